"""Equivariant linear maps: the general basis solver, layers and MLPs.

>>> from geomlin.groups import SO
>>> from geomlin.reps import V
>>> from geomlin.linear import equivariant_basis
>>> equivariant_basis(V(SO(3)) ** 2, V(SO(3))).shape  # the cross product
torch.Size([1, 3, 9])

Diagram layers (Brauer / partition diagrams with the fast factored product)
live in [`geomlin.linear.diagrams`][].
"""

from geomlin.linear.diagrams import (
    GROUP_NAMES,
    Diagram,
    DiagramLinear,
    apply_diagram,
    basis_size,
    brauer_diagrams,
    diagram_basis,
    diagram_matrix,
    levi_civita_diagrams,
    partition_diagrams,
    set_partitions,
    spanning_diagrams,
)
from geomlin.linear.layers import EquivariantLinear
from geomlin.linear.mlp import (
    EquivariantBilinear,
    EquivariantBlock,
    EquivariantMLP,
    GatedNonlinearity,
    uniform_rep,
    with_gates,
)
from geomlin.linear.sampled_solver import nullspace_sampled
from geomlin.linear.solver import constraint_gram, equivariant_basis

__all__ = [
    "GROUP_NAMES",
    # diagram layers (Pearce-Crump): geomlin.linear.diagrams
    "Diagram",
    "DiagramLinear",
    "EquivariantBilinear",
    "EquivariantBlock",
    "EquivariantLinear",
    "EquivariantMLP",
    "GatedNonlinearity",
    "apply_diagram",
    "basis_size",
    "brauer_diagrams",
    "constraint_gram",
    "diagram_basis",
    "diagram_matrix",
    "equivariant_basis",
    "levi_civita_diagrams",
    "nullspace_sampled",
    "partition_diagrams",
    "set_partitions",
    "spanning_diagrams",
    "uniform_rep",
    "with_gates",
]
