"""Exact cell-list searches of point clouds: every pair within a radius, and the k nearest neighbours.

**Cell lists.** Points are binned into cubic cells of side ``cell >= cutoff``; every pair closer than
``cutoff`` lies in the same or an adjacent cell, so each point is compared only with the points of
its ``3^d`` neighbouring cells (Allen & Tildesley, *Computer Simulation of Liquids*, Sec. 5.3). The
points are sorted by their linearised cell keys and a cell's points are found by binary search
(``torch.searchsorted``), so the work is ``O(N log N + candidate pairs)``, linear in the number of
points at a fixed density, and runs unchanged on any device. Candidate pairs are processed in
blocks of targets of about [`CANDIDATE_BUDGET`][] pairs, which bounds memory.

[`radius_pairs`][] returns every pair within ``cutoff``; [`knn_pairs`][] the ``k`` nearest
neighbours of every point, exactly: it searches a radius estimated from the density and doubles
it for the points that have fewer than ``k`` neighbours inside, until all have enough (a ball
holding ``k`` points holds the ``k`` nearest). Both order the pairs by target, then distance,
then source index, and compute distances in float64. [`search_pairs`][] is the search behind both
(and behind the periodic [`geomlin.neighbors.periodic.neighbor_list`][]) without their argument
checks, for other modules of this package.

**Host syncs on accelerators.** The number of pairs depends on the data, so an accelerator must
report sizes back to the host; everything else stays on the device. A radius search reads back the
number of candidate pairs (with the test that the positions are finite), the block boundaries when
there is more than one block, and the number of pairs kept: two syncs for up to
[`CANDIDATE_BUDGET`][] candidates, three beyond (then the candidates of each block are generated
twice: once to count, once to keep). [`knn_pairs`][] adds one sync per round of radius doubling (one
round for evenly spread points; each round is a radius search). On the CPU the blocks are streamed
and nothing is recomputed.
"""

from __future__ import annotations

import itertools
import math

import torch
from torch import Tensor

from geomlin.validation import (
    check_batch_vector,
    check_bool,
    check_float,
    check_index,
    check_positive_int,
    check_same_device,
    check_tensor,
    shape_str,
)

#: Candidate pairs examined per block of targets (bounds the memory of one search step).
CANDIDATE_BUDGET = 1 << 19
#: Dimensions up to which the cell list is used (``3^d`` neighbour cells); above it, brute force.
MAX_GRID_DIM = 4
#: Headroom of the first kNN radius over the estimate from a uniform density in the bounding box.
KNN_RADIUS_FACTOR = 1.2
#: Rounds of radius doubling after which [`knn_pairs`][] gives up: the first radius is at least
#: ``extent * N^(-1/d)`` and a radius of ``sqrt(d) * extent`` holds every pair, so about
#: ``log2(sqrt(d) N^(1/d))`` rounds always suffice.
MAX_KNN_ROUNDS = 64


def radius_pairs(pos: Tensor, cutoff: float, batch: Tensor | None = None, loop: bool = False,
                 targets: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """All ordered pairs ``(source j, target i)`` with ``|x_i - x_j| <= cutoff`` in the same graph.

    Parameters
    ----------
    pos : Tensor of shape (N, d)
        float positions, finite.
    cutoff : float
        the distance, finite and > 0.
    batch : Tensor of shape (N,), optional
        int graph index of every point, sorted (PyG's ``batch``).
    loop : bool
        include ``(i, i)``.
    targets : Tensor of shape (T,), optional
        int64 target indices in ``[0, N)`` (default: every point).

    Returns
    -------
    src : Tensor of shape (E,)
        int64 source indices; the pairs are sorted by target, then distance, then source.
    dst : Tensor of shape (E,)
        int64 target indices.
    d2 : Tensor of shape (E,)
        float64 squared distances.

    Notes
    -----
    With every point a target, only half of the neighbouring cells are searched (those with a
    positive key offset, plus the point's own cell) and each pair found there is used in both
    directions. Host syncs on accelerators: two, or three beyond [`CANDIDATE_BUDGET`][]
    candidate pairs (see the module docstring).
    """
    pos = check_points(pos)
    cutoff = check_float(cutoff, "cutoff", minimum=0.0, strict_minimum=True)
    batch = check_batch(batch, pos)
    check_bool(loop, "loop")
    if targets is not None:
        check_tensor(targets, "targets", ndim=1, dtype="index")
        check_same_device("pos", pos, "targets", targets)
        targets = check_index(targets, "targets", pos.shape[0], "points").long()
    return search_pairs(pos, cutoff, batch, loop, targets)


def knn_pairs(pos: Tensor, k: int, batch: Tensor | None = None, loop: bool = False
              ) -> tuple[Tensor, Tensor, Tensor]:
    """The ``k`` nearest sources of every point in its graph (fewer where the graph is smaller).

    Parameters
    ----------
    pos : Tensor of shape (N, d)
        float positions, finite.
    k : int
        neighbours per point, >= 1.
    batch : Tensor of shape (N,), optional
        int graph index of every point, sorted (PyG's ``batch``).
    loop : bool
        every point is its own neighbour (first, at distance 0).

    Returns
    -------
    src, dst, d2 : Tensor of shape (E,)
        like [`radius_pairs`][]: sorted by target, then distance, then source index (so ties are
        broken by the lower index); a graph of ``m <= k`` points (``m - 1`` without ``loop``)
        contributes all its pairs.

    Notes
    -----
    Host syncs on accelerators: those of one radius search plus one, per round of radius doubling.
    """
    pos = check_points(pos)
    k = check_positive_int(k, "k")
    batch = check_batch(batch, pos)
    check_bool(loop, "loop")
    n, d = pos.shape
    device = pos.device
    if n == 0:
        return search_pairs(pos, 1.0, batch, loop, None)
    graph = batch if batch is not None else torch.zeros(n, dtype=torch.long, device=device)
    per_graph_count = torch.zeros(n, dtype=torch.long, device=device).index_add_(0, graph, torch.ones_like(graph))
    want = (per_graph_count[graph] - (0 if loop else 1)).clamp(max=k)         # neighbours each point gets
    x = pos.detach().to(torch.float64)
    extent = (x.max(dim=0).values - x.min(dim=0).values).max()
    extent = torch.where(extent > 0, extent, torch.ones_like(extent))
    per_graph = (n / (graph.max() + 1).to(x.dtype)).clamp_min(1.0)             # mean points per graph
    ball = math.pi ** (d / 2) / math.gamma(d / 2 + 1)                          # volume of the unit d-ball
    r = KNN_RADIUS_FACTOR * extent * ((k + 1) / (per_graph * ball)) ** (1.0 / d)
    todo = torch.arange(n, device=device)
    out_src, out_dst, out_d2 = [], [], []
    for _ in range(MAX_KNN_ROUNDS):
        src, dst, d2 = search_pairs(pos, r, batch, loop, todo)
        found = torch.searchsorted(dst, todo, right=True) - torch.searchsorted(dst, todo)
        done = found >= want[todo]
        finished = torch.zeros(n, dtype=torch.bool, device=device)
        finished[todo] = done
        rank = torch.arange(dst.numel(), device=device) - torch.searchsorted(dst, dst)   # place in its target's run
        take = finished[dst] & (rank < want[dst])
        if device.type == "cpu":
            picked, left = take.nonzero().squeeze(1), (~done).nonzero().squeeze(1)
        else:
            num_take, num_left = torch.stack([take.sum(), (~done).sum()]).tolist()  # the round's one sync
            picked = torch.nonzero_static(take, size=num_take).squeeze(1)
            left = torch.nonzero_static(~done, size=num_left).squeeze(1)
        out_src.append(src[picked])
        out_dst.append(dst[picked])
        out_d2.append(d2[picked])
        todo = todo[left]
        if not todo.numel():
            return _sorted(torch.cat(out_src), torch.cat(out_dst), torch.cat(out_d2))
        r = r * 2.0
    raise RuntimeError("knn_pairs: the search radius did not reach the k-th neighbour (unreachable for finite input)")


# ----------------------------------------------------------------------------- building blocks (also of periodic.py)
def search_pairs(pos: Tensor, cutoff, batch: Tensor | None, loop: bool, targets: Tensor | None,
                 sort: bool = True) -> tuple[Tensor, Tensor, Tensor]:
    """The search of [`radius_pairs`][] without its argument checks: ``src, dst, d2`` of shape ``(E,)``.

    ``pos (N, d)`` float, ``cutoff`` a float or a 0-d float tensor on ``pos``'s device (a tensor's value
    is the caller's to check), ``batch (N,)`` int64 or None, ``targets (T,)`` int64 in range or None (every
    point). ``sort=False`` leaves the pairs in search order (see [`pair_order`][]). Non-finite positions
    and a float cutoff that is not positive are still refused (on a device in the first host sync).
    """
    check_points(pos)
    if not torch.is_tensor(cutoff):
        cutoff = check_float(cutoff, "cutoff", minimum=0.0, strict_minimum=True)
    n, d = pos.shape
    device = pos.device
    every = targets is None
    if every:
        targets = torch.arange(n, device=device)
    empty = (torch.zeros(0, dtype=torch.long, device=device),) * 2 + (torch.zeros(0, dtype=torch.float64,
                                                                                  device=device),)
    if n == 0 or targets.numel() == 0:
        return empty
    x = pos.detach().to(torch.float64)
    finite = None if device.type == "cpu" else torch.isfinite(x).all()
    if d > MAX_GRID_DIM:
        return _brute_force_pairs(x, cutoff, batch, loop, targets, finite)
    num_graphs = batch.max() + 1 if batch is not None else 1
    key, strides = _keys(x, _cell_size(x, cutoff, num_graphs), batch)
    order = torch.argsort(key, stable=True)
    sorted_key = key[order]
    offsets = _offsets(d, strides)
    if every:
        offsets = offsets[(3 ** d - 1) // 2:]              # own cell + half of the neighbours (mirrored below)
    own = offsets == 0                                      # pairs of a cell with itself
    neighbour_keys = key[targets][:, None] + offsets[None, :]                   # (T, cells)
    first_of_cell = torch.searchsorted(sorted_key, neighbour_keys).clamp(max=n - 1)
    found = sorted_key[first_of_cell] == neighbour_keys
    per_cell = torch.where(found, _run_ends(sorted_key)[first_of_cell] - first_of_cell,
                           torch.zeros_like(first_of_cell))                    # points per cell (T, cells)
    counts = per_cell.sum(dim=1)                                                # candidates per target
    r2 = cutoff * cutoff

    def candidates(block):
        start, stop, size = block
        cnt = per_cell[start:stop].reshape(-1)
        tgt = targets[start:stop].repeat_interleave(counts[start:stop], output_size=size)
        first = first_of_cell[start:stop].reshape(-1).repeat_interleave(cnt, output_size=size)
        within = torch.arange(size, device=device) - (torch.cumsum(cnt, 0) - cnt).repeat_interleave(
            cnt, output_size=size)
        src = order.index_select(0, first + within)
        d2 = (x.index_select(0, src) - x.index_select(0, tgt)).pow(2).sum(dim=1)
        keep = d2 <= r2
        if not loop:
            keep &= src != tgt
        if not every:
            return (src, tgt, d2), [keep]
        mirror = (~own).expand(stop - start, -1).reshape(-1).repeat_interleave(cnt, output_size=size)
        return (src, tgt, d2), [keep, keep & mirror]     # the mirrored pairs: the other direction

    out_src, out_dst, out_d2 = [], [], []
    for (src, tgt, d2), picks in compact_blocks(_plan(torch.cumsum(counts, 0), CANDIDATE_BUDGET, finite), candidates, device):
        out_src.append(src[picks[0]])
        out_dst.append(tgt[picks[0]])
        out_d2.append(d2[picks[0]])
        if every:
            out_src.append(tgt[picks[1]])
            out_dst.append(src[picks[1]])
            out_d2.append(d2[picks[1]])
    src, dst, d2 = torch.cat(out_src), torch.cat(out_dst), torch.cat(out_d2)
    return _sorted(src, dst, d2) if sort else (src, dst, d2)


def compact_blocks(blocks: list, candidates, device: torch.device, finite: Tensor | None = None):
    """The kept candidates of every block: yields ``(values, indices)`` per block.

    ``candidates(block) -> (values, masks)`` generates a block's candidates (any ``values``) and bool
    masks ``(M,)`` of those to keep; ``indices`` are the int64 positions of the True entries of each mask.

    On the CPU the masks are compacted block by block. On an accelerator the counts of one block are
    read back at once, or, with several blocks, the counts of all blocks in a first pass (one host
    sync) and the candidates generated again to compact them at known sizes (``nonzero_static``, no
    sync). ``finite`` (device only) is read and refused in that sync, before anything is allocated from the counts.
    """
    if device.type == "cpu" or not blocks:
        for block in blocks:
            values, masks = candidates(block)
            yield values, [m.nonzero().squeeze(1) for m in masks]
        return
    flag = [] if finite is None else [finite.long()]
    if len(blocks) == 1:
        values, masks = candidates(blocks[0])
        counts = torch.stack([*flag, *(m.sum() for m in masks)]).tolist()
        passes = [(values, masks)]
    else:
        counts = torch.cat([*(f[None] for f in flag),
                            *(torch.stack([m.sum() for m in candidates(b)[1]]) for b in blocks)]).tolist()
        passes = (candidates(b) for b in blocks)
    if flag:
        refuse_nonfinite(counts.pop(0))
    width = len(counts) // len(blocks)
    sizes = [counts[i:i + width] for i in range(0, len(counts), width)]
    for (values, masks), block_counts in zip(passes, sizes):
        yield values, [torch.nonzero_static(m, size=c).squeeze(1) for m, c in zip(masks, block_counts)]


def pair_order(dst: Tensor, d2: Tensor, src: Tensor) -> Tensor:
    """The permutation ``(E,)`` int64 that orders pairs by target, then squared distance, then source.

    Three stable sorts of ``dst``, ``d2`` and ``src`` (each ``(E,)``): pairs equal in all three keep
    their order.
    """
    o = torch.argsort(src, stable=True)
    o = o[torch.argsort(d2[o], stable=True)]
    return o[torch.argsort(dst[o], stable=True)]


def check_points(pos, dim: int | None = None) -> Tensor:
    """Check the positions of a search: ``pos (N, d)`` float (``d == dim`` when given, else ``d >= 1``).

    Finiteness is tested at once on the CPU; on an accelerator the search's first host sync tests it
    ([`search_pairs`][]), so a NaN is refused there too, without a sync of its own. Returns ``pos``.
    """
    what = "N points of dimension d" if dim is None else f"N atoms in {dim} dimensions"
    check_tensor(pos, "pos", ndim=2, finite=isinstance(pos, Tensor) and pos.device.type == "cpu", what=what)
    if pos.shape[1] < 1 or (dim is not None and pos.shape[1] != dim):
        want = "at least one coordinate" if dim is None else f"{dim} coordinates"
        raise ValueError(f"pos must have {want} per point ({what}), got shape {shape_str(pos.shape)}")
    return pos


def check_batch(batch, pos: Tensor, num_graphs: int | None = None) -> Tensor | None:
    """Check a PyG ``batch (N,)`` for ``pos (N, d)`` (sorted, non-negative, ``< num_graphs`` when given,
    on ``pos``'s device); returns it as int64, or None."""
    if batch is None:
        return None
    check_batch_vector(batch, "batch", pos.shape[0], num_graphs=num_graphs)
    check_same_device("pos", pos, "batch", batch)
    return batch.long()


def refuse_nonfinite(ok: int, name: str = "pos") -> None:
    """Raise the boundary's error for non-finite ``name`` unless ``ok`` (a flag read back from a device)."""
    if not ok:
        raise ValueError(f"{name} contains NaN or inf values")


# ----------------------------------------------------------------------------- the cell list
def _keys(pos: Tensor, cell: Tensor, batch: Tensor | None) -> tuple[Tensor, Tensor]:
    """Linearised cell keys ``(N,)`` int64 and the key stride of each axis ``(d,)``.

    Cell coordinates are shifted by one so that the neighbour offsets ``-1, 0, +1`` stay inside
    the grid; the graph index (``batch``) is the most significant digit, so cells of different
    graphs never meet. Every axis spans at least 3 cells, so ``strides[k] > sum(strides[k+1:])``.
    """
    lo = pos.min(dim=0).values
    coords = torch.floor((pos - lo) / cell).long() + 1
    dims = coords.max(dim=0).values + 2
    strides = torch.ones_like(dims)
    for k in range(pos.shape[1] - 2, -1, -1):
        strides[k] = strides[k + 1] * dims[k + 1]
    key = (coords * strides).sum(dim=1)
    if batch is not None:
        key = key + batch * (strides[0] * dims[0])
    return key, strides


def _cell_size(pos: Tensor, cutoff, num_graphs: Tensor | int) -> Tensor:
    """``cutoff``, enlarged where needed so that the linearised keys fit comfortably in int64 (0-d tensor)."""
    d = pos.shape[1]
    extent = (pos.max(dim=0).values - pos.min(dim=0).values).max()
    if torch.is_tensor(num_graphs):
        per_axis = (torch.floor((2.0 ** 60 / num_graphs.clamp_min(1).to(pos.dtype)) ** (1.0 / d)) - 3).clamp_min(1)
    else:
        per_axis = max(int((2.0 ** 60 / max(num_graphs, 1)) ** (1.0 / d)) - 3, 1)
    cell = (extent / per_axis).clamp_min(1e-300)
    return torch.maximum(cell, cutoff) if torch.is_tensor(cutoff) else cell.clamp_min(cutoff)


def _offsets(d: int, strides: Tensor) -> Tensor:
    """Key offsets ``(3^d,)`` of the neighbouring cells (including the cell itself), in increasing order.

    Row ``c`` is the step ``(-1, 0, 1)^d`` of ``itertools.product`` order (the first axis varies
    slowest); because each stride exceeds the sum of the later ones, that order sorts the offsets,
    and the middle row (all steps 0) is the cell itself.
    """
    code = torch.arange(3 ** d, device=strides.device)
    steps = torch.stack([(code // 3 ** (d - 1 - k)) % 3 - 1 for k in range(d)], dim=1)
    return (steps * strides).sum(dim=1)


def _run_ends(sorted_key: Tensor) -> Tensor:
    """For every position of a sorted key array, one past the last position holding the same key ``(N,)``."""
    n = sorted_key.shape[0]
    last = torch.ones(n, dtype=torch.bool, device=sorted_key.device)
    last[:-1] = sorted_key[1:] != sorted_key[:-1]
    end = torch.where(last, torch.arange(1, n + 1, device=sorted_key.device), torch.full_like(sorted_key, n))
    return end.flip(0).cummin(0).values.flip(0)


def _plan(ends: Tensor, budget: int, finite: Tensor | None) -> list[tuple[int, int, int]]:
    """Blocks ``(first target, end target, candidates)`` of about ``budget`` candidates, from the
    cumulative candidate counts ``ends (T,)``: one host sync, two when there is more than one block.

    ``finite`` (a 0-d bool on a device; None on the CPU, where the boundary has checked) is read in the
    same sync, before anything is allocated from the counts, and refused when False.
    """
    if finite is None:
        total = int(ends[-1])
    else:
        total, ok = torch.stack([ends[-1], finite.long()]).tolist()
        refuse_nonfinite(ok)
    if total <= budget:
        return [(0, ends.shape[0], total)]
    starts = torch.cat([ends.new_zeros(1), ends[:-1]])                    # candidates before each target
    num = -(-total // budget)
    cuts = torch.searchsorted(starts, torch.arange(1, num, device=ends.device) * budget)
    bounds = torch.cat([cuts.new_zeros(1), cuts, cuts.new_full((1,), ends.shape[0])])
    before = torch.cat([ends.new_zeros(1), ends])[bounds]
    bounds, before = torch.stack([bounds, before]).tolist()
    return [(a, b, before[i + 1] - before[i]) for i, (a, b) in enumerate(itertools.pairwise(bounds)) if b > a]


def _sorted(src: Tensor, dst: Tensor, d2: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The pairs ordered by target, then squared distance, then source."""
    o = pair_order(dst, d2, src)
    return src[o], dst[o], d2[o]


def _brute_force_pairs(x: Tensor, cutoff, batch: Tensor | None, loop: bool, targets: Tensor,
                       finite: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
    """All pairs within ``cutoff`` by full distance rows of float64 ``x`` (for high dimensions), in blocks of targets."""
    n = x.shape[0]
    rows = max(1, CANDIDATE_BUDGET // max(n, 1))

    def candidates(start):
        tgt = targets[start:start + rows]
        d2 = ((x[tgt, None, :] - x[None, :, :]) ** 2).sum(dim=-1)              # (t, N)
        ok = d2 <= cutoff * cutoff
        if batch is not None:
            ok &= batch[tgt, None] == batch[None, :]
        if not loop:
            ok &= tgt[:, None] != torch.arange(n, device=x.device)[None, :]
        return (tgt, d2.reshape(-1)), [ok.reshape(-1)]

    out_src, out_dst, out_d2 = [], [], []
    for (tgt, d2), (flat,) in compact_blocks(list(range(0, targets.numel(), rows)), candidates, x.device, finite):
        out_src.append(flat % n)
        out_dst.append(tgt[flat // n])
        out_d2.append(d2[flat])
    return _sorted(torch.cat(out_src), torch.cat(out_dst), torch.cat(out_d2))
