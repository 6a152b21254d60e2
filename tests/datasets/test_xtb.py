"""Optional xTB extra: recomputed energies/forces equal the bundled trajectories; forces = -dE/dx;
a short Langevin run round-trips through NPZTrajectory."""

import numpy as np
import pytest
import torch

from geomlin.datasets import NPZTrajectory
from geomlin.datasets.xtb import langevin_trajectory, write_trajectory, xtb_energy_forces
from tests.datasets.conftest import MD_DIR
from tests.oracles import require


@pytest.fixture(autouse=True)
def _tblite():
    """The oracle: tblite's GFN2-xTB (skipped locally when missing, a failure under CI=true)."""
    require("tblite")


def test_recompute_bundled_frame():
    raw = np.load(MD_DIR / "xtb_md_ethanol.npz")
    e, f = xtb_energy_forces(raw["nuclear_charges"], raw["coords"][499])
    assert e == pytest.approx(raw["energies"][499], abs=1e-3)
    assert np.allclose(f, raw["forces"][499], atol=5e-3)       # SCC-convergence noise ~1e-3


def test_forces_are_minus_energy_gradient():
    raw = np.load(MD_DIR / "xtb_md_ethanol.npz")
    z, x = raw["nuclear_charges"], raw["coords"][0].copy()
    _, f = xtb_energy_forces(z, x)
    h = 1e-4
    for atom, axis in ((0, 0), (3, 2)):
        xp, xm = x.copy(), x.copy()
        xp[atom, axis] += h
        xm[atom, axis] -= h
        grad = (xtb_energy_forces(z, xp)[0] - xtb_energy_forces(z, xm)[0]) / (2 * h)
        assert -grad == pytest.approx(f[atom, axis], abs=1e-3)


def test_short_trajectory_round_trip(tmp_path):
    raw = np.load(MD_DIR / "xtb_md_ethanol.npz")
    traj = langevin_trajectory(raw["nuclear_charges"], raw["coords"][0], num_frames=3, stride=2,
                               equilibration_steps=2, seed=1, progress=False)
    p = tmp_path / "rmd17_ethanol.npz"
    write_trajectory(p, traj)
    ds = NPZTrajectory(p)
    assert len(ds) == 3 and torch.equal(ds[2].force, torch.from_numpy(traj["forces"][2]))
    again = langevin_trajectory(raw["nuclear_charges"], raw["coords"][0], num_frames=3, stride=2,
                                equilibration_steps=2, seed=1, progress=False)
    assert np.array_equal(again["coords"], traj["coords"])
