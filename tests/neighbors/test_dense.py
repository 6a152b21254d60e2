"""geomlin.neighbors.dense against a brute-force oracle (every pair's distance, sorted by hand): the
fixed-slot search with k, a cutoff, self-loops, masks and ties, and no host sync on the simulated
accelerator."""

import pytest
import torch

from geomlin.neighbors import nearest_neighbors
from geomlin.validation import deferred_checks


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
