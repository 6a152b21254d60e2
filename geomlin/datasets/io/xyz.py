"""Reader and writer of plain and extended XYZ trajectories.

A frame is: the atom count; a comment line; one line per atom ``symbol x y z
[extra columns]``. The comment line holds the energy in one of two ways:

* plain XYZ (MD17 / schnetpack snippets): the first field is the energy;
* extended XYZ (ASE, Kapil et al.): ``key=value`` pairs such as ``energy=-97.2``
  and ``Properties=species:S:1:pos:R:3:forces:R:3`` naming the atom columns.

Column layout. Every atom line of a frame must have the same number of columns (a line that
lacks a value would otherwise shift the columns after it). Plain XYZ has 4 columns
(``symbol x y z``) or 7 (plus ``fx fy fz``); any other width needs an extended-XYZ
``Properties=`` spec naming the columns. Extended XYZ lines have exactly the columns the spec
announces. Forces come from a ``forces`` (or ``force``, ``F``) property of 3 real columns.

Periodic cells (extended XYZ, as ASE writes them): ``Lattice="a1x a1y a1z a2x a2y a2z a3x a3y a3z"``
holds the three lattice vectors (rows of the cell, Angstrom) and ``pbc="T T F"`` which of them are
periodic (``T``/``F``, ``True``/``False`` or ``1``/``0``; with a ``Lattice`` and no ``pbc`` all three
are, as in ASE). A ``pbc`` with a periodic axis needs a ``Lattice``; the periodic lattice vectors must
be linearly independent.

Species are element symbols or atomic numbers ``1 ... 118``. Every error is a
[`FileFormatError`][] naming the file, the line and the frame.

[`write_xyz`][] writes frames as extended XYZ (element symbols, ``Lattice=`` and ``pbc=`` for periodic
frames, ``energy=``, a ``forces`` property), which this reader and ASE's read back.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

import numpy as np

from geomlin.datasets.elements import ATOMIC_NUMBERS, MAX_ATOMIC_NUMBER, SYMBOLS
from geomlin.io_atomic import atomic_write_text
from geomlin.validation import FileFormatError, check_file

_PAIR = re.compile(r'([A-Za-z_][\w\-]*)\s*=\s*("[^"]*"|\'[^\']*\'|\{[^}]*\}|\S+)')
ENERGY_KEYS = ("energy", "Energy", "E", "total_energy", "free_energy")
FORCE_KEYS = ("forces", "force", "F")
#: Column counts of plain XYZ atom lines: ``symbol x y z`` and ``symbol x y z fx fy fz``.
PLAIN_WIDTH, PLAIN_WIDTH_FORCES = 4, 7
#: Spellings of the ``pbc=`` flags of extended XYZ.
PBC_FLAGS = {"T": True, "F": False, "True": True, "False": False, "1": True, "0": False}
#: Smallest ``det(Gram) / prod |a_k|^2`` of the periodic lattice vectors (below it they are dependent).
MIN_CELL_SHAPE = 1e-20


@dataclass
class XYZFrame:
    """One frame: ``z (N,)`` int64, ``pos (N, 3)`` float64, ``energy`` float or None,
    ``forces (N, 3)`` float64 or None, the parsed comment ``info`` (extended XYZ pairs), and the
    periodic cell: ``cell (3, 3)`` float64 (lattice vectors as rows) and ``pbc (3,)`` bool, both None
    for a frame without ``Lattice=`` (and without a periodic ``pbc=``); ``line`` is the 1-based line of
    its comment (for errors that concern the whole frame)."""

    z: np.ndarray
    pos: np.ndarray
    energy: float | None
    forces: np.ndarray | None
    info: dict[str, str]
    cell: np.ndarray | None = None
    pbc: np.ndarray | None = None
    line: int = 0


def parse_comment(comment: str) -> dict[str, str]:
    """``key=value`` pairs of an extended-XYZ comment line (quotes stripped); {} for a plain comment."""
    out = {}
    for key, value in _PAIR.findall(comment):
        if value[:1] in "\"'{" and len(value) >= 2:
            value = value[1:-1]
        out[key] = value
    return out


def _properties(spec: str, path: str, line: int, frame: int) -> dict[str, tuple[int, int, str]]:
    """``Properties=name:type:count:...`` -> {name: (first column, count, type)}."""
    parts = spec.split(":")
    if len(parts) % 3:
        raise FileFormatError(path, f"malformed Properties={spec!r}; expected name:type:count triples",
                              line=line, record=frame)
    out, col = {}, 0
    for k in range(0, len(parts), 3):
        name, typ, count = parts[k], parts[k + 1], parts[k + 2]
        if not count.isdigit() or int(count) < 1:
            raise FileFormatError(path, f"Properties={spec!r}: column count of {name!r} must be a positive "
                                  f"integer, got {count!r}", line=line, record=frame)
        out[name] = (col, int(count), typ)
        col += int(count)
    for name in ("pos", *FORCE_KEYS):
        if name in out and (out[name][1] != 3 or out[name][2] != "R"):
            raise FileFormatError(path, f"Properties={spec!r}: {name!r} must be 3 real columns ({name}:R:3), "
                                  f"got {name}:{out[name][2]}:{out[name][1]}", line=line, record=frame)
    if "pos" not in out:
        raise FileFormatError(path, f"Properties={spec!r} lack 'pos' (the positions)", line=line, record=frame)
    return out


def read_xyz(path: str | os.PathLike) -> list[XYZFrame]:
    """All frames of an XYZ file; see the module docstring for the accepted layouts.

    Raises FileNotFoundError for a missing file and [`FileFormatError`][]
    (a ValueError) naming the file, line and frame for a bad atom count, a truncated frame, atom
    lines of unequal width, an unknown element or atomic number, a malformed or non-finite number.
    """
    path = os.fspath(check_file(path, "path"))
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    frames, i, n = [], 0, len(lines)
    while i < n:
        if not lines[i].strip():
            i += 1
            continue
        frame = len(frames)
        try:
            count = int(lines[i].split()[0])
        except ValueError:
            raise FileFormatError(path, f"expected the atom count of frame {frame}, got {lines[i]!r}",
                                  line=i + 1, record=frame) from None
        if count < 1:
            raise FileFormatError(path, f"atom count must be >= 1, got {count}", line=i + 1, record=frame)
        if i + 2 + count > n:
            raise FileFormatError(path, f"truncated frame: {count} atoms announced but only "
                                  f"{max(n - i - 2, 0)} atom lines follow", line=i + 1, record=frame)
        comment = lines[i + 1]
        info = parse_comment(comment)
        props = _properties(info["Properties"], path, i + 2, frame) if "Properties" in info else None
        rows = [line.split() for line in lines[i + 2:i + 2 + count]]
        frames.append(_frame(rows, comment, info, props, path, frame, i + 3))
        i += 2 + count
    if not frames:
        raise FileFormatError(path, "no XYZ frames found (empty file?)")
    return frames


def _species(token: str, path: str, line: int, frame: int) -> int:
    """Atomic number of an element symbol or of an integer token in ``1 ... 118``."""
    try:
        z = int(token)
    except ValueError:
        z = ATOMIC_NUMBERS.get(token[:1].upper() + token[1:].lower())
        if z is None:
            raise FileFormatError(path, f"unknown element symbol {token!r}", line=line, record=frame) from None
        return z
    if not 1 <= z <= MAX_ATOMIC_NUMBER:
        raise FileFormatError(path, f"atomic number must be in 1..{MAX_ATOMIC_NUMBER}, got {z}",
                              line=line, record=frame)
    return z


def _numbers(rows, first_col: int, path: str, frame: int, first_line: int, what: str) -> np.ndarray:
    try:
        return np.array([r[first_col:first_col + 3] for r in rows], dtype=np.float64).reshape(len(rows), 3)
    except ValueError:
        for k, r in enumerate(rows):
            try:
                [float(t) for t in r[first_col:first_col + 3]]
            except ValueError:
                raise FileFormatError(path, f"malformed number in the {what} columns "
                                      f"{' '.join(r[first_col:first_col + 3])!r}",
                                      line=first_line + k, record=frame) from None
        raise


def _frame(rows, comment, info, props, path, frame, first_line) -> XYZFrame:
    """One frame from its atom lines (``first_line`` = 1-based line number of the first atom line)."""
    width = len(rows[0])
    for k, r in enumerate(rows):
        if len(r) != width:
            raise FileFormatError(path, f"atom line has {len(r)} columns but the frame's first atom line "
                                  f"(line {first_line}) has {width}; every atom line needs the same columns",
                                  line=first_line + k, record=frame)
    if props is not None:
        need = sum(c for _, c, _ in props.values())
        if width != need:
            raise FileFormatError(path, f"Properties announce {need} columns but the atom lines have {width}",
                                  line=first_line, record=frame)
        sp_col = props.get("species", (0, 1, "S"))[0]
        pos_col = props["pos"][0]
        force_col = next((props[k][0] for k in FORCE_KEYS if k in props), None)
    else:
        if width not in (PLAIN_WIDTH, PLAIN_WIDTH_FORCES):
            raise FileFormatError(path, f"plain XYZ atom lines need {PLAIN_WIDTH} columns 'symbol x y z' or "
                                  f"{PLAIN_WIDTH_FORCES} 'symbol x y z fx fy fz', got {width}; name other "
                                  "columns with an extended-XYZ Properties= comment", line=first_line,
                                  record=frame)
        sp_col, pos_col = 0, 1
        force_col = 4 if width == PLAIN_WIDTH_FORCES else None
    z = np.array([_species(r[sp_col], path, first_line + k, frame) for k, r in enumerate(rows)], dtype=np.int64)
    pos = _numbers(rows, pos_col, path, frame, first_line, "position")
    forces = None if force_col is None else _numbers(rows, force_col, path, frame, first_line, "force")
    for name, arr in (("coordinate", pos), ("force", forces)):
        if arr is not None and not np.isfinite(arr).all():
            k = int(np.flatnonzero(~np.isfinite(arr).all(axis=1))[0])
            raise FileFormatError(path, f"non-finite (NaN or infinite) {name}", line=first_line + k, record=frame)
    energy = None
    key = next((k for k in ENERGY_KEYS if k in info), None)
    if key is not None:
        try:
            energy = float(info[key])
        except ValueError:
            raise FileFormatError(path, f"{key}= value {info[key]!r} is not a number", line=first_line - 1,
                                  record=frame) from None
    elif not info and comment.split():
        try:
            energy = float(comment.split()[0])
        except ValueError:
            energy = None              # free-text comment: no energy
    if energy is not None and not np.isfinite(energy):
        raise FileFormatError(path, f"non-finite energy on the comment line {comment!r}", line=first_line - 1,
                              record=frame)
    cell, pbc = _cell(info, path, first_line - 1, frame)
    return XYZFrame(z, pos, energy, forces, info, cell, pbc, first_line - 1)


def _cell(info: dict[str, str], path: str, line: int, frame: int) -> tuple[np.ndarray | None, np.ndarray | None]:
    """``cell (3, 3)`` and ``pbc (3,)`` of a frame from its ``Lattice=`` and ``pbc=`` pairs (None, None without)."""
    pbc = None
    if "pbc" in info:
        flags = info["pbc"].split()
        if len(flags) != 3 or any(f not in PBC_FLAGS for f in flags):
            raise FileFormatError(path, f"pbc={info['pbc']!r} must be three flags T or F (e.g. pbc=\"T T T\")",
                                  line=line, record=frame)
        pbc = np.array([PBC_FLAGS[f] for f in flags])
    if "Lattice" not in info:
        if pbc is not None and pbc.any():
            raise FileFormatError(path, f"pbc={info['pbc']!r} makes the frame periodic but there is no Lattice= "
                                  "(the cell's three lattice vectors)", line=line, record=frame)
        return None, None
    try:
        cell = np.array(info["Lattice"].split(), dtype=np.float64)
    except ValueError:
        raise FileFormatError(path, f"Lattice={info['Lattice']!r} must be 9 numbers (three lattice vectors)",
                              line=line, record=frame) from None
    if cell.shape != (9,):
        raise FileFormatError(path, f"Lattice={info['Lattice']!r} must be 9 numbers (three lattice vectors), "
                              f"got {cell.size}", line=line, record=frame)
    if not np.isfinite(cell).all():
        raise FileFormatError(path, f"Lattice={info['Lattice']!r} holds a non-finite number", line=line, record=frame)
    cell = cell.reshape(3, 3)
    pbc = np.ones(3, dtype=bool) if pbc is None else pbc
    periodic = cell[pbc]
    gram = periodic @ periodic.T
    if pbc.any() and not np.linalg.det(gram) > MIN_CELL_SHAPE * np.prod(np.diag(gram)):
        raise FileFormatError(path, f"Lattice={info['Lattice']!r}: the periodic lattice vectors (pbc={info.get('pbc', 'T T T')!r}) "
                              "are linearly dependent", line=line, record=frame)
    return cell, pbc


def write_xyz(path: str | os.PathLike, frames) -> None:
    """Write [`XYZFrame`][]s as extended XYZ, atomically ([`geomlin.io_atomic.atomic_write_text`][]).

    Each frame: the atom count; a comment with ``Lattice=`` and ``pbc=`` (periodic frames),
    ``Properties=species:S:1:pos:R:3[:forces:R:3]`` and ``energy=`` (when the frame has them); one
    line ``symbol x y z [fx fy fz]`` per atom. Positions and the lattice are written with 8 decimals,
    energies with 8 and forces with 6 (the frames' units: the writer converts nothing).
    """
    lines = []
    for f in frames:
        comment = []
        if f.cell is not None:
            comment.append('Lattice="' + " ".join(f"{v:.8f}" for v in np.asarray(f.cell, dtype=float).reshape(9)) + '"')
        comment.append("Properties=species:S:1:pos:R:3" + (":forces:R:3" if f.forces is not None else ""))
        if f.energy is not None:
            comment.append(f"energy={float(f.energy):.8f}")
        if f.cell is not None:
            comment.append('pbc="' + " ".join("T" if p else "F" for p in f.pbc) + '"')
        lines += [str(len(f.z)), " ".join(comment)]
        for k, (z, x) in enumerate(zip(np.asarray(f.z).tolist(), np.asarray(f.pos, dtype=float))):
            row = f"{SYMBOLS[z]:<2s} {x[0]:15.8f} {x[1]:15.8f} {x[2]:15.8f}"
            if f.forces is not None:
                row += " {:13.6f} {:13.6f} {:13.6f}".format(*np.asarray(f.forces[k], dtype=float))
            lines.append(row)
    atomic_write_text(path, "\n".join(lines) + "\n")
