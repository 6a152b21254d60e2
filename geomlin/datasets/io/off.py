"""Reader for the Object File Format (``.off``), as used by ModelNet.

Layout: a header line ``OFF``; the counts ``nv nf ne``; ``nv`` vertex lines
``x y z``; ``nf`` face lines ``k i1 ... ik [colour]``. ``#`` starts a comment.
Some ModelNet files fuse the first two lines (``OFF490 518 0``); that header bug
is accepted. Faces with four or more vertices are fan-triangulated.
"""

from __future__ import annotations

import os

import numpy as np

from geomlin.datasets.io.mesh_utils import fan_triangulate
from geomlin.validation import FileFormatError, check_file

#: Coordinates per vertex line (extra columns, e.g. colours, are ignored).
VERTEX_COLUMNS = 3


def read_off(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """Vertices ``(V, 3)`` float64 and triangles ``(T, 3)`` int64 of an OFF file.

    Raises FileNotFoundError for a missing file; [`FileFormatError`][]
    (a ValueError) naming the file and line for a missing ``OFF`` header, malformed counts, too
    few vertex / face lines, non-numeric or non-finite values and out-of-range face indices. A
    file with no faces returns ``(V, 3)`` and ``(0, 3)``; samplers reject such an empty mesh with
    their own error.
    """
    path = os.fspath(check_file(path, "path"))
    with open(path, encoding="utf-8", errors="replace") as f:
        raw = f.read().splitlines()
    lines = [(k, ln.split("#", 1)[0].strip()) for k, ln in enumerate(raw)]
    lines = [(k, ln) for k, ln in lines if ln]
    if not lines or not lines[0][1].upper().lstrip("CN").startswith("OFF"):
        raise FileFormatError(path, "not an OFF file (first line must start with 'OFF', got "
                              f"{lines[0][1][:20] if lines else ''!r})", line=lines[0][0] + 1 if lines else None)
    head = lines[0][1]
    rest = head[head.upper().index("OFF") + 3:].strip()
    body = lines[1:]
    if rest:                                   # ModelNet header bug: "OFF<nv> <nf> <ne>" on one line
        counts_line, counts_no = rest, lines[0][0]
    else:
        if not body:
            raise FileFormatError(path, "missing the counts line 'nv nf ne' after the OFF header")
        (counts_no, counts_line), body = body[0], body[1:]
    try:
        nv, nf = (int(t) for t in counts_line.split()[:2])
    except ValueError:
        raise FileFormatError(path, f"malformed counts line {counts_line!r}; expected 'nv nf ne'",
                              line=counts_no + 1) from None
    if nv < 0 or nf < 0:
        raise FileFormatError(path, f"negative counts {nv}, {nf}", line=counts_no + 1)
    if len(body) < nv + nf:
        raise FileFormatError(path, f"truncated file: header announces {nv} vertices and {nf} faces but only "
                              f"{len(body)} data lines follow")
    vlines = body[:nv]
    for no, ln in vlines:
        parts = ln.split()
        if len(parts) < VERTEX_COLUMNS:
            raise FileFormatError(path, f"vertex line {ln!r} needs {VERTEX_COLUMNS} coordinates 'x y z'",
                                  line=no + 1)
    try:
        verts = np.array([ln.split()[:VERTEX_COLUMNS] for _, ln in vlines], dtype=np.float64).reshape(nv, 3)
    except ValueError:
        for no, ln in vlines:
            try:
                [float(p) for p in ln.split()[:VERTEX_COLUMNS]]
            except ValueError:
                raise FileFormatError(path, f"malformed vertex line {ln!r}", line=no + 1) from None
        raise
    bad = ~np.isfinite(verts).all(axis=1)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise FileFormatError(path, f"vertex {k} has a NaN or infinite coordinate", line=vlines[k][0] + 1)
    flines = body[nv:nv + nf]
    polys = []
    for no, ln in flines:
        try:
            row = [int(t) for t in ln.split()]
        except ValueError:
            row = None
        if row is None or row[0] < 3 or len(row) < 1 + row[0]:
            raise FileFormatError(path, f"malformed face line {ln!r}: needs a vertex count >= 3 followed by "
                                  "that many integer indices", line=no + 1)
        poly = row[1:1 + row[0]]
        if min(poly) < 0 or max(poly) >= nv:
            raise FileFormatError(path, f"face line {ln!r} refers to a vertex outside 0..{nv - 1}", line=no + 1)
        polys.append(poly)
    sizes = {len(p) for p in polys}
    faces = fan_triangulate(np.array(polys) if len(sizes) == 1 else polys, path) if polys else \
        np.zeros((0, 3), dtype=np.int64)
    return verts, faces
