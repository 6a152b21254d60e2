"""SyntheticShapes and NBody: shapes, determinism, geometry oracles, E(3)-equivariance of the simulator."""

import math

import pytest
import torch
from torch_geometric.data import Data, InMemoryDataset
from torch_geometric.loader import DataLoader

from geomlin import validation
from geomlin.datasets import NBody, SyntheticShapes, simulate_charged_particles, synthetic_shapes
from geomlin.datasets.synthetic import (
    CYLINDER_HEIGHT,
    CYLINDER_RADIUS,
    SHAPE_CLASSES,
    TORUS_MAJOR,
    TORUS_MINOR,
    coulomb_forces,
    shape_points,
)
from geomlin.groups import E3
from geomlin.reps import Positions, Scalars, Vectors
from geomlin.testing import assert_equivariant


def test_shapes_fields_and_labels():
    ds = SyntheticShapes(num_per_class=3, num_points=128, seed=1, rotation="SO3")
    assert isinstance(ds, InMemoryDataset)
    assert len(ds) == 3 * len(SHAPE_CLASSES) and ds.num_classes == len(SHAPE_CLASSES) >= 8
    d = ds[5]
    assert d.pos.shape == (128, 3) and d.pos.dtype == torch.float32
    assert d.y.shape == (1,) and d.y.dtype == torch.long
    assert torch.bincount(torch.cat([g.y for g in ds])).tolist() == [3] * len(SHAPE_CLASSES)
    batch = next(iter(DataLoader(ds, batch_size=4)))
    assert batch.pos.shape == (512, 3) and batch.y.shape == (4,)


def test_shapes_stacked_storage_matches_pyg_collate():
    """Oracle: PyG's own collate of the same graphs gives the same storage and slices."""
    pos, y = synthetic_shapes(2, 16, seed=3, classes=("cube", "torus"))
    ds = SyntheticShapes(2, 16, seed=3, classes=("cube", "torus"))
    ref, ref_slices = InMemoryDataset.collate([Data(pos=p, y=t[None]) for p, t in zip(pos, y)])
    assert torch.equal(ds._data.pos, ref.pos) and torch.equal(ds._data.y, ref.y)
    for key in ref_slices:
        assert torch.equal(ds.slices[key], ref_slices[key])


def test_shapes_deterministic_per_seed():
    a, ya = synthetic_shapes(2, 64, seed=7, rotation="O3")
    b, yb = synthetic_shapes(2, 64, seed=7, rotation="O3")
    c, _ = synthetic_shapes(2, 64, seed=8, rotation="O3")
    assert torch.equal(a, b) and torch.equal(ya, yb)
    assert not torch.allclose(a, c)


def test_shape_surfaces_oracles():
    """Points lie on the analytic surfaces (implicit equations as oracles)."""
    g = torch.Generator().manual_seed(0)
    sphere = shape_points("sphere", 2, 500, g)
    assert torch.allclose(sphere.norm(dim=-1), torch.ones(2, 500, dtype=torch.float64))
    tor = shape_points("torus", 2, 500, g)
    ring = (tor[..., :2].norm(dim=-1) - TORUS_MAJOR) ** 2 + tor[..., 2] ** 2
    assert torch.allclose(ring, torch.full_like(ring, TORUS_MINOR ** 2))
    cyl = shape_points("cylinder", 1, 4000, g)[0]
    rad = cyl[:, :2].norm(dim=-1)
    on_side = (rad - CYLINDER_RADIUS).abs() < 1e-12
    on_cap = (cyl[:, 2].abs() - CYLINDER_HEIGHT / 2).abs() < 1e-12
    assert bool((on_side | on_cap).all())
    # area weighting: lateral fraction = 2 pi r h / (2 pi r h + 2 pi r^2)
    expect = CYLINDER_HEIGHT / (CYLINDER_HEIGHT + CYLINDER_RADIUS)
    assert abs(on_side.double().mean().item() - expect) < 0.03
    cube = shape_points("cube", 1, 1000, g)[0]
    assert torch.allclose(cube.abs().max(dim=-1).values, torch.full((1000,), 0.6, dtype=torch.float64))


def test_shape_rotation_preserves_radial_profile():
    """Rotation changes coordinates but not distances to the centroid (no jitter, fixed scale)."""
    kw = {"num_per_class": 1, "num_points": 256, "seed": 2, "classes": ("pyramid",), "jitter": 0.0,
              "scale_range": (1.0, 1.0), "dtype": torch.float64}
    plain, _ = synthetic_shapes(rotation=None, **kw)
    rot, _ = synthetic_shapes(rotation="O3", **kw)
    assert not torch.allclose(plain, rot)
    # Same RNG stream up to the rotation draw -> same canonical points; norms agree.
    assert torch.allclose(plain.norm(dim=-1), rot.norm(dim=-1), atol=1e-12)


@pytest.mark.parametrize("kwargs, match", [
    ({"num_per_class": 0, "num_points": 8}, "num_per_class"),
    ({"num_per_class": 1, "num_points": 8, "classes": ("blob",)}, "classes"),
    ({"num_per_class": 1, "num_points": 8, "rotation": "SO2"}, "rotation"),
    ({"num_per_class": 1, "num_points": 8, "scale_range": (0.0, 1.0)}, "scale_range"),
])
def test_shapes_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SyntheticShapes(**kwargs)


def test_nbody_fields_and_horizon():
    ds = NBody(num_samples=6, num_particles=5, seed=0, burn_in_steps=50, horizon_steps=100)
    d = ds[2]
    assert d.pos.shape == d.vel.shape == d.y.shape == d.target_pos.shape == (5, 3)
    assert d.charges.shape == (5, 1) and set(d.charges.flatten().tolist()) <= {-1.0, 1.0}
    assert d.edge_index.shape == (2, 20) and d.edge_attr.shape == (20, 1)
    assert torch.equal(d.edge_attr[:, 0], (d.charges[d.edge_index[0]] * d.charges[d.edge_index[1]])[:, 0])
    assert math.isclose(ds.horizon, 0.1)
    # Oracle: re-simulating the stored input state over the horizon reproduces the target.
    raw = NBody(6, 5, 0, 50, 100, dtype=torch.float64)
    x, _v = simulate_charged_particles(raw[2].pos, raw[2].vel, raw[2].charges, 100)
    assert torch.allclose(x, raw[2].y, atol=1e-12)
    assert torch.allclose(d.y, raw[2].y.float())
    again = NBody(num_samples=6, num_particles=5, seed=0, burn_in_steps=50, horizon_steps=100)
    assert torch.equal(again[4].y, ds[4].y)


def test_coulomb_forces_brute_force_and_momentum():
    """Oracle: a Python double loop over pairs; Newton's third law (total force 0)."""
    g = torch.Generator().manual_seed(1)
    pos = torch.randn(4, 3, generator=g, dtype=torch.float64)
    q = torch.tensor([[1.0], [-1.0], [1.0], [1.0]], dtype=torch.float64)
    ref = torch.zeros(4, 3, dtype=torch.float64)
    for i in range(4):
        for j in range(4):
            if i != j:
                r = pos[i] - pos[j]
                ref[i] += q[i, 0] * q[j, 0] * r / r.norm() ** 3
    got = coulomb_forces(pos, q)
    assert torch.allclose(got, ref, atol=1e-12)
    assert torch.allclose(got.sum(0), torch.zeros(3, dtype=torch.float64), atol=1e-12)


def test_simulator_is_e3_equivariant():
    g = torch.Generator().manual_seed(4)
    pos = torch.randn(3, 5, 3, generator=g, dtype=torch.float64)
    vel = 0.5 * torch.randn(3, 5, 3, generator=g, dtype=torch.float64)
    q = torch.randint(0, 2, (3, 5, 1), generator=g).double() * 2 - 1

    def sim(x, v, c):
        return simulate_charged_particles(x, v, c, num_steps=100)

    assert_equivariant(sim, E3(), (Positions(3), Vectors(3), Scalars()), (Positions(3), Vectors(3)),
                       inputs=(pos, vel, q))


def test_nbody_bad_arguments():
    with pytest.raises(ValueError, match="num_particles"):
        NBody(num_samples=2, num_particles=1)
    with pytest.raises(ValueError, match="charges"):
        simulate_charged_particles(torch.zeros(5, 3), torch.zeros(5, 3), torch.ones(5), 1)


def test_classes_separable_by_rotation_invariant_features():
    """Sanity of the task: a 1-NN on invariant features (radial histogram + PCA spectrum) separates
    the classes of randomly rotated and reflected clouds; a broken generator would fail this."""
    def features(pos):
        pos = pos.double() - pos.double().mean(1, keepdim=True)
        r = pos.norm(dim=-1)
        r = r / r.max(1, keepdim=True).values
        hist = torch.stack([torch.histc(x, 20, 0, 1) for x in r]) / pos.shape[1]
        ev = torch.linalg.eigvalsh(pos.transpose(1, 2) @ pos / pos.shape[1])
        return torch.cat([hist, 3 * ev / ev.sum(1, keepdim=True)], 1)

    xtr, ytr = synthetic_shapes(12, 384, seed=0, rotation="O3")
    xte, yte = synthetic_shapes(6, 384, seed=1, rotation="O3")
    pred = ytr[torch.cdist(features(xte), features(xtr)).argmin(1)]
    assert (pred == yte).double().mean().item() >= 0.9


def test_nbody_physics_runs_on_a_device_without_syncs():
    """On the simulated accelerator (tests/device/simulated.py) the forces and the integrator stay on
    the device, record no host sync or upload, and give the CPU's numbers."""
    from tests.device import simulated as sim

    g = torch.Generator().manual_seed(0)
    pos, vel = torch.randn(4, 5, 3, generator=g, dtype=torch.float64), torch.randn(4, 5, 3, generator=g, dtype=torch.float64)
    q = torch.randint(0, 2, (4, 5, 1), generator=g).double() * 2 - 1
    want = (coulomb_forces(pos, q, max_force=5.0), *simulate_charged_particles(pos, vel, q, 10))
    with validation.deferred_checks(), sim.watch() as log:
        p, v, c = sim.to_sim((pos, vel, q))
        got = (coulomb_forces(p, c, max_force=5.0), *simulate_charged_particles(p, v, c, 10))
    assert not log.events, log.report()
    for a, b in zip(got, want):
        assert a.device == sim.DEVICE and torch.equal(sim.to_cpu(a), b)
