"""The potentials at scale and in periodic cells (issue 35): every potential takes its edges from the cell
lists beyond its dense block, from periodic cells, or from the caller, with the energies of all pairs.

Oracles: each molecule evaluated alone with all pairs (the dense block), the all-pairs edge list written
out, lattice translations and supercells (the periodic energy is a sum over the atoms of one cell, each
seeing every image within the cutoff), central finite differences of the energy under a strain (stress),
and the equivariance checker of geomlin.testing on positions and cell rotated together.
"""

import math

import pytest
import torch

from geomlin.batching import batch_layout
from geomlin.models import EGNNPotential, GauntPotential, MoleculeEnergyModel, PonitaPotential
from geomlin.models.edges import DENSE_BLOCK
from geomlin.models.graphs import graph_edges
from geomlin.neighbors import neighbor_list
from geomlin.reps import Positions, Scalars, Vectors
from geomlin.reps.feature_type import rotation_part
from geomlin.testing import assert_equivariant
from tests.device.checks import assert_runs_on_device  # registers the stand-in device before any backward
from tests.randomized import randomized

CUTOFF = 3.0
NUM_SPECIES = 4
#: Relative agreement of energies computed over different edge lists (issue 35), and of forces: in float32
#: the forces of sums of ~50 messages in another order (and of float32 positions moved by lattice vectors)
#: round apart by up to ~3e-5 of the largest force (PONITA's LayerNorm after every convolution subtracts
#: the common part of a sum, which magnifies its rounding).
TOL = {torch.float64: 1e-10, torch.float32: 1e-5}
FORCE_TOL = {torch.float64: 1e-10, torch.float32: 1e-4}
POTENTIALS = {
    "gaunt": lambda: GauntPotential(NUM_SPECIES, hidden_channels=4, lmax=2, num_blocks=2, correlation=2,
                                    cutoff=CUTOFF, avg_num_neighbors=10.0),
    "egnn": lambda: EGNNPotential(NUM_SPECIES, hidden_channels=8, num_blocks=2, num_basis=4, cutoff=CUTOFF),
    "ponita": lambda: PonitaPotential(NUM_SPECIES, hidden_channels=8, num_blocks=2, num_basis=8, cutoff=CUTOFF),
}
LOOPS = {"gaunt": False, "egnn": False, "ponita": True}
DTYPES = pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
NAMES = pytest.mark.parametrize("name", list(POTENTIALS))


def _model(name, dtype, seed=0):
    torch.manual_seed(seed)
    return MoleculeEnergyModel(randomized(POTENTIALS[name](), 0.3, dtype), energy_mean=-1.0, scale=2.0)


def _close(got, want, dtype, tol=TOL):
    scale = want.detach().abs().max().clamp_min(1.0)
    torch.testing.assert_close(got, want, rtol=tol[dtype], atol=tol[dtype] * float(scale))


def _liquid(n, density, seed, dtype=torch.float64):
    """``n`` random atoms at ``density`` per cubic Angstrom in a cube, no two closer than 0.7 A."""
    g = torch.Generator().manual_seed(seed)
    side = (n / density) ** (1 / 3)
    pos = torch.rand(n, 3, generator=g, dtype=torch.float64) * side
    for _ in range(50):                      # push apart near-coincident atoms (smooth, small systems)
        d = torch.cdist(pos, pos) + torch.eye(n, dtype=torch.float64) * 10
        close = (d < 0.7).any(dim=1)
        if not close.any():
            break
        pos[close] = torch.rand(int(close.sum()), 3, generator=g, dtype=torch.float64) * side
    return pos.to(dtype), torch.randint(NUM_SPECIES, (n,), generator=g), side


@NAMES
@DTYPES
def test_molecules_far_apart_beyond_the_dense_block_give_the_sum_of_each_alone_with_all_pairs(name, dtype):
    """One system of five 16-atom molecules 4 cutoffs apart (80 atoms > DENSE_BLOCK: the cell-list search)
    has the energy of the five molecules alone (16 atoms: all pairs), and their forces."""
    model = _model(name, dtype)
    mols = [_liquid(16, 0.08, seed, dtype) for seed in range(5)]
    assert 5 * 16 > DENSE_BLOCK
    pos = torch.cat([p + torch.tensor([4.0 * CUTOFF * k + 0.5 * CUTOFF, 0.0, 0.0], dtype=dtype)
                     for k, (p, _, _) in enumerate(mols)])
    species = torch.cat([z for _, z, _ in mols])
    energy, forces = model(pos, species, batch=torch.zeros(80, dtype=torch.long))
    alone = [model(p[None], z[None]) for p, z, _ in mols]
    offset = (len(mols) - 1) * model.energy_mean.to(dtype)   # energy_mean is added once per system
    _close(energy, sum(e for e, _ in alone) - offset, dtype)
    _close(forces, torch.cat([f[0] for _, f in alone]), dtype, FORCE_TOL)


@NAMES
@DTYPES
def test_a_liquid_beyond_the_dense_block_gets_the_energy_of_all_its_pairs(name, dtype):
    """120 atoms at liquid density: the cell-list edges (automatic), the caller's edges from neighbor_list,
    and every pair written out as edge_index give one energy and one set of forces."""
    model = _model(name, dtype, seed=1)
    pos, species, _ = _liquid(120, 0.1, seed=7, dtype=dtype)
    batch = torch.zeros(120, dtype=torch.long)
    energy, forces = model(pos, species, batch=batch)
    every = graph_edges(pos, batch_layout(batch=batch, num_graphs=1), loop=LOOPS[name])
    want_e, want_f = model(pos, species, batch=batch, edge_index=every)
    _close(energy, want_e, dtype)
    _close(forces, want_f, dtype, FORCE_TOL)
    edges, _ = neighbor_list(pos.double(), CUTOFF, loop=LOOPS[name])
    given_e, given_f = model(pos, species, batch=batch, edge_index=edges)
    _close(given_e, want_e, dtype)
    _close(given_f, want_f, dtype, FORCE_TOL)
    padded_e, padded_f = model(pos[None], species[None])               # padded, wider than the block
    _close(padded_e, want_e, dtype)
    _close(padded_f[0], want_f, dtype, FORCE_TOL)


CELLS = {
    "orthorhombic": torch.tensor([[4.2, 0.0, 0.0], [0.0, 3.6, 0.0], [0.0, 0.0, 5.0]], dtype=torch.float64),
    "triclinic": torch.tensor([[4.4, 0.0, 0.0], [1.3, 3.9, 0.0], [-0.8, 0.9, 4.6]], dtype=torch.float64),
}


def _box(kind, n=14, seed=3, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    cell = CELLS[kind]
    frac = torch.rand(n, 3, generator=g, dtype=torch.float64)
    return (frac @ cell).to(dtype), torch.randint(NUM_SPECIES, (n,), generator=g), cell.to(dtype)


def _periodic(model, pos, species, cell, **kw):
    return model(pos, species, batch=torch.zeros(len(species), dtype=torch.long), cell=cell[None], **kw)


@NAMES
@DTYPES
@pytest.mark.parametrize("kind", list(CELLS))
def test_periodic_energy_is_invariant_to_lattice_translations_and_translations(name, dtype, kind):
    """Cells thinner than twice the cutoff (several images of a neighbour, an atom's own images): moving
    atoms by lattice vectors, moving the whole system, and handing in the same edges from outside
    leave energy and forces unchanged; a supercell of two cells has twice the energy."""
    model = _model(name, dtype, seed=2)
    pos, species, cell = _box(kind, dtype=dtype)
    energy, forces = _periodic(model, pos, species, cell)
    g = torch.Generator().manual_seed(5)
    lattice = torch.randint(-2, 3, (len(species), 3), generator=g).to(dtype) @ cell   # a lattice vector per atom
    moved = _periodic(model, pos + lattice, species, cell)
    _close(moved[0], energy, dtype)
    _close(moved[1], forces, dtype, FORCE_TOL)
    shifted = _periodic(model, pos + torch.tensor([0.37, -1.9, 2.6], dtype=dtype), species, cell)
    _close(shifted[0], energy, dtype)
    _close(shifted[1], forces, dtype, FORCE_TOL)
    edges, shift = neighbor_list(pos.double(), CUTOFF, cell=cell.double(), loop=LOOPS[name])
    given = _periodic(model, pos, species, cell, edge_index=edges, shift=shift)
    _close(given[0], energy, dtype)
    _close(given[1], forces, dtype, FORCE_TOL)
    double = torch.stack([cell[0] * 2, cell[1], cell[2]])
    twice = _periodic(model, torch.cat([pos, pos + cell[0]]), species.repeat(2), double)
    _close(twice[0] - model.energy_mean.to(dtype), 2 * (energy - model.energy_mean.to(dtype)), dtype)
    _close(twice[1], forces.repeat(2, 1), dtype, FORCE_TOL)


@NAMES
def test_periodic_energy_forces_and_stress_are_e3_equivariant_with_the_cell(name):
    """Rotating (and reflecting) positions and cell together, and translating positions: the energy is
    invariant, forces and stress rotate (checker of geomlin.testing, float64)."""
    model = _model(name, torch.float64, seed=4)
    pos, species, cell = _box("triclinic", n=10)

    def energy_forces_stress(p, c):
        e, f, s = _periodic(model, p, species, c[0], compute_stress=True)
        return e, f, s[0]

    def stress_action(g, s):
        R = rotation_part(g).to(s.dtype)
        return R @ s @ R.T

    assert_equivariant(energy_forces_stress, "E3", (Positions(3), Vectors(3, 3)),
                       (Scalars(), Vectors(3), stress_action), inputs=(pos, cell[None]), num_samples=4)


@NAMES
def test_stress_is_the_strain_derivative_of_the_energy(name):
    """Oracle: central differences of E((1 + eps) x, (1 + eps) cell) / V, float64."""
    model = _model(name, torch.float64, seed=6)
    pos, species, cell = _box("triclinic", n=10)
    _, _, stress = _periodic(model, pos, species, cell, compute_stress=True)
    h, fd = 1e-5, torch.zeros(3, 3, dtype=torch.float64)
    volume = abs(float(torch.linalg.det(cell)))
    for a in range(3):
        for b in range(3):
            strain = torch.zeros(3, 3, dtype=torch.float64)
            strain[a, b] = strain[b, a] = h / 2 if a != b else h
            up, _ = _periodic(model, pos @ (torch.eye(3) + strain), species, cell @ (torch.eye(3) + strain),
                              compute_forces=False)
            down, _ = _periodic(model, pos @ (torch.eye(3) - strain), species, cell @ (torch.eye(3) - strain),
                                compute_forces=False)
            fd[a, b] = (up - down).item() / (2 * h) / volume
    torch.testing.assert_close(stress[0], fd, rtol=1e-6, atol=1e-8)


@NAMES
def test_a_cell_too_small_for_the_cutoff_is_refused_with_the_numbers(name):
    model = _model(name, torch.float64)
    pos, species, _ = _box("orthorhombic", n=4)
    tiny = torch.diag(torch.tensor([0.3, 4.0, 4.0], dtype=torch.float64))
    with pytest.raises(ValueError, match=r"too small for the cutoff 3: its height along lattice vector 0 is 0\.3"):
        _periodic(model, pos, species, tiny)


def test_edges_and_cells_are_checked_at_the_boundary():
    model = _model("gaunt", torch.float64)
    pos, species, cell = _box("orthorhombic", n=6)
    batch = torch.zeros(6, dtype=torch.long)
    edges, shift = neighbor_list(pos, CUTOFF, cell=cell)
    with pytest.raises(ValueError, match="edges in a cell need their lattice shifts"):
        model(pos, species, batch=batch, edge_index=edges, cell=cell)
    with pytest.raises(ValueError, match="shift .* needs edge_index and cell"):
        model(pos, species, batch=batch, edge_index=edges, shift=shift)
    with pytest.raises(ValueError, match="edge_index indexes flat atoms"):
        model.net(pos[None], species[None], edge_index=edges)
    with pytest.raises(ValueError, match=r"cell must have shape \(G, 3, 3\) .* G = 1"):
        model(pos, species, batch=batch, cell=cell.expand(2, 3, 3))
    with pytest.raises(ValueError, match="pbc marks periodic axes but no cell"):
        model(pos, species, batch=batch, pbc=True)
    with pytest.raises(ValueError, match="compute_stress=True needs the periodic cell"):
        model(pos, species, batch=batch, compute_stress=True)


def test_ponita_without_a_cutoff_refuses_what_needs_one():
    net = PonitaPotential(NUM_SPECIES, hidden_channels=8, num_blocks=1, num_basis=8, cutoff=None)
    pos, species, cell = _box("orthorhombic", n=6)
    with pytest.raises(ValueError, match=r"cutoff=None.*periodic cells and systems of more than 64 atoms"):
        net(pos, species, batch=torch.zeros(6, dtype=torch.long), cell=cell)
    big, z, _ = _liquid(DENSE_BLOCK + 1, 0.1, seed=1)
    with pytest.raises(ValueError, match="need a cutoff"):
        net(big[None], z[None])


@NAMES
def test_a_pyg_batch_of_boxes_carries_its_cells(name):
    """PyG collates per-graph cells (1, 3, 3) to (G, 3, 3): two different boxes in one Batch get the
    energies and forces they have alone."""
    from torch_geometric.data import Batch, Data

    model = _model(name, torch.float64, seed=8)
    boxes = [_box("orthorhombic", n=8, seed=1), _box("triclinic", n=11, seed=2)]
    data = Batch.from_data_list([Data(pos=p, z=z, cell=c[None], pbc=torch.ones(1, 3, dtype=torch.bool))
                                 for p, z, c in boxes])
    energy, forces = model(data)
    alone = [_periodic(model, p, z, c) for p, z, c in boxes]
    _close(energy, torch.cat([e for e, _ in alone]), torch.float64)
    _close(forces, torch.cat([f for _, f in alone]), torch.float64, FORCE_TOL)
    edges, shift = neighbor_list(data.pos, CUTOFF, data.batch, data.cell, data.pbc, loop=LOOPS[name])
    data.edge_index, data.shift = edges, shift
    given, _ = model(data)
    _close(given, energy, torch.float64)
    assert math.isfinite(float(energy.sum()))


@NAMES
def test_periodic_potentials_with_given_edges_run_on_a_device_without_host_syncs(name):
    """The accelerator stand-in (tests/device): with the edges, shifts, cell and a planned layout handed in
    (the search done at the data boundary), energy, forces and their gradients (double backward) make no
    host sync and give the CPU's numbers (float32 gradients through PONITA's LayerNorms: 1e-4). The edges
    fit one chunk: the stand-in's autograd device thread aborts the process when a checkpointed chunk is
    recomputed in it (a limit of the stand-in; the chunked path's numbers are tested on the CPU)."""
    model = _model(name, torch.float32, seed=9).train()
    pos, species, cell = _box("triclinic", n=10, dtype=torch.float32)
    edges, shift = neighbor_list(pos, CUTOFF, cell=cell, loop=LOOPS[name])
    layout = batch_layout(batch=torch.zeros(10, dtype=torch.long), num_graphs=1)
    assert_runs_on_device(model, pos, species, batch=layout, edge_index=edges, shift=shift, cell=cell[None],
                          rtol=1e-4)
