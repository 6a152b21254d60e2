"""Symmetry groups as generators, their sampling, and Euclidean helpers.

>>> from geomlin.groups import SO, O, S
>>> O(3).sample(4).shape
torch.Size([4, 3, 3])
"""

from geomlin.groups.base import Group, haar_orthogonal
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
    as_group,
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
from geomlin.groups.rotations import (
    chordal_distance,
    geodesic_distance,
    matrix_to_rotation_6d,
    rotation_6d_to_matrix,
    special_procrustes,
)

__all__ = [
    "E3",
    "GL",
    "MINKOWSKI_METRIC",
    "SE3",
    "SL",
    "SO",
    "SU",
    "C",
    "D",
    "DirectProduct",
    "Euclidean",
    "Group",
    "Lorentz",
    "O",
    "RigidTransform",
    "RubiksCube",
    "S",
    "SO13p",
    "Sp",
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
]
