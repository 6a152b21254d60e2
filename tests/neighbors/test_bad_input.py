"""Bad input at every public boundary of geomlin.neighbors: the exception type and a phrase of the message
(what was expected, what was given), on the CPU and, for the values a device holds, on the simulated
accelerator, where the checks ride on the search's first host sync; plus valid-input controls."""

import math

import pytest
import torch

from geomlin.neighbors import edge_vectors, knn_pairs, nearest_neighbors, neighbor_list, radius_pairs
from tests.refusals import assert_refused

POS = torch.rand(12, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 3
BATCH = torch.tensor([0] * 5 + [1] * 7)
CELL = 4.0 * torch.eye(3, dtype=torch.float64)
CELLS = torch.stack([CELL, 5.0 * torch.eye(3, dtype=torch.float64)])
EDGES, SHIFT = neighbor_list(POS, 2.0, cell=CELL)


def _with(x, where, value):
    x = x.clone()
    x[where] = value
    return x


NAN_POS, INF_POS = _with(POS, (3, 1), math.nan), _with(POS, (0, 0), math.inf)

CASES = [
    # radius_pairs
    ("radius: NaN positions", lambda: radius_pairs(NAN_POS, 1.0), ValueError, "pos contains NaN or inf values"),
    ("radius: inf positions", lambda: radius_pairs(INF_POS, 1.0), ValueError, "pos contains NaN or inf values"),
    ("radius: negative cutoff", lambda: radius_pairs(POS, -1.0), ValueError, "cutoff must be > 0.0, got -1.0"),
    ("radius: zero cutoff", lambda: radius_pairs(POS, 0.0), ValueError, "cutoff must be > 0.0, got 0.0"),
    ("radius: NaN cutoff", lambda: radius_pairs(POS, math.nan), ValueError, "cutoff must be finite"),
    ("radius: inf cutoff", lambda: radius_pairs(POS, math.inf), ValueError, "cutoff must be finite"),
    ("radius: bool cutoff", lambda: radius_pairs(POS, True), TypeError, "cutoff must be a real number"),
    ("radius: list positions", lambda: radius_pairs(POS.tolist(), 1.0), TypeError, "pos must be a torch.Tensor"),
    ("radius: int positions", lambda: radius_pairs(POS.long(), 1.0), TypeError, "pos must have"),
    ("radius: 1-D positions", lambda: radius_pairs(POS[:, 0], 1.0), ValueError, "pos must have 2 dimension(s)"),
    ("radius: no coordinates", lambda: radius_pairs(POS[:, :0], 1.0), ValueError, "at least one coordinate"),
    ("radius: batch too short", lambda: radius_pairs(POS, 1.0, BATCH[:-1]), ValueError,
     "batch must have one entry per item (12)"),
    ("radius: float batch", lambda: radius_pairs(POS, 1.0, BATCH.double()), TypeError, "batch must have"),
    ("radius: unsorted batch", lambda: radius_pairs(POS, 1.0, BATCH.flip(0)), ValueError, "batch must be sorted"),
    ("radius: negative batch", lambda: radius_pairs(POS, 1.0, BATCH - 1), ValueError, "batch must be non-negative"),
    ("radius: loop 1", lambda: radius_pairs(POS, 1.0, loop=1), TypeError, "loop must be a bool"),
    ("radius: target out of range", lambda: radius_pairs(POS, 1.0, targets=torch.tensor([0, 12])), ValueError,
     "targets must index points in [0, 12)"),
    ("radius: float targets", lambda: radius_pairs(POS, 1.0, targets=torch.tensor([0.0])), TypeError,
     "targets must have"),
    # knn_pairs
    ("knn: NaN positions", lambda: knn_pairs(NAN_POS, 3), ValueError, "pos contains NaN or inf values"),
    ("knn: k = 0", lambda: knn_pairs(POS, 0), ValueError, "k must be >= 1, got 0"),
    ("knn: negative k", lambda: knn_pairs(POS, -2), ValueError, "k must be >= 1, got -2"),
    ("knn: float k", lambda: knn_pairs(POS, 2.5), TypeError, "k must be an int"),
    ("knn: bool k", lambda: knn_pairs(POS, True), TypeError, "k must be an int"),
    ("knn: batch too long", lambda: knn_pairs(POS, 2, torch.zeros(13, dtype=torch.long)), ValueError,
     "batch must have one entry per item"),
    ("knn: loop 'yes'", lambda: knn_pairs(POS, 2, loop="yes"), TypeError, "loop must be a bool"),
    # neighbor_list
    ("list: NaN positions", lambda: neighbor_list(NAN_POS, 1.0, cell=CELL), ValueError, "pos contains NaN"),
    ("list: NaN positions, free", lambda: neighbor_list(NAN_POS, 1.0), ValueError, "pos contains NaN"),
    ("list: negative cutoff", lambda: neighbor_list(POS, -0.5, cell=CELL), ValueError, "cutoff must be > 0.0"),
    ("list: 2-D atoms in a cell", lambda: neighbor_list(POS[:, :2], 1.0, cell=CELL), ValueError,
     "pos must have 3 coordinates per point"),
    ("list: cell (2, 3)", lambda: neighbor_list(POS, 1.0, cell=CELL[:2]), ValueError,
     "cell must have shape (G, 3, 3) or (3, 3)"),
    ("list: int cell", lambda: neighbor_list(POS, 1.0, cell=CELL.long()), TypeError, "cell must have"),
    ("list: NaN cell", lambda: neighbor_list(POS, 1.0, cell=_with(CELL, (1, 1), math.nan)), ValueError,
     "cell contains NaN or inf values"),
    ("list: two cells, one graph", lambda: neighbor_list(POS, 1.0, cell=CELLS), ValueError,
     "cell holds 2 cells but there is one graph"),
    ("list: batch beyond the cells", lambda: neighbor_list(POS, 1.0, BATCH + 1, CELLS), ValueError,
     "batch refers to graph 2 but there are 2 graphs"),
    ("list: pbc without a cell", lambda: neighbor_list(POS, 1.0, pbc=(True, True, True)), ValueError,
     "pbc needs the cell"),
    ("list: two pbc flags", lambda: neighbor_list(POS, 1.0, cell=CELL, pbc=(True, False)), TypeError,
     "pbc must be a bool, three bools"),
    ("list: pbc strings", lambda: neighbor_list(POS, 1.0, cell=CELL, pbc=("T", "T", "T")), TypeError,
     "pbc must be a bool, three bools"),
    ("list: float pbc", lambda: neighbor_list(POS, 1.0, cell=CELL, pbc=torch.ones(3)), TypeError, "pbc must have"),
    ("list: pbc (2, 3) for one cell", lambda: neighbor_list(POS, 1.0, cell=CELL, pbc=torch.ones(2, 3, dtype=torch.bool)),
     ValueError, "pbc must have shape (3,) or (G, 3)"),
    ("list: cell too small", lambda: neighbor_list(POS, 6.0, cell=0.1 * CELL), ValueError,
     "is too small for the cutoff 6: its height along lattice vector 0 is 0.4"),
    ("list: zero periodic vector", lambda: neighbor_list(POS, 1.0, cell=_with(CELL, 2, 0.0)), ValueError,
     "linearly dependent periodic lattice vectors"),
    ("list: loop 0", lambda: neighbor_list(POS, 1.0, loop=0), TypeError, "loop must be a bool"),
    # edge_vectors
    ("vectors: shift without cell", lambda: edge_vectors(POS, EDGES, SHIFT), ValueError, "needs shift and cell together"),
    ("vectors: cell without shift", lambda: edge_vectors(POS, EDGES, cell=CELL[None]), ValueError,
     "needs shift and cell together"),
    ("vectors: a shift short", lambda: edge_vectors(POS, EDGES, SHIFT[:-1], CELL[None]), ValueError,
     "shift must have shape"),
    ("vectors: two cells, no batch", lambda: edge_vectors(POS, EDGES, SHIFT, CELLS), ValueError, "pass batch (N,)"),
    ("vectors: edge_index (3, E)", lambda: edge_vectors(POS, EDGES[[0, 1, 1]]), ValueError,
     "edge_index must have shape (2, *)"),
    ("vectors: float edge_index", lambda: edge_vectors(POS, EDGES.double()), TypeError, "edge_index must have"),
    ("vectors: 2-D atoms", lambda: edge_vectors(POS[:, :2], EDGES), ValueError, "pos must have shape"),
    # nearest_neighbors (the dense search: the same refusals)
    ("dense: NaN positions", lambda: nearest_neighbors(NAN_POS[None], 3), ValueError, "pos contains NaN"),
    ("dense: k = 0", lambda: nearest_neighbors(POS[None], 0), ValueError, "k must be >= 1, got 0"),
    ("dense: negative cutoff", lambda: nearest_neighbors(POS[None], 3, cutoff=-1.0), ValueError, "cutoff must be > 0.0"),
    ("dense: loop 1", lambda: nearest_neighbors(POS[None], 3, loop=1), TypeError, "loop must be a bool"),
    ("dense: float mask", lambda: nearest_neighbors(POS[None], 3, mask=torch.ones(1, 12)), TypeError,
     "mask must have dtype torch.bool"),
]


@pytest.mark.parametrize("what,call,exc,phrase", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_refused_clearly(what, call, exc, phrase):
    assert_refused(call, exc, phrase)


def test_at_least_50_cases():
    assert len(CASES) >= 50


@pytest.mark.parametrize("search", [
    lambda p: radius_pairs(p, 1.0),
    lambda p: radius_pairs(torch.cat([p, p], dim=1), 1.0),             # 6-D: the brute-force path
    lambda p: knn_pairs(p, 3),
    lambda p: neighbor_list(p, 1.0),
], ids=["radius", "radius 6-D", "knn", "neighbor_list"])
def test_nan_positions_are_refused_at_once_on_a_device(search):
    """On an accelerator the finiteness test rides on the first host sync, so the search refuses NaN
    there too (before, knn_pairs ran 64 rounds of radius doubling and blamed the radius)."""
    from tests.device import simulated as sim

    assert_refused(lambda: search(sim.to_sim(NAN_POS)), ValueError, "pos contains NaN or inf values")


def test_nan_cells_are_refused_at_once_on_a_device():
    from tests.device import simulated as sim

    pos, cell = sim.to_sim((POS, _with(CELL, (0, 2), math.inf)))
    assert_refused(lambda: neighbor_list(pos, 1.0, cell=cell), ValueError, "cell contains NaN or inf values")


def test_valid_inputs_are_accepted():
    """Controls: the edge cases that are fine (a float cutoff given as an int, int32 batch and targets,
    a 0-d float tensor cutoff, one atom, pbc as one bool or a tensor (3,), a zero cell with no
    periodic axis)."""
    assert radius_pairs(POS, 2, BATCH.int(), targets=torch.tensor([0, 3], dtype=torch.int32))[0].numel() > 0
    assert radius_pairs(POS, torch.tensor(2.0))[0].numel() > 0
    assert knn_pairs(POS[:1], 4)[0].numel() == 0
    for pbc in (True, torch.tensor([True, False, True]), False):
        assert neighbor_list(POS, 1.5, cell=CELL, pbc=pbc)[0].shape[0] == 2
    edge_index, shift = neighbor_list(POS, 1.5, cell=torch.zeros(3, 3, dtype=torch.float64), pbc=False)
    assert not shift.any() and torch.equal(edge_index, neighbor_list(POS, 1.5)[0])


def test_the_search_behind_the_public_functions_refuses_too():
    """cell_list.search_pairs (periodic.py's building block) refuses NaN and a cutoff <= 0 itself."""
    from geomlin.neighbors.cell_list import search_pairs

    assert_refused(lambda: search_pairs(NAN_POS, 1.0, None, False, None), ValueError, "pos contains NaN")
    assert_refused(lambda: search_pairs(POS, -1.0, None, False, None), ValueError, "cutoff must be > 0.0")
