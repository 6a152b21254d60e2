"""Offline-first datasets for molecules and point clouds, as PyTorch Geometric datasets.

Layout: ``io/`` (file readers: SDF, XYZ, OFF, PLY, NPZ) -> dataset modules
(``qm9``, ``md17``, ``xyz_trajectories``, ``sdf_molecules``, ``modelnet``, ``shapenet``, ``meshes``,
``synthetic``) -> ``transforms``. Every loader reads a local path and never
touches the network; a missing file raises ``FileNotFoundError`` that lists the
expected files, the official source and where to put them.

Importing this package is cheap: the dataset classes (and PyTorch Geometric)
are imported on first attribute access.

>>> from geomlin.datasets import SyntheticShapes, NBody
>>> len(SyntheticShapes(num_per_class=2, num_points=64))
20
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "InMemoryList": "base",
    "SyntheticShapes": "synthetic", "synthetic_shapes": "synthetic", "SHAPE_CLASSES": "synthetic",
    "NBody": "synthetic", "nbody": "synthetic", "simulate_charged_particles": "synthetic",
    "coulomb_forces": "synthetic",
    "sample_surface": "surface",
    "QM9": "qm9", "QM9_TARGETS": "qm9", "qm9_split": "qm9",
    "NPZTrajectory": "md17", "MD17": "md17",
    "XYZDataset": "xyz_trajectories",
    "SDFDataset": "sdf_molecules",
    "ModelNet": "modelnet",
    "ShapeNetPart": "shapenet",
    "MeshPointClouds": "meshes", "read_mesh": "meshes",
    "transforms": None,
}

__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'geomlin.datasets' has no attribute {name!r}")
    module = _EXPORTS[name]
    if module is None:
        value = importlib.import_module(f"geomlin.datasets.{name}")
    else:
        value = getattr(importlib.import_module(f"geomlin.datasets.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + __all__)
