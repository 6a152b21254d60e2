"""Reader for the QM9 tables shipped by the ``qm9pack`` package (``pip install qm9pack``).

qm9pack 1.0.3 (R. Ramakrishnan, MIT licence) holds the whole of QM9 as CSV files in its
``qm9pack/data/`` folder: ``qm9_part1.csv``, ``qm9_part2.csv``, ``qm9_part3.csv`` (the molecules
in index order, 130,831 rows in all) and ``qm9_polarizability.csv`` (polarizability tensors,
not read here). Each part has the header [`COLUMNS`][] and one row per molecule, the fields
of its ``dsgdb9nsd_NNNNNN.xyz`` file ([`geomlin.datasets.io.dsgdb9nsd`][]), text
fields quoted::

    "dsgdb9nsd_000001.xyz",1,"C","InChI=1S/CH4/h1H4",5,"[4,1,0,0,0]","['C','H','H','H','H']",
    "[[-0.0126981359,1.0858041578,0.0080009958],...]","[-0.535689,...]","[1341.307,...]",
    157.7118,157.70997,157.70699,0.,13.21,-0.3877,0.1171,0.5048,35.3641,0.044749,-40.47893,
    -40.476062,-40.475117,-40.498597,6.469

(one line in the file). The 15 numeric columns are the properties of the XYZ files' line 2 in
the same order and units. The 3,054 molecules of the original ``uncharacterized.txt`` are not
in the tables: their ``Index`` values are simply missing.

The package is located without importing it ([`installed_data_folder`][]; qm9pack's own
``get_data`` needs pandas and setuptools' ``pkg_resources``), and the files are parsed with a
split of each line at the quote character and vectorised ``numpy.loadtxt`` calls rather than
a general CSV parser, so the rows must keep the quoting above (as qm9pack ships them). Every error is a
[`FileFormatError`][] naming the file and line.
"""

from __future__ import annotations

import importlib.util
import io
import os
import re
from pathlib import Path

import numpy as np

from geomlin.datasets.elements import ATOMIC_NUMBERS
from geomlin.datasets.io.dsgdb9nsd import PROPERTY_NAMES, GDB9Records
from geomlin.validation import FileFormatError, quote_line

#: Header of every ``qm9_part<k>.csv``.
COLUMNS = ("XYZ_file", "Index", "SMILES", "InChi", "N_atoms", "Stoichiometry", "Elements", "XYZ_Ang",
           "Mulliken_pop", "Harmonic_Freq_cmi", "RotA_GHz", "RotB_GHz", "RotC_GHz", "Dipole_debye",
           "Polarizability_bohr3", "HOMO_au", "LUMO_au", "HOMO_LUMO_gap_au", "R2_bohr2", "ZPVE_au",
           "InternalEnergy_0K_au", "InternalEnergy_298K_au", "Enthalphy_298K_au", "GibbsFreeEnergy_298K_au",
           "Heatcapacity_Cv_cal_mol_K")
#: The numeric columns, one per entry of [`PROPERTY_NAMES`][].
PROPERTY_COLUMNS = COLUMNS[10:]
#: File names of the parts, numbered from 1.
PART_PATTERN = re.compile(r"qm9_part(\d+)\.csv")
#: Pieces of a row split at the quote character: 8 quoted fields, the separators around them.
PIECES = 17
#: Pieces that hold exactly one comma (between two quoted fields).
COMMA_PIECES = (4, 8, 10, 12, 14)
INDEX_PIECE, ATOMS_PIECE, TAIL_PIECE = 2, 6, 16
NAME_PIECE, ELEMENTS_PIECE, XYZ_PIECE = 1, 9, 11
PACKAGE = "qm9pack"
#: Element symbols as qm9pack writes them (``b"C"``) -> atomic number.
SYMBOL_TO_Z = {symbol.encode(): z for symbol, z in ATOMIC_NUMBERS.items()}

assert len(PROPERTY_COLUMNS) == len(PROPERTY_NAMES)


def installed_data_folder() -> Path | None:
    """The ``data/`` folder of an installed qm9pack, found without importing it; None if absent."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "data"
    return folder if folder.is_dir() else None


def find_parts(folder: str | os.PathLike) -> list[Path]:
    """``qm9_part1.csv``, ``qm9_part2.csv``, ... of ``folder``, in order; [] when it has none.

    Raises FileNotFoundError naming the first missing part when the numbering has a gap.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return []
    parts = {}
    for entry in os.scandir(folder):
        m = PART_PATTERN.fullmatch(entry.name)
        if m and entry.is_file():
            parts[int(m.group(1))] = Path(entry.path)
    for k in range(1, len(parts) + 1):
        if k not in parts:
            raise FileNotFoundError(f"qm9pack table {folder / f'qm9_part{k}.csv'} is missing; the parts must be "
                                    f"numbered 1..{max(parts)} without gaps")
    return [parts[k] for k in sorted(parts)]


def read_qm9pack(paths: list[str | os.PathLike]) -> GDB9Records:
    """Molecules of qm9pack's ``qm9_part<k>.csv`` tables, concatenated in the order given.

    Parameters
    ----------
    paths : list of str or os.PathLike
        The part files ([`find_parts`][] of a folder or of [`installed_data_folder`][]).

    Returns
    -------
    GDB9Records
        ``index`` from the ``Index`` column, positions from ``XYZ_Ang``, properties from the 15
        numeric columns (file units); ``files`` / ``lines`` name each row.

    Raises
    ------
    FileNotFoundError
        If a file is missing.
    geomlin.validation.FileFormatError
        Naming the file and line, for a wrong header, a row that does not have qm9pack's fields
        and quoting, an ``XYZ_file`` that does not match ``Index``, ``N_atoms`` that disagrees with
        the elements or coordinates, an unknown element, or a malformed or non-finite number.
    """
    files, lines_no, cols = [], [], {k: [] for k in ("name", "index", "atoms", "elements", "xyz", "tail")}
    for path in paths:
        path = os.fspath(path)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"qm9pack table not found: {path}")
        with open(path, "rb") as f:
            data = f.read()
        header = data[:data.find(b"\n")].rstrip(b"\r").decode("utf-8", errors="replace")
        if tuple(header.split(",")) != COLUMNS:
            raise FileFormatError(path, f"expected qm9pack's header {','.join(COLUMNS)!r}, got {header[:200]!r}",
                                  line=1)
        numbers, pieces = _split_lines(path, data)
        files += [path] * len(numbers)
        lines_no += numbers
        for key, piece in zip(cols, pieces):
            cols[key] += piece
    m = len(files)
    if m == 0:
        raise FileFormatError(os.fspath(paths[0]) if paths else "<qm9pack>", "no molecule rows found")
    lines_no = np.asarray(lines_no, dtype=np.int64)

    def where(k):
        return files[k], int(lines_no[k])

    index = _integers(cols["index"], where, "Index")
    num_atoms = _integers(cols["atoms"], where, "N_atoms")
    expected = [b"dsgdb9nsd_%06d.xyz" % i for i in index.tolist()]
    if cols["name"] != expected:
        k = next(k for k, (a, b) in enumerate(zip(cols["name"], expected)) if a != b)
        raise _error(where(k), f"XYZ_file {quote_line(cols['name'][k])} does not match Index {index[k]} "
                     f"(expected {expected[k].decode()!r})")
    num_elements = np.array([e.count(b",") + 1 for e in cols["elements"]])
    num_xyz = np.array([x.count(b"],[") + 1 for x in cols["xyz"]])
    brackets = np.array([x[:2] == b"[[" and x[-2:] == b"]]" for x in cols["xyz"]])
    bad = (num_atoms < 1) | (num_elements != num_atoms) | (num_xyz != num_atoms) | ~brackets
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise _error(where(k), f"N_atoms is {num_atoms[k]} but Elements lists {num_elements[k]} and XYZ_Ang "
                     f"{num_xyz[k]} atoms (XYZ_Ang must be [[x,y,z],...])")
    properties = _loadtxt([t[1:] for t in cols["tail"]], len(PROPERTY_NAMES), where, "numeric columns")
    atom_mol = np.repeat(np.arange(m), num_atoms)
    pos = _loadtxt([x[2:-2].replace(b"],[", b"\n") for x in cols["xyz"]], 3, lambda k: where(atom_mol[k]),
                   "XYZ_Ang coordinates", per_item=num_atoms)
    symbols = b",".join(cols["elements"]).translate(None, b"[]' ").split(b",")
    try:
        z = np.array([SYMBOL_TO_Z[s] for s in symbols], dtype=np.int64)
    except KeyError as err:
        k = int(atom_mol[symbols.index(err.args[0])])
        raise _error(where(k), f"unknown element symbol {quote_line(err.args[0])} in Elements") from None
    return GDB9Records(index, num_atoms, z, pos, properties, files, lines_no, lines_per_atom=0)


def _split_lines(path: str, data: bytes) -> tuple[list[int], list[list[bytes]]]:
    """Line numbers and the name, Index, N_atoms, Elements, XYZ_Ang and numeric-tail fields of every row.

    Each line is split at the quote character (8 quoted fields give 17 pieces); a row that does
    not have qm9pack's fields and quoting raises FileFormatError naming its line.
    """
    numbers, fields = [], [[] for _ in range(6)]
    for no, line in enumerate(data.split(b"\n")[1:], start=2):
        line = line.rstrip(b"\r")
        if not line:
            continue
        p = line.split(b'"')
        if (len(p) != PIECES or p[0] or any(p[k] != b"," for k in COMMA_PIECES) or p[TAIL_PIECE][:1] != b","
                or not all(p[k][:1] == b"," and p[k][-1:] == b"," for k in (INDEX_PIECE, ATOMS_PIECE))):
            raise FileFormatError(path, f"expected a row of {len(COLUMNS)} fields with qm9pack's quoting "
                                  "(XYZ_file, SMILES, InChi, Stoichiometry, Elements, XYZ_Ang, Mulliken_pop and "
                                  f"Harmonic_Freq_cmi in double quotes), got {quote_line(line)}", line=no)
        numbers.append(no)
        for out, piece in zip(fields, (p[NAME_PIECE], p[INDEX_PIECE][1:-1], p[ATOMS_PIECE][1:-1],
                                       p[ELEMENTS_PIECE], p[XYZ_PIECE], p[TAIL_PIECE])):
            out.append(piece)
    return numbers, fields


def _integers(texts: list[bytes], where, what: str) -> np.ndarray:
    try:
        return np.array(texts, dtype="S").astype(np.int64)
    except ValueError:
        k = next(k for k, t in enumerate(texts) if not t.strip().isdigit())
        raise _error(where(k), f"{what} must be an integer, got {quote_line(texts[k])}") from None


def _loadtxt(chunks: list[bytes], width: int, where, what: str, per_item: np.ndarray | None = None) -> np.ndarray:
    """Comma-separated numbers of ``chunks`` (one per row, ``per_item[k]`` lines each) as ``(-1, width)``.

    On a malformed or non-finite number the rows are checked one by one so the error names the
    file and line (``where(k)`` -> ``(file, line)``, ``k`` indexing the output rows).
    """
    try:
        out = np.loadtxt(io.BytesIO(b"\n".join(chunks)), delimiter=",", dtype=np.float64, comments=None, ndmin=2)
        ok = out.shape == (len(chunks) if per_item is None else int(per_item.sum()), width)
    except ValueError:
        ok = False
    if ok and np.isfinite(out).all():
        return out
    if ok:
        k = int(np.flatnonzero(~np.isfinite(out).all(axis=1))[0])
        raise _error(where(k), f"non-finite (NaN or infinite) value in the {what}")
    row = 0
    for chunk in chunks:
        for part in chunk.split(b"\n"):
            fields = part.split(b",")
            bad = [f for f in fields if not _is_number(f)]
            if len(fields) != width or bad:
                detail = f"malformed number {quote_line(bad[0])}" if bad else f"{len(fields)} values instead of {width}"
                raise _error(where(row), f"{detail} in the {what}")
            row += 1
    raise _error(where(0), f"could not read the {what}")


def _error(where: tuple[str, int], message: str) -> FileFormatError:
    return FileFormatError(where[0], message, line=where[1])


def _is_number(token: bytes) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


