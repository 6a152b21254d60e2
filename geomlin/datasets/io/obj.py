"""Reader for Wavefront OBJ geometry: ``v x y z`` vertices and ``f`` polygon faces.

Face entries may be ``i``, ``i/t``, ``i//n`` or ``i/t/n``; indices are 1-based and
negative ones count back from the latest vertex. Texture, normal, group and material
lines are ignored; polygons are fan-triangulated.
"""

from __future__ import annotations

import os

import numpy as np

from geomlin.datasets.io.mesh_utils import check_finite, check_indices, fan_triangulate


def read_obj(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """Vertices ``(V, 3)`` float64 and triangles ``(T, 3)`` int64 of an OBJ file.

    Raises FileNotFoundError for a missing file and ValueError naming the file and line for a
    malformed vertex or face line, non-finite coordinates or out-of-range indices.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"OBJ file not found: {path}")
    verts, polys = [], []
    with open(path, encoding="utf-8", errors="replace") as f:
        for no, line in enumerate(f, start=1):
            parts = line.split()
            if not parts:
                continue
            try:
                if parts[0] == "v":
                    verts.append([float(t) for t in parts[1:4]])
                    if len(verts[-1]) != 3:
                        raise ValueError
                elif parts[0] == "f":
                    idx = [int(t.split("/")[0]) for t in parts[1:]]
                    polys.append([i - 1 if i > 0 else len(verts) + i for i in idx])
            except ValueError:
                raise ValueError(f"{path}, line {no}: malformed {parts[0]!r} line {line.strip()!r}") from None
    v = np.asarray(verts, dtype=np.float64).reshape(-1, 3)
    check_finite(v, path)
    faces = fan_triangulate(polys, path) if polys else np.zeros((0, 3), dtype=np.int64)
    check_indices(faces, len(v), path)
    return v, faces
