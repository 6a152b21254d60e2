"""Graphs built at the data boundary (geomlin.models.graphs): brute-force edge lists as the oracle,
the host syncs each function makes on the simulated accelerator (tests/device/simulated.py), sums
accumulated in float32, and the models' sync-free calls with precomputed graphs."""

import pytest
import torch

from geomlin.batching import batch_layout
from geomlin.models import PointNet, Ponita, PonitaPotential
from geomlin.models.graphs import (
    count_neighbors,
    dense_edge_index,
    graph_edges,
    padded_edge_index,
    padded_neighbors,
)
from geomlin.validation import deferred_checks
from tests.device import simulated as sim

F64 = torch.float64


def _pairs(edge_index) -> list:
    return list(map(tuple, sim.to_cpu(edge_index).T.tolist()))


def _brute(pos, batch, cutoff, loop):
    """Ordered by target, then source, within each graph (graphs in order); with a cutoff, the pairs
    within it by target, then distance, then source."""
    n = pos.shape[0]
    pairs = [(j, i) for i in range(n) for j in range(n) if batch[i] == batch[j] and (loop or i != j)
             and (cutoff is None or (pos[i] - pos[j]).norm() <= cutoff)]
    if cutoff is not None:
        pairs.sort(key=lambda p: (p[1], float((pos[p[0]] - pos[p[1]]).pow(2).sum()), p[0]))
    return pairs


@pytest.mark.parametrize("loop", [True, False])
@pytest.mark.parametrize("cutoff", [None, 1.2])
def test_graph_edges_match_brute_force(cutoff, loop):
    pos = torch.randn(14, 3, dtype=F64, generator=torch.Generator().manual_seed(5))
    batch = torch.tensor([0] * 4 + [1] * 1 + [3] * 9)  # graph 2 is empty, graph 1 a single node
    got = graph_edges(pos, batch_layout(batch=batch, num_graphs=4), cutoff, loop)
    assert got.dtype == torch.int64 and _pairs(got) == _brute(pos, batch, cutoff, loop)
    assert _pairs(graph_edges(pos, batch, cutoff=cutoff, loop=loop)) == _pairs(got)  # num_graphs counted


@pytest.mark.parametrize("loop", [True, False])
def test_dense_edge_index_is_graph_edges_of_a_padded_batch(loop):
    B, N = 3, 4
    batch = torch.arange(B).repeat_interleave(N)
    want = graph_edges(torch.zeros(B * N, 3), batch, loop=loop)
    assert torch.equal(dense_edge_index(B, N, loop=loop), want)
    assert dense_edge_index(2, 1).shape == (2, 0) and dense_edge_index(0, 5, loop=True).shape == (2, 0)


def test_bad_graph_input():
    pos = torch.randn(4, 3)
    with pytest.raises(ValueError, match="sorted"):
        graph_edges(pos, torch.tensor([1, 0, 0, 1]))
    with pytest.raises(ValueError, match="refers to graph 1 but there are 1 graphs"):
        graph_edges(pos, batch_layout(batch=torch.tensor([0, 0, 1, 1]), num_graphs=1))
    with pytest.raises(ValueError, match="NaN"):
        graph_edges(torch.full((2, 3), float("nan")))
    with pytest.raises(ValueError, match="cutoff must be > 0"):
        graph_edges(pos, cutoff=0.0)
    with pytest.raises(TypeError, match="batch must have an integer dtype"):
        graph_edges(pos, torch.zeros(4))


def test_host_syncs_of_the_data_boundary_functions():
    """graph_edges of a layout planned on the device reads one number back (with a cutoff, the two of the
    cell list), none with a layout planned on the host; dense_edge_index none; every output stays on
    the device."""
    pos = torch.randn(9, 3, generator=torch.Generator().manual_seed(0))
    batch = torch.tensor([0] * 5 + [1] * 4)
    want = {r: graph_edges(pos, batch, r) for r in (None, 1.5)}
    host_plan = batch_layout(batch=batch).to(sim.DEVICE)
    pos, batch = sim.to_sim((pos, batch))
    for cutoff, syncs in ((None, 1), (1.5, 2)):
        with deferred_checks(), sim.watch() as log:
            e = graph_edges(pos, batch_layout(batch=batch, num_graphs=2), cutoff)
        assert len(log.of("sync")) == syncs and len(log.events) == syncs, log.report()
        assert e.device == sim.DEVICE and torch.equal(sim.to_cpu(e), want[cutoff])
    with deferred_checks(), sim.watch() as log:
        e = graph_edges(pos, host_plan)  # all pairs of a plan that knows its sizes
        dense = dense_edge_index(3, 4, device=sim.DEVICE)
    assert not log.events, log.report()
    assert torch.equal(sim.to_cpu(e), want[None]) and dense.device == sim.DEVICE


def test_padded_all_pairs_equal_the_radius_graph():
    """The smooth window gives the pairs beyond the cutoff zero weight: all pairs = cutoff graph."""
    torch.manual_seed(0)
    model = Ponita(2, 8, 1, 2, in_vector_channels=1, out_vector_channels=1, mode="points", cutoff=1.5).double()
    (x, pos, vec), _ = model.example_inputs(generator=torch.Generator().manual_seed(1))
    pos = pos[:8]
    x, vec = x[:8], vec[:8]
    layout = batch_layout(batch=torch.arange(2).repeat_interleave(4))
    radius_graph = graph_edges(pos, layout, 1.5)
    assert radius_graph.shape[1] < dense_edge_index(2, 4, loop=True).shape[1]
    padded = model(x.reshape(2, 4, 2), pos.reshape(2, 4, 3), vec.reshape(2, 4, 1, 3))  # all pairs
    for a, b in zip(padded, model(x, pos, vec, batch=layout, edge_index=radius_graph)):
        torch.testing.assert_close(a, b, rtol=1e-13, atol=1e-13)


def test_models_are_sync_free_with_precomputed_graphs():
    """With edge_index and a planned layout given (or padded inputs), forward and backward record no event;
    the convenience calls that count the graphs and find the graph themselves sync a bounded number of times."""
    torch.manual_seed(0)
    ponita = Ponita(2, 8, 1, 1, in_vector_channels=1, out_vector_channels=1, mode="points", cutoff=2.0)
    (x, pos, vec), kw = ponita.example_inputs(generator=torch.Generator().manual_seed(2), dtype=torch.float32)
    pointnet = PointNet(3, point_widths=(8,), head_widths=(8,))
    potential = PonitaPotential(num_species=3, hidden_channels=8, num_blocks=1, cutoff=2.0)
    mol, z = torch.randn(2, 5, 3), torch.randint(3, (2, 5))
    modules, inputs = sim.to_sim(((ponita, pointnet, potential), (x, pos, vec, kw, mol, z)))
    x, pos, vec, kw, mol, z = inputs
    ponita, pointnet, potential = modules
    pos.requires_grad_(True)
    mol.requires_grad_(True)
    with deferred_checks(), sim.watch() as log:
        s, v = ponita(x, pos, vec, **kw)
        logits = pointnet(pos, batch=kw["batch"])
        energy = potential(mol, z)
        (s.sum() + v.sum() + logits.sum() + energy.sum()).backward()
    assert not log.events, log.report()
    with deferred_checks(), sim.watch() as log:
        ponita(x, pos, vec, batch=kw["batch"].batch)  # counts the graphs and builds the radius graph itself
    assert 1 <= len(log.of("sync")) <= 3 and len(log.events) == len(log.of("sync")), log.report()
    with deferred_checks(), sim.watch() as log:
        pointnet(pos, batch=kw["batch"].batch)  # counts the graphs
    assert len(log.events) == 1, log.report()


def _brute_neighbors(pos, cutoff, mask):
    """Per (b, i): the neighbours j != i closer than cutoff between real atoms, nearest first."""
    B, N, _ = pos.shape
    out = {}
    for b in range(B):
        for i in range(N):
            d = {j: float((pos[b, j] - pos[b, i]).norm()) for j in range(N)
                 if j != i and (pos[b, j] - pos[b, i]).norm() < cutoff and (mask is None or (mask[b, i] and mask[b, j]))}
            out[b, i] = sorted(d, key=lambda j: (d[j], j))
    return out


@pytest.mark.parametrize("with_mask", [False, True])
@pytest.mark.parametrize("K", [6, 11])  # K > N: the extra slots stay unused
def test_padded_neighbors_match_brute_force(with_mask, K):
    g = torch.Generator().manual_seed(3)
    pos = 1.5 * torch.randn(3, 8, 3, dtype=F64, generator=g)
    mask = torch.rand(3, 8, generator=g) > 0.3 if with_mask else None
    cutoff = 1.8
    want = _brute_neighbors(pos, cutoff, mask)
    assert max(map(len, want.values())) <= 6 < max(len(v) for v in _brute_neighbors(pos, 4.0, None).values())
    index, edge_mask = padded_neighbors(pos, cutoff, K, mask)
    assert index.shape == edge_mask.shape == (3, 8, K) and index.dtype == torch.int64
    counts = count_neighbors(pos, cutoff, mask)
    for (b, i), js in want.items():
        assert index[b, i][edge_mask[b, i]].tolist() == js  # nearest first (no ties in random data)
        assert (index[b, i][~edge_mask[b, i]] == i).all()  # unused slots: the atom itself
        assert counts[b, i] == len(js)
    edge_index, flat_mask = padded_edge_index(index, edge_mask)
    used = sorted(map(tuple, edge_index[:, flat_mask].T.tolist()))
    assert used == sorted((b * 8 + j, b * 8 + i) for (b, i), js in want.items() for j in js)
    assert edge_index.shape == (2, 3 * 8 * K)


def test_padded_neighbors_refuse_overflow():
    """An atom with more than K neighbours within the cutoff is an error, never a truncation."""
    pos = torch.randn(2, 6, 3, dtype=F64, generator=torch.Generator().manual_seed(0)) * 0.1  # all close
    assert padded_neighbors(pos, 1.0, 5)[1].all()
    with pytest.raises(ValueError, match=r"more than max_neighbors=4 neighbours within cutoff=1.0"):
        padded_neighbors(pos, 1.0, 4)
    mask = torch.ones(2, 6, dtype=torch.bool)
    mask[:, 0] = False  # five real atoms: four neighbours each fit
    assert padded_neighbors(pos, 1.0, 4, mask)[1].sum() == 2 * 5 * 4
    with pytest.raises(ValueError, match="max_neighbors must be"):
        padded_neighbors(pos, 1.0, 0)
    with pytest.raises(ValueError, match="cutoff must be > 0"):
        padded_neighbors(pos, -1.0, 4)


def test_padded_neighbors_are_sync_free_and_defer_overflow_on_an_accelerator():
    """No host sync on the simulated device inside a deferred-checks scope, where the overflow check is
    deferred to the scope's end; at once outside one."""
    pos = torch.randn(2, 6, 3, generator=torch.Generator().manual_seed(0)) * 0.1
    want = padded_neighbors(pos, 1.0, 5)
    pos = sim.to_sim(pos)
    with deferred_checks(), sim.watch() as log:
        index, edge_mask = padded_neighbors(pos, 1.0, 5)
        padded_edge_index(index, edge_mask)
        count_neighbors(pos, 1.0)
    assert not log.events, log.report()
    assert torch.equal(sim.to_cpu(index), want[0]) and torch.equal(sim.to_cpu(edge_mask), want[1])
    with pytest.raises(ValueError, match="more than max_neighbors=4 .*deferred_checks"), deferred_checks():
        padded_neighbors(pos, 1.0, 4)  # too few slots: nothing raised before the scope's end
    with pytest.raises(ValueError, match="more than max_neighbors=4"):
        padded_neighbors(pos, 1.0, 4)


def test_padded_neighbors_trace_as_one_graph():
    """Static shapes: one graph for positions that change (dynamo alone, no C++ compile)."""
    from torch._dynamo.testing import CompileCounter

    counter = CompileCounter()
    fn = torch.compile(padded_neighbors, backend=counter, fullgraph=True, dynamic=False)
    g = torch.Generator().manual_seed(1)
    with torch._dynamo.config.patch(error_on_recompile=True):
        for _ in range(3):
            pos = torch.randn(2, 7, 3, generator=g)
            for got, want in zip(fn(pos, 2.0, 7), padded_neighbors(pos, 2.0, 7)):
                assert torch.equal(got, want)
    assert counter.frame_count == 1
