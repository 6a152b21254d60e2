"""Equivariant linear maps: the general basis solver, layers and MLPs.

>>> from geomlin.groups import SO
>>> from geomlin.reps import V
>>> from geomlin.linear import equivariant_basis
>>> equivariant_basis(V(SO(3)) ** 2, V(SO(3))).shape  # the cross product
torch.Size([1, 3, 9])

Diagram layers (Brauer / partition diagrams with the fast factored product)
live in :mod:`geomlin.linear.diagrams`.
"""

from geomlin.linear.layers import EquivariantLinear
from geomlin.linear.mlp import (
    EquivariantBilinear,
    EquivariantBlock,
    EquivariantMLP,
    GatedNonlinearity,
    uniform_rep,
    with_gates,
)
from geomlin.linear.solver import clear_cache, constraint_gram, equivariant_basis

__all__ = [
    "equivariant_basis", "constraint_gram", "clear_cache", "EquivariantLinear", "EquivariantMLP",
    "EquivariantBilinear", "EquivariantBlock", "GatedNonlinearity", "uniform_rep", "with_gates",
]
