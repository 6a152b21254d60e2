"""Diagram bases and fast diagram layers (Pearce-Crump).

Equivariant linear maps ``(R^n)^{⊗k} -> (R^n)^{⊗l}`` for S_n (partition
diagrams), O(n) (Brauer diagrams), SO(n) (Brauer + ``(l+k)\\n`` Levi-Civita
diagrams) and Sp(n) (Brauer diagrams with the symplectic form), their dense
matrices, the fast factored product and the layer [`DiagramLinear`][].
See ``docs/diagrams.md``.
"""

from geomlin.linear.diagrams.apply import apply_diagram
from geomlin.linear.diagrams.basis import basis_size, diagram_basis
from geomlin.linear.diagrams.dense import diagram_matrix
from geomlin.linear.diagrams.diagram import Diagram
from geomlin.linear.diagrams.enumerate import (
    brauer_diagrams,
    levi_civita_diagrams,
    partition_diagrams,
    set_partitions,
    spanning_diagrams,
)
from geomlin.linear.diagrams.families import GROUP_NAMES
from geomlin.linear.diagrams.layer import DiagramLinear

__all__ = [
    "GROUP_NAMES",
    "Diagram",
    "DiagramLinear",
    "apply_diagram",
    "basis_size",
    "brauer_diagrams",
    "diagram_basis",
    "diagram_matrix",
    "levi_civita_diagrams",
    "partition_diagrams",
    "set_partitions",
    "spanning_diagrams",
]
