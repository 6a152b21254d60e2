"""SDFDataset on the bundled QM9 SDF: labels from CSV or data items, count mismatch, caching."""

import pytest
import torch

from geomlin.datasets import QM9, SDFDataset
from tests.datasets.conftest import QM9_DIR

SDF, CSV = QM9_DIR / "gdb9.sdf", QM9_DIR / "gdb9.sdf.csv"


def test_sdf_with_csv_labels_matches_qm9(qm9_root):
    ds = SDFDataset(SDF, CSV, target_columns=["u0", "mu"], id_column="mol_id")
    ref = QM9(qm9_root)
    assert len(ds) == 21 and ds.target_columns == ["u0", "mu"]
    for a, b in zip(ds, ref):
        assert torch.equal(a.z, b.z) and torch.equal(a.pos, b.pos) and torch.equal(a.edge_index, b.edge_index)
        assert a.y.shape == (1, 2)
    assert ds[0].y[0, 0].item() == pytest.approx(-40.47893)
    default = SDFDataset(SDF, CSV, id_column="mol_id")
    assert default[0].y.shape == (1, 19)                  # every numeric column but the id


def test_count_mismatch_names_both_counts(tmp_path):
    short = tmp_path / "short.csv"
    short.write_text("\n".join(CSV.read_text().splitlines()[:-2]) + "\n")
    with pytest.raises(ValueError, match=r"gdb9\.sdf has 21 molecule records but .*short\.csv has 19 label rows"):
        SDFDataset(SDF, short)


def test_id_mismatch(tmp_path):
    swapped = tmp_path / "swapped.csv"
    lines = CSV.read_text().splitlines()
    lines[1], lines[2] = lines[2], lines[1]
    swapped.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"record 0 .* named 'gdb_1' but row 2 .* mol_id='gdb_2'"):
        SDFDataset(SDF, swapped, id_column="mol_id")


def test_labels_from_data_items_and_cache(tmp_path):
    recs = [r for r in SDF.read_text().split("$$$$\n") if r.strip()][:3]
    text = "".join(r.replace("M  END\n", f"M  END\n> <pIC50>\n{5 + k}.5\n\n") + "$$$$\n"
                   for k, r in enumerate(recs))
    p = tmp_path / "act.sdf"
    p.write_text(text)
    ds = SDFDataset(p, target_columns=["pIC50"], cache_dir=tmp_path / "cache")
    assert [d.y.item() for d in ds] == [5.5, 6.5, 7.5]
    assert (tmp_path / "cache" / "geomlin_sdf_act.pt").is_file()
    again = SDFDataset(p, target_columns=["pIC50"], cache_dir=tmp_path / "cache")
    assert torch.equal(again[2].pos, ds[2].pos) and again.target_columns == ["pIC50"]
    with pytest.raises(ValueError, match=r"record 0 \('gdb_1'\) lacks the data item <logP>"):
        SDFDataset(p, target_columns=["logP"])


def test_missing_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="none.sdf"):
        SDFDataset(tmp_path / "none.sdf")
