"""Exact neighbour search on point clouds with a uniform grid (a cell list), in plain torch.

Points are binned into cubic cells of side ``cell >= r``; every pair closer than ``r`` lies in
the same or an adjacent cell, so each point is compared only with the points of its ``3^d``
neighbouring cells (Allen & Tildesley, *Computer Simulation of Liquids*, Sec. 5.3). Cells are
found by sorting the points' linearised cell keys and binary search (``torch.searchsorted``), so
the work is ``O(N log N + candidate pairs)`` and runs unchanged on any device. Candidate pairs
are processed in blocks of targets of at most :data:`CANDIDATE_BUDGET` pairs, which bounds memory.

:func:`radius_pairs` returns every pair within ``r``; :func:`knn_pairs` the ``k`` nearest
neighbours of every point, exactly: it searches a radius estimated from the density and doubles
it for the points that have fewer than ``k`` neighbours inside, until all have enough (a ball
holding ``k`` points holds the ``k`` nearest). Both order the pairs by target, then distance,
then source index, and compute distances in float64.
"""

from __future__ import annotations

import itertools
import math

import torch
from torch import Tensor

#: Candidate pairs examined per block of targets (bounds the memory of one search step).
CANDIDATE_BUDGET = 1 << 19
#: Dimensions up to which the cell list is used (``3^d`` neighbour cells); above it, brute force.
MAX_GRID_DIM = 4
#: Headroom of the first kNN radius over the estimate from a uniform density in the bounding box.
KNN_RADIUS_FACTOR = 1.2


def _keys(pos: Tensor, cell: float, batch: Tensor | None) -> tuple[Tensor, Tensor]:
    """Linearised cell keys ``(N,)`` int64 and the key stride of each axis ``(d,)``.

    Cell coordinates are shifted by one so that the neighbour offsets ``-1, 0, +1`` stay inside
    the grid; the graph index (``batch``) is the most significant digit, so cells of different
    graphs never meet.
    """
    lo = pos.min(dim=0).values
    coords = torch.floor((pos - lo) / cell).long() + 1
    dims = coords.max(dim=0).values + 2
    strides = torch.ones_like(dims)
    for k in range(pos.shape[1] - 2, -1, -1):
        strides[k] = strides[k + 1] * dims[k + 1]
    key = (coords * strides).sum(dim=1)
    if batch is not None:
        key = key + batch.long() * int(strides[0] * dims[0])
    return key, strides


def _cell_size(pos: Tensor, r: float, num_graphs: int) -> float:
    """``r``, enlarged where needed so that the linearised keys fit comfortably in int64."""
    d = pos.shape[1]
    extent = float((pos.max(dim=0).values - pos.min(dim=0).values).max()) if pos.shape[0] else 0.0
    per_axis = int((2.0 ** 60 / max(num_graphs, 1)) ** (1.0 / d)) - 3
    return max(r, extent / max(per_axis, 1), 1e-300)


def _offsets(d: int, strides: Tensor) -> Tensor:
    """Key offsets ``(3^d,)`` of the neighbouring cells (including the cell itself)."""
    steps = torch.tensor(list(itertools.product((-1, 0, 1), repeat=d)), device=strides.device)
    return (steps * strides).sum(dim=1)


def radius_pairs(pos: Tensor, r: float, batch: Tensor | None = None, loop: bool = False,
                 targets: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """All ordered pairs ``(source j, target i)`` with ``|x_i - x_j| <= r`` in the same graph.

    Parameters
    ----------
    pos: ``(N, d)`` float positions.  r: the radius (> 0).  batch: optional ``(N,)`` sorted graph
    indices.  loop: include ``(i, i)``.  targets: optional ``(T,)`` int64 target indices (default:
    every point).

    Returns
    -------
    ``src (E,)``, ``dst (E,)`` int64 and squared distances ``d2 (E,)`` float64, sorted by target,
    then distance, then source.

    With every point a target, only half of the neighbouring cells are searched (those with a
    positive key offset, plus the point's own cell) and each pair found there is used in both
    directions.
    """
    n, d = pos.shape
    device = pos.device
    every = targets is None
    if every:
        targets = torch.arange(n, device=device)
    empty = (torch.zeros(0, dtype=torch.long, device=device),) * 2 + (torch.zeros(0, dtype=torch.float64,
                                                                                  device=device),)
    if n == 0 or targets.numel() == 0:
        return empty
    if d > MAX_GRID_DIM:
        return _brute_force_pairs(pos, r, batch, loop, targets)
    x = pos.detach().to(torch.float64)
    num_graphs = int(batch.max()) + 1 if batch is not None and batch.numel() else 1
    key, strides = _keys(x, _cell_size(x, r, num_graphs), batch)
    order = torch.argsort(key, stable=True)
    cell_keys, cell_sizes = torch.unique_consecutive(key[order], return_counts=True)
    cell_starts = torch.cumsum(cell_sizes, 0) - cell_sizes
    offsets = _offsets(d, strides)
    if every:
        offsets = offsets[offsets >= 0]                    # own cell + half of the neighbours (mirrored below)
    neighbour_keys = key[targets][:, None] + offsets[None, :]                   # (T, cells)
    slot = torch.searchsorted(cell_keys, neighbour_keys).clamp(max=cell_keys.numel() - 1)
    found = cell_keys[slot] == neighbour_keys
    lo = cell_starts[slot]
    cnt_all = torch.where(found, cell_sizes[slot], torch.zeros_like(slot))
    counts = cnt_all.sum(dim=1)                                                 # candidates per target
    own = offsets == 0                                                          # pairs of a cell with itself
    r2 = r * r
    out_src, out_dst, out_d2 = [], [], []
    ends = torch.cumsum(counts, 0)
    start = 0
    while start < targets.numel():
        base = int(ends[start - 1]) if start else 0
        stop = int(torch.searchsorted(ends, torch.tensor(base + CANDIDATE_BUDGET, device=device), right=True))
        stop = max(stop, start + 1)
        blo, cnt = lo[start:stop].reshape(-1), cnt_all[start:stop].reshape(-1)
        mirror = (~own).expand(stop - start, -1).reshape(-1).repeat_interleave(cnt)
        tgt = targets[start:stop].repeat_interleave(counts[start:stop])
        first = blo.repeat_interleave(cnt)
        within = torch.arange(tgt.numel(), device=device) - (torch.cumsum(cnt, 0) - cnt).repeat_interleave(cnt)
        src = order.index_select(0, first + within)
        d2 = (x.index_select(0, src) - x.index_select(0, tgt)).pow(2).sum(dim=1)
        keep = d2 <= r2
        if not loop:
            keep &= src != tgt
        src, tgt, d2 = src[keep], tgt[keep], d2[keep]
        if every:                                       # the other direction of the half-shell pairs
            m = mirror[keep]
            src, tgt, d2 = torch.cat([src, tgt[m]]), torch.cat([tgt, src[m]]), torch.cat([d2, d2[m]])
        out_src.append(src)
        out_dst.append(tgt)
        out_d2.append(d2)
        start = stop
    src, dst, d2 = torch.cat(out_src), torch.cat(out_dst), torch.cat(out_d2)
    return _sorted(src, dst, d2)


def _sorted(src: Tensor, dst: Tensor, d2: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The pairs ordered by target, then squared distance, then source (three stable sorts)."""
    o = torch.argsort(src, stable=True)
    o = o[torch.argsort(d2[o], stable=True)]
    o = o[torch.argsort(dst[o], stable=True)]
    return src[o], dst[o], d2[o]


def _brute_force_pairs(pos: Tensor, r: float, batch: Tensor | None, loop: bool,
                       targets: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """All pairs within ``r`` by full distance rows (for high dimensions), in blocks of targets."""
    x = pos.detach().to(torch.float64)
    rows = max(1, CANDIDATE_BUDGET // max(x.shape[0], 1))
    out_src, out_dst, out_d2 = [], [], []
    for start in range(0, targets.numel(), rows):
        tgt = targets[start:start + rows]
        d2 = ((x[tgt, None, :] - x[None, :, :]) ** 2).sum(dim=-1)              # (t, N)
        ok = d2 <= r * r
        if batch is not None:
            ok &= batch[tgt, None] == batch[None, :]
        if not loop:
            ok[torch.arange(tgt.numel(), device=x.device), tgt] = False
        t_idx, s_idx = ok.nonzero(as_tuple=True)
        out_src.append(s_idx)
        out_dst.append(tgt[t_idx])
        out_d2.append(d2[t_idx, s_idx])
    return _sorted(torch.cat(out_src), torch.cat(out_dst), torch.cat(out_d2))


def knn_pairs(pos: Tensor, k: int, batch: Tensor | None = None, loop: bool = False
              ) -> tuple[Tensor, Tensor, Tensor]:
    """The ``k`` nearest sources of every point in its graph (fewer where the graph is smaller).

    Returns ``src, dst, d2`` like :func:`radius_pairs`: sorted by target, then distance, then
    source index (so ties are broken by the lower index); a graph of ``m <= k`` points (``m - 1``
    without ``loop``) contributes all its pairs.
    """
    n, d = pos.shape
    device = pos.device
    if n == 0:
        return radius_pairs(pos, 1.0, batch, loop)
    graph = batch.long() if batch is not None else torch.zeros(n, dtype=torch.long, device=device)
    sizes = torch.bincount(graph)
    want = (sizes[graph] - (0 if loop else 1)).clamp(max=k)                    # neighbours each point gets
    x = pos.detach().to(torch.float64)
    extent = float((x.max(dim=0).values - x.min(dim=0).values).max())
    if extent == 0.0:
        extent = 1.0
    per_graph = max(float(sizes.float().mean()), 1.0)
    ball = math.pi ** (d / 2) / math.gamma(d / 2 + 1)                          # volume of the unit d-ball
    r = KNN_RADIUS_FACTOR * extent * ((k + 1) / (per_graph * ball)) ** (1.0 / d)
    todo = torch.arange(n, device=device)
    out_src, out_dst, out_d2 = [], [], []
    while todo.numel():
        src, dst, d2 = radius_pairs(pos, r, batch, loop, targets=todo)
        found = torch.bincount(dst, minlength=n)[todo]
        done = found >= want[todo]
        keep_target = torch.zeros(n, dtype=torch.bool, device=device)
        keep_target[todo[done]] = True
        sel = keep_target[dst]
        src, dst, d2 = src[sel], dst[sel], d2[sel]
        first = torch.searchsorted(dst, dst, right=False)                       # start of each target's run
        rank = torch.arange(dst.numel(), device=device) - first
        take = rank < want[dst]
        out_src.append(src[take])
        out_dst.append(dst[take])
        out_d2.append(d2[take])
        todo = todo[~done]
        r *= 2.0
        if not math.isfinite(r):                                               # unreachable for finite input
            raise RuntimeError("knn_pairs: the search radius overflowed")
    return _sorted(torch.cat(out_src), torch.cat(out_dst), torch.cat(out_d2))
