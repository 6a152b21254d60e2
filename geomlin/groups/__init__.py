"""Symmetry groups as generators, their sampling, and Euclidean helpers.

Every group follows one protocol ([`SymmetryGroup`][geomlin.groups.base.SymmetryGroup]: generators,
``sample``, ``key``, ``is_subgroup_of``, a ``name``), and [`as_group`][geomlin.groups.names.as_group]
parses every name a group prints.

>>> from geomlin.groups import SO, O, S, as_group
>>> O(3).sample(4).shape
torch.Size([4, 3, 3])
>>> as_group("SE(3)")
SE(3)
"""

from geomlin.groups.base import Group, SymmetryGroup, haar_orthogonal
from geomlin.groups.classical import (
    GL,
    MINKOWSKI_METRIC,
    SL,
    SO,
    SU,
    C,
    D,
    DirectProduct,
    Lorentz,
    O,
    RubiksCube,
    S,
    SO13p,
    Sp,
    Trivial,
    U,
    Z,
    complexify,
    realify,
    symplectic_form,
)
from geomlin.groups.euclidean import (
    E3,
    SE3,
    Euclidean,
    RigidTransform,
    random_rigid,
    transform_positions,
    transform_scalars,
    transform_vectors,
)
from geomlin.groups.names import as_group
from geomlin.groups.rotations import (
    chordal_distance,
    geodesic_distance,
    matrix_to_rotation_6d,
    rotation_6d_to_matrix,
    special_procrustes,
)
from geomlin.groups.versor import CliffordGroup, Pin301, PseudoOrthogonalGroup, versor_group

__all__ = [
    "E3",
    "GL",
    "MINKOWSKI_METRIC",
    "SE3",
    "SL",
    "SO",
    "SU",
    "C",
    "CliffordGroup",
    "D",
    "DirectProduct",
    "Euclidean",
    "Group",
    "Lorentz",
    "O",
    "Pin301",
    "PseudoOrthogonalGroup",
    "RigidTransform",
    "RubiksCube",
    "S",
    "SO13p",
    "Sp",
    "SymmetryGroup",
    "Trivial",
    "U",
    "Z",
    "as_group",
    "chordal_distance",
    "complexify",
    "geodesic_distance",
    "haar_orthogonal",
    "matrix_to_rotation_6d",
    "random_rigid",
    "realify",
    "rotation_6d_to_matrix",
    "special_procrustes",
    "symplectic_form",
    "transform_positions",
    "transform_scalars",
    "transform_vectors",
    "versor_group",
]
