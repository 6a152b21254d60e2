"""The ASE calculator (geomlin.deploy.calculator, issue 31): units, finite differences, ASE's own drivers.

Oracles: ASE itself (its numerical forces, its unit constants ``ase.units.kcal / ase.units.mol``,
its integrators and optimizer), and the eager potential. The 1,000-step NVE runs of the issue's
acceptance (eager and packaged) are slow; a 400-step eager run at 0.25 fs is in the default set.
"""

import numpy as np
import pytest
import torch

from geomlin.deploy import Units
from geomlin.models.md import EnergyAndForces
from tests.deploy.potentials import ethanol, trained_ethanol_potential
from tests.oracles import require

ase = require("ase")
from ase import Atoms, units
from ase.calculators.fd import calculate_numerical_forces
from ase.md.langevin import Langevin
from ase.md.velocitydistribution import Stationary, thermalize_momenta
from ase.md.verlet import VelocityVerlet
from ase.optimize import BFGS

from geomlin.deploy.calculator import GeomlinCalculator

#: The issue's bound on the energy drift of NVE at 0.5 fs (eV per atom per ps).
MAX_DRIFT = 1e-4


def _atoms(frame: int = 0) -> Atoms:
    numbers, pos, _, _ = ethanol(slice(frame, frame + 1))
    return Atoms(numbers=numbers.numpy(), positions=pos[0].numpy())


def nve_drift(calc, steps: int, dt_fs: float = 0.5, seed: int = 0) -> float:
    """|slope| of the total energy per atom of ASE's VelocityVerlet, eV/atom/ps (300 K start)."""
    atoms = _atoms()
    atoms.calc = calc
    thermalize_momenta(atoms, temperature_K=300, rng=np.random.default_rng(seed))
    Stationary(atoms)
    totals = []
    dyn = VelocityVerlet(atoms, timestep=dt_fs * units.fs)
    dyn.attach(lambda: totals.append(atoms.get_total_energy()), interval=1)
    dyn.run(steps)
    t = np.arange(len(totals)) * dt_fs * 1e-3
    return abs(np.polyfit(t, np.asarray(totals) / len(atoms), 1)[0])


def test_energy_and_forces_in_ev_from_the_recorded_units():
    model = trained_ethanol_potential(torch.float64)
    atoms = _atoms()
    atoms.calc = GeomlinCalculator(model)
    numbers, pos, _, _ = ethanol(slice(0, 1))
    energy, forces = model(pos, numbers[None])
    kcal = units.kcal / units.mol
    assert atoms.get_potential_energy() == pytest.approx(float(energy) * kcal, rel=1e-8)
    np.testing.assert_allclose(atoms.get_forces(), forces[0].detach().numpy() * kcal, rtol=1e-8, atol=1e-12)
    assert Units("kcal/mol").energy_to_ev == pytest.approx(kcal, rel=1e-8)


def test_forces_equal_central_differences_in_float64():
    atoms = _atoms(frame=5)
    atoms.calc = GeomlinCalculator(trained_ethanol_potential(), dtype=torch.float64)
    forces = atoms.get_forces()
    numeric = calculate_numerical_forces(atoms, eps=1e-4)     # ASE's central differences
    error = np.linalg.norm(forces - numeric) / np.linalg.norm(forces)
    assert error < 1e-6, error


def test_float64_on_request_leaves_the_model_untouched():
    model = trained_ethanol_potential()
    calc = GeomlinCalculator(model, dtype=torch.float64)
    assert calc.dtype == torch.float64 and next(model.parameters()).dtype == torch.float32


def test_compiled_step_gives_the_eager_numbers():
    model = trained_ethanol_potential()
    atoms, other = _atoms(), _atoms()
    atoms.calc = GeomlinCalculator(model)
    other.calc = GeomlinCalculator(EnergyAndForces(model, backend="aot_eager"))
    np.testing.assert_allclose(other.get_forces(), atoms.get_forces(), rtol=1e-5, atol=1e-5)
    assert other.get_potential_energy() == pytest.approx(atoms.get_potential_energy(), rel=1e-6)


def test_nve_conserves_energy_eager_short():
    """100 fs at 0.25 fs (over shorter spans at 0.5 fs the fit measures the energy's fluctuation, not its drift)."""
    calc = GeomlinCalculator(trained_ethanol_potential(), dtype=torch.float64)
    assert nve_drift(calc, 400, dt_fs=0.25) < MAX_DRIFT


@pytest.mark.slow
def test_nve_1000_steps_eager_and_package(tmp_path):
    from geomlin import deploy, load

    model = trained_ethanol_potential()
    drift = nve_drift(GeomlinCalculator(model), 1000)
    print(f"eager float32: drift {drift:.2e} eV/atom/ps")
    assert drift < MAX_DRIFT
    numbers, pos, _, _ = ethanol(slice(0, 2))
    deploy.package(model, tmp_path / "ethanol.pt2", (pos.float(), numbers.expand(2, -1).clone()))
    drift = nve_drift(GeomlinCalculator(load(tmp_path / "ethanol.pt2")), 1000)
    print(f"package float32: drift {drift:.2e} eV/atom/ps")
    assert drift < MAX_DRIFT


def test_langevin_and_bfgs_run_unchanged():
    model = trained_ethanol_potential()
    atoms = _atoms()
    atoms.calc = GeomlinCalculator(model)
    thermalize_momenta(atoms, temperature_K=300, rng=np.random.default_rng(1))
    Langevin(atoms, timestep=0.5 * units.fs, temperature_K=300, friction=0.01 / units.fs, fixcm=False,
             rng=np.random.default_rng(2)).run(20)
    assert np.isfinite(atoms.get_potential_energy())
    start = atoms.get_potential_energy()
    BFGS(atoms, logfile=None).run(fmax=0.05, steps=200)
    assert atoms.get_potential_energy() < start
    assert np.abs(atoms.get_forces()).max() < 0.05


def test_elements_and_cells_the_model_cannot_take_are_refused():
    atoms = _atoms()
    atoms.numbers[0] = 7                              # nitrogen: not in the training data
    atoms.calc = GeomlinCalculator(trained_ethanol_potential())
    with pytest.raises(ValueError, match=r"trained on the elements H, C, O; .* element N \(Z=7\)"):
        atoms.get_potential_energy()
    atoms = _atoms()
    atoms.cell, atoms.pbc = [0.5, 10.0, 10.0], True       # thinner than cutoff / MAX_CELL_IMAGES
    potential = trained_ethanol_potential().model         # without the test's all-pairs core
    atoms.calc = GeomlinCalculator(potential, units=Units("kcal/mol"), species={1: 1, 6: 6, 8: 8})
    with pytest.raises(ValueError, match=r"too small for the cutoff 5: its height along lattice vector 0 is 0\.5"):
        atoms.get_potential_energy()


def test_a_model_without_units_needs_them():
    model = trained_ethanol_potential()
    del model.card
    with pytest.raises(ValueError, match="records no energy units"):
        GeomlinCalculator(model)
    calc = GeomlinCalculator(model, units=Units("kcal/mol"), species={1: 1, 6: 6, 8: 8})
    atoms = _atoms()
    atoms.calc = calc
    assert np.isfinite(atoms.get_potential_energy())


def test_package_path_gives_the_eager_numbers_and_refuses_float64():
    """Through a PackagedModel (here around the exported program; the AOTInductor build is in the slow tests)."""
    from geomlin.deploy.packaged import PackagedModel
    from tests.deploy.test_packaged import _program

    model, program, meta = _program()
    packaged = PackagedModel(program.module(), meta, "ethanol.pt2")
    atoms, other = _atoms(3), _atoms(3)
    atoms.calc, other.calc = GeomlinCalculator(model), GeomlinCalculator(packaged)
    np.testing.assert_allclose(other.get_forces(), atoms.get_forces(), rtol=1e-4, atol=1e-5)
    assert other.get_potential_energy() == pytest.approx(atoms.get_potential_energy(), rel=1e-6)
    with pytest.raises(TypeError, match="runs in torch.float32; it cannot run in torch.float64"):
        GeomlinCalculator(packaged, dtype=torch.float64)
