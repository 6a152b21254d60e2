"""Point clouds sampled from mesh files: ``read_mesh`` (PLY / OFF / OBJ) and ``MeshPointClouds``."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch_geometric.data import Data

from geomlin.datasets.base import InMemoryList, check_float_dtype
from geomlin.datasets.io.obj import read_obj
from geomlin.datasets.io.off import read_off
from geomlin.datasets.io.ply import read_ply
from geomlin.datasets.surface import sample_surface
from geomlin.validation import FileFormatError, check_int, check_positive_int

READERS = {".ply": read_ply, ".off": read_off, ".obj": read_obj}


def read_mesh(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """Vertices ``(V, 3)`` float64 and triangles ``(T, 3)`` int64 of a ``.ply``, ``.off`` or ``.obj`` file."""
    path = os.fspath(path)
    ext = os.path.splitext(path)[1].lower()
    if ext not in READERS:
        raise ValueError(f"{path}: unsupported mesh format {ext!r}; expected one of {sorted(READERS)}")
    return READERS[ext](path)


def mesh_point_cloud(path: str | os.PathLike, num_points: int, generator: torch.Generator | None = None,
                     include_normals: bool = False, dtype: torch.dtype = torch.float32) -> Data:
    """One mesh file -> ``Data(pos (num_points, 3)[, normal (num_points, 3)])`` sampled area-weighted.

    Raises ValueError naming the file for an empty mesh (no faces) or a mesh of zero area.
    """
    num_points = check_positive_int(num_points, "num_points")
    check_float_dtype(dtype)
    verts, faces = read_mesh(path)
    if len(faces) == 0 or len(verts) == 0:
        raise ValueError(f"{os.fspath(path)}: empty mesh ({len(verts)} vertices, {len(faces)} faces); "
                         "cannot sample surface points")
    try:
        out = sample_surface(torch.from_numpy(verts), torch.from_numpy(faces), num_points, generator,
                             include_normals=include_normals)
    except ValueError as err:
        raise FileFormatError(path, str(err)) from None
    if include_normals:
        return Data(pos=out[0].to(dtype), normal=out[1].to(dtype))
    return Data(pos=out.to(dtype))


class MeshPointClouds(InMemoryList):
    """Point clouds sampled uniformly (area-weighted) from the surfaces of PLY / OFF / OBJ meshes.

    Parameters
    ----------
    paths : Sequence[str | os.PathLike]
        mesh files; one graph each, in this order.
    num_points : int
        points per cloud.
    labels : Sequence[int] | None
        optional integer label per path, stored as ``y (1,)`` int64.
    include_normals : bool
        also store the unit face normal of each point as ``normal (num_points, 3)``
    seed : int
        sampling is deterministic given ``seed`` (file ``i`` uses seed ``seed + i``).

    Notes
    -----
    Fields: ``pos (num_points, 3)`` in the mesh's own units, ``dtype`` (float32 default),
    ``name`` (file stem), optional ``y`` and ``normal``.
    """

    def __init__(self, paths: Sequence[str | os.PathLike], num_points: int = 1024,
                 labels: Sequence[int] | None = None, include_normals: bool = False, seed: int = 0,
                 transform: Callable | None = None, pre_transform: Callable | None = None,
                 dtype: torch.dtype = torch.float32):
        self._start(transform, pre_transform)
        num_points = check_positive_int(num_points, "num_points")
        seed = check_int(seed, "seed", minimum=0)
        check_float_dtype(dtype)
        if isinstance(paths, (str, os.PathLike)):
            raise TypeError("paths must be a list of mesh files, got a single path; wrap it in a list")
        paths = [os.fspath(p) for p in paths]
        if not paths:
            raise ValueError("MeshPointClouds needs at least one mesh path")
        if labels is not None:
            if len(labels) != len(paths):
                raise ValueError(f"got {len(labels)} labels for {len(paths)} mesh paths; they must pair up")
            labels = [check_int(v, f"labels[{i}]", minimum=0) for i, v in enumerate(labels)]
        missing = [p for p in paths if not os.path.isfile(p)]
        if missing:
            raise FileNotFoundError(f"mesh files not found: {missing}")
        self.paths = paths
        graphs = []
        for i, p in enumerate(paths):
            g = torch.Generator().manual_seed(int(seed) + i)
            d = mesh_point_cloud(p, num_points, g, include_normals, dtype)
            d.name = os.path.splitext(os.path.basename(p))[0]
            if labels is not None:
                d.y = torch.tensor([labels[i]])
            graphs.append(d)
        self._set_graphs(graphs)


