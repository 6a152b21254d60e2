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


def test_water_box_holds_rigid_molecules_at_the_density():
    """The formula: 3 M atoms in a cube of volume M / density, every molecule at water's gas-phase
    geometry (O-H 0.9578 Angstrom, H-O-H 104.48 degrees), oxygens inside the cell; the rotations spread the molecules' bisectors over the sphere."""
    from geomlin.datasets.xtb import WATER_DENSITY, water_box

    z, pos, cell = water_box(1000, seed=3)
    assert z.tolist() == [8, 1, 1] * 1000 and pos.shape == (3000, 3)
    np.testing.assert_allclose(cell, (1000 / WATER_DENSITY) ** (1 / 3) * np.eye(3), rtol=1e-12)
    o, h1, h2 = pos[0::3], pos[1::3], pos[2::3]
    np.testing.assert_allclose(np.linalg.norm(h1 - o, axis=1), 0.9578, atol=1e-4)
    np.testing.assert_allclose(np.linalg.norm(h2 - o, axis=1), 0.9578, atol=1e-4)
    cos = ((h1 - o) * (h2 - o)).sum(1) / 0.9578 ** 2
    np.testing.assert_allclose(np.degrees(np.arccos(np.clip(cos, -1, 1))), 104.48, atol=0.02)
    assert ((o >= 0) & (o < cell[0, 0])).all()
    bisector = (h1 + h2) / 2 - o
    assert np.linalg.norm((bisector / np.linalg.norm(bisector, axis=1)[:, None]).mean(0)) < 0.1
    side = cell[0, 0]
    gaps = []
    for a in range(0, 3000, 500):                      # minimum-image distances between atoms of two molecules
        d = pos[a:a + 500, None, :] - pos[None, :, :]
        d = np.linalg.norm(d - side * np.round(d / side), axis=-1)
        d[(np.arange(a, a + 500)[:, None] // 3) == (np.arange(3000)[None, :] // 3)] = np.inf
        gaps.append(d.min())
    assert min(gaps) > 1.5


def test_periodic_water_energy_is_invariant_to_wrapping_and_forces_are_its_gradient():
    """tblite in a cell: a molecule moved by a lattice vector leaves the energy unchanged; forces are
    -dE/dx by central differences (the cell reaches tblite in Angstrom -> Bohr like the positions)."""
    from geomlin.datasets.xtb import water_box

    z, x, cell = water_box(8, seed=1)
    e, f = xtb_energy_forces(z, x, cell=cell)
    moved = x.copy()
    moved[3:6] += cell[1] - cell[2]
    assert xtb_energy_forces(z, moved, cell=cell)[0] == pytest.approx(e, abs=1e-6)
    h = 1e-4
    xp, xm = x.copy(), x.copy()
    xp[4, 0] += h
    xm[4, 0] -= h
    grad = (xtb_energy_forces(z, xp, cell=cell)[0] - xtb_energy_forces(z, xm, cell=cell)[0]) / (2 * h)
    assert -grad == pytest.approx(f[4, 0], abs=1e-3)


@pytest.mark.slow
def test_periodic_trajectory_round_trips_through_extended_xyz(tmp_path):
    from geomlin.datasets import XYZDataset
    from geomlin.datasets.xtb import water_box, write_xyz_trajectory

    z, x, cell = water_box(8, seed=2)
    traj = langevin_trajectory(z, x, num_frames=2, stride=1, equilibration_steps=0, cell=cell, progress=False)
    assert traj["cell"].tolist() == cell.tolist() and traj["pbc"].tolist() == [True] * 3
    p = tmp_path / "water.extxyz"
    write_xyz_trajectory(p, traj)
    ds = XYZDataset(p)
    assert len(ds) == 2 and ds[1].pbc.all()
    np.testing.assert_allclose(ds[1].cell[0].numpy(), cell, atol=1e-8)          # 8 decimals written
    np.testing.assert_allclose(ds[1].energy.numpy(), traj["energies"][1:], atol=1e-8)
    np.testing.assert_allclose(ds[1].force.numpy(), traj["forces"][1], atol=1e-6)


@pytest.mark.slow
def test_recompute_bundled_water_frame():
    """A frame of the bundled periodic water box, recomputed with tblite in its cell."""
    from geomlin.datasets.io.xyz import read_xyz

    frame = read_xyz(MD_DIR / "xtb_md_water27.xyz")[15]
    e, f = xtb_energy_forces(frame.z, frame.pos, cell=frame.cell, pbc=frame.pbc)
    assert e == pytest.approx(frame.energy, abs=1e-4)
    assert np.allclose(f, frame.forces, atol=5e-4)
