"""Feature types: how tensors transform, and the representation algebra.

Every equivariant module declares ``type_in`` / ``type_out`` with these types
([`geomlin.reps.declarations`][]), so
[`geomlin.testing.assert_equivariant`][], ``geomlin audit`` and
[`EquivariantSequential`][] need nothing else.

* the representation algebra: ``V(G)``, ``Scalar``, sums, tensor products, duals, e3nn Irreps
  ([`IrrepsRep`][]); group-free reps (EMLP's ``T(p, q)``, ``V ** 2 + 3 * T(1)``) bound later by
  ``rep(G)``;
* [`Scalars`][], [`Labels`][], [`Vectors`][], [`Positions`][] (E(n), SE(n)), [`Frames`][];
* [`Multivectors`][] (Clifford algebras, acted on by versors);
* [`SphereCoefficients`][] (spherical-harmonic coefficients up to ``lmax`` under O(3));
* [`Tensors`][] (order-``k`` tensors over a group of ``n x n`` matrices);
* [`Images`][] and [`RegularFeatures`][] (square images and group-convolution features under C4 / D4).

>>> from geomlin.groups import O
>>> from geomlin.reps import V, Scalar
>>> rep = 2 * Scalar + V(O(3)) ** 2
>>> rep.size
11
"""

from geomlin.reps.base import (
    DualRep,
    Rep,
    Scalar,
    ScalarRep,
    SumRep,
    TensorRep,
    Vector,
    bind,
    common_group,
)
from geomlin.reps.declarations import declared_group, declared_types, example_inputs
from geomlin.reps.feature_type import FeatureType, compatible
from geomlin.reps.group_free import GroupFreeRep, T, V
from geomlin.reps.images import Images, RegularFeatures
from geomlin.reps.irreps import IrrepsRep, wigner_D_from_matrix
from geomlin.reps.sequential import EquivariantSequential
from geomlin.reps.types import (
    NATURAL,
    PSEUDO,
    Frames,
    Labels,
    Multivectors,
    Positions,
    Scalars,
    SphereCoefficients,
    Tensors,
    Vectors,
)

__all__ = [
           "NATURAL",
           "PSEUDO",
           "DualRep",
           "EquivariantSequential",
           "FeatureType",
           "Frames",
           "GroupFreeRep",
           "Images",
           "IrrepsRep",
           "Labels",
           "Multivectors",
           "Positions",
           "RegularFeatures",
           "Rep",
           "Scalar",
           "ScalarRep",
           "Scalars",
           "SphereCoefficients",
           "SumRep",
           "T",
           "TensorRep",
           "Tensors",
           "V",
           "Vector",
           "Vectors",
           "bind",
           "common_group",
           "compatible",
           "declared_group",
           "declared_types",
           "example_inputs",
           "wigner_D_from_matrix",
]
