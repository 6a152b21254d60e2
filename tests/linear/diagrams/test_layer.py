"""DiagramLinear: equivariance (geomlin.testing), the dense-sum oracle, gradients and bad input."""

import pytest
import torch

from geomlin.linear.diagrams import diagram_matrix
from geomlin.linear.diagrams.layer import DiagramLinear
from geomlin.testing import assert_equivariant

from .helpers import group_for, tensor_action

CASES = [
    ("S", 4, 2, 2), ("S", 3, 1, 1), ("S", 4, 2, 1), ("S", 3, 1, 3), ("S", 2, 3, 2), ("S", 5, 0, 2), ("S", 4, 2, 0),
    ("O", 3, 2, 2), ("O", 3, 1, 1), ("O", 4, 3, 1), ("O", 2, 1, 3), ("O", 3, 0, 2), ("O", 3, 4, 0), ("O", 1, 2, 2),
    ("SO", 3, 2, 2), ("SO", 3, 2, 1), ("SO", 3, 1, 2), ("SO", 3, 3, 2), ("SO", 3, 0, 3), ("SO", 4, 2, 2),
    ("SO", 4, 1, 3), ("SO", 2, 1, 1), ("SO", 3, 3, 0),
    ("Sp", 4, 2, 2), ("Sp", 2, 1, 1), ("Sp", 4, 3, 1), ("Sp", 4, 0, 2), ("Sp", 2, 3, 3), ("Sp", 4, 2, 0),
]
C_IN, C_OUT = 3, 2


def _layer(name, n, k, l, bias=True):
    layer = DiagramLinear(name, n, k, l, C_IN, C_OUT, bias=bias).double()
    with torch.no_grad():
        if layer.bias is not None:
            layer.bias.normal_()  # test with a nonzero bias: odd functions hide bugs
    return layer


@pytest.mark.parametrize("name,n,k,l", CASES)
def test_layer_is_equivariant(name, n, k, l):
    layer = _layer(name, n, k, l)
    x = torch.randn(4, C_IN, *([n] * k), dtype=torch.float64)
    group = base = group_for(name, n)
    if name == "O":  # make sure reflections are among the samples

        class WithReflection:
            def sample(self, m, generator=None, dtype=torch.float64):
                g = base.sample(m, generator=generator, dtype=dtype)
                r = torch.eye(n, dtype=dtype)
                r[0, 0] = -1
                return torch.cat([r[None], g[:-1] @ r]) if m > 1 else r[None]

        group = WithReflection()
    assert_equivariant(layer, group, tensor_action(k), tensor_action(l), inputs=(x,), rtol=1e-9,
                       allow_zero=layer.num_basis == 0 and layer.bias is None)


@pytest.mark.parametrize("name,n,k,l", [c for c in CASES if c[1] ** (c[2] + c[3]) <= 4 ** 4])
def test_layer_equals_dense_sum_of_diagrams(name, n, k, l):
    """y = Σ_d (D_d ⊗ Λ_d) x + Σ_b D_b β_b with the dense diagram matrices (independent oracle)."""
    layer = _layer(name, n, k, l)
    orbit = name == "S"
    B = 3
    x = torch.randn(B, C_IN, *([n] * k), dtype=torch.float64)
    y = layer(x).reshape(B, C_OUT, -1)
    ref = torch.zeros(B, C_OUT, n ** l, dtype=torch.float64)
    lam = layer.weight.detach()
    for r, d in enumerate(layer.basis):
        D = diagram_matrix(d, n, name, orbit=orbit)
        gain = (D.pow(2).sum() / n ** l).sqrt()
        ref += torch.einsum("PQ,oi,biQ->boP", D / gain, lam[r], x.reshape(B, C_IN, -1))
    for r, d in enumerate(layer.bias_basis):
        D = diagram_matrix(d, n, name, orbit=orbit)[:, 0]
        gain = (D.pow(2).sum() / n ** l).sqrt()
        ref += layer.bias.detach()[r][:, None] * D / gain
    assert torch.allclose(y, ref, rtol=1e-11, atol=1e-11)


def test_parameter_counts_are_the_basis_sizes():
    layer = DiagramLinear("S", 3, 2, 2, 4, 5)
    assert layer.weight.shape == (14, 5, 4) and layer.num_basis == 14
    assert layer.bias.shape == (2, 5)  # S_3, (0, 2): the orbit basis {1,2}, {1}{2}
    assert DiagramLinear("O", 3, 2, 2, 1, 1, bias=False).bias is None
    assert DiagramLinear("O", 3, 2, 1, 1, 1).num_basis == 0
    assert "num_basis=14" in repr(layer)


def test_layer_accepts_geomlin_groups_and_extra_batch_axes():
    from geomlin.groups import O, Sp

    layer = DiagramLinear(O(3), 3, 2, 2, 2, 2)
    assert layer(torch.randn(5, 7, 2, 3, 3)).shape == (5, 7, 2, 3, 3)
    assert DiagramLinear(Sp(2), 4, 1, 1, 1, 1)(torch.randn(1, 4)).shape == (1, 4)
    assert DiagramLinear("SO(3)", 3, 1, 1, 1, 1).type_in == DiagramLinear("SO", 3, 1, 1, 1, 1).type_in  # names parse
    with pytest.raises(ValueError, match="acts on R\\^4 but n = 3"):
        DiagramLinear(Sp(2), 3, 1, 1, 1, 1)


def test_gradients_reach_weights_bias_and_input():
    layer = _layer("SO", 3, 2, 3)
    x = torch.randn(2, C_IN, 3, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(layer, (x,))
    layer(x).square().sum().backward()
    assert layer.weight.grad.abs().sum() > 0 and layer.bias.grad.abs().sum() > 0


def test_float32_and_init_scale():
    layer = DiagramLinear("S", 8, 2, 2, 16, 16)
    x = torch.randn(64, 16, 8, 8)
    y = layer(x)
    assert y.dtype == torch.float32
    assert 0.2 < y.std().item() < 5.0  # unit-gain basis keeps activations O(1)


def test_bad_input_raises_clear_errors():
    layer = DiagramLinear("O", 3, 2, 2, 2, 2)
    with pytest.raises(ValueError, match="trailing axes of size n = 3"):
        layer(torch.randn(4, 2, 3, 4))
    with pytest.raises(ValueError, match="in_channels=2"):
        layer(torch.randn(4, 5, 3, 3))
    with pytest.raises(ValueError, match="in_channels=2"):
        layer(torch.randn(3, 3))
    with pytest.raises(TypeError, match="floating point"):
        layer(torch.ones(4, 2, 3, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="x contains NaN or inf"):
        layer(torch.full((4, 2, 3, 3), float("nan")))
    with pytest.raises(TypeError, match="torch.Tensor"):
        layer([[1.0]])
    with pytest.raises(ValueError, match="unknown group"):
        DiagramLinear("U", 3, 1, 1, 1, 1)
    with pytest.raises(ValueError, match="acts on R\\^4 but n = 3"):
        DiagramLinear("S(4)", 3, 1, 1, 1, 1)
    with pytest.raises(TypeError, match=r"diagram bases exist for the geomlin S/O/SO/Sp groups, got E\(3\)"):
        DiagramLinear("E3", 3, 1, 1, 1, 1)
    with pytest.raises(TypeError, match="geomlin S/O/SO/Sp"):
        DiagramLinear(3, 3, 1, 1, 1, 1)
    with pytest.raises(ValueError, match="n = 2m even"):
        DiagramLinear("Sp", 3, 1, 1, 1, 1)
    with pytest.raises(ValueError, match=r"n \(the dimension of R\^n\) must be >= 1"):
        DiagramLinear("SO", 0, 1, 1, 1, 1)
    with pytest.raises(ValueError, match="order_in must be >= 0"):
        DiagramLinear("S", 3, -1, 1, 1, 1)
    with pytest.raises(ValueError, match="out_channels must be >= 1"):
        DiagramLinear("S", 3, 1, 1, 1, 0)
