"""QM9 on the bundled 21-molecule sample: counts, targets, units, positions, cache behaviour, errors."""

import os
import shutil

import numpy as np
import pytest
import torch

from geomlin.datasets import QM9, qm9_split
from geomlin.datasets.io.sdf import read_sdf
from geomlin.datasets.qm9 import HARTREE_TO_EV, KCALMOL_TO_EV, QM9_TARGETS
from tests.oracles import require

# Atom counts of gdb_1 ... gdb_21 (from the counts lines; e.g. methane 5, ammonia 4, water 3).
ATOM_COUNTS = [5, 4, 3, 4, 3, 4, 8, 6, 7, 6, 7, 6, 11, 9, 9, 9, 7, 10, 9, 8, 14]


def test_counts_fields_and_methane(qm9_root):
    ds = QM9(qm9_root)
    assert len(ds) == 21
    assert [d.num_nodes for d in ds] == ATOM_COUNTS
    methane = ds[0]
    assert methane.name == "gdb_1" and methane.z.tolist() == [6, 1, 1, 1, 1]
    assert methane.y.shape == (1, 19)
    assert abs(methane.y[0, 7].item() - (-1101.488)) < 1e-3        # U0 in eV
    assert methane.edge_index.shape == (2, 8) and methane.edge_attr.shape == (8, 4)
    assert ds.units["U0"] == "eV" and ds.targets[7] == "U0"


def test_positions_equal_sdf_and_targets_equal_csv(qm9_root):
    ds = QM9(qm9_root)
    rec = read_sdf(qm9_root / "raw" / "gdb9.sdf")
    off = rec.atom_offsets
    rows = [ln.split(",") for ln in (qm9_root / "raw" / "gdb9.sdf.csv").read_text().splitlines()]
    header = rows[0]
    for k, d in enumerate(ds):
        assert torch.equal(d.pos, torch.tensor(rec.pos[off[k]:off[k + 1]], dtype=torch.float32))
        for t, (_, col, factor, _) in enumerate(QM9_TARGETS):
            want = float(rows[k + 1][header.index(col)]) * factor
            assert d.y[0, t].item() == pytest.approx(want, rel=1e-6, abs=1e-6)


def test_atomref_oracle(qm9_root):
    """U0_atom (kcal/mol in the CSV) = U0 - sum of isolated-atom energies: two independent unit paths agree."""
    ds = QM9(qm9_root)
    ref = QM9.atomref("U0")
    assert ref.shape == (100, 1) and QM9.atomref("mu") is None
    for d in ds:
        atomization = d.y[0, 7].double() - ref[d.z, 0].double().sum()
        assert atomization.item() == pytest.approx(d.y[0, 12].item(), abs=2e-3)
    assert HARTREE_TO_EV / KCALMOL_TO_EV == pytest.approx(627.5095, rel=1e-6)


def test_matches_pyg_qm9_processing(qm9_root, tmp_path):
    """Oracle: PyTorch Geometric's QM9 (RDKit path) on the same raw folder."""
    require("rdkit")
    from torch_geometric.datasets import QM9 as PygQM9

    pyg_root = tmp_path / "pyg"
    shutil.copytree(qm9_root / "raw", pyg_root / "raw")
    (pyg_root / "raw" / "uncharacterized.txt").write_text("header\n" * 9 + "footer\nfooter")  # no ids
    csv = pyg_root / "raw" / "gdb9.sdf.csv"
    csv.write_text(csv.read_text().rstrip("\n") + "\n")     # PyG drops a last line without newline
    ref = PygQM9(str(pyg_root))
    ours = QM9(qm9_root)
    assert len(ref) == len(ours)
    for a, b in zip(ours, ref):
        assert torch.equal(a.z, b.z) and torch.allclose(a.pos, b.pos)
        assert torch.equal(a.edge_index, b.edge_index) and torch.equal(a.edge_attr, b.edge_attr)
        assert torch.allclose(a.y, b.y, rtol=1e-6)
        assert torch.equal(a.x, b.x[:, :5])


def test_cache_reused_rebuilt_when_raw_changes_or_corrupt(qm9_root):
    QM9(qm9_root)
    cache = qm9_root / "processed" / QM9.cache_name
    assert cache.is_file()
    stamp = cache.stat().st_mtime_ns
    QM9(qm9_root)
    assert cache.stat().st_mtime_ns == stamp                 # reused
    csv = qm9_root / "raw" / "gdb9.sdf.csv"
    csv.write_text(csv.read_text().replace("-40.47893,", "-40.0,", 1))
    assert QM9(qm9_root)[0].y[0, 7].item() == pytest.approx(-40.0 * HARTREE_TO_EV)   # rebuilt, not stale
    cache.write_bytes(b"not a torch file")
    assert len(QM9(qm9_root)) == 21                           # corrupt cache rebuilt
    assert not [p for p in cache.parent.iterdir() if p.name.endswith(".tmp")]


def test_pre_transform_and_filter_are_fingerprinted(qm9_root):
    class Tag:
        def __init__(self, v):
            self.v = v

        def __call__(self, d):
            d.tag = torch.tensor([self.v])
            return d

        def __repr__(self):
            return f"Tag({self.v})"

    assert QM9(qm9_root, pre_transform=Tag(1))[3].tag.item() == 1
    assert QM9(qm9_root, pre_transform=Tag(2))[3].tag.item() == 2
    small = QM9(qm9_root, pre_filter=lambda d: d.num_nodes <= 4)
    assert [d.num_nodes for d in small] == [n for n in ATOM_COUNTS if n <= 4]


def test_uncharacterized_skipped(qm9_root):
    (qm9_root / "raw" / "uncharacterized.txt").write_text(
        "header\n" * 9 + "    3    x\n    5    y\n" + "\n\n")
    ds = QM9(qm9_root)
    assert len(ds) == 19 and "gdb_3" not in [d.name for d in ds]
    assert [int(d.idx) for d in ds][:4] == [0, 1, 3, 5]


def test_count_mismatch_error_then_fix(qm9_root):
    csv = qm9_root / "raw" / "gdb9.sdf.csv"
    good = csv.read_text()
    csv.write_text("\n".join(good.splitlines()[:-1]) + "\n")
    with pytest.raises(ValueError, match=r"gdb9\.sdf has 21 molecule records but .*gdb9\.sdf\.csv has 20 label rows"):
        QM9(qm9_root)
    assert not (qm9_root / "processed").exists() or not os.listdir(qm9_root / "processed")
    csv.write_text(good)
    assert len(QM9(qm9_root)) == 21


def test_truncated_sdf_error_leaves_no_cache(qm9_root):
    sdf = qm9_root / "raw" / "gdb9.sdf"
    good = sdf.read_text()
    sdf.write_text(good[: good.index("gdb_21") + 60])
    with pytest.raises(ValueError, match=r"record 20, 'gdb_21'.*truncated"):
        QM9(qm9_root)
    assert not (qm9_root / "processed").exists() or not os.listdir(qm9_root / "processed")
    sdf.write_text(good)
    assert QM9(qm9_root)[20].num_nodes == 14


def test_missing_files_message(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"gdb9\.sdf \+ gdb9\.sdf\.csv.*dsgdb9nsd.*qm9_part1\.csv.*qm9\.zip"):
        QM9(tmp_path)


def test_split_helper():
    s = qm9_split(130_831, seed=0)
    assert (len(s["train"]), len(s["val"]), len(s["test"])) == (110_000, 10_000, 10_831)
    allidx = torch.cat(list(s.values()))
    assert torch.equal(allidx.sort().values, torch.arange(130_831))
    assert torch.equal(qm9_split(100, 3, 0.8, 0.1)["test"], qm9_split(100, 3, 0.8, 0.1)["test"])
    with pytest.raises(ValueError, match="exceeds"):
        qm9_split(21)
    _ = np  # numpy used by the oracle helpers above


@pytest.mark.parametrize("old, new, match", [
    ("    0.0022   -0.0060    0.0020 H ", "    0.0022   -0.0060    0.0020 Qx", "unknown element symbol 'Qx'"),
    ("    0.0022   -0.0060    0.0020 H ", "    0.0022       nan    0.0020 H ", "non-finite"),
])
def test_bad_record_error_names_record_no_cache_then_fix(qm9_root, old, new, match):
    sdf = qm9_root / "raw" / "gdb9.sdf"
    good = sdf.read_text()
    assert old in good
    sdf.write_text(good.replace(old, new, 1))
    with pytest.raises(ValueError, match=rf"gdb9\.sdf:6 \(record 0, 'gdb_1'\): {match}"):
        QM9(qm9_root)
    assert not (qm9_root / "processed").exists() or not os.listdir(qm9_root / "processed")
    sdf.write_text(good)
    assert len(QM9(qm9_root)) == 21
