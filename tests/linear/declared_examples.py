"""Equivariance examples of the module classes in :mod:`geomlin.linear` (see tests/test_declarations.py).

Every factory builds a module with biases and random (not zero) parameters; groups with
reflections (O(n), S(n), the full Lorentz group) are sampled with them.
"""

import torch

from geomlin.groups import SO, Lorentz, O, S, Sp
from geomlin.linear import (
    DiagramLinear,
    EquivariantBilinear,
    EquivariantBlock,
    EquivariantLinear,
    EquivariantMLP,
    GatedNonlinearity,
)
from geomlin.linear.tables import ConstantTables
from geomlin.reps import Scalar, T, V


def _randomised(module):
    """Every parameter (biases included) drawn from a standard normal: no zero bias hides a bug."""
    with torch.no_grad():
        for p in module.parameters():
            p.normal_()
    return module


EXAMPLES = {
    EquivariantLinear: [
        lambda: _randomised(EquivariantLinear(2 * Scalar + V(O(3)) + V(O(3)) ** 2, V(O(3)) ** 2 + Scalar)),
        lambda: _randomised(EquivariantLinear(T(1) + T(0, 1), T(2) + T(0), group=Lorentz())),
    ],
    EquivariantMLP: [
        lambda: EquivariantMLP(2 * T(1), T(0), hidden_channels=32, num_blocks=2, group=O(5)),
        lambda: EquivariantMLP(4 * T(1), T(0), hidden_channels=24, num_blocks=1, group=Lorentz()),
    ],
    EquivariantBilinear: [
        lambda: _randomised(EquivariantBilinear(3 * Scalar + 2 * V(S(4)) + V(S(4)) ** 2)),
    ],
    GatedNonlinearity: [
        lambda: GatedNonlinearity(2 * Scalar + V(SO(3)) + V(SO(3)) ** 2),
    ],
    EquivariantBlock: [
        lambda: _randomised(EquivariantBlock(V(Sp(1)) + Scalar, 2 * Scalar + V(Sp(1)))),
    ],
    DiagramLinear: [
        lambda: _randomised(DiagramLinear("S", 4, 2, 2, 2, 3)),
        lambda: _randomised(DiagramLinear("O", 3, 3, 1, 2, 2)),
        lambda: _randomised(DiagramLinear("SO", 3, 1, 2, 1, 2)),
        lambda: _randomised(DiagramLinear("Sp", 4, 2, 0, 2, 2)),
    ],
}

NOT_EQUIVARIANT = {
    ConstantTables: "a holder of a layer's constant tables (buffers moved with it); it has no forward",
}
