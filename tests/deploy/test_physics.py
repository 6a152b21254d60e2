"""``geomlin audit --physics`` and the exit status of every audit (geomlin.deploy.physics, issue 31).

Oracles: a potential whose forces are ``-dE/dpos`` by construction and whose energy is E(3)
invariant (the briefly trained Gaunt potential of tests/deploy/potentials.py) must pass every
figure; a direct force head (forces not the energy's gradient) must fail the finite-difference
figure; an energy that reads absolute coordinates must fail the symmetry figures, and the plain
equivariance audit, whose declared types it breaks.
"""

import pytest
import torch

from geomlin.__main__ import main
from geomlin.deploy import physics
from tests.deploy.potentials import ROOT, AbsoluteEnergy, DirectForces, trained_ethanol_potential

POTENTIALS = str(ROOT / "tests" / "deploy" / "potentials.py")
FAST = ["--nve-steps", "40", "--samples", "2"]


def _failed(figures):
    return {f.check for f in figures if not f.passed}


def test_trained_potential_passes_the_gradient_and_symmetry_figures_in_float64():
    figures = physics.physics_audit(trained_ethanol_potential(), num_samples=2, nve_steps=2)
    assert {f.molecule for f in figures} == {"ethanol", "malonaldehyde", "aspirin"}
    static = [f for f in figures if not f.check.startswith("NVE")]
    assert len(static) == 3 * 9 and all(f.passed for f in static), [f for f in static if not f.passed]
    fd = [f for f in figures if f.check.startswith("forces vs")]
    assert all(f.value < 6e-7 for f in fd), fd   # measured 1.2e-7 (ethanol) to 3.7e-7 (aspirin: 20 neighbours per atom)


@pytest.mark.slow
def test_trained_potential_passes_the_default_audit(capsys):
    """The default NVE run (800 steps of 0.25 fs; shorter runs measure the fluctuation, not the drift)."""
    assert main(["audit", "--physics", f"{POTENTIALS}:trained_ethanol_potential"]) == 0
    assert "All figures within their thresholds." in capsys.readouterr().out


def test_direct_force_head_fails_the_finite_differences():
    failed = _failed(physics.physics_audit(DirectForces(), num_samples=2, nve_steps=40))
    assert "forces vs central differences of the energy" in failed


def test_energy_reading_absolute_coordinates_fails_the_symmetry_figures():
    failed = _failed(physics.physics_audit(AbsoluteEnergy(), num_samples=2, nve_steps=40))
    assert {"energy invariance under rotations", "energy invariance under translations",
            "force equivariance under rotations", "force equivariance under reflections"} <= failed
    assert "forces vs central differences of the energy" not in failed   # its forces are its gradient


@pytest.mark.parametrize("name, status, words", [
    ("DirectForces", 1, "forces vs central differences of the energy"),
    ("AbsoluteEnergy", 1, "energy invariance under translations"),
])
def test_physics_audit_exit_status(capsys, name, status, words):
    assert main(["audit", "--physics", f"{POTENTIALS}:{name}", *FAST]) == status
    out = capsys.readouterr().out
    assert words in out and ("FAIL" in out) == bool(status), out
    assert "<= 1e-06" in out and "eV/atom/ps" in out     # every figure with its threshold


def test_plain_audit_exits_nonzero_when_declared_types_do_not_hold(capsys):
    assert main(["audit", f"{POTENTIALS}:AbsoluteEnergy", "--samples", "2"]) == 1
    assert "NOT equivariant" in capsys.readouterr().out
    assert main(["audit", f"{POTENTIALS}:trained_ethanol_potential", "--samples", "2"]) == 0


def test_physics_audit_of_a_trained_checkpoint_exits_zero(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "molecules", "--quick", "--model", "egnn", "--no-progress", "--threads", "1",
                 "--out", str(out)]) == 0
    assert main(["audit", "--physics", str(out), *FAST]) == 0
    report = capsys.readouterr().out
    assert "egnn" in report and "All figures within their thresholds." in report, report


def test_physics_refusals_are_one_line(capsys, tmp_path):
    assert main(["audit", "--nve-steps", "10", f"{POTENTIALS}:DirectForces"]) == 2
    assert "--physics" in capsys.readouterr().err
    out = tmp_path / "nb"
    assert main(["train", "nbody", "--quick", "--model", "egnn", "--num-train", "8", "--num-test", "4",
                 "--no-progress", "--threads", "1", "--out", str(out)]) == 0
    assert main(["audit", "--physics", str(out), *FAST]) == 2
    err = capsys.readouterr().err
    assert "model 'egnn'" in err and len(err.strip().splitlines()) == 1, err


def test_finite_difference_figure_is_the_gradient_error():
    """The figure itself against a hand-made non-gradient: forces scaled by 1.01 give 0.01 / 1.01."""
    model = trained_ethanol_potential(torch.float64)
    mol = physics.bundled_molecules(lambda z: True)[0]
    species = mol.numbers

    def scaled(pos, sp):
        energy, forces = model(pos, sp)
        return energy, 1.01 * forces

    error = physics.force_error(scaled, mol.pos, species, torch.float64, physics.THRESHOLDS[torch.float64]["step"])
    assert error == pytest.approx(0.01 / 1.01, rel=1e-4)


def test_a_float32_package_is_audited_in_float32_with_float32_thresholds():
    from geomlin.deploy.packaged import PackagedModel
    from tests.deploy.test_packaged import _program

    _, program, meta = _program()
    figures = physics.physics_audit(PackagedModel(program.module(), meta, "ethanol.pt2"), num_samples=2,
                                    nve_steps=2)
    static = [f for f in figures if not f.check.startswith("NVE")]
    assert all(f.passed for f in static), [f for f in static if not f.passed]
    fd = [f for f in static if f.check.startswith("forces vs")]
    assert all(f.threshold == physics.THRESHOLDS[torch.float32]["forces"] and f.value > 1e-5 for f in fd), fd
