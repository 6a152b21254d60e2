"""V2000 SDF reader: values equal the file (independent str.split oracle), clear errors on bad records."""

import numpy as np
import pytest

from geomlin.datasets.io.sdf import read_sdf
from tests.datasets.conftest import QM9_DIR

SDF = QM9_DIR / "gdb9.sdf"


def _split_oracle(path):
    """Independent whitespace-split parse of every record: (names, list of (coords, symbols, bonds))."""
    out = []
    for block in path.read_text().split("$$$$\n"):
        lines = block.splitlines()
        if not lines:
            continue
        na, nb = int(lines[3].split()[0]), int(lines[3].split()[1])
        atoms = [ln.split() for ln in lines[4:4 + na]]
        bonds = [ln.split() for ln in lines[4 + na:4 + na + nb]]
        out.append((lines[0].strip(), np.array([[float(v) for v in a[:3]] for a in atoms]), [a[3] for a in atoms],
                    np.array([[int(b[0]) - 1, int(b[1]) - 1, int(b[2])] for b in bonds])))
    return out


def test_reads_bundled_sample_exactly():
    rec = read_sdf(SDF)
    ref = _split_oracle(SDF)
    assert len(rec) == len(ref) == 21
    off, boff = rec.atom_offsets, rec.bond_offsets
    sym_z = {"H": 1, "C": 6, "N": 7, "O": 8, "F": 9}
    for k, (name, xyz, syms, bonds) in enumerate(ref):
        assert rec.names[k] == name == f"gdb_{k + 1}"
        assert np.array_equal(rec.pos[off[k]:off[k + 1]], xyz)
        assert rec.z[off[k]:off[k + 1]].tolist() == [sym_z[s] for s in syms]
        assert np.array_equal(rec.bonds[boff[k]:boff[k + 1]], bonds.reshape(-1, 3))


def _write(tmp_path, text, name="bad.sdf"):
    p = tmp_path / name
    p.write_text(text)
    return p


def _records(n=3):
    return SDF.read_text().split("$$$$\n")[:n]


def test_truncated_record(tmp_path):
    recs = _records(3)
    lines = recs[2].splitlines()
    text = "$$$$\n".join(recs[:2]) + "$$$$\n" + "\n".join(lines[:6]) + "\n"
    p = _write(tmp_path, text)
    with pytest.raises(ValueError, match=r"bad\.sdf:\d+ \(record 2, 'gdb_3'\): truncated"):
        read_sdf(p)


def test_missing_separator_is_truncated(tmp_path):
    text = "$$$$\n".join(_records(2)) + "$$$$\n" + _records(3)[2].replace("M  END\n", "")
    with pytest.raises(ValueError, match="record 2.*truncated"):
        read_sdf(_write(tmp_path, text.rstrip("\n") + "\n"))


def test_unknown_element(tmp_path):
    recs = _records(2)
    recs[1] = recs[1].replace(" N   0", " Xq  0", 1)
    with pytest.raises(ValueError, match=r"bad\.sdf:\d+ \(record 1, 'gdb_2'\): unknown element symbol 'Xq'"):
        read_sdf(_write(tmp_path, "$$$$\n".join(recs) + "$$$$\n"))


def test_nan_coordinate(tmp_path):
    recs = _records(2)
    lines = recs[1].splitlines()
    lines[5] = "       nan" + lines[5][10:]
    recs[1] = "\n".join(lines) + "\n"
    with pytest.raises(ValueError, match=r"bad\.sdf:21 \(record 1, 'gdb_2'\): non-finite"):
        read_sdf(_write(tmp_path, "$$$$\n".join(recs) + "$$$$\n"))


def test_malformed_coordinate_and_counts(tmp_path):
    recs = _records(1)
    lines = recs[0].splitlines()
    lines[4] = "   -0.01x7" + lines[4][10:]
    with pytest.raises(ValueError, match="record 0.*malformed coordinates"):
        read_sdf(_write(tmp_path, "\n".join(lines) + "\n$$$$\n"))
    lines = recs[0].splitlines()
    lines[3] = "  x  4  0" + lines[3][9:]
    with pytest.raises(ValueError, match="record 0.*malformed counts line"):
        read_sdf(_write(tmp_path, "\n".join(lines) + "\n$$$$\n", "bad2.sdf"))


def test_bond_to_missing_atom(tmp_path):
    recs = _records(1)
    recs[0] = recs[0].replace("  1  5  1  0", "  1  9  1  0")
    with pytest.raises(ValueError, match="record 0.*outside 1..5"):
        read_sdf(_write(tmp_path, recs[0] + "$$$$\n"))


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.sdf"):
        read_sdf(tmp_path / "nope.sdf")


def test_data_items(tmp_path):
    rec = _records(1)[0].replace("M  END\n", "M  END\n> <energy>\n-1.5\n\n> <label> (7)\nactive\n\n")
    out = read_sdf(_write(tmp_path, rec + "$$$$\n"))
    assert out.properties[0] == {"energy": "-1.5", "label": "active"}


def _v2000(name, symbols, coords, bonds):
    lines = [name, "  geomlin-test", "", f"{len(symbols):3d}{len(bonds):3d}  0  0  0  0  0  0  0  0999 V2000"]
    for s, (x, y, z) in zip(symbols, coords):
        lines.append(f"{x:10.4f}{y:10.4f}{z:10.4f} {s:<3} 0  0  0  0  0  0  0  0  0  0  0  0")
    lines += [f"{i + 1:3d}{j + 1:3d}{t:3d}  0" for i, j, t in bonds]
    return "\n".join([*lines, "M  END", "$$$$"]) + "\n"


def test_round_trip_random_molecules(tmp_path):
    """Property test: random molecules written in V2000 layout are read back exactly (4-decimal coords)."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    symbols = ["H", "C", "N", "O", "F", "S", "Cl", "Br"]
    z_of = {"H": 1, "C": 6, "N": 7, "O": 8, "F": 9, "S": 16, "Cl": 17, "Br": 35}
    coord = st.integers(-999_999, 999_999).map(lambda v: v / 1e4)
    molecule = st.integers(1, 12).flatmap(lambda n: st.tuples(
        st.lists(st.sampled_from(symbols), min_size=n, max_size=n),
        st.lists(st.tuples(coord, coord, coord), min_size=n, max_size=n),
        st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1), st.integers(1, 4)), max_size=2 * n)))

    @settings(max_examples=40, deadline=None)
    @given(st.lists(molecule, min_size=1, max_size=4))
    def check(mols):
        text = "".join(_v2000(f"m{k}", *m) for k, m in enumerate(mols))
        p = tmp_path / "rt.sdf"
        p.write_text(text)
        rec = read_sdf(p)
        assert rec.names == [f"m{k}" for k in range(len(mols))]
        assert rec.z.tolist() == [z_of[s] for m in mols for s in m[0]]
        assert np.array_equal(rec.pos, np.array([c for m in mols for c in m[1]]).reshape(-1, 3))
        assert rec.bonds.tolist() == [list(b) for m in mols for b in m[2]]

    check()
