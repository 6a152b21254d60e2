"""EquivariantLinear: equivariance for every shipped group, biases, dtypes, bad input."""

import pytest
import torch

from geomlin.groups import SL, SO, C, D, DirectProduct, Group, Lorentz, O, S, SO13p, Sp, Trivial
from geomlin.linear import EquivariantLinear, equivariant_basis
from geomlin.reps import IrrepsRep, Scalar, V
from geomlin.testing import assert_equivariant

SHIPPED = [SO(3), O(3), SO(2), Sp(1), Sp(2), S(4), C(6), D(5), Lorentz(), SO13p(), SL(2), Trivial(2),
           DirectProduct(SO(2), S(3))]


def _rep_pairs(G):
    v = V(G)
    return [
        (v, v),
        (2 * Scalar + v, v ** 2 + Scalar),           # a sum
        (v ** 2 + v, v ** 2),                        # a tensor power
        (v * v.dual(), Scalar + v.dual() * v),       # duals
    ]


@pytest.mark.parametrize("G", SHIPPED, ids=repr)
def test_equivariant_linear_for_every_shipped_group(G):
    for rin, rout in _rep_pairs(G):
        layer = EquivariantLinear(rin, rout).double()
        with torch.no_grad():
            for p in layer.parameters():
                p.normal_()
        assert_equivariant(layer, G, rin, rout, num_samples=10)


def test_irreps_layer():
    rin = IrrepsRep("2x0e + 1o + 2e")
    rout = IrrepsRep("0e + 2x1o + 2e")
    layer = EquivariantLinear(rin, rout).double()
    assert_equivariant(layer, O(3), rin, rout, num_samples=10)
    # 0e->0e (2 in, 1 out), 1o->1o (1 in, 2 out), 2e->2e (1 in, 1 out)
    assert layer.num_coefficients == 2 + 2 + 1


def test_bias_lives_on_invariant_subspace():
    G = Lorentz()
    rout = V(G) ** 2 + Scalar + V(G)
    layer = EquivariantLinear(V(G), rout).double()
    with torch.no_grad():
        layer.bias.normal_()
    assert layer.bias.numel() == 2  # eta and the scalar
    b = layer.bias_vector()
    for g in G.sample(5):
        assert torch.allclose(rout.rho(g) @ b, b, atol=1e-9 * rout.rho(g).abs().max().item())


def test_parameter_count_equals_basis_dimension():
    G = O(3)
    rin, rout = 3 * V(G) + Scalar, V(G) ** 2 + 2 * V(G)
    layer = EquivariantLinear(rin, rout, bias=False)
    assert layer.num_coefficients == equivariant_basis(rin, rout).shape[0]
    assert sum(p.numel() for p in layer.parameters()) == layer.num_coefficients


def test_weights_fill_the_commutant_whose_dimension_schur_gives():
    """Oracle: Schur's lemma. V + 1 = l1 + l0 and V (x) V = l0 + l1 + l2 for SO(3), so the maps between
    them form a space of dimension 1 + 1 = 2; layers with random coefficients commute with the group
    and span exactly that space."""
    G = SO(3)
    rin, rout = V(G) + Scalar, V(G) ** 2
    weights = []
    for seed in range(5):
        torch.manual_seed(seed)
        layer = EquivariantLinear(rin, rout, bias=False).double()
        with torch.no_grad():
            for p in layer.parameters():
                p.normal_()
        weights.append(layer.weight())
    g = G.sample(4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    for W in weights:
        assert torch.allclose(rout.rho(g) @ W, W @ rin.rho(g), atol=1e-12)
    assert torch.linalg.matrix_rank(torch.stack([W.flatten() for W in weights])) == 2


def test_dtype_round_trip_keeps_float64_exactness():
    G = O(3)
    layer = EquivariantLinear(V(G) ** 2, V(G) ** 2).float().double()
    assert_equivariant(layer, G, V(G) ** 2, V(G) ** 2)
    y = EquivariantLinear(V(G), V(G))(torch.randn(2, 3))
    assert y.dtype == torch.float32


def test_gradients_flow():
    G = S(3)
    layer = EquivariantLinear(V(G) ** 2, V(G))
    layer(torch.randn(4, 9)).pow(2).sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in layer.parameters())


def test_user_group_layer():
    rx = torch.tensor([[1.0, 0, 0], [0, 0, -1], [0, 1, 0]])
    ry = torch.tensor([[0.0, 0, 1], [0, 1, 0], [-1, 0, 0]])
    G = Group(discrete_generators=torch.stack([rx, ry]), name="Cube")
    layer = EquivariantLinear(V(G) ** 2, V(G) + V(G) ** 2).double()
    assert_equivariant(layer, G, V(G) ** 2, V(G) + V(G) ** 2)


def test_layer_errors():
    G = O(3)
    layer = EquivariantLinear(V(G), V(G))
    with pytest.raises(ValueError, match=r"shape \(\.\.\., 3\)"):
        layer(torch.randn(2, 4))
    with pytest.raises(ValueError, match="NaN"):
        layer(torch.tensor([[0.0, float("nan"), 1.0]]))
    with pytest.raises(TypeError, match="floating"):
        layer(torch.ones(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="different groups"):
        EquivariantLinear(V(O(3)), V(SO(3)))
    with pytest.raises(TypeError):
        EquivariantLinear(3, V(G))
