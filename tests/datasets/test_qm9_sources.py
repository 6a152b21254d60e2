"""QM9 from its three sources: MoleculeNet SDF + CSV, the original dsgdb9nsd XYZ files (folder or
.tar.bz2) and qm9pack's tables give identical datasets; source selection, exclusions, caches, errors.

Oracle: :mod:`tests.datasets.qm9_formats` writes the bundled sample in each layout from its text
(no geomlin reader involved), so the same numbers reach every reader.
"""

import errno
import os
import shutil

import numpy as np
import pytest
import torch

from geomlin.datasets import QM9
from geomlin.datasets.cache import CacheWriteError, save_cache
from geomlin.datasets.qm9 import (
    ATOMIZATION_COLUMNS,
    QM9_TARGETS,
    find_qm9_files,
    process_qm9,
    read_uncharacterized,
)
from geomlin.validation import FileFormatError
from tests.datasets.conftest import QM9_DIR
from tests.datasets.qm9_formats import (
    XYZ_PROPERTIES,
    make_bundled_samples,
    read_moleculenet_text,
    require_qm9pack,
    write_moleculenet,
    write_qm9pack,
    write_uncharacterized,
    write_xyz_archive,
    write_xyz_folder,
    xyz_name,
)

#: Molecules of the bundled sample treated as uncharacterized in the conversion test.
EXCLUDED = (2, 7, 13)
FIELDS = ("z", "pos", "x", "y", "idx")


@pytest.fixture
def molecules():
    return read_moleculenet_text(QM9_DIR)


def write_all(root, molecules, excluded=EXCLUDED):
    """The molecules in every layout under ``root``: {layout: QM9 root}; ``uncharacterized.txt`` where the
    source has one, qm9pack's tables without the excluded rows (as qm9pack ships them)."""
    roots = {k: root / k for k in ("moleculenet", "xyz-folder", "xyz-archive", "qm9pack")}
    write_moleculenet(roots["moleculenet"] / "raw", molecules)
    write_xyz_folder(roots["xyz-folder"] / "raw", molecules)
    write_xyz_archive(roots["xyz-archive"] / "raw" / "dsgdb9nsd.xyz.tar.bz2", molecules, shuffle=0)
    write_qm9pack(roots["qm9pack"], [m for m in molecules if m.index not in excluded], parts=3)
    for k in ("moleculenet", "xyz-folder", "xyz-archive"):
        write_uncharacterized(roots[k] / "raw" / "uncharacterized.txt", list(excluded))
    return roots


def assert_same(a, b):
    assert len(a) == len(b)
    for key in FIELDS:
        assert torch.equal(a._data[key], b._data[key]), key
        assert torch.equal(a.slices[key], b.slices[key]), key
    assert a._data.name == b._data.name


def test_bundled_samples_are_one_dataset():
    sdf = QM9(QM9_DIR, cache=False)
    xyz = QM9(QM9_DIR / "xyz", cache=False)
    pack = QM9(QM9_DIR / "qm9pack", cache=False)
    assert (sdf.source, xyz.source, pack.source) == ("moleculenet", "xyz", "qm9pack")
    assert len(sdf) == 21
    assert_same(sdf, xyz)
    assert_same(sdf, pack)
    assert sdf[0].edge_index.shape == (2, 8) and "edge_index" not in xyz[0] and "edge_index" not in pack[0]


def test_bundled_samples_are_reproducible(tmp_path):
    """``python -m tests.datasets.qm9_formats`` rewrites the bundled XYZ and qm9pack samples byte for byte."""
    require_qm9pack()
    make_bundled_samples(QM9_DIR, tmp_path)
    for name in ("xyz/dsgdb9nsd.xyz.tar.bz2", "qm9pack/qm9_part1.csv"):
        assert (tmp_path / name).read_bytes() == (QM9_DIR / name).read_bytes(), name


def test_conversion_between_the_three_formats(tmp_path, molecules):
    roots = write_all(tmp_path, molecules)
    sets = {k: QM9(r) for k, r in roots.items()}
    kept = [m for m in molecules if m.index not in EXCLUDED]
    ref = sets["moleculenet"]
    assert len(ref) == 18 and [d.name for d in ref] == [f"gdb_{m.index}" for m in kept]
    assert [int(d.idx) for d in ref] == [m.index - 1 for m in kept]
    for ds in sets.values():
        assert_same(ref, ds)
    # the oracle's numbers: positions as written, every target from its text
    for d, m in zip(ref, kept):
        assert torch.equal(d.pos, torch.tensor(m.values, dtype=torch.float32))
        for t, (_, col, factor, _) in enumerate(QM9_TARGETS):
            if col in ATOMIZATION_COLUMNS:
                text = m.atomization[list(ATOMIZATION_COLUMNS).index(col)]
            else:
                text = m.properties[XYZ_PROPERTIES.index(col)]
            assert d.y[0, t].item() == np.float32(float(text) * factor)


def test_float64_targets_agree_and_atomization_is_computed_as_moleculenet_does(tmp_path, molecules):
    roots = write_all(tmp_path, molecules)
    data = {}
    for key, root in roots.items():
        files = find_qm9_files(root)
        skip = read_uncharacterized(files.uncharacterized()) if files.uncharacterized() else set()
        data[key] = process_qm9(files, skip, dtype=torch.float64)[0]
    atom_cols = [t for t, (_, col, _, _) in enumerate(QM9_TARGETS) if col in ATOMIZATION_COLUMNS]
    other = [t for t in range(len(QM9_TARGETS)) if t not in atom_cols]
    ref = data["moleculenet"]
    for key, d in data.items():
        assert torch.equal(d.pos, ref.pos) and torch.equal(d.y[:, other], ref.y[:, other]), key
        # MoleculeNet's *_atom columns are rounded to 12 digits; these sources compute them
        torch.testing.assert_close(d.y[:, atom_cols], ref.y[:, atom_cols], rtol=1e-11, atol=0)


def test_xyz_folder_and_archive_in_any_order(tmp_path, molecules):
    write_xyz_archive(tmp_path / "a" / "dsgdb9nsd.xyz.tar.bz2", molecules, shuffle=3)
    write_xyz_archive(tmp_path / "b" / "dsgdb9nsd.xyz.tar.bz2", molecules)
    assert_same(QM9(tmp_path / "a", cache=False), QM9(tmp_path / "b", cache=False))
    assert [int(d.idx) for d in QM9(tmp_path / "a", cache=False)] == list(range(21))


def test_skip_uncharacterized_false(tmp_path, molecules):
    roots = write_all(tmp_path, molecules)
    for key in ("moleculenet", "xyz-folder", "xyz-archive"):
        assert len(QM9(roots[key], skip_uncharacterized=False, cache=False)) == 21
    with pytest.raises(ValueError, match=r"qm9pack's tables hold only the 130,831 characterized.*3,054"):
        QM9(roots["qm9pack"], skip_uncharacterized=False)


def test_source_selection(tmp_path, molecules):
    root = tmp_path / "all"
    write_moleculenet(root / "raw", molecules)
    write_xyz_folder(root / "raw", molecules[:5])
    write_qm9pack(root, molecules[:3])
    assert QM9(root, cache=False).source == "moleculenet"                      # auto: MoleculeNet first
    assert len(QM9(root, source="xyz", cache=False)) == 5
    assert len(QM9(root, source="qm9pack", cache=False)) == 3                  # the root's tables, not the package
    with pytest.raises(ValueError, match=r"source must be 'auto' or one of 'moleculenet', 'xyz', 'qm9pack'"):
        QM9(root, source="sdf")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match=r"expected dsgdb9nsd_\*\.xyz files or dsgdb9nsd\.xyz\.tar\.bz2"):
        QM9(empty, source="xyz")
    with pytest.raises(ValueError, match="download=True fetches MoleculeNet's qm9.zip only"):
        QM9(empty, source="xyz", download=True)


def test_cache_per_source_and_xyz_folder_stats(tmp_path, molecules):
    root = tmp_path / "r"
    write_moleculenet(root / "raw", molecules)
    write_xyz_folder(root / "raw", molecules)
    cache = root / "processed" / QM9.cache_name
    assert "edge_index" in QM9(root)[0]
    assert "edge_index" not in QM9(root, source="xyz")[0]                      # another source rebuilds
    stamp = cache.stat().st_mtime_ns
    assert len(QM9(root, source="xyz")) == 21 and cache.stat().st_mtime_ns == stamp   # reused
    one = root / "raw" / xyz_name(molecules[0])
    one.write_text(one.read_text().replace("-40.47893", "-40.0"))
    assert QM9(root, source="xyz")[0].y[0, 7].item() == pytest.approx(-40.0 * 27.211386246)   # edited: rebuilt


def test_cache_write_errors_name_the_folder(tmp_path, monkeypatch):
    root = tmp_path / "ro"
    shutil.copytree(QM9_DIR / "xyz", root)
    folder = root / "processed"

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(torch, "save", full_disk)
    with pytest.raises(CacheWriteError) as info:
        QM9(root)
    message = str(info.value)
    assert "\n" not in message and repr(str(folder)) in message and "No space left on device" in message
    assert "cache=False" in message and info.value.errno == errno.ENOSPC
    assert not [p for p in folder.iterdir()]                                   # no temporary file left
    assert len(QM9(root, cache=False)) == 21

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(os, "makedirs", read_only)
    with pytest.raises(CacheWriteError, match=r"Read-only file system"):
        save_cache(tmp_path / "elsewhere" / "c.pt", "fp", {})


def test_moleculenet_names_must_be_gdb_indices(tmp_path, molecules):
    write_moleculenet(tmp_path / "raw", molecules)
    for name in ("gdb9.sdf", "gdb9.sdf.csv"):
        p = tmp_path / "raw" / name
        p.write_text(p.read_text().replace("gdb_5\n", "mol_5\n").replace("gdb_5,", "mol_5,"))
    with pytest.raises(FileFormatError, match=r"gdb9\.sdf:\d+ \(record 4\): record 4 is named 'mol_5'"):
        QM9(tmp_path, cache=False)


def test_elements_outside_qm9_name_file_and_line(tmp_path, molecules):
    write_xyz_folder(tmp_path, molecules)
    p = tmp_path / xyz_name(molecules[2])                                      # water: O H H
    p.write_text(p.read_text().replace("\nO\t", "\nS\t"))
    with pytest.raises(FileFormatError, match=r"dsgdb9nsd_000003\.xyz:3: element Z=16 is not one of QM9's"):
        QM9(tmp_path, cache=False)
    write_moleculenet(tmp_path / "m", molecules)
    sdf = tmp_path / "m" / "gdb9.sdf"
    sdf.write_text(sdf.read_text().replace(" O   0", " S   0", 1))
    with pytest.raises(FileFormatError, match=r"gdb9\.sdf:33: element Z=16"):
        QM9(tmp_path / "m", cache=False)


def test_duplicate_index_names_both_files(tmp_path, molecules):
    write_xyz_folder(tmp_path, molecules)
    (tmp_path / "dsgdb9nsd_999999.xyz").write_text((tmp_path / xyz_name(molecules[3])).read_text())
    with pytest.raises(ValueError, match=r"molecule 4 appears twice: in .*dsgdb9nsd_000004\.xyz:3 and in "
                                         r".*dsgdb9nsd_999999\.xyz:3"):
        QM9(tmp_path, cache=False)
