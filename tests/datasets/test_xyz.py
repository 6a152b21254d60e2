"""XYZDataset on the bundled MD17 ethanol snippet; extended XYZ; bad files."""

import numpy as np
import pytest
import torch

from geomlin.datasets import XYZDataset
from tests.datasets.conftest import MD_DIR


def _oracle(path):
    lines = path.read_text().splitlines()
    frames, i = [], 0
    while i < len(lines):
        n = int(lines[i])
        rows = [ln.split() for ln in lines[i + 2:i + 2 + n]]
        frames.append((float(lines[i + 1]), [r[0] for r in rows], [[float(v) for v in r[1:4]] for r in rows],
                       [[float(v) for v in r[4:7]] for r in rows]))
        i += 2 + n
    return frames


def test_snippet_three_frames_with_forces():
    path = MD_DIR / "ethanol_snip.xyz"
    ds = XYZDataset(path)
    ref = _oracle(path)
    assert len(ds) == len(ref) == 3
    for d, (e, syms, pos, force) in zip(ds, ref):
        assert d.energy.item() == e
        assert d.z.tolist() == [{"C": 6, "O": 8, "H": 1}[s] for s in syms]
        assert torch.equal(d.pos, torch.tensor(pos, dtype=torch.float64))
        assert torch.equal(d.force, torch.tensor(force, dtype=torch.float64))


EXTXYZ = """3
Properties=species:S:1:pos:R:3:forces:R:3 energy=-14.5 pbc="F F F"
O 0.0 0.0 0.1 0.5 0.0 0.0
H 0.0 0.7 -0.5 0.0 0.1 0.0
H 0.0 -0.7 -0.5 0.0 -0.1 0.0
2
Properties=species:S:1:pos:R:3:forces:R:3 energy=-1.25
H 0.0 0.0 0.0 1.0 0.0 0.0
H 0.0 0.0 0.74 -1.0 0.0 0.0
"""


def test_extended_xyz_variable_sizes(tmp_path):
    p = tmp_path / "w.extxyz"
    p.write_text(EXTXYZ)
    ds = XYZDataset(p)
    assert len(ds) == 2 and ds[0].num_nodes == 3 and ds[1].num_nodes == 2
    assert ds[0].energy.item() == -14.5 and ds[1].energy.item() == -1.25
    assert ds[0].force[1].tolist() == [0.0, 0.1, 0.0]
    assert ds[1].z.tolist() == [1, 1]


def test_plain_xyz_without_energy(tmp_path):
    p = tmp_path / "m.xyz"
    p.write_text("2\nhydrogen molecule\nH 0 0 0\nH 0 0 0.74\n")
    d = XYZDataset(p)[0]
    assert d.pos[1, 2].item() == 0.74 and "energy" not in d and "force" not in d


@pytest.mark.parametrize("text, match", [
    ("3\nE\nH 0 0 0\nH 0 0 1\n", "truncated frame"),
    ("2\n-1.0\nH 0 0 0\nQq 0 0 1\n", "unknown element symbol 'Qq'"),
    ("2\n-1.0\nH 0 0 0\nH 0 nan 1\n", "non-finite"),
    ("x\n-1.0\nH 0 0 0\n", "expected the atom count"),
    ("2\n-1.0\nH 0 0 0\nH 0 0 a\n", "malformed number"),
    ("", "no XYZ frames"),
])
def test_bad_xyz(tmp_path, text, match):
    p = tmp_path / "bad.xyz"
    p.write_text(text)
    with pytest.raises(ValueError, match=rf"bad\.xyz.*{match}"):
        XYZDataset(p)


WATER_BOX = """3
Lattice="6.0 0.0 0.0 1.5 5.5 0.0 -0.5 0.7 7.25" Properties=species:S:1:pos:R:3:forces:R:3 energy=-10.5 pbc="T T F"
O 0.0 0.0 0.1 0.5 0.0 0.0
H 0.0 0.7 -0.5 0.0 0.1 0.0
H 5.9 -0.7 -0.5 0.0 -0.1 0.0
3
Lattice="6.0 0.0 0.0 1.5 5.5 0.0 -0.5 0.7 7.25" Properties=species:S:1:pos:R:3:forces:R:3 energy=-10.25
O 0.0 0.0 0.2 0.5 0.0 0.0
H 0.0 0.7 -0.4 0.0 0.1 0.0
H 5.9 -0.7 -0.4 0.0 -0.1 0.0
"""


def test_extended_xyz_cells_batch_as_pyg_per_graph_attributes(tmp_path):
    """``Lattice=`` and ``pbc=`` as ASE writes them (the second frame: all periodic by default) become
    ``cell (1, 3, 3)`` and ``pbc (1, 3)``, which a PyG batch stacks to ``(G, 3, 3)`` and ``(G, 3)``."""
    from torch_geometric.loader import DataLoader

    p = tmp_path / "box.extxyz"
    p.write_text(WATER_BOX)
    ds = XYZDataset(p)
    lattice = [[6.0, 0.0, 0.0], [1.5, 5.5, 0.0], [-0.5, 0.7, 7.25]]
    assert ds[0].cell.shape == (1, 3, 3) and ds[0].cell[0].tolist() == lattice
    assert ds[0].pbc.tolist() == [[True, True, False]] and ds[1].pbc.tolist() == [[True, True, True]]
    batch = next(iter(DataLoader(ds, batch_size=2)))
    assert batch.cell.shape == (2, 3, 3) and batch.pbc.shape == (2, 3) and batch.cell.dtype == torch.float64
    assert batch.pos.shape == (6, 3) and batch.batch.tolist() == [0, 0, 0, 1, 1, 1]


def test_extended_xyz_written_by_ase(tmp_path):
    """ASE writes the file (triclinic cell, periodic along two axes, energy and forces, 8 decimals); the
    reader gets what ASE's own reader reads from it."""
    from tests.oracles import require

    ase = require("ase")
    from ase.calculators.singlepoint import SinglePointCalculator
    from ase.io import read, write

    rng = np.random.default_rng(0)
    frames = []
    for k in range(3):
        atoms = ase.Atoms("OH2" * 4, positions=rng.uniform(0, 6, (12, 3)),
                          cell=[[6.0, 0, 0], [1.2, 5.8, 0], [0.3, -0.4, 6.5]], pbc=[True, k != 1, True])
        atoms.calc = SinglePointCalculator(atoms, energy=-3.0 * k - 0.25, forces=rng.normal(size=(12, 3)))
        frames.append(atoms)
    p = tmp_path / "ase.extxyz"
    write(p, frames, format="extxyz")
    ds = XYZDataset(p)
    for d, atoms in zip(ds, read(p, ":")):
        np.testing.assert_allclose(d.cell[0].numpy(), atoms.cell.array, rtol=0, atol=0)
        assert d.pbc[0].tolist() == atoms.pbc.tolist()
        np.testing.assert_allclose(d.pos.numpy(), atoms.positions, rtol=0, atol=0)
        np.testing.assert_allclose(d.force.numpy(), atoms.get_forces(), rtol=0, atol=0)
        assert d.energy.item() == atoms.get_potential_energy() and d.z.tolist() == atoms.numbers.tolist()


def test_written_extended_xyz_reads_back_here_and_in_ase(tmp_path):
    """write_xyz's file, read by this reader and by ASE's: the same numbers to the written decimals."""
    from tests.oracles import require

    require("ase")
    from ase.io import read

    from geomlin.datasets.io.xyz import XYZFrame, read_xyz, write_xyz

    rng = np.random.default_rng(1)
    cell = np.array([[6.0, 0, 0], [1.2, 5.8, 0], [0.3, -0.4, 6.5]])
    frames = [XYZFrame(np.array([8, 1, 1, 6]), rng.uniform(-2, 8, (4, 3)), -1234.5678 + k, rng.normal(size=(4, 3)),
                       {}, cell, np.array([True, k == 0, True])) for k in range(2)]
    frames.append(XYZFrame(np.array([1, 1]), rng.uniform(size=(2, 3)), None, None, {}))
    p = tmp_path / "out.extxyz"
    write_xyz(p, frames)
    for mine, theirs, want in zip(read_xyz(p), read(p, ":"), frames):
        np.testing.assert_allclose(mine.pos, want.pos, atol=1e-8)
        np.testing.assert_allclose(theirs.positions, want.pos, atol=1e-8)
        assert mine.z.tolist() == theirs.numbers.tolist() == want.z.tolist()
        if want.cell is not None:
            np.testing.assert_allclose(mine.cell, want.cell, atol=1e-8)
            np.testing.assert_allclose(theirs.cell.array, want.cell, atol=1e-8)
            assert mine.pbc.tolist() == theirs.pbc.tolist() == want.pbc.tolist()
            assert mine.energy == pytest.approx(want.energy, abs=1e-8)
            assert theirs.get_potential_energy() == pytest.approx(want.energy, abs=1e-8)
            np.testing.assert_allclose(mine.forces, want.forces, atol=1e-6)
            np.testing.assert_allclose(theirs.get_forces(), want.forces, atol=1e-6)
        else:
            assert mine.cell is None and mine.energy is None and mine.forces is None and not theirs.pbc.any()


def test_bundled_periodic_water_box():
    """datasets/md/xtb_md_water27.xyz: 30 frames of 27 molecules in a periodic cube at liquid density,
    each O with its two H (unwrapped: an O-H bond never spans the box)."""
    ds = XYZDataset(MD_DIR / "xtb_md_water27.xyz")
    assert len(ds) == 30 and ds[0].z.tolist() == [8, 1, 1] * 27
    side = ds[0].cell[0, 0, 0].item()
    assert torch.equal(ds[0].cell[0], side * torch.eye(3, dtype=torch.float64)) and ds[7].pbc.all()
    assert 81 / side ** 3 == pytest.approx(0.1, rel=0.01)
    for d in (ds[0], ds[29]):
        oh = (d.pos[1::3] - d.pos[0::3]).norm(dim=-1), (d.pos[2::3] - d.pos[0::3]).norm(dim=-1)
        assert all(0.85 < float(r.min()) and float(r.max()) < 1.15 for r in oh)
