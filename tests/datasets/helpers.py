"""Test helpers: an independent point-on-mesh oracle and an OFF writer."""

import numpy as np


def on_surface(points: np.ndarray, verts: np.ndarray, faces: np.ndarray, tol: float = 1e-6) -> np.ndarray:
    """Oracle: for each point, whether some triangle contains it (plane distance and barycentrics).

    Brute force over all (point, triangle) pairs; ``tol`` is relative to the mesh's extent.
    """
    scale = np.ptp(verts, axis=0).max()
    a, b, c = (verts[faces[:, k]] for k in range(3))
    n = np.cross(b - a, c - a)
    area2 = np.linalg.norm(n, axis=1)
    keep = area2 > 1e-12 * scale**2
    a, b, c, n, area2 = a[keep], b[keep], c[keep], n[keep], area2[keep]
    unit = n / area2[:, None]
    rel = points[:, None, :] - a[None]
    dist = np.abs((rel * unit[None]).sum(-1))
    # barycentric coordinates of the projection via signed sub-areas
    def sub(p, q):
        return (np.cross(q[None] - p[None], points[:, None, :] - p[None]) * unit[None]).sum(-1) / area2[None]
    w_c, w_a, w_b = sub(a, b), sub(b, c), sub(c, a)
    inside = (w_a >= -tol) & (w_b >= -tol) & (w_c >= -tol)
    return ((dist <= tol * scale) & inside).any(axis=1)


def write_off(path, verts, faces, header_bug=False):
    lines = []
    if header_bug:
        lines.append(f"OFF{len(verts)} {len(faces)} 0")
    else:
        lines += ["OFF", f"{len(verts)} {len(faces)} 0"]
    lines += [" ".join(f"{x:.9g}" for x in v) for v in verts]
    lines += [" ".join(str(i) for i in [len(f), *f]) for f in faces]
    path.write_text("\n".join(lines) + "\n")


CUBE_VERTS = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=float)
CUBE_QUADS = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
TETRA_VERTS = np.array([[0, 0, 0], [2, 0, 0], [0, 3, 0], [0, 0, 1.5]], dtype=float)
TETRA_TRIS = [(0, 2, 1), (0, 1, 3), (0, 3, 2), (1, 2, 3)]
