"""Reader for the Object File Format (``.off``), as used by ModelNet.

Layout: a header line ``OFF``; the counts ``nv nf ne``; ``nv`` vertex lines
``x y z``; ``nf`` face lines ``k i1 ... ik [colour]``. ``#`` starts a comment.
Some ModelNet files fuse the first two lines (``OFF490 518 0``); that header bug
is accepted. Faces with four or more vertices are fan-triangulated.
"""

from __future__ import annotations

import os

import numpy as np

from geomlin.datasets.io.mesh_utils import check_finite, check_indices, fan_triangulate


def read_off(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """Vertices ``(V, 3)`` float64 and triangles ``(T, 3)`` int64 of an OFF file.

    Raises FileNotFoundError for a missing file; ValueError naming the file (and line) for a
    missing ``OFF`` header, malformed counts, too few vertex / face lines, non-numeric or
    non-finite values and out-of-range face indices. A file with no faces returns ``(V, 3)`` and
    ``(0, 3)``; samplers reject such an empty mesh with their own error.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"OFF file not found: {path}")
    with open(path, encoding="utf-8", errors="replace") as f:
        raw = f.read().splitlines()
    lines = [(k, ln.split("#", 1)[0].strip()) for k, ln in enumerate(raw)]
    lines = [(k, ln) for k, ln in lines if ln]
    if not lines or not lines[0][1].upper().lstrip("CN").startswith("OFF"):
        raise ValueError(f"{path}: not an OFF file (first line must start with 'OFF', got "
                         f"{lines[0][1][:20] if lines else ''!r})")
    head = lines[0][1]
    rest = head[head.upper().index("OFF") + 3:].strip()
    body = lines[1:]
    if rest:                                   # ModelNet header bug: "OFF<nv> <nf> <ne>" on one line
        counts_line, counts_no = rest, lines[0][0]
    else:
        if not body:
            raise ValueError(f"{path}: missing the counts line 'nv nf ne' after the OFF header")
        (counts_no, counts_line), body = body[0], body[1:]
    try:
        nv, nf = (int(t) for t in counts_line.split()[:2])
    except ValueError:
        raise ValueError(f"{path}, line {counts_no + 1}: malformed counts line {counts_line!r}; "
                         "expected 'nv nf ne'") from None
    if nv < 0 or nf < 0:
        raise ValueError(f"{path}, line {counts_no + 1}: negative counts {nv}, {nf}")
    if len(body) < nv + nf:
        raise ValueError(f"{path}: truncated file: header announces {nv} vertices and {nf} faces but only "
                         f"{len(body)} data lines follow")
    vlines = [ln for _, ln in body[:nv]]
    try:
        verts = np.array([ln.split()[:3] for ln in vlines], dtype=np.float64).reshape(nv, 3)
    except ValueError:
        for k, ln in enumerate(vlines):
            parts = ln.split()
            try:
                if len(parts) < 3:
                    raise ValueError
                [float(p) for p in parts[:3]]
            except ValueError:
                raise ValueError(f"{path}, line {body[k][0] + 1}: malformed vertex line {ln!r}") from None
        raise
    check_finite(verts, path)
    flines = body[nv:nv + nf]
    try:
        rows = [[int(t) for t in ln.split()] for _, ln in flines]
    except ValueError:
        for no, ln in flines:
            try:
                [int(t) for t in ln.split()]
            except ValueError:
                raise ValueError(f"{path}, line {no + 1}: malformed face line {ln!r}") from None
        raise
    polys = []
    for (no, ln), row in zip(flines, rows):
        k = row[0]
        if k < 3 or len(row) < 1 + k:
            raise ValueError(f"{path}, line {no + 1}: face line {ln!r} needs a vertex count >= 3 followed by "
                             "that many indices")
        polys.append(row[1:1 + k])
    sizes = {len(p) for p in polys}
    faces = fan_triangulate(np.array(polys) if len(sizes) == 1 else polys, path) if polys else \
        np.zeros((0, 3), dtype=np.int64)
    check_indices(faces, nv, path)
    return verts, faces
