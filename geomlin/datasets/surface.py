"""Area-weighted sampling of points on triangle meshes.

A point uniform on a triangle ``(a, b, c)`` is ``a + s (b - a) + t (c - a)`` with
``(s, t)`` uniform on the unit simplex; reflecting ``(s, t) -> (1 - s, 1 - t)``
when ``s + t > 1`` folds the unit square onto the simplex without bias
(Turk 1990, "Generating random points in triangles", Graphics Gems). Triangles
are picked with probability proportional to their area, so the points are
uniform on the whole surface.
"""

from __future__ import annotations

import torch
from torch import Tensor

from geomlin.validation import check_positive_int, check_tensor


def check_mesh(vertices: Tensor, faces: Tensor, where: str = "mesh") -> None:
    """Raise unless ``vertices (V, 3)`` float and ``faces (F, 3)`` integer form a usable, non-empty mesh."""
    check_tensor(vertices, f"{where}: vertices", shape=(None, 3), what="V vertices in 3D")
    check_tensor(faces, f"{where}: faces", shape=(None, 3), dtype="int", what="F triangles")
    if vertices.shape[0] == 0 or faces.shape[0] == 0:
        raise ValueError(f"{where}: empty mesh ({vertices.shape[0]} vertices, {faces.shape[0]} faces); "
                         "surface sampling needs at least one triangle")
    if not torch.isfinite(vertices).all():
        bad = int((~torch.isfinite(vertices)).any(dim=-1).nonzero()[0, 0])
        raise ValueError(f"{where}: vertex {bad} has a NaN or infinite coordinate")
    if int(faces.min()) < 0 or int(faces.max()) >= vertices.shape[0]:
        raise ValueError(f"{where}: face indices must lie in [0, {vertices.shape[0]}), got range "
                         f"[{int(faces.min())}, {int(faces.max())}]")


def sample_surface(vertices: Tensor, faces: Tensor, num_points: int, generator: torch.Generator | None = None,
                   include_normals: bool = False, *, return_normals: bool | None = None):
    """``num_points`` points uniform on the surface of a triangle mesh.

    Parameters
    ----------
    vertices: ``(V, 3)`` float positions.
    faces: ``(F, 3)`` integer triangle indices.
    num_points: how many points to draw (with replacement over triangles).
    generator: optional ``torch.Generator`` for reproducibility.
    include_normals: also return the unit normal of the triangle each point lies on
        (``return_normals`` is the deprecated spelling).

    Returns
    -------
    ``pos (num_points, 3)`` in the dtype of ``vertices``, and ``normal (num_points, 3)`` when asked.
    """
    if return_normals is not None:
        import warnings

        warnings.warn("sample_surface(return_normals=...) is deprecated; use include_normals=...", DeprecationWarning,
                      stacklevel=2)
        include_normals = return_normals
    check_mesh(vertices, faces)
    num_points = check_positive_int(num_points, "num_points")
    faces = faces.long()
    a, b, c = (vertices[faces[:, k]] for k in range(3))
    cross = torch.linalg.cross(b - a, c - a)
    areas = cross.norm(dim=-1)                      # twice the areas; only ratios matter
    total = float(areas.sum())
    if not total > 0:
        raise ValueError(f"mesh has zero surface area ({faces.shape[0]} degenerate faces); cannot sample points")
    choice = torch.multinomial(areas, num_points, replacement=True, generator=generator)
    st = torch.rand(num_points, 2, generator=generator, dtype=torch.float64).to(vertices.dtype)
    fold = st.sum(dim=-1) > 1
    st = torch.where(fold[:, None], 1 - st, st)
    pos = a[choice] + st[:, :1] * (b - a)[choice] + st[:, 1:] * (c - a)[choice]
    if include_normals:
        n = cross[choice]
        return pos, n / n.norm(dim=-1, keepdim=True).clamp_min(torch.finfo(vertices.dtype).tiny)
    return pos
