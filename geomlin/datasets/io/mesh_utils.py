"""Helpers shared by the mesh readers: polygon fan triangulation and index checks."""

from __future__ import annotations

import numpy as np

from geomlin.validation import FileFormatError


def fan_triangulate(polygons: list[list[int]] | np.ndarray, where: str) -> np.ndarray:
    """Triangles ``(T, 3)`` int64 from polygons given as vertex-index lists (fan from the first vertex).

    A polygon ``(v0, v1, ..., vk)`` becomes ``(v0, v1, v2), (v0, v2, v3), ...``; exact for convex
    polygons, the faces ModelNet and most mesh exporters write. Polygons with fewer than three
    vertices raise [`FileFormatError`][] naming ``where`` (the file).
    """
    if isinstance(polygons, np.ndarray):
        if polygons.ndim != 2 or polygons.shape[1] < 3:
            raise FileFormatError(where, f"faces need at least 3 vertices, got array of shape {polygons.shape}")
        k = polygons.shape[1]
        if k == 3:
            return polygons.astype(np.int64)
        tris = [polygons[:, [0, j, j + 1]] for j in range(1, k - 1)]
        return np.stack(tris, axis=1).reshape(-1, 3).astype(np.int64)
    out = []
    for n, poly in enumerate(polygons):
        if len(poly) < 3:
            raise FileFormatError(where, f"face {n} has {len(poly)} vertices; a face needs at least 3")
        v0 = poly[0]
        out.extend((v0, poly[j], poly[j + 1]) for j in range(1, len(poly) - 1))
    return np.asarray(out, dtype=np.int64).reshape(-1, 3)


def check_indices(faces: np.ndarray, num_vertices: int, where: str) -> None:
    """FileFormatError (naming the file ``where``) unless every index of ``faces`` lies in ``[0, num_vertices)``."""
    if faces.size and (faces.min() < 0 or faces.max() >= num_vertices):
        bad = int(np.flatnonzero((faces < 0).any(1) | (faces >= num_vertices).any(1))[0])
        raise FileFormatError(where, f"face {bad} refers to vertex {faces[bad].tolist()} outside "
                              f"0..{num_vertices - 1}")


def check_finite(vertices: np.ndarray, where: str) -> None:
    """FileFormatError naming the file and the first vertex with a NaN or infinite coordinate."""
    bad = ~np.isfinite(vertices).all(axis=1)
    if bad.any():
        raise FileFormatError(where, f"vertex {int(np.flatnonzero(bad)[0])} has a NaN or infinite coordinate")
