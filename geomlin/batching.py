"""Batches of point sets: the one layout type, planned once at the data boundary.

A batch holds ``B`` sets (point clouds, molecules, graphs) of different sizes in one of two layouts:

* **padded**: tensors ``(B, N, ...)`` with an optional boolean ``mask (B, N)`` (True = real item;
  the layout of PyG's ``to_dense_batch``);
* **flat** (PyTorch Geometric): tensors ``(N_total, ...)`` with a sorted batch vector
  ``batch (N_total,)`` naming each item's set (PyG's ``Batch.batch``).

**The convention.** Every public model and module of geomlin takes padded tensors with ``mask=`` and
flat tensors with ``batch=`` (PyG's words); ``batch`` is a batch vector or the [`BatchLayout`][]
planned from it, which carries the sizes so that the forward reads nothing back from the device.
The models of [`geomlin.models`][] also take a PyG ``Data`` / ``Batch`` whole. Inside the library
every function that depends on the layout takes the planned layout as ``layout=`` (``None``: padded,
every item real); [`as_layout`][] turns the public keywords into it, once per call.

**Counting graphs.** [`num_graphs`][] is the one count: ``batch[-1] + 1`` of a sorted batch vector
(0 when empty), which equals PyG's ``batch.max() + 1``; a PyG ``Batch`` knows its ``num_graphs``
without reading the device, and a count given to [`batch_layout`][] is checked against the
vector instead (trailing empty graphs are allowed).

**Planning and devices.** The sizes of a flat batch are data, and reading data back from an
accelerator makes the host wait. [`batch_layout`][] settles them once per batch, before any forward:

* a batch vector on the CPU (a data loader's collation) is planned there for free, with every
  size on the host; move the plan with the batch, ``layout.to(device)``;
* given ``num_graphs`` and ``max_items`` (upper bounds: the batch size, the largest set of the
  data set) it is planned on the batch's own device without reading it, every set padded to
  ``max_items`` slots;
* given ``num_graphs`` alone on an accelerator it is planned without reading it but carries no
  attention plan (pools, scatters and graph counts need only the count; GATr refuses it);
* otherwise a batch vector on an accelerator is read to the host once, here.

The attention plan (for [`geomlin.gatr`][]) groups the sets of a flat batch by size so that fused
attention calls never build an ``items x items`` mask; ``method`` picks how (``"bucketed"``: sets
within a factor [`BUCKET_RATIO`][] of each other padded together; ``"chunked"``: query chunks of
[`CHUNK_ITEMS`][] against the key range of their sets; ``"masked"``: one block-diagonal mask, small
inputs only; ``"padded"``: every set in one ``(num_graphs, max_items)`` grid).

A [`BatchLayout`][] is a registered pytree: ``torch.export`` and ``torch.utils._pytree.tree_map``
see its tensors, and its sizes are constants of the traced program.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass

import torch
from torch import Tensor
from torch.utils import _pytree as pytree
from torch.utils.checkpoint import checkpoint

from geomlin.validation import (
    check_batch_vector,
    check_choice,
    check_condition,
    check_mask,
    check_nonnegative_int,
    check_positive_int,
    check_same_device,
    check_tensor,
)

#: Set sizes within this factor share one padded group in ``method="bucketed"`` (at most
#: ``BUCKET_RATIO**2`` times the work of exact per-set attention, typically far less).
BUCKET_RATIO = math.sqrt(2.0)
#: Edges per chunk of [`scatter_messages`][]: one chunk's messages (a few MB at the widths of geomlin's
#: potentials, so they stay in cache) are all that is held at once and what the backward recomputes.
EDGE_CHUNK = 2048
#: Query items per chunk in ``method="chunked"``.
CHUNK_ITEMS = 1024
#: Attention plans of flat batches (``"auto"`` picks one, see [`batch_layout`][]).
FLAT_METHODS = ("auto", "bucketed", "chunked", "masked", "padded")
#: The two layouts.
KINDS = ("padded", "flat")


@dataclass(frozen=True, eq=False)
class AttentionGroup:
    """Sets of similar size padded to ``length``: slot ``[s, j]`` holds item ``index[s, j]``.

    ``index (sets, length)`` int64, or None for a contiguous run of equal sets starting at item
    ``start``; ``key_mask (sets, length)`` bool, None when every set has ``length`` items;
    ``valid`` the flat slots that hold real items (with ``key_mask``).
    """

    index: Tensor | None
    key_mask: Tensor | None
    valid: Tensor | None
    start: int
    num_sets: int
    length: int


@dataclass(frozen=True, eq=False)
class BatchLayout:
    """A batch's layout, planned once by [`batch_layout`][] (or [`layout_of`][]) and reused by every layer.

    Plain data: the tensors live on one device ([`to`][geomlin.batching.BatchLayout.to] moves them), the
    sizes are Python numbers (constants of a traced program).

    Attributes
    ----------
    kind : str
        ``"padded"`` or ``"flat"``.
    mask : Tensor or None
        the item mask as given: ``(B, N)`` bool (padded) or ``(N_total,)`` bool (flat: padding items
        inside a flat batch, GATr only); None: every item is real.
    batch : Tensor or None
        flat: ``(N_total,)`` int64, the set of every item (sorted).
    num_graphs : int
        flat: the number of sets ``B`` (padded layouts take ``B`` from their tensors: 0).
    max_items : int
        flat: the largest set, or an upper bound of it (0: not known on the host).
    sizes : tuple[int, ...]
        flat plans made on the host: the items of every set (``()`` otherwise).
    slots : Tensor or None
        flat with ``max_items``: each item's slot ``b max_items + position`` in the padded grid.
    method : str or None
        flat: the attention plan (``"bucketed"``, ``"chunked"``, ``"masked"``, ``"padded"``), None
        without one; padded: ``"padded"``.
    key_mask, sets, set_of, inverse, groups, set_starts, set_sizes
        the attention plan (see the module docstring): the key mask of padded rows ``(rows, N)``,
        the attention set of every item (padding items of a flat batch get sets of their own),
        chunked plans' set per sorted item, the permutation back to the input order, the groups of
        a bucketed plan, and the host starts and sizes of the attention sets.
    """

    kind: str
    mask: Tensor | None = None
    batch: Tensor | None = None
    num_graphs: int = 0
    max_items: int = 0
    sizes: tuple = ()
    slots: Tensor | None = None
    method: str | None = "padded"
    key_mask: Tensor | None = None
    sets: Tensor | None = None
    set_of: Tensor | None = None
    inverse: Tensor | None = None
    groups: tuple = ()
    set_starts: tuple = ()
    set_sizes: tuple = ()

    @property
    def is_flat(self) -> bool:
        """True for a flat (PyG) layout."""
        return self.kind == "flat"

    @property
    def device(self) -> torch.device | None:
        """The device of the plan's tensors (``None`` when it holds none)."""
        leaves = [t for t in pytree.tree_leaves(self) if isinstance(t, Tensor)]
        return leaves[0].device if leaves else None

    def to(self, device, non_blocking: bool = False) -> BatchLayout:
        """A copy with every tensor on ``device`` (move the plan together with the batch)."""
        device = torch.device(device)
        return pytree.tree_map(lambda t: t.to(device, non_blocking=non_blocking) if isinstance(t, Tensor) else t,
                               self)

    def describe(self) -> str:
        """One line for error messages: the kind and the sizes."""
        if not self.is_flat:
            return "a padded layout" + ("" if self.mask is None else f" with a mask of shape {tuple(self.mask.shape)}")
        return f"a flat layout of {self.batch.shape[0]} items in {self.num_graphs} sets"


_GROUP_TENSORS = ("index", "key_mask", "valid")
_GROUP_STATIC = ("start", "num_sets", "length")
_TENSOR_FIELDS = ("mask", "batch", "slots", "key_mask", "sets", "set_of", "inverse", "groups")
_STATIC_FIELDS = ("kind", "num_graphs", "max_items", "sizes", "method", "set_starts", "set_sizes")


def _register(cls, children: tuple[str, ...], static: tuple[str, ...]) -> None:
    """Register a frozen dataclass as a pytree: ``children`` are its (tensor) leaves, ``static`` its context."""

    def flatten(obj):
        return [getattr(obj, f) for f in children], tuple(getattr(obj, f) for f in static)

    def flatten_with_keys(obj):
        leaves, context = flatten(obj)
        return [(pytree.GetAttrKey(f), leaf) for f, leaf in zip(children, leaves)], context

    def unflatten(leaves, context):
        return cls(**dict(zip(children, leaves)), **dict(zip(static, context)))

    pytree.register_pytree_node(cls, flatten, unflatten, serialized_type_name=f"{cls.__module__}.{cls.__qualname__}",
                                flatten_with_keys_fn=flatten_with_keys)


_register(AttentionGroup, _GROUP_TENSORS, _GROUP_STATIC)
_register(BatchLayout, _TENSOR_FIELDS, _STATIC_FIELDS)


# ------------------------------------------------------------------------------------ planning
def num_graphs(batch: Tensor) -> int:
    """Number of graphs of a sorted PyG batch vector ``(N_total,)``: ``batch[-1] + 1`` (0 when empty).

    The one count of geomlin (PyG's ``batch.max() + 1`` for the sorted vectors PyG builds). Reads one
    value: a host synchronisation on an accelerator; a PyG ``Batch`` carries ``num_graphs`` on the
    host, and [`batch_layout`][] takes it as an argument.
    """
    check_tensor(batch, "batch", ndim=1, dtype="int")
    return int(batch[-1]) + 1 if batch.numel() else 0


def batch_layout(mask: Tensor | None = None, batch: Tensor | None = None, *, num_graphs: int | None = None,
                 max_items: int | None = None, method: str = "auto", num_items: int | None = None) -> BatchLayout:
    """Plan the layout of a padded batch (``mask``) or a flat one (``batch``), once, at the data boundary.

    Parameters
    ----------
    mask : Tensor, optional
        ``(B, N)`` bool (padded; any leading axes), True = real item. With ``batch``: ``(N_total,)``
        padding items inside a flat batch (they attend to nothing and nothing attends to them).
    batch : Tensor, optional
        ``(N_total,)`` integer set of every item, sorted (PyG's ``Batch.batch``): a flat batch.
    num_graphs : int, optional
        the number of sets (PyG's ``Batch.num_graphs``, an upper bound of ``batch[-1] + 1``); counted
        by [`num_graphs`][geomlin.batching.num_graphs] when omitted (one read on an accelerator).
    max_items : int, optional
        an upper bound of the items in one set; with ``num_graphs`` the plan is made on ``batch``'s
        device without reading it (every set padded to ``max_items`` slots; a larger set, or an index
        ``>= num_graphs``, is a ValueError, deferred on accelerators: [`geomlin.validation`][]).
    method : str
        the attention plan of a flat batch: ``"auto"`` (``"padded"`` with both bounds; none for a
        batch on an accelerator given ``num_graphs`` alone; else ``"bucketed"``), ``"bucketed"``,
        ``"chunked"``, ``"masked"`` or ``"padded"`` (see the module docstring).
    num_items : int, optional
        the number of items ``batch`` must describe (default: its length).

    Returns
    -------
    BatchLayout
        on the device of ``mask`` / ``batch``.

    Notes
    -----
    A padded row without any real item attends to all its items (finite, meaningless outputs)
    instead of producing NaN.
    """
    method = check_choice(method, "method", FLAT_METHODS)
    if batch is None:
        if mask is None:
            return BatchLayout("padded")
        check_mask(mask, "mask")
        if mask.ndim == 0:
            raise ValueError("mask must have an items axis, got a 0-d tensor")
        key_mask = mask.reshape(-1, mask.shape[-1])
        key_mask = key_mask | ~key_mask.any(-1, keepdim=True)
        return BatchLayout("padded", mask=mask, key_mask=key_mask)
    n = batch.shape[0] if num_items is None else num_items
    if num_graphs is not None:
        num_graphs = check_nonnegative_int(num_graphs, "num_graphs")
    if max_items is not None:
        max_items = check_positive_int(max_items, "max_items")
    batch = check_batch_vector(batch, "batch", n, num_graphs=num_graphs).long()
    if mask is not None:
        check_mask(mask, "mask", shape=(n,))
        check_same_device("mask", mask, "batch", batch)
    on_host = batch.device.type == "cpu"
    if method == "auto":
        method = "padded" if max_items is not None and num_graphs is not None else "bucketed"
        if method == "bucketed" and not on_host and num_graphs is not None:
            method = None
    if method == "padded":
        if num_graphs is None or max_items is None:
            raise ValueError("method='padded' needs num_graphs and max_items (upper bounds of the number of sets "
                             "and of the items per set)")
        return _plan_padded(batch, mask, num_graphs, max_items)
    if method is None:
        return BatchLayout("flat", mask=mask, batch=batch, num_graphs=num_graphs, method=None, sets=batch)
    layout = _plan_host(batch.detach().to("cpu"), None if mask is None else mask.detach().to("cpu"), method,
                        num_graphs)
    if not on_host:
        layout = layout.to(batch.device)
    return dataclasses.replace(layout, batch=batch, mask=mask)


def as_layout(mask: Tensor | None = None, batch: Tensor | BatchLayout | None = None,
              num_items: int | None = None) -> BatchLayout:
    """The layout of a public call's ``mask=`` / ``batch=`` keywords (see the module docstring).

    ``batch`` may already be a [`BatchLayout`][] (then ``mask`` must be None and a flat one must
    describe ``num_items`` items); a batch vector is planned by [`batch_layout`][] (on the CPU
    for free; on an accelerator its graphs are counted, one read of the device, and it gets no
    attention plan: plan it at the data boundary instead); without either the layout is padded
    (with ``mask`` when given).
    """
    if isinstance(batch, BatchLayout):
        if mask is not None:
            raise ValueError("give the mask inside the planned layout (batch_layout(mask, batch)), not beside it")
        if batch.is_flat and num_items is not None and batch.batch.shape[0] != num_items:
            raise ValueError(f"the layout describes {batch.batch.shape[0]} items but the input has {num_items}")
        return batch
    if batch is not None and not isinstance(batch, Tensor):
        raise TypeError(f"batch must be a batch vector (a tensor) or a BatchLayout, got {type(batch).__name__}")
    count = None
    if batch is not None and batch.device.type != "cpu":
        count = num_graphs(batch)  # the one read of the convenience path
    return batch_layout(mask, batch, num_graphs=count, num_items=num_items)


def layout_of(data, *, max_items: int | None = None, method: str = "auto") -> BatchLayout:
    """The flat layout of a PyTorch Geometric ``Data`` (one graph) or ``Batch``.

    ``num_graphs`` comes from the object (a host number); ``max_items`` (an upper bound of the
    largest graph) plans it on its device without a read. A batch on the CPU is planned for free.
    """
    from torch_geometric.data import Data
    from torch_geometric.data.data import BaseData

    if not isinstance(data, BaseData):
        raise TypeError(f"data must be a torch_geometric Data or Batch, got {type(data).__name__}")
    n = int(data.num_nodes)
    batch = getattr(data, "batch", None)
    if batch is None or isinstance(data, Data) and not hasattr(data, "ptr"):
        pos = getattr(data, "pos", None)
        device = pos.device if isinstance(pos, Tensor) else None
        batch = torch.zeros(n, dtype=torch.int64, device=device) if batch is None else batch
    count = int(data.num_graphs) if hasattr(data, "num_graphs") else 1
    return batch_layout(batch=batch, num_graphs=count, max_items=max_items, method=method, num_items=n)


def _slots(batch: Tensor, num_graphs: int, width: int) -> Tensor:
    """Each item's slot ``b width + position`` in a ``(num_graphs, width)`` grid (sorted batch vector)."""
    counts = torch.zeros(num_graphs, dtype=torch.long, device=batch.device).index_add_(0, batch, torch.ones_like(batch))
    check_condition(counts <= width, f"batch has a set of more than max_items={width} items")
    position = torch.arange(batch.shape[0], device=batch.device) - (counts.cumsum(0) - counts)[batch]
    return batch * width + position.clamp(0, width - 1)


def _plan_padded(batch: Tensor, mask: Tensor | None, num_graphs: int, max_items: int) -> BatchLayout:
    """Every set padded to ``max_items`` slots of a ``(num_graphs, max_items)`` grid, on ``batch``'s device."""
    slots = _slots(batch, num_graphs, max_items)
    real = torch.ones(batch.shape[0], dtype=torch.bool, device=batch.device) if mask is None else mask
    key_mask = torch.zeros(num_graphs * max_items, dtype=torch.bool, device=batch.device).index_copy(0, slots, real)
    key_mask = key_mask.view(num_graphs, max_items)
    key_mask = key_mask | ~key_mask.any(-1, keepdim=True)
    return BatchLayout("flat", mask=mask, batch=batch, num_graphs=num_graphs, max_items=max_items, slots=slots,
                       method="padded", key_mask=key_mask, sets=batch)


def _plan_host(b: Tensor, mask: Tensor | None, method: str, count: int | None) -> BatchLayout:
    """The plan of a CPU batch vector, every size read as a Python number."""
    num_real = num_graphs(b) if count is None else count
    sizes = torch.bincount(b, minlength=num_real).tolist()
    width = max(sizes, default=0)
    common = {"num_graphs": num_real, "max_items": width, "sizes": tuple(sizes),
              "slots": _slots(b, num_real, max(width, 1))}
    if mask is not None:  # padding items inside a flat batch: one extra set per set id, never attended to
        b = torch.where(mask, b, num_real + b)
    num_sets = int(b.max()) + 1 if b.numel() else 0  # attention sets: padding items made sets of their own
    is_sorted = b.numel() < 2 or bool((b[1:] >= b[:-1]).all())
    order = torch.arange(b.numel()) if is_sorted else torch.argsort(b, stable=True)
    counts = torch.bincount(b, minlength=num_sets)
    set_sizes = counts.tolist()
    set_starts = tuple(itertools.accumulate([0, *set_sizes[:-1]])) if set_sizes else ()
    plan = {"method": method, "sets": b, "set_starts": set_starts, "set_sizes": tuple(set_sizes)}
    if method != "bucketed":
        plan["inverse"] = None if is_sorted else torch.argsort(order)
        plan["groups"] = () if is_sorted else (AttentionGroup(order, None, None, 0, 0, 0),)
        if method == "chunked":
            plan["set_of"] = torch.repeat_interleave(torch.arange(num_sets), counts, output_size=b.numel())
        return BatchLayout("flat", **common, **plan)
    buckets: dict[int, list[int]] = {}
    for s, c in enumerate(set_sizes):
        if c:
            buckets.setdefault(math.ceil(math.log(c) / math.log(BUCKET_RATIO) - 1e-9), []).append(s)
    groups, pieces = [], []
    for key in sorted(buckets):
        members = buckets[key]
        length = max(set_sizes[s] for s in members)
        equal = all(set_sizes[s] == length for s in members)
        run = is_sorted and equal and all(set_starts[a] + length == set_starts[c]
                                          for a, c in itertools.pairwise(members))
        if run:
            groups.append(AttentionGroup(None, None, None, set_starts[members[0]], len(members), length))
            pieces.append(torch.arange(set_starts[members[0]], set_starts[members[0]] + len(members) * length))
            continue
        j = torch.arange(length)
        size = torch.tensor([set_sizes[s] for s in members])[:, None]
        start = torch.tensor([set_starts[s] for s in members])[:, None]
        valid = j[None, :] < size
        slot = order[torch.where(valid, start + j[None, :], start)]  # padding repeats the first item
        flat_valid = None if equal else torch.arange(valid.numel())[valid.flatten()]
        groups.append(AttentionGroup(slot, None if equal else valid, flat_valid, 0, len(members), length))
        pieces.append(slot[valid])
    perm = torch.cat(pieces) if pieces else torch.zeros(0, dtype=torch.long)
    inverse = None
    if not torch.equal(perm, torch.arange(perm.numel())):
        inverse = torch.empty_like(perm)
        inverse[perm] = torch.arange(perm.numel())
    return BatchLayout("flat", **common, **plan, inverse=inverse, groups=tuple(groups))


# ------------------------------------------------------------------------------ sums and pools
def scatter_sum(values: Tensor, index: Tensor, num_rows: int) -> Tensor:
    """``out[r] = sum_{e : index[e] = r} values[e]``, accumulated in at least float32.

    Parameters
    ----------
    values : Tensor
        ``(E, ...)`` floating messages (bfloat16 / float16 under autocast).
    index : Tensor
        ``(E,)`` int64 row of every message, in ``[0, num_rows)`` (checked by the caller).
    num_rows : int
        Rows of the output.

    Returns
    -------
    Tensor
        ``(num_rows, ...)`` in ``values``'s dtype promoted to at least float32 (float64 stays float64):
        a bfloat16 sum of a few hundred messages would keep only about two significant digits.
    """
    dtype = torch.promote_types(values.dtype, torch.float32)
    out = torch.zeros(num_rows, *values.shape[1:], dtype=dtype, device=values.device)
    return out.index_add_(0, index, values.to(dtype))


def scatter_messages(message, index: Tensor, num_rows: int, edge_args: tuple, chunk: int | None = None) -> Tensor:
    """``out[r] = sum_{e : index[e] = r} message(*edge_args[e])``, chunk by chunk, recomputed for the backward.

    Message passing without holding every message: chunks of edges are summed into the output, and
    with autograd on each runs under ``torch.utils.checkpoint`` (non-reentrant: twice differentiable;
    no random state kept, so ``message`` draws no random numbers; no early stop), so the backward
    recomputes a chunk instead of keeping its ``O(E x message)`` intermediates. The numbers are those
    of [`scatter_sum`][] of all messages at once, which traced code (``torch.compile``, ``torch.export``) runs.
    Pass per-edge inputs only (node features gathered per edge, ``x.index_select(0, src)``): a whole
    tensor read by every chunk would get a dense gradient per chunk.

    Parameters
    ----------
    message : callable
        ``message(*chunk_args) -> (E_c, ...)`` messages of a chunk of ``edge_args``.
    index : Tensor
        ``(E,)`` int64 row of every message, in ``[0, num_rows)`` (checked by the caller).
    num_rows : int
        rows of the output.
    edge_args : tuple of Tensor
        per-edge tensors ``(E, ...)``, cut into chunks.
    chunk : int, optional
        edges per chunk (default [`EDGE_CHUNK`][]).

    Returns
    -------
    Tensor
        ``(num_rows, ...)``, accumulated in at least float32 as [`scatter_sum`][].
    """
    chunk = EDGE_CHUNK if chunk is None else chunk
    if torch.compiler.is_compiling() or index.shape[0] <= chunk:
        return scatter_sum(message(*edge_args), index, num_rows)
    recompute = torch.is_grad_enabled()
    out = None
    # split, not slices: one backward node gathers every chunk's gradient (not an (E, ...) fill per chunk)
    for rows, *part in zip(index.split(chunk), *(a.split(chunk) for a in edge_args)):
        values = (checkpoint(message, *part, use_reentrant=False, preserve_rng_state=False, early_stop=False)
                  if recompute else message(*part))
        if out is None:
            dtype = torch.promote_types(values.dtype, torch.float32)
            out = torch.zeros(num_rows, *values.shape[1:], dtype=dtype, device=values.device)
        out.index_add_(0, rows, values.to(out.dtype))
    return out


def _flat(layout: BatchLayout | None) -> bool:
    return layout is not None and layout.is_flat


def _item_weights(x: Tensor, mask: Tensor) -> Tensor:
    """The padded mask ``(B, N)`` as weights broadcastable against ``x (B, N, ...)``."""
    return mask.to(x.dtype).reshape(*mask.shape, *([1] * (x.ndim - 2)))


def pool_sum(x: Tensor, layout: BatchLayout | None = None) -> Tensor:
    """Sum over the items of each set: padded ``(B, N, ...)`` (masked) or flat ``(N_total, ...)`` -> ``(B, ...)``.

    Flat sums accumulate in at least float32 ([`scatter_sum`][]) and come back in that dtype.
    """
    if _flat(layout):
        return scatter_sum(x, layout.batch, layout.num_graphs)
    mask = None if layout is None else layout.mask
    return x.sum(1) if mask is None else (x * _item_weights(x, mask)).sum(1)


def pool_mean(x: Tensor, layout: BatchLayout | None = None) -> Tensor:
    """Mean over the items of each set: padded ``(B, N, ...)`` (masked) or flat ``(N_total, ...)`` ->
    ``(B, ...)`` in ``x``'s dtype. A set without (real) items pools to zeros, never 0/0."""
    if _flat(layout):
        sums = scatter_sum(x, layout.batch, layout.num_graphs)
        counts = scatter_sum(torch.ones_like(x.reshape(x.shape[0], -1)[:, 0]), layout.batch, layout.num_graphs)
        return (sums / counts.clamp_min(1).reshape(-1, *([1] * (x.ndim - 1)))).to(x.dtype)
    mask = None if layout is None else layout.mask
    if mask is None:
        return x.mean(1) if x.shape[1] else x.new_zeros(x.shape[0], *x.shape[2:])
    w = _item_weights(x, mask)
    return (x * w).sum(1) / w.sum(1).clamp_min(1)


def pool_max(x: Tensor, layout: BatchLayout | None = None) -> Tensor:
    """Maximum over the items of each set: padded ``(B, N, C)`` (masked) or flat ``(N_total, C)`` ->
    ``(B, C)`` in ``x``'s dtype. A set without (real) items pools to zeros."""
    if _flat(layout):
        out = torch.zeros(layout.num_graphs, *x.shape[1:], dtype=x.dtype, device=x.device)
        index = layout.batch.reshape(-1, *([1] * (x.ndim - 1))).expand_as(x)
        return out.scatter_reduce(0, index, x, reduce="amax", include_self=False)
    if x.shape[1] == 0:  # no items at all: the documented empty-set result, not amax's error
        return x.new_zeros(x.shape[0], *x.shape[2:])
    mask = None if layout is None else layout.mask
    if mask is None:
        return x.amax(dim=1)
    keep = mask.reshape(*mask.shape, *([1] * (x.ndim - 2)))
    pooled = x.masked_fill(~keep, torch.finfo(x.dtype).min).amax(dim=1)
    return torch.where(mask.any(dim=1).reshape(-1, *([1] * (x.ndim - 2))), pooled, torch.zeros_like(pooled))


def pool_softmax(scores: Tensor, x: Tensor, layout: BatchLayout | None = None) -> Tensor:
    """Attention pooling ``sum_i softmax_i(scores)_i x_i`` per set.

    ``scores (B, N, K)`` (padded, masked) or ``(N_total, K)`` (flat), ``x (B, N, C, d)`` or
    ``(N_total, C, d)`` -> ``(B, K, C, d)``: one weighted mean of the items per score column.
    """
    if _flat(layout):
        B, K, batch = layout.num_graphs, scores.shape[-1], layout.batch
        top = scores.new_full((B, K), -torch.inf).scatter_reduce(
            0, batch[:, None].expand(-1, K), scores, reduce="amax", include_self=True)
        e = (scores - top[batch].detach()).exp()  # (N, K); the shift cancels in the ratio
        den = scores.new_zeros(B, K).index_add(0, batch, e)
        num = x.new_zeros(B, K, *x.shape[1:]).index_add(0, batch, e[:, :, None, None] * x[:, None])
        return num / den.clamp_min(torch.finfo(den.dtype).tiny)[:, :, None, None]
    mask = None if layout is None else layout.mask
    if mask is not None:
        scores = scores.masked_fill(~mask[..., None], -torch.inf)
    a = torch.softmax(scores, dim=1)  # (B, N, K)
    return torch.einsum("bnk,bncd->bkcd", a, x)


def broadcast_pooled(pooled: Tensor, like: Tensor, layout: BatchLayout | None = None) -> Tensor:
    """Per-set values ``(B, ...)`` back onto the items of ``like`` (padded ``(B, N, ...)`` or flat)."""
    if _flat(layout):
        return pooled[layout.batch]
    return pooled[:, None].expand(-1, like.shape[1], *pooled.shape[1:])


# -------------------------------------------------------------------------------- converters
def _width(layout: BatchLayout) -> int:
    """The padded width of a flat layout: its ``max_items``, or the largest set read from the device."""
    if layout.max_items:
        return layout.max_items
    counts = torch.zeros(layout.num_graphs, dtype=torch.long, device=layout.batch.device)
    counts = counts.index_add_(0, layout.batch, torch.ones_like(layout.batch))
    return int(counts.max()) if counts.numel() else 0  # the one read of a layout planned without sizes


def to_padded(values: Tensor, layout: BatchLayout) -> tuple[Tensor, Tensor]:
    """Item values of a flat batch ``(N_total, ...)`` as zero-padded ``(B, N, ...)`` and the mask ``(B, N)`` bool.

    Item ``i`` of set ``b`` lands at ``[b, i]`` (the layout of PyG's ``to_dense_batch``), ``N`` is the
    layout's ``max_items`` (a layout planned on the device without it reads the largest set once).
    Padding items of a flat batch (its ``mask``) are placed and marked False.
    """
    if not layout.is_flat:
        raise ValueError(f"to_padded needs a flat layout, got {layout.describe()}")
    check_tensor(values, "values", shape=(layout.batch.shape[0], ...), dtype="any")
    width = _width(layout)
    slots = layout.slots if layout.slots is not None and layout.max_items == width else \
        _slots(layout.batch, layout.num_graphs, max(width, 1))
    B = layout.num_graphs
    real = torch.ones(values.shape[0], dtype=torch.bool, device=values.device) if layout.mask is None else layout.mask
    padded = values.new_zeros((B * width, *values.shape[1:])).index_copy(0, slots, values)
    mask = torch.zeros(B * width, dtype=torch.bool, device=values.device).index_copy(0, slots, real)
    return padded.reshape(B, width, *values.shape[1:]), mask.reshape(B, width)


def to_flat(padded: Tensor, layout: BatchLayout) -> Tensor:
    """The inverse of [`to_padded`][]: ``(B, N, ...)`` -> the items of the flat layout ``(N_total, ...)``."""
    if not layout.is_flat:
        raise ValueError(f"to_flat needs a flat layout, got {layout.describe()}")
    check_tensor(padded, "padded", shape=(layout.num_graphs, None, ...), dtype="any")
    width = padded.shape[1]
    slots = layout.slots if layout.slots is not None and layout.max_items == width else \
        _slots(layout.batch, layout.num_graphs, max(width, 1))
    return padded.reshape(-1, *padded.shape[2:]).index_select(0, slots)


__all__ = [
    "BUCKET_RATIO", "CHUNK_ITEMS", "EDGE_CHUNK", "FLAT_METHODS", "KINDS", "AttentionGroup",
    "BatchLayout", "as_layout", "batch_layout", "broadcast_pooled", "layout_of", "num_graphs", "pool_max", "pool_mean", "pool_softmax",
    "pool_sum", "scatter_messages", "scatter_sum", "to_flat", "to_padded",
]
