"""EquivariantMLP: gated + bilinear blocks are equivariant for any group and can learn."""

import pytest
import torch

from geomlin.groups import SO, Group, Lorentz, O, S, Sp
from geomlin.linear import EquivariantMLP, GatedNonlinearity, with_gates
from geomlin.reps import Scalar, V
from geomlin.testing import assert_equivariant


@pytest.mark.parametrize("G", [O(3), SO(3), Lorentz(), Sp(1), S(4)], ids=repr)
def test_mlp_is_equivariant(G):
    v = V(G)
    rin, rout = 2 * Scalar + 2 * v, v ** 2 + v + Scalar
    mlp = EquivariantMLP(rin, rout, hidden=6, depth=2).double()
    assert_equivariant(mlp, G, rin, rout, num_samples=10)


def test_lorentz_mlp_produces_invariants():
    # no linear invariant exists for V -> Scalar; the bilinear layer must create x^T eta x
    G = Lorentz()
    mlp = EquivariantMLP(V(G), Scalar, hidden=4, depth=1).double()
    x = torch.randn(64, 4, dtype=torch.float64)
    y = mlp(x)
    assert y.std() > 1e-6
    assert_equivariant(mlp, G, V(G), Scalar)


def test_gated_nonlinearity_shapes():
    G = O(3)
    rep = 2 * Scalar + V(G) + V(G) ** 2
    gate = GatedNonlinearity(rep)
    x = torch.randn(5, with_gates(rep).size)
    assert gate(x).shape == (5, rep.size)


def test_mlp_fits_a_quadratic_invariant():
    G = O(3)
    torch.manual_seed(0)
    mlp = EquivariantMLP(V(G), Scalar, hidden=8, depth=1)
    opt = torch.optim.Adam(mlp.parameters(), lr=2e-2)
    x = torch.randn(128, 3)
    y = (x ** 2).sum(-1, keepdim=True)
    first = None
    for _ in range(60):
        loss = (mlp(x) - y).pow(2).mean()
        first = first if first is not None else loss.item()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.1 * first


def test_user_group_mlp():
    rx = torch.tensor([[1.0, 0, 0], [0, 0, -1], [0, 1, 0]])
    ry = torch.tensor([[0.0, 0, 1], [0, 1, 0], [-1, 0, 0]])
    G = Group(discrete_generators=torch.stack([rx, ry]), name="Cube")
    mlp = EquivariantMLP(V(G) + Scalar, V(G) ** 2, hidden=4, depth=1).double()
    assert_equivariant(mlp, G, V(G) + Scalar, V(G) ** 2)


def test_mlp_errors():
    with pytest.raises(ValueError):
        EquivariantMLP(V(O(3)), Scalar, hidden=4, depth=0)
    with pytest.raises(TypeError):
        EquivariantMLP(V(O(3)), Scalar, hidden="big")
    mlp = EquivariantMLP(V(O(3)), Scalar, hidden=4, depth=1)
    with pytest.raises(ValueError, match="NaN"):
        mlp(torch.full((1, 3), float("inf")))
