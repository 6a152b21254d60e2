"""How GATr's items are grouped into sets for attention, and the fused attention call per group.

Attention must cost memory linear in the number of items, whatever the batch layout:

* **one set** or a **padded batch** ``(batch, items)`` with a boolean ``mask (batch, items)``: one
  call to ``torch.nn.functional.scaled_dot_product_attention`` with queries, keys and values
  of one width (PyTorch's flash / memory-efficient kernels, CPU flash included) and at most a
  ``(batch, 1, 1, items)`` key mask;
* a **flat batch** (PyTorch Geometric): items ``(items, ...)`` with a ``batch (items,)`` vector.
  ``method="bucketed"`` (the default, chosen by measurement, see ``docs/gatr.md``) groups the sets
  by size (lengths within a factor of [`BUCKET_RATIO`][]), pads each group to its longest set
  and runs one fused call per group: no ``items x items`` mask is ever built, and equal-size sets
  stored contiguously (the usual PyG batch) are a reshape, not a copy. ``method="chunked"`` runs
  query chunks of [`CHUNK_ITEMS`][] items against the key range of their sets with a small block
  mask (the fallback for one huge set among many small ones); ``method="masked"`` builds the
  ``items x items`` block-diagonal mask (small inputs and tests only). ``method="padded"`` pads
  every set to a given bound ``max_items`` in one fused call; it is planned on the batch vector's
  device from ``num_sets`` and ``max_items`` alone.

Multi-query attention (one key/value head shared by all query heads, the reference GATr's default)
folds the heads into the query axis, a free reshape in the items-first layout ``(B, items, heads,
width)`` the layers use. Nested jagged tensors (measured: 10x the memory on CPU), FlexAttention
(compiles on CPU) and ``torch.nn.attention.varlen`` (CUDA and half precision only) were not
chosen; see ``docs/gatr.md``.

Planning and devices. The shapes of a flat batch's groups depend on its set sizes, which a plan
must know on the host. [`set_layout`][] is called once per batch, at the data boundary, and
the blocks reuse the plan; no forward pass reads anything back from the device:

* a batch vector on the CPU (a data loader's collation) is planned there for free; move the plan
  with the batch, ``set_layout(batch=batch).to(device)``;
* ``set_layout(batch=batch, num_sets=..., max_items=...)`` (upper bounds, e.g. the batch size and
  the largest set of the dataset) plans ``method="padded"`` on the batch's own device with no
  host synchronisation (and shapes that do not change from batch to batch);
* otherwise a batch vector on an accelerator is read to the host once, inside ``set_layout``
  (one synchronisation per batch, outside any forward pass).
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor

from geomlin.validation import (
    check_batch_vector,
    check_choice,
    check_condition,
    check_mask,
    check_positive_int,
    check_same_device,
)

#: Set sizes within this factor share one padded group in ``method="bucketed"`` (at most
#: ``BUCKET_RATIO**2`` times the work of exact per-set attention, typically far less).
BUCKET_RATIO = math.sqrt(2.0)
#: Query items per chunk in ``method="chunked"``.
CHUNK_ITEMS = 1024
#: Attention methods for flat (PyG) batches.
FLAT_METHODS = ("auto", "bucketed", "chunked", "masked", "padded")


def _move(value, device, non_blocking: bool):
    if isinstance(value, Tensor):
        return value.to(device, non_blocking=non_blocking)
    if isinstance(value, list):
        return [_move(v, device, non_blocking) for v in value]
    if dataclasses.is_dataclass(value):
        return dataclasses.replace(value, **{f.name: _move(getattr(value, f.name), device, non_blocking)
                                             for f in dataclasses.fields(value)})
    return value


@dataclass
class _Group:
    """Sets of similar size padded to ``length``: slot ``[s, j]`` holds item ``index[s, j]``."""

    index: Tensor | None  # (sets, length) long, or None for a contiguous run
    key_mask: Tensor | None  # (sets, length) bool; None when every set has ``length`` items
    valid: Tensor | None  # (items of the group,) long: the flat slots that hold real items (with key_mask)
    start: int  # contiguous run: first item
    num_sets: int
    length: int


@dataclass
class SetLayout:
    """Which items attend to which: built by [`set_layout`][], reused by every block.

    ``kind``: ``"padded"`` (``key_mask (B, items)`` or none: all items of a row attend to each
    other) or ``"flat"`` (a PyG batch vector, planned by ``method``; ``num_sets`` sets, an upper
    bound for ``method="padded"``). ``mask`` and ``batch`` are the inputs it was planned from.
    Plain data: the tensors live on one device ([`to`][] moves them), the sizes are Python
    numbers.
    """

    kind: str
    method: str = "auto"
    key_mask: Tensor | None = None
    batch: Tensor | None = None
    num_sets: int = 0
    groups: list = field(default_factory=list)
    inverse: Tensor | None = None  # items in group order -> original order (None: identity)
    starts: list = field(default_factory=list)
    sizes: list = field(default_factory=list)
    mask: Tensor | None = None  # the item mask as given (None: every item is real)
    sets: Tensor | None = None  # the set each item attends in (padding items of a flat batch: sets of their own)
    set_of: Tensor | None = None  # chunked: the set of each item in sorted order
    slots: Tensor | None = None  # padded flat plan: each item's slot in the (num_sets * max_items) grid
    max_items: int = 0

    @property
    def device(self) -> torch.device | None:
        """The device of the plan's tensors (``None`` when it holds none)."""
        for t in (self.key_mask, self.batch, self.mask, self.sets, self.slots, self.set_of, self.inverse):
            if t is not None:
                return t.device
        return None

    def to(self, device, non_blocking: bool = False) -> SetLayout:
        """A copy with every tensor on ``device`` (move the plan together with the batch)."""
        return _move(self, torch.device(device), non_blocking)


def attention_mask(mask: Tensor | None = None, batch: Tensor | None = None) -> Tensor | None:
    """A boolean mask ``True = may attend`` as one tensor (small problems and tests; see [`attend_masked`][]).

    ``mask (..., items)`` marks valid items (padding layout) -> ``(..., 1, 1, items)``;
    ``batch (items,)`` assigns items to sets (PyG flat layout) -> ``(1, items, items)``
    block-diagonal. Both may be given. Prefer [`set_layout`][], which never builds the
    ``items x items`` mask.
    """
    out = None
    if mask is not None:
        check_mask(mask, "mask")
        out = mask[..., None, None, :]
    if batch is not None:
        block = (batch[:, None] == batch[None, :])[None]
        out = block if out is None else out & block
    return out


def set_layout(mask: Tensor | None = None, batch: Tensor | None = None, method: str = "auto",
               num_items: int | None = None, *, num_sets: int | None = None,
               max_items: int | None = None) -> SetLayout:
    """Plan attention for a padded batch (``mask (..., items)`` bool, True = real item) or a flat
    batch (``batch (items,)`` int, the set of each item, PyG style, sorted; ``mask (items,)`` may
    mark padding items inside it too).

    Parameters
    ----------
    mask, batch : Tensor | None
        see above; give ``batch`` for a flat batch.
    method : str
        flat batches: ``"auto"`` (``"padded"`` when ``max_items`` is given, else
        ``"bucketed"``), ``"bucketed"``, ``"chunked"``, ``"masked"``, ``"padded"``; see the module
        docstring.
    num_items : int | None
        the number of items ``batch`` must describe (default: its length).
    num_sets, max_items : int | None
        upper bounds of the number of sets (``batch.max() + 1``) and of the
        items in one set. With both, ``method="padded"`` is planned on ``batch``'s device without
        reading it (a set larger than ``max_items`` or an id ``>= num_sets`` is an error, deferred
        on accelerators, see [`geomlin.validation`][]).

    Notes
    -----
    A padded row without any real item attends to all its items (its outputs are finite and
    meaningless) instead of producing NaN. Plan at the data boundary: a batch vector on an
    accelerator without ``max_items`` is read to the host here (one synchronisation).
    """
    method = check_choice(method, "method", FLAT_METHODS)
    if batch is None:
        if mask is None:
            return SetLayout("padded", method)
        check_mask(mask, "mask")
        if mask.ndim == 0:
            raise ValueError("mask must have an items axis, got a 0-d tensor")
        key_mask = mask.reshape(-1, mask.shape[-1])
        key_mask = key_mask | ~key_mask.any(-1, keepdim=True)
        return SetLayout("padded", method, key_mask=key_mask, mask=mask)
    n = batch.shape[0] if num_items is None else num_items
    if num_sets is not None:
        num_sets = check_positive_int(num_sets, "num_sets")
    if max_items is not None:
        max_items = check_positive_int(max_items, "max_items")
    batch = check_batch_vector(batch, "batch", n, num_graphs=num_sets)
    if mask is not None:
        check_mask(mask, "mask", shape=(n,))
        check_same_device("mask", mask, "batch", batch)
    if method == "auto":
        method = "padded" if max_items is not None else "bucketed"
    if method == "padded":
        if num_sets is None or max_items is None:
            raise ValueError("method='padded' needs num_sets and max_items (upper bounds of the number of sets and "
                             "of the items per set)")
        return _plan_padded(batch, mask, num_sets, max_items)
    device = batch.device
    layout = _plan_flat(batch.detach().to("cpu"), None if mask is None else mask.detach().to("cpu"), method)
    if device.type != "cpu":
        layout = layout.to(device)
    layout.batch, layout.mask = batch, mask
    return layout


def _plan_padded(batch: Tensor, mask: Tensor | None, num_sets: int, max_items: int) -> SetLayout:
    """Every set padded to ``max_items`` slots of a ``(num_sets, max_items)`` grid, on ``batch``'s device."""
    device, n = batch.device, batch.shape[0]
    batch = batch.long()
    counts = torch.zeros(num_sets, dtype=torch.long, device=device).index_add_(0, batch, torch.ones_like(batch))
    check_condition(counts <= max_items, f"batch has a set of more than max_items={max_items} items")
    position = torch.arange(n, device=device) - (counts.cumsum(0) - counts)[batch]
    slots = batch * max_items + position.clamp(0, max_items - 1)
    real = torch.ones(n, dtype=torch.bool, device=device) if mask is None else mask
    key_mask = torch.zeros(num_sets * max_items, dtype=torch.bool, device=device).index_copy(0, slots, real)
    key_mask = key_mask.view(num_sets, max_items)
    key_mask = key_mask | ~key_mask.any(-1, keepdim=True)
    return SetLayout("flat", "padded", key_mask=key_mask, batch=batch, num_sets=num_sets, mask=mask, sets=batch,
                     slots=slots, max_items=max_items)


def _plan_flat(b: Tensor, mask: Tensor | None, method: str) -> SetLayout:
    """Host plan of a CPU batch vector (sizes read as Python numbers)."""
    b = b.to(torch.long)
    num_real = int(b.max()) + 1 if b.numel() else 0
    if mask is not None:  # padding items inside a flat batch: one extra set per set id, never attended to
        b = torch.where(mask, b, num_real + b)
    num_sets = int(b.max()) + 1 if b.numel() else 0
    is_sorted = b.numel() < 2 or bool((b[1:] >= b[:-1]).all())
    order = torch.arange(b.numel()) if is_sorted else torch.argsort(b, stable=True)
    counts = torch.bincount(b, minlength=num_sets)
    sizes = counts.tolist()
    starts = [0] * num_sets
    acc = 0
    for s, c in enumerate(sizes):
        starts[s] = acc
        acc += c
    layout = SetLayout("flat", method, batch=b, num_sets=num_real, starts=starts, sizes=sizes, sets=b)
    if method != "bucketed":
        layout.inverse = None if is_sorted else torch.argsort(order)
        layout.groups = [order] if not is_sorted else []
        if method == "chunked":
            layout.set_of = torch.repeat_interleave(torch.arange(num_sets), counts, output_size=b.numel())
        return layout
    buckets: dict[int, list[int]] = {}
    for s, c in enumerate(sizes):
        if c:
            buckets.setdefault(math.ceil(math.log(c) / math.log(BUCKET_RATIO) - 1e-9), []).append(s)
    pieces = []
    for key in sorted(buckets):
        sets = buckets[key]
        length = max(sizes[s] for s in sets)
        equal = all(sizes[s] == length for s in sets)
        run = is_sorted and equal and all(starts[a] + length == starts[c] for a, c in itertools.pairwise(sets))
        if run:
            layout.groups.append(_Group(None, None, None, starts[sets[0]], len(sets), length))
            pieces.append(torch.arange(starts[sets[0]], starts[sets[0]] + len(sets) * length))
            continue
        j = torch.arange(length)
        size = torch.tensor([sizes[s] for s in sets])[:, None]
        start = torch.tensor([starts[s] for s in sets])[:, None]
        valid = j[None, :] < size
        slot = order[torch.where(valid, start + j[None, :], start)]  # padding repeats the first item
        flat_valid = None if equal else torch.arange(valid.numel())[valid.flatten()]
        layout.groups.append(_Group(slot, None if equal else valid, flat_valid, 0, len(sets), length))
        pieces.append(slot[valid])
    perm = torch.cat(pieces) if pieces else torch.zeros(0, dtype=torch.long)
    if not torch.equal(perm, torch.arange(perm.numel())):
        inverse = torch.empty_like(perm)
        inverse[perm] = torch.arange(perm.numel())
        layout.inverse = inverse
    return layout


def _sdpa(q: Tensor, k: Tensor, v: Tensor, key_mask: Tensor | None, scale: float) -> Tensor:
    """Fused attention in the items-first layout: ``q (B, N, Hq, D)``, ``k, v (B, Nk, Hk, D)``
    (``Hk`` 1 or ``Hq``), ``key_mask (B, Nk)`` bool or None -> ``(B, N, Hq, D)``."""
    B, N, H, D = q.shape
    mask = None if key_mask is None else key_mask[:, None, None, :]
    if k.shape[2] == 1:  # multi-query: the heads become extra queries (a view in this layout)
        out = F.scaled_dot_product_attention(q.reshape(B, 1, N * H, D), k.transpose(1, 2), v.transpose(1, 2),
                                             attn_mask=mask, scale=scale)
        return out.reshape(B, N, H, D)
    out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                         attn_mask=mask, scale=scale)
    return out.transpose(1, 2)


def attend_masked(q: Tensor, k: Tensor, v: Tensor, mask: Tensor, scale: float) -> Tensor:
    """Scaled dot-product attention of items-first features under a boolean ``mask``.

    ``q (..., N, heads, D)``, ``k, v (..., Nk, kv_heads, D)`` (``kv_heads`` 1 or ``heads``, shared
    by groups of query heads), ``mask`` (``True`` = may attend) broadcastable to
    ``(..., heads, N, Nk)``. Returns ``(..., N, heads, D)``. The mask is materialised by the
    kernel: for query-dependent masks of small problems; [`attend`][] covers set layouts.
    """
    want = (*q.shape[:-3], q.shape[-2], q.shape[-3], k.shape[-3])
    try:
        fits = torch.broadcast_shapes(mask.shape, want) == want
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(f"attn_mask has shape {tuple(mask.shape)}, which does not broadcast against "
                         f"(..., heads, items, key_items) = {want}")
    out = F.scaled_dot_product_attention(q.transpose(-2, -3), k.transpose(-2, -3), v.transpose(-2, -3),
                                         attn_mask=mask, scale=scale, enable_gqa=k.shape[-2] != q.shape[-2])
    return out.transpose(-2, -3)


def attend(q: Tensor, k: Tensor, v: Tensor, layout: SetLayout | None, scale: float) -> Tensor:
    """Scaled dot-product attention of items-first features under a [`SetLayout`][].

    ``q (B, items, heads, D)``, ``k, v (B, items, kv_heads, D)`` (``kv_heads`` 1 or ``heads``);
    flat layouts need ``B = 1``. Returns ``(B, items, heads, D)``. Reads nothing back from the
    device (the plan holds every size).
    """
    if layout is None or layout.kind == "padded":
        key_mask = None if layout is None else layout.key_mask
        if key_mask is not None and key_mask.shape[0] != q.shape[0]:
            raise ValueError(f"the attention mask covers {key_mask.shape[0]} rows but the input has {q.shape[0]}")
        return _sdpa(q, k, v, key_mask, scale)
    if q.shape[0] != 1:
        raise ValueError(f"a flat (batch-vector) layout needs items without leading batch axes, got {q.shape[0]} rows")
    q, k, v = q[0], k[0], v[0]  # (N, H, D)
    if layout.method == "masked":
        b = layout.sets
        return attend_masked(q[None], k[None], v[None], b[:, None] == b[None, :], scale)
    if layout.method == "chunked":
        return _attend_chunked(q, k, v, layout, scale)[None]
    if layout.method == "padded":
        return _attend_padded(q, k, v, layout, scale)[None]
    parts = []
    for g in layout.groups:
        if g.index is None:
            sl = slice(g.start, g.start + g.num_sets * g.length)
            qg, kg, vg = (t[sl].reshape(g.num_sets, g.length, t.shape[-2], t.shape[-1]) for t in (q, k, v))
        else:
            qg, kg, vg = q[g.index], k[g.index], v[g.index]
        out = _sdpa(qg, kg, vg, g.key_mask, scale)  # (sets, length, H, D)
        out = out.reshape(-1, out.shape[-2], out.shape[-1])
        parts.append(out if g.valid is None else out.index_select(0, g.valid))
    out = torch.cat(parts) if len(parts) != 1 else parts[0]
    if layout.inverse is not None:
        out = out[layout.inverse]
    return out[None]


def _attend_padded(q: Tensor, k: Tensor, v: Tensor, layout: SetLayout, scale: float) -> Tensor:
    """Every set in one ``(num_sets, max_items)`` grid: scatter, one fused call, gather."""
    rows, length = layout.num_sets, layout.max_items

    def grid(t: Tensor) -> Tensor:
        out = t.new_zeros(rows * length, t.shape[-2], t.shape[-1]).index_copy(0, layout.slots, t)
        return out.view(rows, length, t.shape[-2], t.shape[-1])

    out = _sdpa(grid(q), grid(k), grid(v), layout.key_mask, scale)
    return out.reshape(rows * length, out.shape[-2], out.shape[-1]).index_select(0, layout.slots)


def _attend_chunked(q: Tensor, k: Tensor, v: Tensor, layout: SetLayout, scale: float,
                    chunk: int = CHUNK_ITEMS) -> Tensor:
    """Query chunks against the key range of their sets: memory ``chunk x range`` (sorted order).

    Chunk borders and key ranges come from the plan's host sizes; the block masks from its
    ``set_of`` on the device.
    """
    chunk = check_positive_int(chunk, "chunk")
    if layout.groups:  # unsorted batch: work in sorted order, undo at the end
        order = layout.groups[0]
        q, k, v = q[order], k[order], v[order]
    starts, sizes = layout.starts, layout.sizes
    out = []
    n = q.shape[0]
    for a in range(0, n, chunk):
        e = min(a + chunk, n)
        first, last = bisect.bisect_right(starts, a) - 1, bisect.bisect_right(starts, e - 1) - 1
        lo, hi = starts[first], starts[last] + sizes[last]
        if first == last:
            out.append(_sdpa(q[None, a:e], k[None, lo:hi], v[None, lo:hi], None, scale)[0])
        else:
            mask = layout.set_of[a:e, None] == layout.set_of[None, lo:hi]
            out.append(attend_masked(q[None, a:e], k[None, lo:hi], v[None, lo:hi], mask, scale)[0])
    res = torch.cat(out) if out else q.new_zeros(0, q.shape[1], v.shape[-1])
    return res if layout.inverse is None else res[layout.inverse]
