"""geomlin.neighbors against a brute-force oracle (every pair's distance, sorted by hand): the cell
lists on clustered, planar and duplicated points, several graphs, 2-D and 5-D, tiny candidate blocks, k
larger than a graph; the dense fixed-slot search with k, a cutoff, self-loops, masks and ties."""

import numpy as np
import pytest
import torch

from geomlin import neighbors
from geomlin.neighbors import knn_pairs, nearest_neighbors, radius_pairs
from geomlin.validation import deferred_checks


def _oracle(pos, batch, loop):
    """All same-graph ordered pairs as (i, d2, j) in float64, from the full distance matrix, sorted by
    (i, d2, j) with numpy's lexsort."""
    x = pos.double().numpy()
    d2 = ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)
    ok = np.ones_like(d2, dtype=bool) if batch is None else (batch[:, None] == batch[None, :]).numpy()
    if not loop:
        np.fill_diagonal(ok, False)
    i, j = np.nonzero(ok)
    dd = d2[i, j]
    o = np.lexsort((j, dd, i))
    return list(zip(i[o].tolist(), dd[o].tolist(), j[o].tolist()))


def _clouds(kind, n=120, d=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    if kind == "uniform":
        return torch.rand(n, d, generator=g)
    if kind == "clustered":
        centres = 10 * torch.randn(4, d, generator=g)
        return centres[torch.arange(n) % 4] + 0.05 * torch.randn(n, d, generator=g)
    if kind == "planar":
        x = torch.rand(n, d, generator=g)
        x[:, -1] = 0.0
        return x
    if kind == "duplicates":                       # many exactly equal distances: ties by source index
        return torch.randint(0, 3, (n, d), generator=g).float()
    raise ValueError(kind)


CASES = [("uniform", 3), ("clustered", 3), ("planar", 3), ("duplicates", 3), ("uniform", 2), ("uniform", 5)]


@pytest.mark.parametrize("kind, d", CASES)
@pytest.mark.parametrize("loop", [False, True])
def test_radius_pairs_match_brute_force(kind, d, loop, monkeypatch):
    monkeypatch.setattr(neighbors, "CANDIDATE_BUDGET", 257)     # many small blocks
    pos = _clouds(kind, d=d)
    batch = torch.tensor([0] * 50 + [1] * 3 + [2] * 67)
    for r in (0.05, 0.3, 2.0, 100.0):
        want = [(i, d2, j) for i, d2, j in _oracle(pos, batch, loop) if d2 <= r * r]
        src, dst, d2 = radius_pairs(pos, r, batch, loop)
        got = list(zip(dst.tolist(), d2.tolist(), src.tolist()))
        assert [(i, j) for i, _, j in got] == [(i, j) for i, _, j in want], (kind, d, r)
        torch.testing.assert_close(d2, torch.tensor([w[1] for w in want], dtype=torch.float64))


@pytest.mark.parametrize("kind, d", CASES)
@pytest.mark.parametrize("k", [1, 4, 60])
def test_knn_pairs_match_brute_force(kind, d, k):
    pos = _clouds(kind, d=d)
    batch = torch.tensor([0] * 50 + [1] * 3 + [2] * 67)
    want, seen = [], {}
    for i, _, j in _oracle(pos, batch, loop=False):
        seen[i] = seen.get(i, 0) + 1
        if seen[i] <= k:
            want.append((i, j))
    src, dst, _ = knn_pairs(pos, k, batch)
    assert list(zip(dst.tolist(), src.tolist())) == want


def test_empty_and_single_points():
    src, dst, d2 = radius_pairs(torch.zeros(0, 3), 1.0)
    assert src.numel() == dst.numel() == d2.numel() == 0
    src, dst, _ = knn_pairs(torch.zeros(1, 3), 3)
    assert src.numel() == 0
    src, dst, _ = knn_pairs(torch.zeros(1, 3), 3, loop=True)
    assert src.tolist() == dst.tolist() == [0]


@pytest.mark.parametrize("d", [3, 5])
@pytest.mark.parametrize("budget", [257, neighbors.CANDIDATE_BUDGET])
def test_searches_on_a_device_match_the_cpu_with_bounded_syncs(d, budget, monkeypatch):
    """On the simulated accelerator (tests/device/simulated.py) the searches give the CPU's pairs and
    read back a fixed number of sizes whatever the number of candidate blocks: at most three for
    radius_pairs (two for a single block), and three per round of knn_pairs."""
    from tests.device import simulated as sim

    monkeypatch.setattr(neighbors, "CANDIDATE_BUDGET", budget)
    pos = _clouds("clustered", d=d)
    batch = torch.tensor([0] * 50 + [1] * 3 + [2] * 67)
    dpos, dbatch = sim.to_sim((pos, batch))
    for r in (0.05, 0.3, 2.0):
        want = radius_pairs(pos, r, batch)
        with deferred_checks(), sim.watch() as log:
            got = radius_pairs(dpos, r, dbatch)
        assert len(log.events) == len(log.of("sync")) <= (2 if budget > 1000 else 3), log.report()
        for a, b in zip(got, want):
            assert a.device == sim.DEVICE and torch.equal(sim.to_cpu(a), b)
    rounds = []
    search = neighbors.radius_pairs
    monkeypatch.setattr(neighbors, "radius_pairs", lambda *a, **kw: rounds.append(1) or search(*a, **kw))
    for k in (1, 4, 60):
        want = knn_pairs(pos, k, batch)
        rounds.clear()
        with deferred_checks(), sim.watch() as log:
            got = knn_pairs(dpos, k, dbatch)
        assert len(log.events) == len(log.of("sync")) <= len(rounds) * (3 if budget > 1000 else 4), log.report()
        for a, b in zip(got, want):
            assert a.device == sim.DEVICE and torch.equal(sim.to_cpu(a), b)


def _dense_oracle(pos, k, cutoff, loop, mask):
    """Per set and point: the other points (self first with loop) sorted by (squared distance, index),
    within the cutoff, real points only; as python lists."""
    out = []
    for b in range(pos.shape[0]):
        rows = []
        for i in range(pos.shape[1]):
            real = mask is None or bool(mask[b, i])
            cand = []
            for j in range(pos.shape[1]):
                d2 = float((pos[b, i] - pos[b, j]).pow(2).sum())
                if j == i or not real or (mask is not None and not mask[b, j]):
                    continue
                if cutoff is None or d2 < cutoff * cutoff:
                    cand.append((d2, j))
            order = ([i] if loop and real else []) + [j for _, j in sorted(cand)]
            rows.append(order[:k])
        out.append(rows)
    return out


@pytest.mark.parametrize("loop", [False, True])
@pytest.mark.parametrize("k, cutoff", [(3, None), (20, None), (4, 1.0), (None, None)])
@pytest.mark.parametrize("with_mask", [False, True])
def test_nearest_neighbors_match_brute_force(k, cutoff, loop, with_mask):
    g = torch.Generator().manual_seed(3)
    pos = torch.randint(0, 3, (2, 9, 3), generator=g).double() * 0.5   # many equal distances: ties by index
    mask = None
    if with_mask:
        mask = torch.ones(2, 9, dtype=torch.bool)
        mask[0, 6:] = False
    index, valid = nearest_neighbors(pos, k, cutoff, loop, mask)
    width = min(k or 9, 9 if loop else 8)
    assert index.shape == valid.shape == (2, 9, width) and index.dtype == torch.int64
    want = _dense_oracle(pos, width, cutoff, loop, mask)
    for b in range(2):
        for i in range(9):
            got = [int(j) for j, ok in zip(index[b, i], valid[b, i]) if ok]
            assert got == want[b][i], (b, i)
            assert all(int(j) == i for j, ok in zip(index[b, i], valid[b, i]) if not ok)  # unused slots: itself


def test_nearest_neighbors_cutoff_alone_takes_the_largest_count_on_the_cpu_only():
    pos = torch.tensor([[[0.0, 0, 0], [1, 0, 0], [5, 0, 0], [5.5, 0, 0], [5.9, 0, 0]]])
    index, valid = nearest_neighbors(pos, cutoff=1.5)
    assert index.shape == (1, 5, 2) and valid.sum(-1).tolist() == [[1, 1, 2, 2, 2]]
    from tests.device import simulated as sim

    with pytest.raises(ValueError, match="needs k"):
        nearest_neighbors(sim.to_sim(pos), cutoff=1.5)
    with pytest.raises(ValueError, match="no neighbour slots"):
        nearest_neighbors(pos[:, :1])


def test_nearest_neighbors_are_sync_free_on_a_device():
    from tests.device import simulated as sim

    pos = torch.randn(3, 7, 3, generator=torch.Generator().manual_seed(0))
    mask = torch.rand(3, 7, generator=torch.Generator().manual_seed(1)) > 0.3
    want = nearest_neighbors(pos, 4, 1.2, False, mask)
    dpos, dmask = sim.to_sim((pos, mask))
    with deferred_checks(), sim.watch() as log:
        got = nearest_neighbors(dpos, 4, 1.2, False, dmask)
    assert not log.events, log.report()
    for a, b in zip(got, want):
        assert torch.equal(sim.to_cpu(a), b)
