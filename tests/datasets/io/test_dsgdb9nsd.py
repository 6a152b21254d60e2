"""dsgdb9nsd XYZ reader: values equal the written text (oracle: tests.datasets.qm9_formats), Mathematica
exponents, folders and archives streamed, and errors naming the file and line."""

import bz2
import io
import tarfile

import numpy as np
import pytest

from geomlin.datasets.io.dsgdb9nsd import PROPERTY_NAMES, parse_qm9_xyz, read_qm9_xyz
from geomlin.validation import FileFormatError
from tests.datasets.conftest import QM9_DIR
from tests.datasets.qm9_formats import read_moleculenet_text, write_xyz_archive, write_xyz_folder, xyz_text

ARCHIVE = QM9_DIR / "xyz" / "dsgdb9nsd.xyz.tar.bz2"


@pytest.fixture
def molecules():
    return read_moleculenet_text(QM9_DIR)


def test_bundled_archive_equals_its_text(molecules):
    rec = read_qm9_xyz(ARCHIVE)
    assert rec.index.tolist() == list(range(1, 22)) and rec.num_atoms.sum() == sum(len(m.symbols) for m in molecules)
    off = rec.atom_offsets
    for k, m in enumerate(molecules):
        assert np.array_equal(rec.pos[off[k]:off[k + 1]], m.values)
        assert np.array_equal(rec.properties[k], [float(v) for v in m.properties])
    assert rec.files[0] == f"{ARCHIVE}/dsgdb9nsd_000001.xyz" and len(PROPERTY_NAMES) == 15


def test_mathematica_exponents():
    text = xyz_text(read_moleculenet_text(QM9_DIR)[0])
    assert "*^" in text                                        # methane has coordinates below 0.01
    rec = parse_qm9_xyz([("m.xyz", text.replace("\t13.21\t", "\t1.321*^1\t").encode())])
    assert rec.pos[0, 2] == 0.0080 and rec.pos[1, 0] == 0.0022 and rec.properties[0, 4] == 13.21


def test_folder_equals_archive_and_ignores_other_files(tmp_path, molecules):
    write_xyz_folder(tmp_path / "f", molecules)
    (tmp_path / "f" / "README.txt").write_text("not a molecule")
    a, b = read_qm9_xyz(tmp_path / "f"), read_qm9_xyz(ARCHIVE)
    for key in ("index", "num_atoms", "z", "pos", "properties"):
        assert np.array_equal(getattr(a, key), getattr(b, key)), key
    sub = read_qm9_xyz(ARCHIVE).select(np.array([4, 1]))
    assert sub.index.tolist() == [5, 2] and sub.num_atoms.tolist() == [3, 4]


def test_archive_is_streamed_not_unpacked(tmp_path, molecules, monkeypatch):
    write_xyz_archive(tmp_path / "a.tar.bz2", molecules)
    monkeypatch.setattr(tarfile, "TarFile", None)              # no extraction machinery
    monkeypatch.setattr(bz2, "decompress", None)               # no whole-archive decompression
    assert len(read_qm9_xyz(tmp_path / "a.tar.bz2")) == 21
    assert [p.name for p in tmp_path.iterdir()] == ["a.tar.bz2"]


@pytest.mark.parametrize("fmt", [tarfile.GNU_FORMAT, tarfile.PAX_FORMAT, tarfile.USTAR_FORMAT])
@pytest.mark.parametrize("mode", ["w:bz2", "w:gz", "w:xz", "w"])
def test_tar_layouts_and_compressions(tmp_path, molecules, fmt, mode):
    folder = "q" * (40 if fmt == tarfile.USTAR_FORMAT else 120)     # GNU long names, pax path records
    path = tmp_path / "dsgdb9nsd.xyz.tar"
    with tarfile.open(path, mode, format=fmt) as tar:
        tar.addfile(tarfile.TarInfo(folder))                         # a zero-size entry before the members
        for m in molecules[:4]:
            data = xyz_text(m).encode()
            info = tarfile.TarInfo(f"{folder}/dsgdb9nsd_{m.index:06d}.xyz")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    rec = read_qm9_xyz(path)
    assert rec.index.tolist() == [1, 2, 3, 4] and rec.files[0] == f"{path}/{folder}/dsgdb9nsd_000001.xyz"


def _one(text, name="dsgdb9nsd_000001.xyz"):
    return parse_qm9_xyz([(name, text.encode())])


@pytest.fixture
def water():
    return xyz_text(read_moleculenet_text(QM9_DIR)[2]).splitlines()


@pytest.mark.parametrize("edit, message", [
    (lambda L: ["x"] + L[1:], r"m\.xyz:1: expected the number of atoms, got 'x'"),
    (lambda L: ["0"] + L[1:], r"m\.xyz:1: the number of atoms must be >= 1"),
    (lambda L: L[:5], r"m\.xyz:1: truncated file: 3 atoms announced, so 8 lines"),
    (lambda L: [L[0], "gbd 3" + L[1][5:]] + L[2:], r"m\.xyz:2: expected 'gdb <index>' and 15 properties"),
    (lambda L: [L[0], L[1].rsplit("\t", 2)[0]] + L[2:], r"m\.xyz:2: expected 15 columns \(15 properties"),
    (lambda L: [L[0], L[1].replace("6.002", "6.o02")] + L[2:], r"m\.xyz:2: malformed number '6.o02'"),
    (lambda L: [L[0], L[1].replace("6.002", "nan")] + L[2:], r"m\.xyz:2: non-finite"),
    (lambda L: L[:3] + [L[3].rsplit("\t", 1)[0]] + L[4:], r"m\.xyz:4: expected 5 columns \(atom line"),
    (lambda L: L[:2] + [L[2].replace("0.9775", "0.97.5")] + L[3:], r"m\.xyz:3: malformed number '0.97.5'"),
    (lambda L: L[:4] + [L[4].replace("H", "Xx", 1)] + L[5:], r"m\.xyz:5: unknown element symbol 'Xx'"),
    (lambda L: L[:4] + [L[4].replace("1.3008", "inf")] + L[5:], r"m\.xyz:5: non-finite \(NaN or infinite\) coord"),
    (lambda L: ["2"] + L[1:], r"m\.xyz:5: expected the harmonic frequencies after the 2 atom lines"),
])
def test_errors_name_file_and_line(water, edit, message):
    with pytest.raises(FileFormatError, match=message):
        _one("\n".join(edit(water)) + "\n", name="m.xyz")


def test_archive_errors(tmp_path, molecules):
    bad = tmp_path / "dsgdb9nsd.xyz.tar.bz2"
    bad.write_bytes(b"not an archive at all")
    with pytest.raises(FileFormatError, match=r"dsgdb9nsd\.xyz\.tar\.bz2: not a readable tar archive"):
        read_qm9_xyz(bad)
    write_xyz_archive(bad, molecules)
    bad.write_bytes(bad.read_bytes()[:2000])
    with pytest.raises(FileFormatError, match="not a readable tar archive"):
        read_qm9_xyz(bad)
    empty = tmp_path / "e.tar.bz2"
    with tarfile.open(empty, "w:bz2") as tar:
        tar.addfile(tarfile.TarInfo("README"), io.BytesIO(b""))
    with pytest.raises(FileFormatError, match=r"e\.tar\.bz2: no dsgdb9nsd_\*\.xyz files found"):
        read_qm9_xyz(empty)
    with pytest.raises(FileNotFoundError, match="QM9 XYZ source not found"):
        read_qm9_xyz(tmp_path / "missing.tar.bz2")


def test_error_inside_archive_names_member_and_line(tmp_path, molecules):
    text = xyz_text(molecules[6]).replace("\tC\t", "\tC\t", 1).splitlines()
    text[4] = text[4].replace("\t", " ", 1).rsplit(None, 1)[0]
    path = tmp_path / "x.tar.bz2"
    with tarfile.open(path, "w:bz2") as tar:
        data = ("\n".join(text) + "\n").encode()
        info = tarfile.TarInfo("sub/dsgdb9nsd_000007.xyz")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    with pytest.raises(FileFormatError, match=r"x\.tar\.bz2/sub/dsgdb9nsd_000007\.xyz:5: expected 5 columns"):
        read_qm9_xyz(path)
    assert bz2.decompress(path.read_bytes())[:3]               # a real bzip2 stream
