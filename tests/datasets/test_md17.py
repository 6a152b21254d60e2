"""NPZTrajectory / MD17 on the bundled GFN2-xTB trajectories; both key conventions; bad files."""

import numpy as np
import pytest
import torch

from geomlin.datasets import MD17, NPZTrajectory
from geomlin.datasets.md17 import read_npz_trajectory
from tests.datasets.conftest import MD_DIR

MOLECULES = ("ethanol", "malonaldehyde", "aspirin")


@pytest.mark.parametrize("molecule", MOLECULES)
def test_bundled_trajectories_equal_file(molecule):
    path = MD_DIR / f"xtb_md_{molecule}.npz"
    ds = MD17(MD_DIR, molecule)
    raw = np.load(path)
    assert len(ds) == 1000
    n = raw["nuclear_charges"].shape[0]
    for k in (0, 499, 999):
        d = ds[k]
        assert d.z.tolist() == raw["nuclear_charges"].tolist()
        assert d.pos.shape == (n, 3) and d.force.shape == (n, 3) and d.energy.shape == (1,)
        assert torch.equal(d.pos, torch.from_numpy(raw["coords"][k]))
        assert torch.equal(d.force, torch.from_numpy(raw["forces"][k]))
        assert d.energy.item() == raw["energies"][k]
    assert ds.units == {"pos": "Angstrom", "energy": "kcal/mol", "force": "kcal/mol/Angstrom"}
    assert "GFN2-xTB" in ds.info["method"]


def test_original_md17_keys_and_float32(tmp_path):
    raw = np.load(MD_DIR / "xtb_md_ethanol.npz")
    p = tmp_path / "md17_ethanol.npz"
    np.savez(p, z=raw["nuclear_charges"], R=raw["coords"][:10], E=raw["energies"][:10, None], F=raw["forces"][:10])
    ds = MD17(tmp_path, "ethanol", revised=False, dtype=torch.float32)
    assert len(ds) == 10 and ds[3].pos.dtype == torch.float32
    assert torch.allclose(ds[3].energy.double(), torch.tensor([raw["energies"][3]]), rtol=1e-7)
    same = NPZTrajectory(p, dtype=torch.float64)
    assert torch.equal(same[9].force, torch.from_numpy(raw["forces"][9]))


def test_official_splits(tmp_path):
    raw = np.load(MD_DIR / "xtb_md_ethanol.npz")
    (tmp_path / "npz_data").mkdir()
    (tmp_path / "splits").mkdir()
    np.savez(tmp_path / "npz_data" / "rmd17_ethanol.npz", **{k: raw[k] for k in raw.files})
    np.savetxt(tmp_path / "splits" / "index_train_02.csv", np.arange(0, 1000, 2), fmt="%d")
    np.savetxt(tmp_path / "splits" / "index_test_02.csv", np.arange(1, 1000, 2), fmt="%d")
    ds = MD17(tmp_path, "ethanol")
    idx = ds.split_indices(2)
    assert idx["train"].tolist() == list(range(0, 1000, 2))
    test = MD17(tmp_path, "ethanol", split="test", split_index=2)
    assert len(test) == 500 and torch.equal(test[0].pos, torch.from_numpy(raw["coords"][1]))
    with pytest.raises(FileNotFoundError, match="index_train_01.csv"):
        ds.split_indices(1)
    with pytest.raises(ValueError, match="split_index"):
        ds.split_indices(6)


def test_missing_molecule_message(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"rmd17_benzene\.npz.*figshare"):
        MD17(tmp_path, "benzene")


def test_wrong_keys_shapes_nan(tmp_path):
    raw = np.load(MD_DIR / "xtb_md_ethanol.npz")
    bad = tmp_path / "bad.npz"
    np.savez(bad, nuclear_charges=raw["nuclear_charges"], coords=raw["coords"][:4], energies=raw["energies"][:4])
    with pytest.raises(ValueError, match=r"bad\.npz: missing the 'force' array \(key F or forces\).*found keys"):
        NPZTrajectory(bad)
    np.savez(bad, z=raw["nuclear_charges"], R=raw["coords"][:4], E=raw["energies"][:3], F=raw["forces"][:4])
    with pytest.raises(ValueError, match=r"energies must be \(M,\) or \(M, 1\) with M = 4"):
        NPZTrajectory(bad)
    coords = raw["coords"][:4].copy()
    coords[2, 1, 0] = np.nan
    np.savez(bad, z=raw["nuclear_charges"], R=coords, E=raw["energies"][:4], F=raw["forces"][:4])
    with pytest.raises(ValueError, match="frame 2 has non-finite"):
        NPZTrajectory(bad)
    bad.write_bytes(b"garbage")
    with pytest.raises(ValueError, match="not a readable .npz"):
        NPZTrajectory(bad)
    with pytest.raises(FileNotFoundError):
        NPZTrajectory(tmp_path / "none.npz")


def test_a_trajectory_without_forces_reads_when_forces_are_optional(tmp_path):
    """``require_forces=False`` reads energies-only files (``force`` is None); by default the missing
    array is named."""
    path = tmp_path / "e.npz"
    np.savez(path, R=np.zeros((3, 2, 3)) + np.arange(3)[:, None, None], z=np.array([1, 8]), E=np.arange(3.0))
    out = read_npz_trajectory(path, require_forces=False)
    assert out["force"] is None and out["energy"].tolist() == [0.0, 1.0, 2.0] and out["pos"].shape == (3, 2, 3)
    with pytest.raises(ValueError, match="missing the 'force' array"):
        read_npz_trajectory(path)
