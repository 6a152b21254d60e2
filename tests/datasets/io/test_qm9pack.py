"""qm9pack table reader: values equal the written text (oracle: tests.datasets.qm9_formats), parts in
order, the installed package found without importing it, and errors naming the file and line."""

import sys

import numpy as np
import pytest

from geomlin.datasets.io.qm9pack import COLUMNS, find_parts, installed_data_folder, read_qm9pack
from geomlin.validation import FileFormatError
from tests.datasets.conftest import QM9_DIR
from tests.datasets.qm9_formats import QM9PACK_HEADER, read_moleculenet_text, write_qm9pack

SAMPLE = QM9_DIR / "qm9pack"


@pytest.fixture
def molecules():
    return read_moleculenet_text(QM9_DIR)


def test_bundled_table_equals_its_text(molecules):
    rec = read_qm9pack(find_parts(SAMPLE))
    assert rec.index.tolist() == list(range(1, 22)) and rec.lines.tolist() == list(range(2, 23))
    off = rec.atom_offsets
    for k, m in enumerate(molecules):
        assert np.array_equal(rec.pos[off[k]:off[k + 1]], m.values)
        assert np.array_equal(rec.properties[k], [float(v) for v in m.properties])
    assert QM9PACK_HEADER == ",".join(COLUMNS)


def test_parts_in_order_and_gaps_refused(tmp_path, molecules):
    paths = write_qm9pack(tmp_path, molecules, parts=3)
    assert find_parts(tmp_path) == paths and find_parts(tmp_path / "none") == []
    rec = read_qm9pack(paths)
    assert rec.index.tolist() == list(range(1, 22)) and rec.files[-1] == str(paths[2])
    paths[1].unlink()
    with pytest.raises(FileNotFoundError, match=r"qm9_part2\.csv is missing"):
        find_parts(tmp_path)


def test_installed_package_found_without_importing_it():
    folder = installed_data_folder()
    if folder is not None:
        assert (folder / "qm9_part1.csv").is_file()
    assert "qm9pack" not in sys.modules                          # its __init__ imports pandas and pkg_resources


def _row_edit(tmp_path, molecules, old, new, count=1):
    path = write_qm9pack(tmp_path, molecules[:5])[0]
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, count))
    return path


@pytest.mark.parametrize("old, new, message", [
    ("XYZ_file,Index", "File,Index", r"qm9_part1\.csv:1: expected qm9pack's header"),
    ('"dsgdb9nsd_000003.xyz"', "dsgdb9nsd_000003.xyz", r"qm9_part1\.csv:4: expected a row of 25 fields"),
    ('"dsgdb9nsd_000003.xyz"', '"dsgdb9nsd_000033.xyz"', r":4: XYZ_file 'dsgdb9nsd_000033.xyz' does not match Index 3"),
    ('"dsgdb9nsd_000003.xyz",3,', '"dsgdb9nsd_000003.xyz",x,', r"qm9_part1\.csv:4: Index must be an integer, got 'x'"),
    (',3,"[2,0,0,1,0]"', ',4,"[2,0,0,1,0]"', r":4: N_atoms is 4 but Elements lists 3 and XYZ_Ang 3"),
    ("['O','H','H']", "['O','H','H','H']", r":4: N_atoms is 3 but Elements lists 4"),
    ("[-0.0344,0.9775,7.6E-3]", "[-0.0344,0.9775]", r"qm9_part1\.csv:4: 2 values instead of 3 in the XYZ_Ang"),
    ("[-0.0344,0.9775,7.6E-3]", "[-0.0344,0.97x5,7.6E-3]", r":4: malformed number '0.97x5' in the XYZ_Ang"),
    ("[-0.0344,0.9775,7.6E-3]", "[-0.0344,nan,7.6E-3]", r":4: non-finite \(NaN or infinite\) value in the XYZ_Ang"),
    (",6.002\n", ",6.0o2\n", r"qm9_part1\.csv:4: malformed number '6.0o2' in the numeric columns"),
    (",6.002\n", "\n", r"qm9_part1\.csv:4: 14 values instead of 15 in the numeric columns"),
    ("['O','H','H']", "['Xx','H','H']", r"qm9_part1\.csv:4: unknown element symbol 'Xx'"),
])
def test_errors_name_file_and_line(tmp_path, molecules, old, new, message):
    path = _row_edit(tmp_path, molecules, old, new)
    with pytest.raises(FileFormatError, match=message):
        read_qm9pack([path])


def test_empty_and_missing(tmp_path):
    (tmp_path / "qm9_part1.csv").write_text(QM9PACK_HEADER + "\n")
    with pytest.raises(FileFormatError, match="no molecule rows found"):
        read_qm9pack([tmp_path / "qm9_part1.csv"])
    with pytest.raises(FileNotFoundError, match="qm9pack table not found"):
        read_qm9pack([tmp_path / "qm9_part9.csv"])
