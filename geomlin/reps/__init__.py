"""Representations: ``V(G)``, ``Scalar``, sums, tensor products, duals, e3nn Irreps.

>>> from geomlin.groups import O
>>> from geomlin.reps import V, Scalar
>>> rep = 2 * Scalar + V(O(3)) ** 2
>>> rep.size
11
"""

from geomlin.reps.base import DualRep, Rep, Scalar, ScalarRep, SumRep, TensorRep, V, Vector, common_group
from geomlin.reps.irreps import IrrepsRep, wigner_D_from_matrix

__all__ = [
           "DualRep",
           "IrrepsRep",
           "Rep",
           "Scalar",
           "ScalarRep",
           "SumRep",
           "TensorRep",
           "V",
           "Vector",
           "common_group",
           "wigner_D_from_matrix",
]
