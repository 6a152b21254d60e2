"""Reader for plain and extended XYZ trajectories.

A frame is: the atom count; a comment line; one line per atom ``symbol x y z
[extra columns]``. The comment line holds the energy in one of two ways:

* plain XYZ (MD17 / schnetpack snippets): the first field is the energy;
* extended XYZ (ASE, Kapil et al.): ``key=value`` pairs such as ``energy=-97.2``
  and ``Properties=species:S:1:pos:R:3:forces:R:3`` naming the atom columns.

Forces come from a ``forces`` (or ``force``) property, or, for plain XYZ, from
three extra columns after the position.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

import numpy as np

from geomlin.datasets.elements import ATOMIC_NUMBERS

_PAIR = re.compile(r'([A-Za-z_][\w\-]*)\s*=\s*("[^"]*"|\'[^\']*\'|\{[^}]*\}|\S+)')
ENERGY_KEYS = ("energy", "Energy", "E", "total_energy", "free_energy")
FORCE_KEYS = ("forces", "force", "F")


@dataclass
class XYZFrame:
    """One frame: ``z (N,)`` int64, ``pos (N, 3)`` float64, ``energy`` float or None,
    ``forces (N, 3)`` float64 or None, and the parsed comment ``info`` (extended XYZ pairs)."""

    z: np.ndarray
    pos: np.ndarray
    energy: float | None
    forces: np.ndarray | None
    info: dict[str, str]


def parse_comment(comment: str) -> dict[str, str]:
    """``key=value`` pairs of an extended-XYZ comment line (quotes stripped); {} for a plain comment."""
    out = {}
    for key, value in _PAIR.findall(comment):
        if value[:1] in "\"'{" and len(value) >= 2:
            value = value[1:-1]
        out[key] = value
    return out


def _properties(spec: str, where: str) -> dict[str, tuple[int, int, str]]:
    """``Properties=name:type:count:...`` -> {name: (first column, count, type)}."""
    parts = spec.split(":")
    if len(parts) % 3:
        raise ValueError(f"{where}: malformed Properties={spec!r}; expected name:type:count triples")
    out, col = {}, 0
    for k in range(0, len(parts), 3):
        name, typ, count = parts[k], parts[k + 1], int(parts[k + 2])
        out[name] = (col, count, typ)
        col += count
    return out


def read_xyz(path: str | os.PathLike) -> list[XYZFrame]:
    """All frames of an XYZ file; see the module docstring for the accepted layouts.

    Raises FileNotFoundError for a missing file and ValueError naming the file, frame and line for
    a bad atom count, a truncated frame, an unknown element, a malformed or non-finite number.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"XYZ file not found: {path}")
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    frames, i, n = [], 0, len(lines)
    while i < n:
        if not lines[i].strip():
            i += 1
            continue
        where = f"{path}: frame {len(frames)} (line {i + 1})"
        try:
            count = int(lines[i].split()[0])
        except ValueError:
            raise ValueError(f"{where}: expected the atom count, got {lines[i]!r}") from None
        if count < 1:
            raise ValueError(f"{where}: atom count must be >= 1, got {count}")
        if i + 2 + count > n:
            raise ValueError(f"{where}: truncated frame: {count} atoms announced but only {max(n - i - 2, 0)} "
                             "atom lines follow")
        comment = lines[i + 1]
        info = parse_comment(comment)
        rows = [line.split() for line in lines[i + 2:i + 2 + count]]
        props = _properties(info["Properties"], where) if "Properties" in info else None
        frames.append(_frame(rows, comment, info, props, where, i + 2))
        i += 2 + count
    if not frames:
        raise ValueError(f"{path}: no XYZ frames found (empty file?)")
    return frames


def _frame(rows, comment, info, props, where, first_line) -> XYZFrame:
    widths = {len(r) for r in rows}
    if props is not None:
        need = sum(c for _, c, _ in props.values())
        if min(widths) < need:
            raise ValueError(f"{where}: Properties announce {need} columns but an atom line has {min(widths)}")
        sp_col = props.get("species", (0, 1, "S"))[0]
        if "pos" not in props:
            raise ValueError(f"{where}: Properties lack 'pos'")
        pos_col = props["pos"][0]
        force_col = next((props[k][0] for k in FORCE_KEYS if k in props), None)
    else:
        if min(widths) < 4:
            raise ValueError(f"{where}: atom lines need 'symbol x y z', got {min(widths)} columns")
        sp_col, pos_col = 0, 1
        force_col = 4 if min(widths) >= 7 else None
    z = np.empty(len(rows), dtype=np.int64)
    for k, r in enumerate(rows):
        sym = r[sp_col]
        if sym.isdigit():
            z[k] = int(sym)
            continue
        zz = ATOMIC_NUMBERS.get(sym[:1].upper() + sym[1:].lower())
        if zz is None:
            raise ValueError(f"{where}, line {first_line + k + 1}: unknown element symbol {sym!r}")
        z[k] = zz
    try:
        pos = np.array([r[pos_col:pos_col + 3] for r in rows], dtype=np.float64)
        forces = None if force_col is None else np.array([r[force_col:force_col + 3] for r in rows], dtype=np.float64)
    except ValueError as err:
        raise ValueError(f"{where}: malformed number in an atom line ({err})") from None
    for name, arr in (("coordinate", pos), ("force", forces)):
        if arr is not None and not np.isfinite(arr).all():
            k = int(np.flatnonzero(~np.isfinite(arr).all(axis=1))[0])
            raise ValueError(f"{where}, line {first_line + k + 1}: non-finite (NaN or infinite) {name}")
    energy = None
    key = next((k for k in ENERGY_KEYS if k in info), None)
    if key is not None:
        energy = _float(info[key], where, f"{key}=")
    elif not info and comment.split():
        try:
            energy = float(comment.split()[0])
        except ValueError:
            energy = None              # free-text comment: no energy
    if energy is not None and not np.isfinite(energy):
        raise ValueError(f"{where}: non-finite energy on the comment line {comment!r}")
    return XYZFrame(z, pos, energy, forces, info)


def _float(text: str, where: str, what: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{where}: {what} value {text!r} is not a number") from None
