"""GATr's fused attention over the sets of a batch, with memory linear in the number of items.

The batch's layout is a [`BatchLayout`][geomlin.batching.BatchLayout], planned once at the data
boundary ([`geomlin.batching.batch_layout`][]) and reused by every block:

* **one set** or a **padded batch** ``(batch, items)`` with a boolean ``mask (batch, items)``: one
  call to ``torch.nn.functional.scaled_dot_product_attention`` with queries, keys and values
  of one width (PyTorch's flash / memory-efficient kernels, CPU flash included) and at most a
  ``(batch, 1, 1, items)`` key mask;
* a **flat batch** (PyTorch Geometric): items ``(items, ...)`` with a ``batch (items,)`` vector,
  attended as the layout's plan says. ``method="bucketed"`` (the default, chosen by measurement,
  see ``docs/gatr.md``) groups the sets by size (lengths within a factor of
  [`BUCKET_RATIO`][geomlin.batching.BUCKET_RATIO]), pads each group to its longest set and runs one
  fused call per group: no ``items x items`` mask is ever built, and equal-size sets stored
  contiguously (the usual PyG batch) are a reshape, not a copy. ``method="chunked"`` runs query
  chunks of [`CHUNK_ITEMS`][geomlin.batching.CHUNK_ITEMS] items against the key range of their sets
  with a small block mask (the fallback for one huge set among many small ones);
  ``method="masked"`` builds the ``items x items`` block-diagonal mask (small inputs and tests
  only). ``method="padded"`` pads every set to the bound ``max_items`` in one fused call; it is
  planned on the batch vector's device from ``num_graphs`` and ``max_items`` alone.

Multi-query attention (one key/value head shared by all query heads, the reference GATr's default)
folds the heads into the query axis, a free reshape in the items-first layout ``(B, items, heads,
width)`` the layers use. Nested jagged tensors (measured: 10x the memory on CPU), FlexAttention
(compiles on CPU) and ``torch.nn.attention.varlen`` (CUDA and half precision only) were not
chosen; see ``docs/gatr.md``. No forward pass reads anything back from the device: the plan holds
every size.
"""

from __future__ import annotations

import bisect

import torch
import torch.nn.functional as F
from torch import Tensor

from geomlin.batching import CHUNK_ITEMS, BatchLayout
from geomlin.validation import check_positive_int


def attention_mask(layout: BatchLayout) -> Tensor | None:
    """The layout's "may attend" relation as one boolean tensor (small problems and tests; see [`attend_masked`][]).

    A padded layout ``mask (..., items)`` -> ``(..., 1, 1, items)`` (None without a mask); a flat one
    -> ``(1, items, items)`` block-diagonal over its sets (padding items of a flat batch attend to
    nothing real). [`attend`][] never builds this ``items x items`` mask.
    """
    if not isinstance(layout, BatchLayout):
        raise TypeError(f"layout must be a BatchLayout (geomlin.batching.batch_layout), got {type(layout).__name__}")
    if not layout.is_flat:
        return None if layout.mask is None else layout.mask[..., None, None, :]
    return (layout.sets[:, None] == layout.sets[None, :])[None]


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


def attend(q: Tensor, k: Tensor, v: Tensor, layout: BatchLayout | None, scale: float) -> Tensor:
    """Scaled dot-product attention of items-first features under a [`BatchLayout`][geomlin.batching.BatchLayout].

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
    if layout.method is None:
        raise ValueError("this flat layout was planned on the device from num_graphs alone and has no attention plan: "
                         "plan it on the CPU (batch_layout(batch=batch).to(device)) or give max_items as well")
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


def _attend_padded(q: Tensor, k: Tensor, v: Tensor, layout: BatchLayout, scale: float) -> Tensor:
    """Every set in one ``(num_graphs, max_items)`` grid: scatter, one fused call, gather."""
    rows, length = layout.num_graphs, layout.max_items

    def grid(t: Tensor) -> Tensor:
        out = t.new_zeros(rows * length, t.shape[-2], t.shape[-1]).index_copy(0, layout.slots, t)
        return out.view(rows, length, t.shape[-2], t.shape[-1])

    out = _sdpa(grid(q), grid(k), grid(v), layout.key_mask, scale)
    return out.reshape(rows * length, out.shape[-2], out.shape[-1]).index_select(0, layout.slots)


def _attend_chunked(q: Tensor, k: Tensor, v: Tensor, layout: BatchLayout, scale: float,
                    chunk: int = CHUNK_ITEMS) -> Tensor:
    """Query chunks against the key range of their sets: memory ``chunk x range`` (sorted order).

    Chunk borders and key ranges come from the plan's host sizes; the block masks from its
    ``set_of`` on the device.
    """
    chunk = check_positive_int(chunk, "chunk")
    if layout.groups:  # unsorted batch: work in sorted order, undo at the end
        order = layout.groups[0].index
        q, k, v = q[order], k[order], v[order]
    starts, sizes = layout.set_starts, layout.set_sizes
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
