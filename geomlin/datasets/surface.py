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

from geomlin.validation import (
    check_condition,
    check_finite,
    check_generator,
    check_index,
    check_positive_int,
    check_tensor,
)


def check_mesh(vertices: Tensor, faces: Tensor, where: str = "mesh") -> Tensor:
    """Raise unless ``vertices (V, 3)`` float and ``faces (F, 3)`` integer form a usable, non-empty mesh.

    Returns ``faces`` as int64 (clamped into range on accelerators, where the value checks are
    deferred: [`geomlin.validation.check_finite`][],
    [`geomlin.validation.check_index`][]).
    """
    check_tensor(vertices, f"{where}: vertices", shape=(None, 3), what="V vertices in 3D")
    check_tensor(faces, f"{where}: faces", shape=(None, 3), dtype="int", what="F triangles")
    if vertices.shape[0] == 0 or faces.shape[0] == 0:
        raise ValueError(f"{where}: empty mesh ({vertices.shape[0]} vertices, {faces.shape[0]} faces); "
                         "surface sampling needs at least one triangle")
    check_finite(vertices, f"{where}: vertices")
    return check_index(faces, f"{where}: faces", vertices.shape[0], "vertices").long()


def sample_surface(vertices: Tensor, faces: Tensor, num_points: int, generator: torch.Generator | None = None,
                   include_normals: bool = False):
    """``num_points`` points uniform on the surface of a triangle mesh.

    Parameters
    ----------
    vertices : Tensor of shape (V, 3)
        float positions.
    faces : Tensor of shape (F, 3)
        integer triangle indices.
    num_points : int
        how many points to draw (with replacement over triangles).
    generator : torch.Generator | None
        optional ``torch.Generator`` on the mesh's device, for reproducibility.
    include_normals : bool
        also return the unit normal of the triangle each point lies on

    Returns
    -------
    pos : Tensor of shape (num_points, 3)
        in the dtype of ``vertices`` on its device.
    normal : Tensor of shape (num_points, 3)
        only when ``include_normals``. No host sync on accelerators (the mesh checks are deferred).
    """
    faces = check_mesh(vertices, faces)
    num_points = check_positive_int(num_points, "num_points")
    check_generator(generator, "generator", vertices.device)
    a, b, c = (vertices[faces[:, k]] for k in range(3))
    cross = torch.linalg.cross(b - a, c - a)
    areas = cross.norm(dim=-1)                      # twice the areas; only ratios matter
    usable = areas.sum() > 0
    check_condition(usable, f"mesh has zero surface area ({faces.shape[0]} degenerate faces); cannot sample points")
    # a zero-sum distribution is a fatal device-side assert in CUDA's multinomial: sample uniformly
    # until the deferred check above is raised
    areas = torch.where(usable, areas, torch.ones_like(areas))
    choice = torch.multinomial(areas, num_points, replacement=True, generator=generator)
    st = torch.rand(num_points, 2, generator=generator, dtype=torch.float64, device=vertices.device).to(vertices.dtype)
    fold = st.sum(dim=-1) > 1
    st = torch.where(fold[:, None], 1 - st, st)
    pos = a[choice] + st[:, :1] * (b - a)[choice] + st[:, 1:] * (c - a)[choice]
    if include_normals:
        n = cross[choice]
        return pos, n / n.norm(dim=-1, keepdim=True).clamp_min(torch.finfo(vertices.dtype).tiny)
    return pos
