"""Bad input to groups, reps and linear maps: a clear error from geomlin's own code, naming the problem.

Each case is ``(call, exception type, phrase of the message)``; a few valid inputs close the file.
"""

import math
import traceback

import pytest
import torch

from geomlin.groups import E3, SO, Group, Lorentz, O, S, Sp, as_group, transform_positions, transform_vectors
from geomlin.linear import (
    DiagramLinear,
    EquivariantBilinear,
    EquivariantLinear,
    EquivariantMLP,
    GatedNonlinearity,
    apply_diagram,
    constraint_gram,
    diagram_basis,
    equivariant_basis,
    nullspace_sampled,
    partition_diagrams,
    uniform_rep,
)
from geomlin.linear.diagrams import Diagram
from geomlin.reps import IrrepsRep, Scalar, T, V, wigner_D_from_matrix

F64 = torch.float64


def _layer():
    return EquivariantLinear(V(O(3)), V(O(3)) ** 2)


def _sheared_c3(copies: int = 1) -> Group:
    """C3 in a non-orthonormal basis (conjugated by a shear), acting on ``copies`` planes."""
    c, s = -0.5, math.sqrt(3) / 2
    shear = torch.tensor([[1.0, 1.0], [0.0, 1.0]], dtype=F64)
    g = shear @ torch.tensor([[c, -s], [s, c]], dtype=F64) @ torch.linalg.inv(shear)
    return Group(discrete_generators=torch.block_diag(*[g] * copies)[None], name=f"ShearedC3x{copies}")


CASES = {
    # --- groups: generators, sizes, elements
    "singular discrete generator": (lambda: Group(discrete_generators=torch.zeros(1, 3, 3)), ValueError, "singular"),
    "complex generator": (lambda: Group(lie_algebra=torch.zeros(1, 2, 2, dtype=torch.complex64)), TypeError,
                          "real float"),
    "non-square generator": (lambda: Group(lie_algebra=torch.zeros(1, 2, 3)), ValueError, "square"),
    "NaN generator": (lambda: Group(discrete_generators=torch.full((1, 2, 2), math.nan)), ValueError, "NaN"),
    "generators of two sizes": (lambda: Group(lie_algebra=torch.zeros(1, 3, 3), discrete_generators=torch.eye(2)),
                                ValueError, "R^2"),
    "float dimension": (lambda: O(2.5), TypeError, "must be an int"),
    "zero dimension": (lambda: SO(0), ValueError, ">= 1"),
    "negative sample count": (lambda: O(3).sample(-1), ValueError, ">= 0"),
    "integer sample dtype": (lambda: SO(3).sample(2, dtype=torch.int64), TypeError, "floating-point torch.dtype"),
    "positions of the wrong size": (lambda: transform_positions(E3().sample(1)[0], torch.randn(5, 2)), ValueError,
                                    "(..., 3)"),
    "a matrix as a rigid transform": (lambda: transform_vectors(torch.eye(3), torch.randn(5, 3)), TypeError,
                                      "RigidTransform"),
    "shear as a rotation": (lambda: SO(3).check_element(torch.eye(3, dtype=F64) + torch.triu(torch.ones(3, 3, dtype=F64), 1)),
                            ValueError, "orthogonal"),
    "reflection in SO(3)": (lambda: SO(3).check_element(torch.diag(torch.tensor([-1.0, 1, 1], dtype=F64))),
                            ValueError, "determinant"),
    "element of the wrong size": (lambda: O(3).check_element(torch.eye(4, dtype=F64)), ValueError, "(..., 3, 3)"),
    "integer element": (lambda: O(3).check_element(torch.eye(3, dtype=torch.long)), TypeError, "floating-point"),
    "unknown group name": (lambda: as_group("G2"), ValueError, "unknown group"),
    "Euclidean group as a matrix group": (lambda: V("E3"), TypeError, "rigid motions"),
    # --- reps
    "non-orthogonal matrix to IrrepsRep.rho": (lambda: IrrepsRep("1o + 2e").rho(2 * torch.eye(3, dtype=F64)),
                                               ValueError, "orthogonal"),
    "shear to wigner_D_from_matrix": (lambda: wigner_D_from_matrix("1o", torch.eye(3, dtype=F64) + 0.5),
                                      ValueError, "orthogonal"),
    "non-Lorentz matrix to V(Lorentz)": (lambda: V(Lorentz()).rho(O(4).sample(1)[0]), ValueError,
                                         "not an element of O(1,3)"),
    "negative tensor power": (lambda: V(O(3)) ** -1, ValueError, ">= 0"),
    "float tensor power": (lambda: V(O(3)) ** 1.5, TypeError, "must be an int"),
    "zero multiplicity": (lambda: 0 * V(O(3)), ValueError, "empty representation: leave the term out"),
    "rep plus a float": (lambda: V(O(3)) + 1.0, TypeError, "cannot combine"),
    "reps of two groups": (lambda: V(O(3)) + V(SO(3)), ValueError, "different groups"),
    "binding to another group": (lambda: V(O(3))(O(4)), ValueError, "not of O(4)"),
    "negative T rank": (lambda: T(-1), ValueError, "p must be >= 0"),
    "bad irreps string": (lambda: IrrepsRep("2x1q"), ValueError, "could not parse"),
    "a rep of a generator of infinite order": (lambda: V(Group(discrete_generators=torch.diag(torch.tensor([2.0, 1.0]))[None])),
                                               ValueError, "has infinite order"),
    # --- solver
    "unknown solver method": (lambda: equivariant_basis(V(O(3)), V(O(3)), method="qr"), ValueError,
                              "method must be one of"),
    "group-free rep without a group": (lambda: equivariant_basis(T(2), T(1)), ValueError, "without a group"),
    "cache_dir is a file": (lambda: equivariant_basis(V(O(3)), V(O(3)), cache_dir=__file__), ValueError,
                            "not a folder"),
    "cache_dir of the wrong type": (lambda: EquivariantLinear(V(O(3)), V(O(3)), cache_dir=3), TypeError,
                                    "cache_dir"),
    "sampled solver for a non-compact group": (
        lambda: equivariant_basis(V(Lorentz()) ** 3, V(Lorentz()) ** 3, method="sampled"), ValueError, "compact"),
    "Gram matrix too large to form": (lambda: constraint_gram(V(O(5)) ** 3, V(O(5)) ** 3), ValueError,
                                      "never forms it"),
    "sampled solver without a Haar measure": (lambda: nullspace_sampled(V(Lorentz()), V(Lorentz())), ValueError,
                                              "compact or finite"),
    "sampled solver for a finite group in a non-orthonormal basis": (
        lambda: equivariant_basis(V(_sheared_c3()), V(_sheared_c3()), method="sampled"), ValueError,
        "is finite but given by non-orthogonal generators (solve it with method='dense')"),
    "nullspace_sampled for a finite group in a non-orthonormal basis": (
        lambda: nullspace_sampled(V(_sheared_c3()) ** 2, Scalar), ValueError, "non-orthogonal generators"),
    "a non-orthogonal finite group beyond the dense limit": (
        lambda: EquivariantLinear(V(_sheared_c3(3)) ** 3, V(_sheared_c3(3)) ** 3), ValueError,
        "46656 unknowns, more than the solver's limit of 8192 for finite groups given by non-orthogonal generators"),
    # --- layers
    "layer input of the wrong size": (lambda: _layer()(torch.randn(2, 4)), ValueError, "(..., 3)"),
    "integer layer input": (lambda: _layer()(torch.ones(2, 3, dtype=torch.long)), TypeError, "floating-point"),
    "NaN layer input": (lambda: _layer()(torch.tensor([[0.0, math.nan, 1.0]])), ValueError, "NaN"),
    "a nonempty input to an empty rep": (lambda: EquivariantLinear(IrrepsRep(""), V(O(3)))(torch.randn(2, 3)),
                                         ValueError, "(..., 0)"),
    "a nonempty input to an empty MLP input": (
        lambda: EquivariantMLP(IrrepsRep(""), V(O(3)), hidden_channels=8, group=O(3))(torch.randn(2, 3)), ValueError,
        "(..., 0)"),
    "the wrong size around an empty block": (
        lambda: EquivariantBilinear(IrrepsRep("") + V(O(3)))(torch.randn(2, 4)), ValueError, "(..., 3)"),
    "layer input that is a list": (lambda: _layer()([[1.0, 2.0, 3.0]]), TypeError, "torch.Tensor"),
    "bias given as 1": (lambda: EquivariantLinear(V(O(3)), V(O(3)), bias=1), TypeError, "bias must be a bool"),
    "layer on a tensor": (lambda: EquivariantLinear(torch.eye(3), V(O(3))), TypeError, "rep_in must be a geomlin Rep"),
    "gates missing": (lambda: GatedNonlinearity(Scalar + V(O(3)))(torch.randn(2, 4)), ValueError, "(..., 5)"),
    "bilinear max_unknowns 0": (lambda: EquivariantBilinear(V(O(3)), max_unknowns=0), ValueError,
                                "max_unknowns must be >= 1"),
    "uniform_rep of zero channels": (lambda: uniform_rep(0, O(3)), ValueError, "channels must be >= 1"),
    "uniform_rep without a group": (lambda: uniform_rep(16), TypeError, "needs the group"),
    "MLP hidden size 0": (lambda: EquivariantMLP(V(O(3)), Scalar, hidden_channels=0), ValueError, ">= 1"),
    "MLP with a scalar-only model and an int width": (lambda: EquivariantMLP(Scalar, Scalar, hidden_channels=8),
                                                     ValueError, "needs a group"),
    # --- diagrams
    "Bell(14) partitions for S(7)": (lambda: DiagramLinear("S", 7, 7, 7, 1, 1), ValueError, "164,029,595 diagrams"),
    "Brauer diagrams beyond the limit": (lambda: diagram_basis("O", 10, 10, 3), ValueError, "diagrams, more than"),
    "negative max_blocks": (lambda: partition_diagrams(2, 2, max_blocks=-1), ValueError, "max_blocks must be >= 0"),
    "diagram layer with a float order": (lambda: DiagramLinear("O", 3, 1.0, 1, 1, 1), TypeError, "must be an int"),
    "diagram layer bias 'yes'": (lambda: DiagramLinear("O", 3, 1, 1, 1, 1, bias="yes"), TypeError, "bias"),
    "diagram layer input with the wrong channels": (lambda: DiagramLinear("O", 3, 1, 1, 2, 1)(torch.randn(2, 1, 3)),
                                                    ValueError, "in_channels=2"),
    "partition diagram for O(n)": (lambda: apply_diagram(Diagram(3, 0, [[0, 1, 2]]), torch.randn(3, 3, 3), 3, "O"),
                                   ValueError, "Brauer diagrams"),
}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_bad_input_is_refused_clearly(case):
    call, err, phrase = CASES[case]
    with pytest.raises(err) as info:
        call()
    assert phrase in str(info.value), f"{case}: {info.value}"
    # raised by geomlin's own code, not from deep inside torch or numpy
    raised_in = traceback.extract_tb(info.tb)[-1].filename
    assert "/geomlin/" in raised_in, raised_in


def test_valid_inputs_are_accepted():
    G = O(3)
    assert G.check_element(G.sample(4, dtype=torch.float32)).shape == (4, 3, 3)  # float32 round-off is fine
    assert Lorentz().check_element(Lorentz().sample(3)).shape == (3, 4, 4)  # boosts, large entries
    assert S(4).check_element(S(4).sample(2)).shape == (2, 4, 4)
    assert Group(discrete_generators=[[[0, 1], [1, 0]]], name="Z2").elements().shape == (2, 2, 2)  # int lists
    assert V("O(3)") == V(G) and T(1, group="O3") == V(G)
    layer = EquivariantLinear(T(1), T(2), group="SO(3)")
    assert layer(torch.randn(5, 2, 3)).shape == (5, 2, 9)
    assert Sp(1).check_element(torch.eye(2, dtype=F64)).shape == (2, 2)
    assert len(partition_diagrams(7, 7, max_blocks=2)) == 8192  # Bell(14) is never enumerated
