"""geomlin.neighbors.cell_list against a brute-force oracle (every pair's distance, sorted by hand):
clustered, planar and duplicated points, several graphs, 2-D and 5-D, tiny candidate blocks, k larger
than a graph; the same pairs and a bounded number of host syncs on the simulated accelerator."""

import numpy as np
import pytest
import torch

from geomlin.neighbors import cell_list, knn_pairs, radius_pairs
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
    monkeypatch.setattr(cell_list, "CANDIDATE_BUDGET", 257)     # many small blocks
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
@pytest.mark.parametrize("budget", [257, cell_list.CANDIDATE_BUDGET])
def test_searches_on_a_device_match_the_cpu_with_bounded_syncs(d, budget, monkeypatch):
    """On the simulated accelerator (tests/device/simulated.py) the searches give the CPU's pairs and
    read back a fixed number of sizes whatever the number of candidate blocks: at most three for
    radius_pairs (two for a single block), and three per round of knn_pairs."""
    from tests.device import simulated as sim

    monkeypatch.setattr(cell_list, "CANDIDATE_BUDGET", budget)
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
    search = cell_list.search_pairs
    monkeypatch.setattr(cell_list, "search_pairs", lambda *a, **kw: rounds.append(1) or search(*a, **kw))
    for k in (1, 4, 60):
        want = knn_pairs(pos, k, batch)
        rounds.clear()
        with deferred_checks(), sim.watch() as log:
            got = knn_pairs(dpos, k, dbatch)
        assert len(log.events) == len(log.of("sync")) <= len(rounds) * (3 if budget > 1000 else 4), log.report()
        for a, b in zip(got, want):
            assert a.device == sim.DEVICE and torch.equal(sim.to_cpu(a), b)
