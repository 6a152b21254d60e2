"""Neighbourhoods of items for geometric-algebra attention: the ``k`` nearest items and/or those within
a cutoff distance, so that [`geomlin.clifford.ga_attention`][] forms ``O(N k^(rank - 1))`` tuples instead of
``N^rank``.

The search itself is the package's one dense neighbour search, [`geomlin.neighbors.nearest_neighbors`][].
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from geomlin.neighbors import nearest_neighbors
from geomlin.validation import check_tensor


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


def neighborhoods(pos: Tensor, k: int | None = None, cutoff: float | None = None,
                  include_self: bool = True) -> Neighborhoods:
    """The ``k`` nearest items of each item and/or those closer than ``cutoff``, from ``pos (..., N, d)``.

    ``k`` alone: the ``k`` nearest (``K = min(k, N)``); ``cutoff`` alone: every item closer than
    ``cutoff``, padded to the largest count (``K`` is data dependent, so this is for CPU tensors;
    on an accelerator give ``k`` as an upper bound); both: the ``k`` nearest, masked from
    ``cutoff`` on. ``include_self`` lists each item as its own (first) neighbour, so ``k = N``
    reproduces the layer over all tuples. Ties are broken by index. The search is
    [`geomlin.neighbors.nearest_neighbors`][] (all ``N^2`` distances, ``O(N^2)`` memory).
    """
    if k is None and cutoff is None:
        raise ValueError("neighborhoods needs k, cutoff or both")
    return Neighborhoods(*nearest_neighbors(pos, k, cutoff, loop=include_self))
