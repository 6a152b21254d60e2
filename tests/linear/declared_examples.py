"""Equivariance examples of the module classes in :mod:`geomlin.linear` (see tests/test_declarations.py).

Every factory builds a module with biases and random (not zero) parameters; groups with
reflections (O(n), S(n), the full Lorentz group) are sampled with them.
"""


from geomlin.groups import SO, Lorentz, O, S, Sp
from geomlin.linear import (
    DiagramLinear,
    EquivariantBilinear,
    EquivariantBlock,
    EquivariantLinear,
    EquivariantMLP,
    GatedNonlinearity,
)
from geomlin.reps import Scalar, T, V
from tests.randomized import randomized

EXAMPLES = {
    EquivariantLinear: [
        lambda: randomized(EquivariantLinear(2 * Scalar + V(O(3)) + V(O(3)) ** 2, V(O(3)) ** 2 + Scalar)),
        lambda: randomized(EquivariantLinear(T(1) + T(0, 1), T(2) + T(0), group=Lorentz())),
    ],
    EquivariantMLP: [
        lambda: EquivariantMLP(2 * T(1), T(0), hidden_channels=32, num_blocks=2, group=O(5)),
        lambda: EquivariantMLP(4 * T(1), T(0), hidden_channels=24, num_blocks=1, group=Lorentz()),
    ],
    EquivariantBilinear: [
        lambda: randomized(EquivariantBilinear(3 * Scalar + 2 * V(S(4)) + V(S(4)) ** 2)),
    ],
    GatedNonlinearity: [
        lambda: GatedNonlinearity(2 * Scalar + V(SO(3)) + V(SO(3)) ** 2),
    ],
    EquivariantBlock: [
        lambda: randomized(EquivariantBlock(V(Sp(1)) + Scalar, 2 * Scalar + V(Sp(1)))),
    ],
    DiagramLinear: [
        lambda: randomized(DiagramLinear("S", 4, 2, 2, 2, 3)),
        lambda: randomized(DiagramLinear("O", 3, 3, 1, 2, 2)),
        lambda: randomized(DiagramLinear("SO", 3, 1, 2, 1, 2)),
        lambda: randomized(DiagramLinear("Sp", 4, 2, 0, 2, 2)),
    ],
}

