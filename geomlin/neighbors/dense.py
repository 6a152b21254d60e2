"""Nearest neighbours of small dense sets in fixed slots: every device, no host sync, one compiled graph.

[`nearest_neighbors`][] measures all ``N^2`` distances of each set and keeps the nearest points of
every point in ``K`` slots ``(..., N, K)``: shapes that depend only on the input's, so it runs inside
a model's forward on any device and traces into one ``torch.compile`` graph. Meant for molecules
and the tuples of a layer; clouds and periodic cells take the cell lists of
[`geomlin.neighbors.cell_list`][] and [`geomlin.neighbors.periodic`][].
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from geomlin.validation import (
    check_bool,
    check_float,
    check_mask,
    check_memory,
    check_positive_int,
    check_tensor,
)


def nearest_neighbors(pos: Tensor, k: int | None = None, cutoff: float | None = None, loop: bool = False,
                      mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """The nearest points of every point of small dense sets, in fixed slots, nearest first.

    Parameters
    ----------
    pos : Tensor of shape (..., N, d)
        float positions of sets of ``N`` points (detached: the selection has no gradient).
    k : int, optional
        Slots per point: ``K = min(k, N)`` with ``loop``, ``min(k, N - 1)`` without. Omitted: every
        neighbour, ``K = N`` (``N - 1``), or with ``cutoff`` the largest number within it (read back
        from the values: CPU tensors only, an accelerator would have to wait for the device).
    cutoff : float, optional
        Only points closer than ``cutoff`` (strictly) are neighbours.
    loop : bool
        Every point is its own neighbour, in slot 0 (ahead of coincident points).
    mask : Tensor of shape (..., N), optional
        bool, the real points of padded sets: the others are nobody's neighbour and have none.

    Returns
    -------
    index : Tensor of shape (..., N, K)
        int64, ``index[..., i, s]`` the point (in ``[0, N)``, within its set) in slot ``s`` of point
        ``i``, ordered by distance, ties by index; the point's own index in an unused slot.
    valid : Tensor of shape (..., N, K)
        bool, True for the used slots (consumers give the others zero weight).

    Notes
    -----
    All ``N^2`` squared distances are formed (float64 for float64 input, else the input's dtype), then
    sorted per point: ``O(N^2)`` memory, meant for molecules and the tuples of a layer, not clouds
    ([`geomlin.neighbors.cell_list.radius_pairs`][], [`geomlin.neighbors.cell_list.knn_pairs`][]). No host sync on any device when ``k`` is given or
    ``cutoff`` is not.
    """
    check_tensor(pos, "pos", min_ndim=2, finite=True, nonempty=True, what="sets of points (..., N, d)")
    if mask is not None:
        check_mask(mask, "mask", tuple(pos.shape[:-1]))
    if cutoff is not None:
        cutoff = check_float(cutoff, "cutoff", minimum=0.0, strict_minimum=True)
    check_bool(loop, "loop")
    n = pos.shape[-2]
    width = n if loop else n - 1
    if k is not None:
        width = min(check_positive_int(k, "k"), width)
    if width < 1:
        raise ValueError(f"nearest_neighbors of sets of {n} point(s) without loop has no neighbour slots")
    check_memory(math.prod(pos.shape[:-2]) * n * n * (pos.element_size() + 8 + 1),
                 f"nearest_neighbors of sets of {n} points (dense (N, N) distances)",
                 "use radius_pairs / knn_pairs (cell lists) for large clouds")
    p = pos.detach()
    d2 = (p[..., :, None, :] - p[..., None, :, :]).pow(2).sum(dim=-1)            # (..., N, N), row: point i
    own = torch.eye(n, dtype=torch.bool, device=pos.device)
    near = ~own
    if cutoff is not None:
        near = near & (d2 < cutoff * cutoff)
    if mask is not None:
        near = near & mask[..., :, None] & mask[..., None, :]
    key = torch.where(near, d2, torch.full_like(d2, math.inf))
    if loop:  # its own first slot, ahead of any coincident point
        mine = own if mask is None else own & mask[..., :, None]
        key = torch.where(mine, torch.full_like(d2, -1.0), key)
    if k is None and cutoff is not None:
        if pos.device.type != "cpu":
            raise ValueError(f"nearest_neighbors(cutoff=...) on {pos.device} needs k, an upper bound of the "
                             "neighbours per point: without it the width would have to be read back from the device")
        width = max(int(torch.isfinite(key).sum(dim=-1).max()), 1)
    dist, index = torch.sort(key, dim=-1, stable=True)
    valid = torch.isfinite(dist[..., :width])
    slots = torch.arange(n, device=pos.device)[:, None].expand(n, width)
    return torch.where(valid, index[..., :width], slots), valid
