"""Every model of geomlin.models takes a PyG batch (issue 32): a ``Batch`` of molecules, clouds or particle
systems of different sizes, straight from a ``torch_geometric`` ``DataLoader``, gives the outputs of the
padded layout (``to_dense_batch`` and its mask) and of each item alone, to 1e-12 in float64 and 1e-6 in
float32. Oracles: the padded call and the per-item calls."""

import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.loader import DataLoader
from torch_geometric.utils import to_dense_batch

from geomlin.models import (
    EGNNDynamics,
    EGNNPotential,
    GATrClassifier,
    GATrDynamics,
    GauntPotential,
    MLPDynamics,
    MoleculeEnergyModel,
    PointNet,
    Ponita,
    PonitaDynamics,
    PonitaPotential,
    VNPointNetClassifier,
)
from tests.randomized import randomized

#: Items of different sizes (the first is the largest, so a single item has the padded width).
SIZES = (6, 3, 5, 4)
TOL = {torch.float64: 1e-12, torch.float32: 1e-6}
#: Forces in float32 go through the derivative of the smooth cutoff polynomial, a sum of terms ~100x its
#: value (cancellation): the flat and padded sums round apart by up to ~2e-6 of the largest force.
FORCE_TOL = {torch.float64: 1e-12, torch.float32: 5e-6}
NUM_SPECIES = 4


def _loader_batch(items):
    return next(iter(DataLoader(items, batch_size=len(items))))


def _molecules(dtype, sizes=SIZES):
    g = torch.Generator().manual_seed(1)
    return [Data(pos=(1.3 * torch.randn(n, 3, generator=g, dtype=torch.float64)).to(dtype),
                 z=torch.randint(NUM_SPECIES, (n,), generator=g)) for n in sizes]


def _clouds(dtype, sizes=SIZES):
    g = torch.Generator().manual_seed(2)
    scale = torch.tensor([1.5, 1.0, 0.5], dtype=torch.float64)
    return [Data(pos=(torch.randn(n, 3, generator=g, dtype=torch.float64) * scale).to(dtype)) for n in sizes]


def _systems(dtype, sizes=SIZES):
    g = torch.Generator().manual_seed(3)
    return [Data(pos=torch.randn(n, 3, generator=g, dtype=torch.float64).to(dtype),
                 vel=(0.5 * torch.randn(n, 3, generator=g, dtype=torch.float64)).to(dtype),
                 charges=(torch.randint(0, 2, (n, 1), generator=g) * 2 - 1).to(dtype)) for n in sizes]


def _close(got, want, dtype, tol=TOL):
    torch.testing.assert_close(got, want, rtol=tol[dtype], atol=tol[dtype])


POTENTIALS = {
    "egnn": lambda: EGNNPotential(NUM_SPECIES, hidden_channels=8, num_blocks=2, num_basis=4),
    "gaunt": lambda: GauntPotential(NUM_SPECIES, hidden_channels=4, lmax=2, num_blocks=2, correlation=2),
    "ponita": lambda: PonitaPotential(NUM_SPECIES, hidden_channels=8, num_blocks=1, num_basis=8),
}


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("name", list(POTENTIALS))
def test_potentials_take_a_pyg_batch(name, dtype):
    """The energy of a flat batch (message passing over its flat edge list) is the padded one and each
    molecule's alone; so are the forces of the wrapping MoleculeEnergyModel."""
    torch.manual_seed(0)
    net = randomized(POTENTIALS[name](), 0.3, dtype)
    items = _molecules(dtype)
    batch = _loader_batch(items)
    pos, mask = to_dense_batch(batch.pos, batch.batch)
    z, _ = to_dense_batch(batch.z, batch.batch)
    flat = net(batch)
    _close(flat, net(pos, z, mask=mask), dtype)
    _close(net(batch.pos, batch.z, batch=batch.batch), flat, dtype)
    _close(flat, torch.cat([net(d.pos[None], d.z[None]) for d in items]), dtype)
    model = MoleculeEnergyModel(net, energy_mean=-1.0, scale=2.0, atom_energies=[0.1, -0.2, 0.3, -0.4])
    energy, forces = model(batch)
    padded_energy, padded_forces = model(pos, z, mask)
    _close(energy, padded_energy, dtype)
    _close(forces, padded_forces[mask], dtype, FORCE_TOL)
    alone = [model(d.pos[None], d.z[None]) for d in items]
    _close(energy, torch.cat([e for e, _ in alone]), dtype)
    _close(forces, torch.cat([f[0] for _, f in alone]), dtype, FORCE_TOL)



@pytest.mark.parametrize("name", list(POTENTIALS))
def test_the_md_step_takes_a_pyg_batch(name):
    """EnergyAndForces on a PyG Batch (molecules of 6, 3, 5 and 4 atoms) returns the energies and the flat
    forces of the molecules taken alone, and refuses a Batch with a species or mask beside it."""
    from geomlin.models import EnergyAndForces

    dtype = torch.float64
    torch.manual_seed(0)
    model = MoleculeEnergyModel(randomized(POTENTIALS[name](), 0.3, dtype), energy_mean=-1.0, scale=2.0)
    step = EnergyAndForces(model, backend=None)
    items = _molecules(dtype)
    batch = _loader_batch(items)
    energy, forces = step(batch)
    assert forces.shape == batch.pos.shape
    alone = [step(d.pos[None], d.z[None]) for d in items]
    _close(energy, torch.cat([e for e, _ in alone]), dtype)
    _close(forces, torch.cat([f[0] for _, f in alone]), dtype, FORCE_TOL)
    one_energy, one_forces = step(items[1])
    _close(one_energy, alone[1][0], dtype)
    _close(one_forces, alone[1][1][0], dtype, FORCE_TOL)
    with pytest.raises(ValueError, match="EnergyAndForces got a PyG Batch and species="):
        step(batch, batch.z)
    with pytest.raises(TypeError, match="species is missing"):
        step(batch.pos[None])


CLASSIFIERS = {
    "pointnet": lambda: PointNet(3, point_widths=(16, 32), head_widths=(16,)),
    "vn_pointnet": lambda: VNPointNetClassifier(3, hidden_channels=4, point_widths=(8, 16), head_widths=(8,)),
    "gatr": lambda: GATrClassifier(3, hidden_mv_channels=4, hidden_s_channels=4, num_blocks=1, num_heads=2),
}


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("name", list(CLASSIFIERS))
def test_point_cloud_classifiers_take_a_pyg_batch(name, dtype):
    torch.manual_seed(0)
    model = randomized(CLASSIFIERS[name](), 0.3, dtype)
    items = _clouds(dtype)
    batch = _loader_batch(items)
    pos, mask = to_dense_batch(batch.pos, batch.batch)
    flat = model(batch)
    _close(flat, model(pos, mask=mask), dtype)
    _close(model(batch.pos, batch=batch.batch), flat, dtype)
    _close(flat, torch.cat([model(d.pos[None]) for d in items]), dtype)


DYNAMICS = {
    "egnn": lambda: EGNNDynamics(hidden_channels=8, num_blocks=2, num_basis=4),
    "gatr": lambda: GATrDynamics(hidden_mv_channels=4, hidden_s_channels=4, num_blocks=1, num_heads=2),
    "ponita": lambda: PonitaDynamics(hidden_channels=8, num_blocks=1, mode="points"),
}


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("name", list(DYNAMICS))
def test_dynamics_models_take_a_pyg_batch(name, dtype):
    torch.manual_seed(0)
    model = randomized(DYNAMICS[name](), 0.3, dtype)
    items = _systems(dtype)
    batch = _loader_batch(items)
    padded = [to_dense_batch(getattr(batch, f), batch.batch) for f in ("pos", "vel", "charges")]
    mask = padded[0][1]
    flat = model(batch)
    _close(flat, model(*(p for p, _ in padded), mask=mask)[mask], dtype)
    _close(model(batch.pos, batch.vel, batch.charges, batch=batch.batch), flat, dtype)
    _close(flat, torch.cat([model(d.pos[None], d.vel[None], d.charges[None])[0] for d in items]), dtype)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
def test_the_mlp_baseline_takes_a_pyg_batch_of_its_particle_count(dtype):
    torch.manual_seed(0)
    model = randomized(MLPDynamics(5, hidden_channels=16), 0.3, dtype)
    items = _systems(dtype, sizes=(5, 5, 5))
    batch = _loader_batch(items)
    flat = model(batch)
    _close(flat, torch.cat([model(d.pos[None], d.vel[None], d.charges[None])[0] for d in items]), dtype)
    with pytest.raises(ValueError, match="exactly 5 particles"):
        model(_loader_batch(_systems(dtype, sizes=(5, 4))))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
def test_ponita_takes_a_pyg_batch(dtype):
    torch.manual_seed(0)
    model = randomized(Ponita(2, 8, 2, 1, in_vector_channels=1, out_vector_channels=1, mode="points"), 0.3, dtype)
    g = torch.Generator().manual_seed(4)
    items = [Data(x=torch.randn(n, 2, generator=g, dtype=torch.float64).to(dtype),
                  pos=torch.randn(n, 3, generator=g, dtype=torch.float64).to(dtype),
                  vec=torch.randn(n, 1, 3, generator=g, dtype=torch.float64).to(dtype)) for n in SIZES]
    batch = _loader_batch(items)
    padded = [to_dense_batch(getattr(batch, f), batch.batch) for f in ("x", "pos", "vec")]
    mask = padded[0][1]
    flat = model(batch)
    for a, b in zip(flat, model(*(p for p, _ in padded), mask=mask)):
        _close(a, b, dtype)
    alone = [model(d.x[None], d.pos[None], d.vec[None]) for d in items]
    for i, a in enumerate(flat):
        _close(a, torch.cat([out[i] for out in alone]), dtype)


def test_the_gatr_classifier_depends_on_every_point():
    """Issue 32: on 200-point clouds, replacing any later point changes the logits (no silent truncation)."""
    torch.manual_seed(0)
    model = randomized(GATrClassifier(3, hidden_mv_channels=4, hidden_s_channels=4, num_blocks=1, num_heads=2),
                       0.3, torch.float64)
    pos = torch.randn(2, 200, 3, dtype=torch.float64)
    base = model(pos)
    for k in (0, 32, 150, 199):
        moved = pos.clone()
        moved[:, k] += 0.5
        assert (model(moved) - base).abs().min() > 1e-9, f"point {k} is ignored"
    flat = model(pos.reshape(400, 3), batch=torch.arange(2).repeat_interleave(200))
    torch.testing.assert_close(flat, base, rtol=1e-12, atol=1e-12)
