"""Reader for Wavefront OBJ geometry: ``v x y z`` vertices and ``f`` polygon faces.

Face entries may be ``i``, ``i/t``, ``i//n`` or ``i/t/n``; indices are 1-based and
negative ones count back from the latest vertex. Texture, normal, group and material
lines are ignored; polygons are fan-triangulated.
"""

from __future__ import annotations

import math
import os

import numpy as np

from geomlin.datasets.io.mesh_utils import check_indices, fan_triangulate
from geomlin.validation import FileFormatError, check_file


def read_obj(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """Vertices ``(V, 3)`` float64 and triangles ``(T, 3)`` int64 of an OBJ file.

    Raises FileNotFoundError for a missing file and [`FileFormatError`][]
    (a ValueError) naming the file and line for a malformed vertex or face line, a face index of 0
    or beyond the vertices read so far, non-finite coordinates or out-of-range indices.
    """
    path = os.fspath(check_file(path, "path"))
    verts, polys = [], []
    with open(path, encoding="utf-8", errors="replace") as f:
        for no, line in enumerate(f, start=1):
            parts = line.split()
            if not parts or parts[0] not in ("v", "f"):
                continue
            try:
                if parts[0] == "v":
                    if len(parts) < 4:
                        raise ValueError
                    xyz = [float(t) for t in parts[1:4]]
                    if not all(map(math.isfinite, xyz)):
                        raise FileFormatError(path, f"non-finite vertex coordinate in {line.strip()!r}", line=no)
                    verts.append(xyz)
                else:
                    idx = [int(t.split("/")[0]) for t in parts[1:]]
                    if len(idx) < 3:
                        raise FileFormatError(path, f"face {line.strip()!r} needs at least 3 vertices", line=no)
                    poly = [i - 1 if i > 0 else len(verts) + i for i in idx]
                    if 0 in idx or min(poly) < 0:
                        raise FileFormatError(path, f"face {line.strip()!r} refers to a vertex that does not "
                                              f"exist (indices are 1-based; {len(verts)} vertices so far)",
                                              line=no)
                    polys.append(poly)
            except ValueError as err:
                if isinstance(err, FileFormatError):
                    raise
                raise FileFormatError(path, f"malformed {parts[0]!r} line {line.strip()!r}", line=no) from None
    v = np.asarray(verts, dtype=np.float64).reshape(-1, 3)
    faces = fan_triangulate(polys, path) if polys else np.zeros((0, 3), dtype=np.int64)
    check_indices(faces, len(v), path)
    return v, faces
