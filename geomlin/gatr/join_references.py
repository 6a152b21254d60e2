"""The reference multivectors of GATr's equivariant join ``<ref>_{e123} (x v y)`` (GATr eq. 4).

The join flips sign under odd versors; so does the ``e123`` component of a reference that
transforms with the data, so their product is equivariant. [`join_reference`][] is that
data-dependent reference (the reference GATr's ``join_reference="data"``: a mean of the inputs,
per set), [`canonical_reference`][] the constant one (``"canonical"``, SE(3) only). The layers and
the model take either (``geomlin.gatr.planes.equivariant_join_planes`` reads its ``e123`` weight).
"""

from __future__ import annotations

import torch
from torch import Tensor

from geomlin.algebra import pga
from geomlin.batching import BatchLayout
from geomlin.validation import check_batch_vector, check_mask


def join_reference(mv: Tensor, mask: Tensor | None = None, batch: Tensor | BatchLayout | None = None) -> Tensor:
    """Per-set mean of ``mv (..., items, channels, 16)``, the reference of the equivariant join.

    * no mask, no batch: mean over items and channels -> ``(..., 1, 1, 16)`` (the reference's
      ``join_reference="data"``);
    * ``mask (..., items)``: mean over valid items -> ``(..., 1, 1, 16)``;
    * ``batch (items,)`` (flat layout, ``mv (items, channels, 16)``, sorted as PyG stores it): mean
      per set, gathered back -> ``(items, 1, 16)``, so every set's reference follows its own
      transformation. A batch vector's sets are numbered by their order in it (at most ``items``
      of them), so nothing is read back from the device; a planned
      [`BatchLayout`][geomlin.batching.BatchLayout] sizes the per-set sums by its ``num_graphs``
      (and brings its item mask).

    Parameters
    ----------
    mv : Tensor of shape (..., items, channels, 16)
        the input multivectors.
    mask : Tensor of shape (..., items), optional
        bool, True = real item.
    batch : Tensor of shape (items,) or BatchLayout, optional
        the set of each item (flat layout), or the layout of the batch.

    Returns
    -------
    Tensor
        ``(..., 1, 1, 16)``, or ``(items, 1, 16)`` for a flat batch.
    """
    pga.check_mv(mv, "mv")
    if mv.ndim < 3:
        raise ValueError(f"mv must have at least 3 dimensions (..., items, channels, 16), got shape {tuple(mv.shape)}")
    rows = None
    if isinstance(batch, BatchLayout):
        if mask is not None:
            raise ValueError("give the mask inside the layout, not beside it")
        mask, rows = batch.mask, batch.num_graphs
        batch = batch.batch if batch.is_flat else None
    if mask is not None:
        check_mask(mask, "mask", shape=mv.shape[:-2])
    if batch is not None:
        if mv.ndim != 3:
            raise ValueError(f"with a batch vector mv must be flat (items, channels, 16), got {tuple(mv.shape)}")
        batch = check_batch_vector(batch, "batch", mv.shape[0], num_graphs=rows)
    per_item = mv.mean(-2, keepdim=True)  # (..., items, 1, 16)
    if batch is not None:
        set_of = batch if rows is not None else _ranks(batch)
        rows = rows if rows is not None else batch.shape[0]
        w = torch.ones(batch.shape[0], dtype=mv.dtype, device=mv.device)
        if mask is not None:
            w = w * mask.to(mv.dtype)
        sums = torch.zeros(rows, pga.DIM, dtype=mv.dtype, device=mv.device)
        sums = sums.index_add(0, set_of, per_item[:, 0] * w[:, None])
        counts = torch.zeros(rows, dtype=mv.dtype, device=mv.device).index_add(0, set_of, w)
        means = sums / counts.clamp_min(1.0)[:, None]
        return means[set_of][:, None, :]
    if mask is not None:
        w = mask.to(mv.dtype)[..., None, None]  # (..., items, 1, 1)
        total = (per_item * w).sum(-3, keepdim=True)
        return total / w.sum(-3, keepdim=True).clamp_min(1.0)
    return per_item.mean(-3, keepdim=True)


def _ranks(batch: Tensor) -> Tensor:
    """The sets of a sorted batch vector renumbered ``0, 1, ...`` in order of appearance, ``(items,)``."""
    if batch.numel() < 2:
        return torch.zeros_like(batch)
    return torch.cat([batch.new_zeros(1), (batch[1:] != batch[:-1]).to(batch.dtype)]).cumsum(0)


def canonical_reference(dtype: torch.dtype = torch.float32, device=None) -> Tensor:
    """The reference GATr's ``join_reference="canonical"``: ``e123 + e0123`` as ``(16,)``.

    Constant, hence invariant under proper motions (SE(3)); a reflection flips the join but not
    this reference, so with it the model is equivariant under SE(3) only.
    """
    out = torch.zeros(pga.DIM, dtype=dtype, device=device)
    out[pga.E123] = 1.0
    out[pga.E0123] = 1.0
    return out
