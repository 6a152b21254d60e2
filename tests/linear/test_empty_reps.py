"""Empty representations (e3nn's ``Irreps("")``, ``"0x1o"``) through the whole linear family (issue 34).

e3nn's ``o3.Linear`` takes empty irreps on either side: a weight of size zero and an output of the right
shape (zeros, or ``(..., 0)``). geomlin's solvers, layers and MLPs do the same.

Oracles: e3nn's ``o3.Linear`` on the same irreps (its ``weight_numel`` and output shape); the dimension
formula ``dim Hom_G(a + E, b + E) = dim Hom_G(a, b)`` for an empty ``E`` (it adds no maps); equivariance
through ``geomlin.testing`` where the outputs are not empty.
"""

import pytest
import torch
from e3nn import o3

from geomlin.groups import SO, O
from geomlin.linear import (
    EquivariantBilinear,
    EquivariantBlock,
    EquivariantLinear,
    EquivariantMLP,
    GatedNonlinearity,
    constraint_gram,
    equivariant_basis,
    nullspace_sampled,
    with_gates,
)
from geomlin.linear.solver import METHODS, block_basis
from geomlin.reps import IrrepsRep, Scalar, V
from geomlin.testing import assert_equivariant

G = O(3)
EMPTY = IrrepsRep("")

#: (irreps in, irreps out) with an empty side or an empty term, as e3nn accepts them.
E3NN_PAIRS = [("", "2x1o"), ("2x1o", ""), ("", ""), ("0x1o", "1o"), ("1o+0x0e", "2x0e"), ("2x0e+0x1o", "1o+0e"),
              ("0x0e", "0e"), ("", "0e+1o")]


@pytest.mark.parametrize("irreps_in,irreps_out", E3NN_PAIRS, ids=[f"{a or 'empty'}->{b or 'empty'}" for a, b in E3NN_PAIRS])
def test_linear_matches_e3nn(irreps_in, irreps_out):
    ref = o3.Linear(irreps_in, irreps_out)
    layer = EquivariantLinear(IrrepsRep(irreps_in), IrrepsRep(irreps_out), bias=False)
    assert layer.num_coefficients == ref.weight_numel
    x = torch.randn(5, o3.Irreps(irreps_in).dim)
    y, y_ref = layer(x), ref(x)
    assert y.shape == y_ref.shape
    if x.shape[-1] == 0:
        assert torch.equal(y, torch.zeros_like(y)) and torch.equal(y_ref, torch.zeros_like(y_ref))


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("rep_in,rep_out", [(EMPTY, V(G)), (V(G), EMPTY), (EMPTY, EMPTY), (Scalar, EMPTY),
                                            (EMPTY, Scalar), (V(G) * EMPTY, V(G)), (EMPTY.dual(), V(G) ** 2)],
                         ids=["E->V", "V->E", "E->E", "1->E", "E->1", "VxE->V", "E*->V2"])
def test_every_solver_gives_the_empty_basis(rep_in, rep_out, method):
    basis = equivariant_basis(rep_in, rep_out, method=method)
    assert basis.shape == (0, rep_out.size, rep_in.size) and basis.dtype == torch.float64
    assert block_basis(rep_in, rep_out, method=method).shape == (0, rep_out.size, rep_in.size)


def test_the_other_solver_entry_points():
    assert constraint_gram(EMPTY, V(G)).shape == (0, 0)
    assert nullspace_sampled(EMPTY, V(G)).shape == (0, 3, 0)
    assert EMPTY.drho(G.lie_algebra).shape == (3, 0, 0) and EMPTY.rho(G.sample(2)).shape == (2, 0, 0)
    assert IrrepsRep("", SO(3)).drho(SO(3).lie_algebra).shape == (3, 0, 0)


def test_an_empty_term_adds_no_maps():
    v = V(G)
    for a, b in [(v, v), (v ** 2, Scalar + v), (Scalar, v ** 2 + Scalar)]:
        dim = equivariant_basis(a, b).shape[0]
        assert equivariant_basis(a + EMPTY, EMPTY + b).shape[0] == dim
        assert equivariant_basis(EMPTY + a + EMPTY, b + EMPTY).shape[0] == dim
    # Hom_O(3)(1o, 1o) is one-dimensional (Schur); the empty blocks sit at the ends
    basis = equivariant_basis(EMPTY + v, v + EMPTY)
    torch.testing.assert_close(basis[0] / basis[0, 0, 0], torch.eye(3, dtype=torch.float64))


def test_bias_of_an_empty_input_is_the_whole_output():
    layer = EquivariantLinear(EMPTY, 2 * Scalar + V(G)).double()
    assert layer.num_coefficients == 0 and layer.bias.numel() == 2
    with torch.no_grad():
        layer.bias.copy_(torch.tensor([1.5, -2.0]))
    y = layer(torch.zeros(4, 0, dtype=torch.float64))
    expected = torch.tensor([1.5, -2.0, 0, 0, 0], dtype=torch.float64).expand(4, 5)
    torch.testing.assert_close(y, expected)
    y.sum().backward()
    torch.testing.assert_close(layer.bias.grad, torch.full((2,), 4.0, dtype=torch.float64))


def test_empty_reps_through_the_mlp_family():
    v = V(G)
    assert with_gates(EMPTY) == EMPTY and with_gates(EMPTY + v).size == 4
    assert GatedNonlinearity(EMPTY)(torch.randn(3, 0)).shape == (3, 0)
    assert EquivariantBilinear(EMPTY)(torch.randn(3, 0)).shape == (3, 0)
    assert EquivariantBlock(v, EMPTY)(torch.randn(3, 3)).shape == (3, 0)
    assert EquivariantBlock(EMPTY, v)(torch.randn(3, 0)).shape == (3, 3)
    assert EquivariantMLP(EMPTY, v, hidden_channels=8, group=G)(torch.randn(3, 0)).shape == (3, 3)
    assert EquivariantMLP(v, EMPTY, hidden_channels=8)(torch.randn(3, 3)).shape == (3, 0)
    assert EquivariantMLP(v, v, hidden_channels=EMPTY + 2 * v + Scalar)(torch.randn(3, 3)).shape == (3, 3)


@pytest.mark.parametrize("make", [
    lambda: EquivariantLinear(EMPTY + V(G) + EMPTY, Scalar + EMPTY + V(G)),
    lambda: EquivariantBilinear(EMPTY + Scalar + V(G) + EMPTY),
    lambda: EquivariantMLP(V(G) + EMPTY, EMPTY + V(G), hidden_channels=EMPTY + 4 * Scalar + 2 * V(G)),
], ids=["linear", "bilinear", "mlp"])
def test_empty_blocks_keep_layers_equivariant(make):
    torch.manual_seed(0)
    module = make().double()
    with torch.no_grad():
        for p in module.parameters():
            p.normal_()
    assert_equivariant(module, G, module.type_in, module.type_out)


def test_an_empty_batch():
    """The same explicit sizes serve a batch of no examples (a shape of 0 that is not a rep's)."""
    model = EquivariantMLP(V(G), Scalar + V(G), hidden_channels=16)
    assert model(torch.randn(0, 3)).shape == (0, 4)
    assert EquivariantBilinear(Scalar + V(G))(torch.randn(0, 2, 4)).shape == (0, 2, 4)
