"""Neighbourhoods of items for geometric-algebra attention: the ``k`` nearest items and/or those within
a radius, so that [`geomlin.clifford.ga_attention`][] forms ``O(N k^(rank - 1))`` tuples instead of
``N^rank``.

(The ``(N, N)`` distance matrix here overlaps with the neighbour search of
[`geomlin.datasets.neighbors`][] and [`geomlin.models.ponita`][]; not unified yet.)
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor

from geomlin.validation import check_float, check_memory, check_positive_int, check_tensor


class Neighborhoods(NamedTuple):
    """Tuples restricted to neighbourhoods: ``index (..., N, K)`` long, the neighbours of each item,
    and ``mask (..., N, K)`` bool, False for padding (outside the radius)."""

    index: Tensor
    mask: Tensor

    def gather(self, x: Tensor) -> Tensor:
        """Per-item features ``x (..., N, C)`` -> their neighbours' ``(..., N, K, C)``."""
        check_tensor(x, "x", shape=(*self.index.shape[:-1], None), dtype="any",
                     what="(..., N, C) features of the items the neighbourhoods index")
        return _gather_items(x, self.index)

    def displacements(self, pos: Tensor) -> Tensor:
        """``pos_j - pos_i`` for the neighbours ``j`` of each ``i``: ``(..., N, K, d)``."""
        return self.gather(pos) - pos[..., :, None, :]


def _gather_items(x: Tensor, index: Tensor) -> Tensor:
    """``x (..., N, C)``, ``index (..., M, K)`` -> ``(..., M, K, C)``."""
    lead = x.shape[:-2]
    if index.shape[:-2] != lead:
        index = index.expand(*lead, *index.shape[-2:])
    xf = x.reshape(-1, x.shape[-2], x.shape[-1])
    idx = index.reshape(xf.shape[0], -1)
    out = torch.gather(xf, 1, idx[..., None].expand(-1, -1, x.shape[-1]))
    return out.reshape(*lead, *index.shape[-2:], x.shape[-1])


def neighborhoods(pos: Tensor, k: int | None = None, radius: float | None = None,
                  include_self: bool = True) -> Neighborhoods:
    """The ``k`` nearest items of each item and/or those within ``radius``, from ``pos (..., N, d)``.

    ``k`` alone: the ``k`` nearest (``K = min(k, N)``); ``radius`` alone: every item within
    ``radius``, padded to the largest count (``K`` is data dependent, so this is for CPU tensors;
    on an accelerator give ``k`` as an upper bound);
    both: the ``k`` nearest, masked beyond ``radius``. ``include_self`` lists each item as its own
    (first) neighbour, so ``k = N`` reproduces the layer over all tuples. Ties are broken by index.
    All ``N^2`` distances are computed, ``O(N^2)`` memory.
    """
    check_tensor(pos, "pos", min_ndim=2, finite=True, nonempty=True)
    if k is None and radius is None:
        raise ValueError("neighborhoods needs k, radius or both")
    n = pos.shape[-2]
    # distances, sorted distances and their int64 indices, (..., N, N) each
    check_memory(math.prod(pos.shape[:-2]) * n * n * (2 * pos.element_size() + 8),
                 f"neighborhoods of {n} items (an (N, N) distance matrix)", "split the cloud into smaller batches")
    dist = torch.cdist(pos, pos)
    if not include_self:
        if n < 2:
            raise ValueError("include_self=False needs at least 2 items")
        dist = dist.masked_fill(torch.eye(n, dtype=torch.bool, device=pos.device), math.inf)
    else:  # each item first among its ties
        dist = dist.masked_fill(torch.eye(n, dtype=torch.bool, device=pos.device), -1.0)
    order = torch.sort(dist, dim=-1, stable=True)
    width = n if include_self else n - 1
    if k is not None:
        width = min(check_positive_int(k, "k"), width)
    mask = torch.ones(*dist.shape[:-1], width, dtype=torch.bool, device=pos.device)
    if radius is not None:
        radius = check_float(radius, "radius", minimum=0.0, strict_minimum=True)
        within = order.values[..., :width] <= radius
        if k is None:
            if pos.device.type != "cpu":
                raise ValueError(f"neighborhoods(radius=...) on {pos.device} needs k, an upper bound of the neighbours "
                                 "per item: without it the width would have to be read back from the device")
            width = max(int(within.sum(-1).max()), 1)
        mask = within[..., :width]
    return Neighborhoods(order.indices[..., :width], mask)
