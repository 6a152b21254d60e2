"""Periodic cells through the ASE calculator and the periodic package (issue 35).

Oracles: ASE's own finite differences (``calculate_numerical_forces``, ``calculate_numerical_stress``),
lattice translations of atoms, and the eager model (for the exported program and its checked inputs).
"""

import numpy as np
import pytest
import torch

from geomlin import deploy
from geomlin.datasets.xtb import water_box
from geomlin.deploy import Units
from geomlin.deploy.packaged import PackagedModel
from geomlin.models import GauntPotential, MoleculeEnergyModel, PeriodicStep, PonitaPotential
from geomlin.neighbors import neighbor_list
from tests.oracles import require
from tests.randomized import randomized

ase = require("ase")
from ase import Atoms
from ase.calculators.fd import calculate_numerical_forces, calculate_numerical_stress

from geomlin.deploy.calculator import GeomlinCalculator

#: Atomic number -> species index of the test models.
SPECIES = {1: 0, 8: 1}
POTENTIALS = {
    "gaunt": lambda: GauntPotential(2, hidden_channels=4, lmax=2, num_blocks=2, correlation=2, cutoff=4.0,
                                    avg_num_neighbors=30.0),
    "ponita": lambda: PonitaPotential(2, hidden_channels=8, num_blocks=1, num_basis=8, cutoff=4.0),
}


def _model(name="gaunt", dtype=torch.float64):
    torch.manual_seed(0)
    return MoleculeEnergyModel(randomized(POTENTIALS[name](), 0.2, dtype), energy_mean=-3.0, scale=0.5).eval()


def _box(molecules=6, seed=0) -> Atoms:
    numbers, pos, cell = water_box(molecules, seed=seed)
    return Atoms(numbers=numbers, positions=pos, cell=cell, pbc=True)


def _calc(model, **kw):
    return GeomlinCalculator(model, units=Units("eV", "Angstrom"), species=SPECIES, **kw)


@pytest.mark.parametrize("name", list(POTENTIALS))
def test_forces_and_stress_equal_ases_finite_differences(name):
    atoms = _box()
    atoms.calc = _calc(_model(name))
    forces = atoms.get_forces()
    np.testing.assert_allclose(forces, calculate_numerical_forces(atoms, eps=1e-4), rtol=1e-6, atol=1e-8)
    stress = atoms.get_stress()
    np.testing.assert_allclose(stress, calculate_numerical_stress(atoms, eps=1e-5), rtol=1e-5, atol=1e-9)


def test_moving_atoms_by_lattice_vectors_and_wrapping_change_nothing():
    atoms = _box()
    atoms.calc = _calc(_model())
    energy, forces, stress = atoms.get_potential_energy(), atoms.get_forces(), atoms.get_stress()
    moved = atoms.copy()
    moved.positions[:5] += atoms.cell.array[0] - 2 * atoms.cell.array[2]
    moved.calc = atoms.calc
    assert moved.get_potential_energy() == pytest.approx(energy, rel=1e-12, abs=1e-12)
    np.testing.assert_allclose(moved.get_forces(), forces, rtol=1e-10, atol=1e-12)
    moved.wrap()
    assert moved.get_potential_energy() == pytest.approx(energy, rel=1e-12, abs=1e-12)
    np.testing.assert_allclose(moved.get_stress(), stress, rtol=1e-9, atol=1e-12)


def _periodic_program(model):
    """The exported periodic program of ``model`` (float32) around a checked PackagedModel."""
    atoms = _box(4)
    pos = torch.tensor(atoms.positions, dtype=torch.float32)
    species = torch.tensor([SPECIES[int(z)] for z in atoms.numbers])
    cell = torch.tensor(atoms.cell.array, dtype=torch.float32)[None]
    edges, shift = neighbor_list(pos.double(), 4.0, cell=cell.double())
    kwargs = {"edge_index": edges, "shift": shift, "cell": cell}
    program = deploy.export(model, (pos, species), kwargs)
    meta = deploy.build_metadata(model, (pos, species), kwargs, extra={"energy_unit": "eV", "length_unit": "Angstrom"})
    return PackagedModel(program.module(), meta, "box.pt2")


def test_the_periodic_package_gives_the_eager_numbers_and_checks_its_edges():
    model = _model(dtype=torch.float32)
    packaged = _periodic_program(model)
    assert packaged.is_periodic and packaged.metadata["neighbors"] == {"cutoff": 4.0, "loop": False}
    atoms, other = _box(9, seed=3), _box(9, seed=3)     # more atoms and edges than the example
    atoms.calc = _calc(model)
    other.calc = _calc(packaged)
    assert other.get_potential_energy() == pytest.approx(atoms.get_potential_energy(), rel=1e-6)
    np.testing.assert_allclose(other.get_forces(), atoms.get_forces(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(other.get_stress(), atoms.get_stress(), rtol=1e-4, atol=1e-6)
    pos = torch.tensor(atoms.positions, dtype=torch.float32)
    species = torch.tensor([SPECIES[int(z)] for z in atoms.numbers])
    cell = torch.tensor(atoms.cell.array, dtype=torch.float32)[None]
    edges, shift = neighbor_list(pos.double(), 4.0, cell=cell.double())
    with pytest.raises(ValueError, match=r"edge_index must index atoms in \[0, 27\)"):
        packaged(pos, species, edges + 1, shift, cell)
    with pytest.raises(ValueError, match="shift has number of edges .* but edge_index has"):
        packaged(pos, species, edges, shift[:-1], cell)
    with pytest.raises(ValueError, match="exported for periodic cells"):
        free = atoms.copy()
        free.pbc = False
        free.calc = _calc(packaged)
        free.get_potential_energy()


def test_a_package_for_free_molecules_refuses_periodic_atoms():
    """Refused before the program runs (a stand-in program that must not be called)."""
    model = _model(dtype=torch.float32)
    args = (torch.randn(1, 4, 3), torch.zeros(1, 4, dtype=torch.long))
    meta = deploy.build_metadata(model, args, extra={"energy_unit": "eV", "length_unit": "Angstrom"})

    def never(*inputs):
        raise AssertionError("the program ran")

    atoms = _box(3)
    atoms.calc = _calc(PackagedModel(never, meta, "molecules.pt2"))
    with pytest.raises(ValueError, match="exported for free molecules and these atoms are periodic"):
        atoms.get_potential_energy()


def test_periodic_step_is_the_model_with_its_cell():
    """Oracle: MoleculeEnergyModel's own periodic call with compute_stress."""
    model = _model()
    atoms = _box(5)
    pos = torch.tensor(atoms.positions)
    species = torch.tensor([SPECIES[int(z)] for z in atoms.numbers])
    cell = torch.tensor(atoms.cell.array)[None]
    edges, shift = neighbor_list(pos, 4.0, cell=cell)
    got = PeriodicStep(model)(pos, species, edges, shift, cell)
    want = model(pos, species, batch=torch.zeros(len(species), dtype=torch.long), cell=cell, compute_stress=True)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b.detach(), rtol=1e-12, atol=1e-12)


@pytest.mark.slow
def test_geomlin_export_of_a_periodic_run_writes_the_periodic_program(tmp_path):
    """Train on the bundled periodic water frames, ``geomlin export`` the checkpoint (AOTInductor), and run
    the package in the calculator: the checkpoint's energy, forces and stress (float32 tolerances)."""
    from geomlin.__main__ import main
    from geomlin.train.tasks.base import bundled_path

    data = bundled_path("md/xtb_md_water27.xyz")
    out, package = tmp_path / "run", tmp_path / "water.pt2"
    assert main(["train", "molecules", "--quick", "--no-progress", "--data", str(data), "--model", "gaunt",
                 "--num-train", "8", "--num-test", "2", "--out", str(out)]) == 0
    assert main(["export", str(out), "--out", str(package)]) == 0
    packaged = deploy.load(package)
    assert packaged.is_periodic
    frames = __import__("ase.io", fromlist=["read"]).read(str(data), index="0")
    atoms, other = frames.copy(), frames.copy()
    units = Units("kcal/mol", "Angstrom")           # what the bundled trajectory holds (an XYZ file states none)
    atoms.calc, other.calc = GeomlinCalculator(out, units=units), GeomlinCalculator(packaged, units=units)
    assert other.get_potential_energy() == pytest.approx(atoms.get_potential_energy(), rel=1e-6)
    np.testing.assert_allclose(other.get_forces(), atoms.get_forces(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(other.get_stress(), atoms.get_stress(), rtol=1e-4, atol=1e-6)


def test_slabs_take_their_two_periodic_directions_and_stress_needs_a_volume():
    """A slab (pbc along a and b) equals ASE's finite-difference forces; the stress of a slab with no third
    cell vector, and of free atoms, is refused with the atoms' pbc and cell lengths."""
    atoms = _box(6)
    atoms.pbc = (True, True, False)
    atoms.cell[2] = 0.0
    atoms.calc = _calc(_model())
    np.testing.assert_allclose(atoms.get_forces(), calculate_numerical_forces(atoms, eps=1e-4), rtol=1e-6,
                               atol=1e-8)
    with pytest.raises(ValueError, match=r"stress needs periodic atoms in a cell of nonzero volume; these have "
                                         r"pbc=\[True, True, False\] and cell lengths \[.*, 0\.0\]"):
        atoms.get_stress()
    atoms.pbc = False
    with pytest.raises(ValueError, match=r"stress needs periodic atoms .* pbc=\[False, False, False\]"):
        atoms.get_stress()
