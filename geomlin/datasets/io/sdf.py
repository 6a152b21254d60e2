"""A fast reader for MDL V2000 SD files (3D molecules with bond blocks), no RDKit needed.

The V2000 layout (CTfile formats, BIOVIA 2020): line 1 the name, line 4 the
counts line ``aaabbb...V2000`` (atom and bond counts in columns 1-3 and 4-6),
then one atom line per atom (x, y, z in three 10-character columns, the element
symbol in columns 32-34) and one bond line per bond (first atom, second atom
and bond type in three 3-character columns), then property lines up to
``M  END``, optional data items (``> <tag>`` followed by value lines), and the
record separator ``$$$$``.

Coordinates and bond columns of all records are gathered and converted with
one vectorised numpy call each, which is what makes this reader fast.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from geomlin.datasets.elements import ATOMIC_NUMBERS
from geomlin.validation import FileFormatError, check_file

RECORD_END = "$$$$"
COUNTS_LINE = 3                 # 0-based index of the counts line inside a record
COORD_WIDTH = 10                # x, y, z columns are 10 characters wide
SYMBOL_COLUMNS = slice(31, 34)  # element symbol, columns 32-34 (1-based)
BOND_WIDTH = 3                  # first atom, second atom, bond type: 3 characters each
MIN_ATOM_LINE = 34
MIN_BOND_LINE = 9
BOND_TYPES = {1: "single", 2: "double", 3: "triple", 4: "aromatic"}


@dataclass
class SDFRecords:
    """Molecules of one SD file, stored flat (concatenated over records).

    Attributes
    ----------
    names : list[str]
        record titles (first line of each record), length ``M``.
    num_atoms : np.ndarray
        ``(M,)`` int64 atoms per record.
    num_bonds : np.ndarray
        ``(M,)`` int64 bonds per record.
    pos : np.ndarray
        ``(A, 3)`` float64 coordinates in the file's unit (Angstrom for QM9 / PubChem),
        ``A = num_atoms.sum()``.
    z : np.ndarray
        ``(A,)`` int64 atomic numbers.
    bonds : np.ndarray
        ``(B, 3)`` int64 rows ``(i, j, type)`` with record-local 0-based atom indices and
        the V2000 bond type (1 single, 2 double, 3 triple, 4 aromatic).
    properties : list[dict[str, str]]
        per record, the ``> <tag>`` data items as ``{tag: value string}``.
    atom_lines : np.ndarray | None
        ``(M,)`` int64 1-based line of each record's first atom line, for messages.
    """

    names: list[str]
    num_atoms: np.ndarray
    num_bonds: np.ndarray
    pos: np.ndarray
    z: np.ndarray
    bonds: np.ndarray
    properties: list[dict[str, str]] = field(default_factory=list)
    atom_lines: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.names)

    @property
    def atom_offsets(self) -> np.ndarray:
        """``(M + 1,)`` start of each record's atoms in ``pos`` / ``z``."""
        return np.concatenate([[0], np.cumsum(self.num_atoms)])

    @property
    def bond_offsets(self) -> np.ndarray:
        """``(M + 1,)`` start of each record's bonds in ``bonds``."""
        return np.concatenate([[0], np.cumsum(self.num_bonds)])


def _record_error(path: str, rec: int, name: str, line: int, msg: str) -> FileFormatError:
    """``path:LINE (record REC, 'NAME'): msg`` with the 0-based ``line`` shown 1-based."""
    return FileFormatError(path, msg, line=line + 1, record=f"{rec}, {name!r}")


#: Files larger than this show a progress bar by default.
PROGRESS_BYTES = 16 << 20


def read_sdf(path: str | os.PathLike, parse_properties: bool = True, progress: bool | None = None) -> SDFRecords:
    """Read every record of a V2000 SD file.

    Parameters
    ----------
    path : str | os.PathLike
        the ``.sdf`` file.
    parse_properties : bool
        also collect ``> <tag>`` data items (set False to skip them).
    progress : bool | None
        show a tqdm bar over records (default: for files over 16 MB, e.g. full QM9).

    Returns
    -------
    SDFRecords
        [`SDFRecords`][] with flat float64 positions, int64 atomic numbers and bonds.

    Raises
    ------
    FileNotFoundError
        If the file is missing.
    ValueError
        Naming the file, the record index, its name and the line, for a truncated record, a
        malformed counts / atom / bond line, a V3000 record, an unknown element symbol or a
        non-finite coordinate.
    """
    path = os.fspath(check_file(path, "path"))
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    bar = None
    if progress or (progress is None and len(text) > PROGRESS_BYTES):
        from tqdm.auto import tqdm
        bar = tqdm(total=text.count(RECORD_END), desc=f"reading {os.path.basename(path)}", unit="mol")
    try:
        return parse_sdf_lines(text.splitlines(), path, parse_properties, bar)
    finally:
        if bar is not None:
            bar.close()


def parse_sdf_lines(lines: list[str], path: str = "<sdf>", parse_properties: bool = True,
                    bar=None) -> SDFRecords:
    """Parse the lines of an SD file; see [`read_sdf`][] (``path`` is only used in messages).

    ``bar`` is an optional tqdm bar advanced once per 4096 records.
    """
    names, n_atoms, n_bonds, props = [], [], [], []
    atom_lines, bond_lines = [], []
    atom_starts = []                     # line number of each record's first atom line
    i, n = 0, len(lines)
    while i < n:
        if not lines[i].strip() and all(not s.strip() for s in lines[i:]):
            break                                       # trailing blank lines
        rec, name = len(names), lines[i].strip()
        if i + COUNTS_LINE >= n:
            raise _record_error(path, rec, name, n - 1, "truncated record: file ends before the counts line")
        counts = lines[i + COUNTS_LINE]
        if "V3000" in counts:
            raise _record_error(path, rec, name, i + COUNTS_LINE, "V3000 records are not supported (V2000 only)")
        try:
            na, nb = int(counts[0:3]), int(counts[3:6])
        except ValueError:
            raise _record_error(path, rec, name, i + COUNTS_LINE,
                                f"malformed counts line {counts!r}; expected 'aaabbb ... V2000'") from None
        if na < 1 or nb < 0:
            raise _record_error(path, rec, name, i + COUNTS_LINE, f"a record needs at least one atom and no "
                                f"negative counts, got {na} atoms and {nb} bonds")
        a0 = i + COUNTS_LINE + 1
        b0 = a0 + na
        end = b0 + nb
        if end > n:
            raise _record_error(path, rec, name, n - 1, f"truncated record: counts line announces {na} atoms and "
                                f"{nb} bonds but the file ends after {n - a0} more lines")
        block_a = lines[a0:b0]
        block_b = lines[b0:end]
        for k, line in enumerate(block_a):
            if len(line) < MIN_ATOM_LINE or line.startswith(("M  ", RECORD_END)):
                raise _record_error(path, rec, name, a0 + k, f"truncated record: expected atom line {k + 1} of "
                                    f"{na}, got {line!r}")
        for k, line in enumerate(block_b):
            if len(line) < MIN_BOND_LINE or line.startswith(("M  ", RECORD_END)):
                raise _record_error(path, rec, name, b0 + k, f"truncated record: expected bond line {k + 1} of "
                                    f"{nb}, got {line!r}")
        atom_lines.extend(block_a)
        bond_lines.extend(block_b)
        # Properties up to the record separator.
        j, tags = end, {}
        while j < n and not lines[j].startswith(RECORD_END):
            line = lines[j]
            if parse_properties and line.startswith(">"):
                lt, gt = line.find("<"), line.find(">", line.find("<") + 1)
                tag = line[lt + 1:gt] if 0 <= lt < gt else line[1:].strip()
                values = []
                j += 1
                while j < n and lines[j].strip() and not lines[j].startswith(RECORD_END):
                    values.append(lines[j])
                    j += 1
                tags[tag] = "\n".join(values)
                continue
            j += 1
        if j >= n:
            raise _record_error(path, rec, name, n - 1, f"truncated record: no '{RECORD_END}' separator after the "
                                "bond block")
        names.append(name)
        n_atoms.append(na)
        n_bonds.append(nb)
        atom_starts.append(a0)
        props.append(tags)
        i = j + 1
        if bar is not None and len(names) % 4096 == 0:
            bar.update(4096)
    if bar is not None:
        bar.update(len(names) % 4096)
    if not names:
        raise FileFormatError(path, "no molecule records found (empty file?)")

    num_atoms = np.asarray(n_atoms, dtype=np.int64)
    num_bonds = np.asarray(n_bonds, dtype=np.int64)
    atom_rec = np.repeat(np.arange(len(names)), num_atoms)

    def locate(flat_index: int) -> tuple[int, str, int]:
        r = int(atom_rec[flat_index])
        first = int(num_atoms[:r].sum())
        return r, names[r], atom_starts[r] + flat_index - first

    # Coordinates: three fixed 10-character columns, converted in one numpy call.
    coord_text = "".join([line[: 3 * COORD_WIDTH] for line in atom_lines])
    cols = np.frombuffer(coord_text.encode("ascii", errors="replace"), dtype=f"S{COORD_WIDTH}")
    try:
        pos = cols.astype(np.float64).reshape(-1, 3)
    except ValueError:
        for k, line in enumerate(atom_lines):
            try:
                [float(line[c * COORD_WIDTH:(c + 1) * COORD_WIDTH]) for c in range(3)]
            except ValueError:
                r, name, ln = locate(k)
                raise _record_error(path, r, name, ln, f"malformed coordinates in atom line {line!r}") from None
        raise
    bad = ~np.isfinite(pos).all(axis=1)
    if bad.any():
        r, name, ln = locate(int(np.flatnonzero(bad)[0]))
        raise _record_error(path, r, name, ln, "non-finite (NaN or infinite) coordinate")

    symbols = np.array([line[SYMBOL_COLUMNS] for line in atom_lines], dtype="U3")
    uniq, inverse = np.unique(symbols, return_inverse=True)
    table = np.empty(len(uniq), dtype=np.int64)
    for u, sym in enumerate(uniq):
        key = sym.strip()
        z_u = ATOMIC_NUMBERS.get(key[:1].upper() + key[1:].lower())
        if z_u is None:
            r, name, ln = locate(int(np.flatnonzero(inverse == u)[0]))
            raise _record_error(path, r, name, ln, f"unknown element symbol {key!r}")
        table[u] = z_u
    z = table[inverse.reshape(-1)] if len(uniq) else np.zeros(0, dtype=np.int64)

    bond_text = "".join([line[: 3 * BOND_WIDTH] for line in bond_lines])
    bcols = np.frombuffer(bond_text.encode("ascii", errors="replace"), dtype=f"S{BOND_WIDTH}")
    bond_rec = np.repeat(np.arange(len(names)), num_bonds)
    try:
        bonds = bcols.astype(np.int64).reshape(-1, 3)
    except ValueError:
        for k, line in enumerate(bond_lines):
            try:
                [int(line[c * BOND_WIDTH:(c + 1) * BOND_WIDTH]) for c in range(3)]
            except ValueError:
                r = int(bond_rec[k])
                raise _record_error(path, r, names[r], atom_starts[r] + int(num_atoms[r]) + k
                                    - int(num_bonds[:r].sum()), f"malformed bond line {line!r}") from None
        raise
    bonds[:, :2] -= 1
    if len(bonds):
        limit = num_atoms[bond_rec]
        bad = (bonds[:, 0] < 0) | (bonds[:, 1] < 0) | (bonds[:, 0] >= limit) | (bonds[:, 1] >= limit)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            r = int(bond_rec[k])
            raise _record_error(path, r, names[r], atom_starts[r] + int(num_atoms[r]) + k - int(num_bonds[:r].sum()),
                                f"bond refers to atom outside 1..{int(num_atoms[r])}: {bond_lines[k]!r}")
    return SDFRecords(names, num_atoms, num_bonds, pos, z, bonds, props,
                      np.asarray(atom_starts, dtype=np.int64) + 1)
