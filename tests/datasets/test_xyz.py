"""XYZDataset on the bundled MD17 ethanol snippet; extended XYZ; bad files."""

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
