"""How GATr's items are grouped into sets for attention, and the fused attention call per group.

Attention must cost memory linear in the number of items, whatever the batch layout:

* **one set** or a **padded batch** ``(batch, items)`` with a boolean ``mask (batch, items)``: one
  call to :func:`torch.nn.functional.scaled_dot_product_attention` with queries, keys and values
  of one width (PyTorch's flash / memory-efficient kernels, CPU flash included) and at most a
  ``(batch, 1, 1, items)`` key mask;
* a **flat batch** (PyTorch Geometric): items ``(items, ...)`` with a ``batch (items,)`` vector.
  ``method="bucketed"`` (the default, chosen by measurement, see ``docs/gatr.md``) groups the sets
  by size (lengths within a factor of :data:`BUCKET_RATIO`), pads each group to its longest set
  and runs one fused call per group: no ``items x items`` mask is ever built, and equal-size sets
  stored contiguously (the usual PyG batch) are a reshape, not a copy. ``method="chunked"`` runs
  query chunks of :data:`CHUNK_ITEMS` items against the key range of their sets with a small block
  mask (the fallback for one huge set among many small ones); ``method="dense"`` builds the
  ``items x items`` block-diagonal mask (small inputs and tests only).

Multi-query attention (one key/value head shared by all query heads, the reference GATr's default)
folds the heads into the query axis, a free reshape in the items-first layout ``(B, items, heads,
width)`` the layers use. Nested jagged tensors (measured: 10x the memory on CPU), FlexAttention
(compiles on CPU) and ``torch.nn.attention.varlen`` (CUDA and half precision only) were not
chosen; see ``docs/gatr.md``.

Planning a flat layout reads the set sizes on the host once per forward pass (one transfer of the
batch vector on a GPU); the blocks reuse the plan.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor

from geomlin.validation import check_batch_vector, check_choice, check_mask, check_positive_int

#: Set sizes within this factor share one padded group in ``method="bucketed"`` (at most
#: ``BUCKET_RATIO**2`` times the work of exact per-set attention, typically far less).
BUCKET_RATIO = math.sqrt(2.0)
#: Query items per chunk in ``method="chunked"``.
CHUNK_ITEMS = 1024
#: Attention methods for flat (PyG) batches.
FLAT_METHODS = ("auto", "bucketed", "chunked", "dense")


@dataclass
class _Group:
    """Sets of similar size padded to ``length``: slot ``[s, j]`` holds item ``index[s, j]``."""

    index: Tensor | None  # (sets, length) long, or None for a contiguous run
    key_mask: Tensor | None  # (sets, length) bool; None when every set has ``length`` items
    start: int  # contiguous run: first item
    num_sets: int
    length: int


@dataclass
class SetLayout:
    """Which items attend to which: built by :func:`set_layout`, reused by every block.

    ``kind``: ``"padded"`` (``key_mask (B, items)`` or none: all items of a row attend to each
    other) or ``"flat"`` (a PyG batch vector, planned into groups; ``num_sets`` real sets). Plain
    data; the index tensors live on the device of the mask / batch vector.
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


def attention_mask(mask: Tensor | None = None, batch: Tensor | None = None) -> Tensor | None:
    """Dense boolean mask ``True = may attend`` (small problems and tests).

    ``mask (..., items)`` marks valid items (padding layout) -> ``(..., 1, 1, items)``;
    ``batch (items,)`` assigns items to sets (PyG flat layout) -> ``(1, items, items)``
    block-diagonal. Both may be given. Prefer :func:`set_layout`, which never builds the
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
               num_items: int | None = None) -> SetLayout:
    """Plan attention for a padded batch (``mask (..., items)`` bool, True = real item) or a flat
    batch (``batch (items,)`` int, the set of each item, PyG style; ``mask (items,)`` may mark
    padding items inside it too).

    ``method`` (flat batches): ``"auto"`` (= ``"bucketed"``), ``"bucketed"``, ``"chunked"``,
    ``"dense"``; see the module docstring. A padded row without any real item attends to all its
    items (its outputs are finite and meaningless) instead of producing NaN.
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
        return SetLayout("padded", method, key_mask=key_mask)
    n = batch.shape[0] if num_items is None else num_items
    check_batch_vector(batch, "batch", n)
    if mask is not None:
        check_mask(mask, "mask", shape=(n,))
    return _plan_flat(batch, mask, "bucketed" if method == "auto" else method)


def _plan_flat(batch: Tensor, mask: Tensor | None, method: str) -> SetLayout:
    device = batch.device
    b = batch.detach().to("cpu", torch.long)
    num_real = int(b.max()) + 1 if b.numel() else 0
    if mask is not None:  # padding items inside a flat batch: one extra set per set id, never attended to
        b = torch.where(mask.detach().cpu(), b, num_real + b)
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
    layout = SetLayout("flat", method, batch=batch if mask is None else b.to(device), num_sets=num_real,
                       starts=starts, sizes=sizes)
    if method != "bucketed":
        layout.inverse = None if is_sorted else torch.argsort(order).to(device)
        layout.groups = [order.to(device)] if not is_sorted else []
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
            layout.groups.append(_Group(None, None, starts[sets[0]], len(sets), length))
            pieces.append(torch.arange(starts[sets[0]], starts[sets[0]] + len(sets) * length))
            continue
        j = torch.arange(length)
        size = torch.tensor([sizes[s] for s in sets])[:, None]
        start = torch.tensor([starts[s] for s in sets])[:, None]
        valid = j[None, :] < size
        slot = order[torch.where(valid, start + j[None, :], start)]  # padding repeats the first item
        layout.groups.append(_Group(slot.to(device), None if equal else valid.to(device), 0, len(sets), length))
        pieces.append(slot[valid])
    perm = torch.cat(pieces) if pieces else torch.zeros(0, dtype=torch.long)
    if not torch.equal(perm, torch.arange(perm.numel())):
        inverse = torch.empty_like(perm)
        inverse[perm] = torch.arange(perm.numel())
        layout.inverse = inverse.to(device)
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


def _sdpa_masked(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, scale: float) -> Tensor:
    """Like :func:`_sdpa` for a query-dependent ``mask (Nq, Nk)`` (heads-first, keys shared by GQA)."""
    out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                         attn_mask=mask, scale=scale, enable_gqa=k.shape[2] != q.shape[2])
    return out.transpose(1, 2)


def attend(q: Tensor, k: Tensor, v: Tensor, layout: SetLayout | None, scale: float) -> Tensor:
    """Scaled dot-product attention of items-first features under a :class:`SetLayout`.

    ``q (B, items, heads, D)``, ``k, v (B, items, kv_heads, D)`` (``kv_heads`` 1 or ``heads``);
    flat layouts need ``B = 1``. Returns ``(B, items, heads, D)``.
    """
    if layout is None or layout.kind == "padded":
        key_mask = None if layout is None else layout.key_mask
        if key_mask is not None and key_mask.shape[0] != q.shape[0]:
            raise ValueError(f"the attention mask covers {key_mask.shape[0]} rows but the input has {q.shape[0]}")
        return _sdpa(q, k, v, key_mask, scale)
    if q.shape[0] != 1:
        raise ValueError(f"a flat (batch-vector) layout needs items without leading batch axes, got {q.shape[0]} rows")
    q, k, v = q[0], k[0], v[0]  # (N, H, D)
    if layout.method == "dense":
        b = layout.batch
        mask = (b[:, None] == b[None, :])
        return _sdpa_masked(q[None], k[None], v[None], mask, scale)
    if layout.method == "chunked":
        return _attend_chunked(q, k, v, layout, scale)[None]
    parts = []
    for g in layout.groups:
        if g.index is None:
            sl = slice(g.start, g.start + g.num_sets * g.length)
            qg, kg, vg = (t[sl].reshape(g.num_sets, g.length, t.shape[-2], t.shape[-1]) for t in (q, k, v))
        else:
            qg, kg, vg = q[g.index], k[g.index], v[g.index]
        out = _sdpa(qg, kg, vg, g.key_mask, scale)  # (sets, length, H, D)
        parts.append(out.reshape(-1, out.shape[-2], out.shape[-1]) if g.key_mask is None else out[g.key_mask])
    out = torch.cat(parts) if len(parts) != 1 else parts[0]
    if layout.inverse is not None:
        out = out[layout.inverse]
    return out[None]


def _attend_chunked(q: Tensor, k: Tensor, v: Tensor, layout: SetLayout, scale: float,
                    chunk: int = CHUNK_ITEMS) -> Tensor:
    """Query chunks against the key range of their sets: memory ``chunk x range`` (sorted order)."""
    chunk = check_positive_int(chunk, "chunk")
    if layout.groups:  # unsorted batch: work in sorted order, undo at the end
        order = layout.groups[0]
        q, k, v = q[order], k[order], v[order]
    set_of = torch.repeat_interleave(torch.arange(len(layout.sizes)), torch.tensor(layout.sizes, dtype=torch.long))
    b_sorted = set_of.to(q.device)
    out = []
    n = q.shape[0]
    for a in range(0, n, chunk):
        e = min(a + chunk, n)
        first, last = int(set_of[a]), int(set_of[e - 1])
        lo, hi = layout.starts[first], layout.starts[last] + layout.sizes[last]
        if first == last:
            out.append(_sdpa(q[None, a:e], k[None, lo:hi], v[None, lo:hi], None, scale)[0])
        else:
            mask = b_sorted[a:e, None] == b_sorted[None, lo:hi]
            out.append(_sdpa_masked(q[None, a:e], k[None, lo:hi], v[None, lo:hi], mask, scale)[0])
    res = torch.cat(out) if out else q.new_zeros(0, q.shape[1], v.shape[-1])
    return res if layout.inverse is None else res[layout.inverse]
