"""Transforms: rotation/translation actions, E(3)-equivariance of Center / NormalizeScale and
invariance of radius / kNN graphs (geomlin.testing), brute-force and SciPy KD-tree oracles for the graphs,
PyG composition."""

import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.transforms import Compose

from geomlin import validation
from geomlin.datasets.transforms import (
    Center,
    KNNGraph,
    NormalizeScale,
    RadiusGraph,
    RandomRotation,
    RandomTranslation,
    SamplePoints,
    knn_graph,
    radius_graph,
)
from geomlin.groups import E3
from geomlin.reps import Positions, Vectors
from geomlin.testing import assert_equivariant, assert_invariant
from tests.oracles import require


def _cloud(n=20, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 3, generator=g, dtype=torch.float64)


@pytest.mark.parametrize("group", ["SO3", "O3"])
def test_random_rotation_acts_on_positions_and_vectors(group):
    pos, force = _cloud(), _cloud(seed=1)
    dets = []
    for seed in range(20):
        d = RandomRotation(group, generator=torch.Generator().manual_seed(seed), store_matrix=True)(
            Data(pos=pos.clone(), force=force.clone(), y=torch.tensor([3.0])))
        R = d.rotation[0]
        assert torch.allclose(R @ R.T, torch.eye(3, dtype=torch.float64), atol=1e-12)
        assert torch.allclose(d.pos, pos @ R.T, atol=1e-12) and torch.allclose(d.force, force @ R.T, atol=1e-12)
        assert d.y.item() == 3.0
        dets.append(round(torch.linalg.det(R).item()))
    assert set(dets) == ({1} if group == "SO3" else {1, -1})


def test_random_translation_moves_positions_only():
    pos, vel = _cloud(), _cloud(seed=2)
    d = RandomTranslation(2.0, generator=torch.Generator().manual_seed(0))(
        Data(pos=pos.clone(), target_pos=pos.clone() + 1, vel=vel.clone()))
    t = d.pos - pos
    assert torch.allclose(t, t[:1].expand_as(t)) and t.abs().sum() > 0
    assert torch.allclose(d.target_pos - (pos + 1), t) and torch.equal(d.vel, vel)


def test_center_and_normalize_are_equivariant():
    """Center(g.x) = R Center(x) and NormalizeScale likewise: translation-free outputs rotate ('vector')."""
    def center(x):
        return Center()(Data(pos=x)).pos

    def normalize(x):
        return NormalizeScale()(Data(pos=x)).pos

    x = _cloud()
    assert_equivariant(center, E3(), (Positions(3),), Vectors(3), inputs=(x,))
    assert_equivariant(normalize, E3(), (Positions(3),), Vectors(3), inputs=(x,))
    out = normalize(x)
    assert torch.allclose(out.mean(0), torch.zeros(3, dtype=torch.float64), atol=1e-12)
    assert out.norm(dim=1).max().item() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="degenerate"):
        normalize(torch.ones(4, 3, dtype=torch.float64))


def _dense(edge_index, n):
    a = torch.zeros(n, n, dtype=torch.float64)
    a[edge_index[1], edge_index[0]] = 1.0
    return a


def test_graphs_match_brute_force_and_are_invariant():
    x = _cloud(30)
    d = torch.cdist(x, x)
    r = 1.2
    ref = [(j, i) for i in range(30) for j in range(30) if i != j and d[i, j] <= r]
    got = radius_graph(x, r)
    assert sorted(map(tuple, got.t().tolist())) == sorted(ref)
    k = 4
    knn = knn_graph(x, k)
    for i in range(30):
        srcs = knn[0, knn[1] == i]
        assert len(srcs) == k
        others = torch.tensor([j for j in range(30) if j != i])
        assert set(srcs.tolist()) == set(others[d[i, others].argsort()[:k]].tolist())
    assert_invariant(lambda p: _dense(radius_graph(p, r), 30), E3(), (Positions(3),), inputs=(x,))
    assert_invariant(lambda p: _dense(knn_graph(p, k), 30), E3(), (Positions(3),), inputs=(x,))


def test_graphs_respect_batch_and_limits():
    x = _cloud(10)
    batch = torch.tensor([0] * 4 + [1] * 6)
    e = radius_graph(x, 100.0, batch=batch)
    assert (batch[e[0]] == batch[e[1]]).all() and e.shape[1] == 4 * 3 + 6 * 5
    assert radius_graph(x, 100.0, max_num_neighbors=2).shape[1] == 20
    assert knn_graph(x, 5, batch=batch).shape[1] == 4 * 3 + 6 * 5
    assert radius_graph(x, 100.0, loop=True).shape[1] == 100
    with pytest.raises(ValueError, match="NaN"):
        radius_graph(torch.full((3, 3), float("nan")), 1.0)


def test_graphs_match_scipy_kdtree():
    """Oracle: SciPy's KD-tree (an independent exact neighbour search) on two batched clouds.

    PyG's own RadiusGraph / KNNGraph need the compiled torch-cluster or pyg-lib, which this project
    does not depend on; SciPy's cKDTree is the neighbour search a user would otherwise reach for.
    """
    spatial = require("scipy.spatial")
    x = torch.cat([_cloud(50, seed=3), _cloud(30, seed=4) + 0.3])
    batch = torch.tensor([0] * 50 + [1] * 30)
    offsets = {0: 0, 1: 50}
    r, k = 0.9, 5
    want_radius, want_knn = set(), set()
    for b in (0, 1):
        pts = x[batch == b].numpy()
        tree = spatial.cKDTree(pts)
        for i, nbrs in enumerate(tree.query_ball_point(pts, r)):
            want_radius |= {(offsets[b] + j, offsets[b] + i) for j in nbrs if j != i}
        _, idx = tree.query(pts, k + 1)
        for i, row in enumerate(idx):
            want_knn |= {(offsets[b] + int(j), offsets[b] + i) for j in row if j != i}
    got_radius = radius_graph(x, r, batch=batch)
    got_knn = KNNGraph(k)(Data(pos=x, batch=batch)).edge_index
    assert set(map(tuple, got_radius.t().tolist())) == want_radius and got_radius.shape[1] == len(want_radius)
    assert set(map(tuple, got_knn.t().tolist())) == want_knn and got_knn.shape[1] == len(want_knn) == 80 * k
    # RadiusGraph on the same data as a transform
    assert set(map(tuple, RadiusGraph(r)(Data(pos=x, batch=batch)).edge_index.t().tolist())) == want_radius


def test_sample_points_and_composition():
    verts = torch.tensor([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], dtype=torch.float64)
    face = torch.tensor([[0, 1, 2], [0, 1, 3]]).t()
    t = Compose([SamplePoints(500, include_normals=True, generator=torch.Generator().manual_seed(0)),
                 NormalizeScale(), KNNGraph(k=3)])
    d = t(Data(pos=verts, face=face))
    assert d.pos.shape == (500, 3) and d.normal.shape == (500, 3) and "face" not in d
    assert d.edge_index.shape == (2, 1500)
    raw = SamplePoints(400, generator=torch.Generator().manual_seed(1))(Data(pos=verts, face=face)).pos
    assert ((raw[:, 2].abs() < 1e-12) | (raw[:, 1].abs() < 1e-12)).all()          # on the two faces
    assert (raw >= -1e-12).all() and (raw.sum(1) <= 1 + 1e-12).all()
    with pytest.raises(ValueError, match=r"face of shape \(3, F\)"):
        SamplePoints(10)(Data(pos=verts))
    with pytest.raises(ValueError, match="empty mesh"):
        SamplePoints(10)(Data(pos=verts, face=torch.zeros(3, 0, dtype=torch.long)))
    with pytest.raises(ValueError, match="group"):
        RandomRotation("SO2")
    with pytest.raises(ValueError, match=r"data.pos of shape \(N, 3\)"):
        Center()(Data(x=torch.ones(3)))


# ------------------------------------------------------------------ on an accelerator
def test_device_haar_sampler_is_the_groups_one():
    """Oracle: geomlin.groups.haar_orthogonal, whose construction the device sampler repeats."""
    from geomlin.datasets.transforms import _haar_orthogonal_3d
    from geomlin.groups import haar_orthogonal

    for special in (True, False):
        for seed in range(5):
            want = haar_orthogonal(1, 3, generator=torch.Generator().manual_seed(seed), special=special)[0]
            got = _haar_orthogonal_3d(torch.Generator().manual_seed(seed), "cpu", special)
            assert torch.equal(got, want)


def _molecule_data(seed=0, batched=False):
    g = torch.Generator().manual_seed(seed)
    n = 24
    fields = {"pos": torch.randn(n, 3, generator=g, dtype=torch.float64),
              "target_pos": torch.randn(n, 3, generator=g, dtype=torch.float64),
              "force": torch.randn(n, 3, generator=g, dtype=torch.float64),
              "vel": torch.randn(n, 3, generator=g, dtype=torch.float64),
              "z": torch.randint(1, 9, (n,), generator=g), "y": torch.tensor([[1.5]], dtype=torch.float64)}
    if batched:
        fields["batch"] = torch.tensor([0] * 10 + [1] * 14)
    return Data(**fields)


def _mesh_data():
    verts = torch.tensor([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], dtype=torch.float64)
    return Data(pos=verts, face=torch.tensor([[0, 1, 2], [0, 1, 3], [0, 2, 3], [1, 2, 3]]).t())


#: (name, transform, data, most host syncs on an accelerator)
DEVICE_CASES = [
    ("RandomRotation-SO3", lambda: RandomRotation("SO3", store_matrix=True), _molecule_data, 0),
    ("RandomRotation-O3", lambda: RandomRotation("O3"), _molecule_data, 0),
    ("RandomTranslation", lambda: RandomTranslation(0.5), _molecule_data, 0),
    ("Center", Center, _molecule_data, 0),
    ("NormalizeScale", NormalizeScale, _molecule_data, 0),
    ("SamplePoints", lambda: SamplePoints(64, include_normals=True), _mesh_data, 0),
    ("RadiusGraph", lambda: RadiusGraph(1.5), lambda: _molecule_data(batched=True), 2),
    ("RadiusGraph-max", lambda: RadiusGraph(1.5, max_num_neighbors=3), lambda: _molecule_data(batched=True), 3),
    ("KNNGraph", lambda: KNNGraph(4), lambda: _molecule_data(batched=True), 12),
    ("composed", lambda: Compose([Center(), RandomRotation(), RandomTranslation(), KNNGraph(3)]),
     _molecule_data, 12),
]


@pytest.mark.parametrize("name,make,data,syncs", DEVICE_CASES, ids=[c[0] for c in DEVICE_CASES])
def test_transforms_keep_every_field_on_the_device(name, make, data, syncs):
    """On the simulated accelerator (tests/device/simulated.py: CUDA's rules on every operator) each
    transform gives the CPU's numbers (the same seed of the default generator), leaves every field on
    the device, uploads nothing and syncs at most the documented number of times."""
    from tests.device import simulated as sim

    torch.manual_seed(0)
    want = make()(data())
    d = sim.to_sim(data())
    torch.manual_seed(0)
    with validation.deferred_checks(), sim.watch() as log:  # the value checks stay on the device
        got = make()(d)
    assert len(log.of("sync")) <= syncs and len(log.events) == len(log.of("sync")), log.report()
    assert sorted(got.keys()) == sorted(want.keys())
    for key, value in want:  # a PyG Data iterates over (name, value) pairs
        if torch.is_tensor(value):
            assert got[key].device == sim.DEVICE, f"{name}: data.{key} left the device"
            torch.testing.assert_close(sim.to_cpu(got[key]), value, rtol=1e-12, atol=1e-12)


def test_random_transforms_refuse_a_generator_on_another_device():
    from tests.device import simulated as sim

    d = sim.to_sim(_molecule_data())
    for t in (RandomRotation(generator=torch.Generator()), RandomTranslation(generator=torch.Generator())):
        with pytest.raises(ValueError, match="cpu generator but the data is on sim:0"):
            t(d)
    with pytest.raises(ValueError, match="cpu generator but the data is on sim:0"):
        SamplePoints(8, generator=torch.Generator())(sim.to_sim(_mesh_data()))


def test_deferred_checks_of_the_transforms_on_a_device():
    """A degenerate cloud and a zero-area mesh raise at once, and inside a deferred-checks scope at its
    end (with no sync before)."""
    from tests.device import simulated as sim

    with pytest.raises(ValueError, match="degenerate point cloud"), validation.deferred_checks():
        with sim.watch() as log:
            NormalizeScale()(sim.to_sim(Data(pos=torch.ones(4, 3))))
        assert not log.events
    with pytest.raises(ValueError, match="degenerate point cloud"):
        NormalizeScale()(sim.to_sim(Data(pos=torch.ones(4, 3))))
    flat = Data(pos=torch.tensor([[0.0, 0, 0], [1, 0, 0], [2, 0, 0]]), face=torch.tensor([[0], [1], [2]]))
    with pytest.raises(ValueError, match="zero surface area"), validation.deferred_checks():
        out = SamplePoints(5)(sim.to_sim(flat))
        assert out.pos.device == sim.DEVICE
    with pytest.raises(ValueError, match="zero surface area"):
        SamplePoints(5)(sim.to_sim(flat))
