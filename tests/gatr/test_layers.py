"""GATr layers: equivariance under random Pin(3,0,1) versors with random (non-zero) biases."""

import pytest
import torch

from geomlin.algebra import Pin301, pin_action
from geomlin.gatr import (
    EquiLayerNorm,
    EquiLinear,
    GATrBlock,
    GeometricAttention,
    GeometricBilinear,
    GeometricMLP,
)
from geomlin.gatr import primitives as P
from geomlin.testing import assert_equivariant

DT = torch.float64
PIN = Pin301()


def randomize(module: torch.nn.Module) -> torch.nn.Module:
    """float64 with every parameter (biases included) random: odd functions hide bugs."""
    module = module.double()
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn_like(p) * 0.5)
    return module


def test_equi_linear_with_scalars():
    layer = randomize(EquiLinear(3, 4, in_s_channels=2, out_s_channels=5))
    x = torch.randn(2, 6, 3, 16, dtype=DT)
    s = torch.randn(2, 6, 2, dtype=DT)
    assert_equivariant(layer, PIN, (pin_action, "scalar"), (pin_action, "scalar"), inputs=(x, s))
    out, out_s = layer(x, s)
    assert out.shape == (2, 6, 4, 16) and out_s.shape == (2, 6, 5)
    # the dense (reference einsum) path computes the same function
    dense = EquiLinear(3, 4, 2, 5, method="dense").double()
    dense.load_state_dict(layer.state_dict())
    for a, b in zip(layer(x, s), dense(x, s)):
        torch.testing.assert_close(a, b)
    # bias lives on the scalar component only
    zero_in = layer(torch.zeros_like(x), torch.zeros_like(s))[0]
    assert zero_in[..., 1:].abs().max() == 0 and zero_in[..., 0].abs().max() > 0


def test_layer_norm_and_bilinear():
    x = torch.randn(2, 5, 3, 16, dtype=DT)
    s = torch.randn(2, 5, 4, dtype=DT)
    assert_equivariant(EquiLayerNorm(), PIN, (pin_action, "scalar"), (pin_action, "scalar"), inputs=(x, s))
    bil = randomize(GeometricBilinear(3, 6, 4, 2, hidden_mv_channels=3))
    ref = P.join_reference(x)
    assert_equivariant(bil, PIN, (pin_action, "scalar", pin_action), (pin_action, "scalar"), inputs=(x, s, ref))
    mlp = randomize(GeometricMLP(3, 4))
    assert_equivariant(mlp, PIN, (pin_action, "scalar", pin_action), (pin_action, "scalar"), inputs=(x, s, ref))


def test_attention_with_padding_mask():
    att = randomize(GeometricAttention(3, 2, 4, 3, num_heads=2))
    x = torch.randn(2, 6, 3, 16, dtype=DT)
    s = torch.randn(2, 6, 4, dtype=DT)
    mask = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], dtype=torch.bool)
    am = P.attention_mask(mask)

    def fn(a, b):
        return att(a, b, attn_mask=am)
    assert_equivariant(fn, PIN, (pin_action, "scalar"), (pin_action, "scalar"), inputs=(x, s))
    # padded items do not influence real ones
    x2, s2 = x.clone(), s.clone()
    x2[0, 4:] = 100.0
    s2[0, 4:] = -7.0
    for a, b in zip(fn(x, s), fn(x2, s2)):
        torch.testing.assert_close(a[0, :4], b[0, :4])


def test_block_equivariant_and_scalar_free():
    block = randomize(GATrBlock(4, 3, num_heads=2))
    x = torch.randn(2, 5, 4, 16, dtype=DT)
    s = torch.randn(2, 5, 3, dtype=DT)
    ref = P.join_reference(x)

    def fn(a, b, r):
        return block(a, b, r)
    assert_equivariant(fn, PIN, (pin_action, "scalar", pin_action), (pin_action, "scalar"), inputs=(x, s, ref))
    no_scalars = randomize(GATrBlock(4, 0, num_heads=2))
    out, out_s = no_scalars(x, None, ref)
    assert out.shape == x.shape and out_s is None


def test_block_compiles():
    """torch.compile captures one block as a single graph (fullgraph) and matches eager."""
    block = GATrBlock(2, 2, num_heads=1).eval()
    x = torch.randn(1, 4, 2, 16)
    s = torch.randn(1, 4, 2)
    ref = P.join_reference(x)
    eager = block(x, s, ref)  # warms the constant tables
    compiled = torch.compile(block, backend="eager", fullgraph=True)
    for a, b in zip(compiled(x, s, ref), eager):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_block_compiles_inductor():
    block = GATrBlock(4, 4, num_heads=2).eval()
    x = torch.randn(2, 8, 4, 16)
    s = torch.randn(2, 8, 4)
    ref = P.join_reference(x)
    eager = block(x, s, ref)
    compiled = torch.compile(block, fullgraph=True)
    for a, b in zip(compiled(x, s, ref), eager):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


def test_layer_errors():
    layer = EquiLinear(3, 4, 2, 1)
    with pytest.raises(ValueError, match="last dimension 16"):
        layer(torch.zeros(5, 3, 15), torch.zeros(5, 2))
    with pytest.raises(ValueError, match=r"\(\.\.\., 3, 16\)"):
        layer(torch.zeros(5, 2, 16), torch.zeros(5, 2))
    with pytest.raises(ValueError, match="scalars must have shape"):
        layer(torch.zeros(5, 3, 16), torch.zeros(5, 3))
    with pytest.raises(ValueError, match="expected scalars"):
        layer(torch.zeros(5, 3, 16))
    with pytest.raises(ValueError, match="non-negative int"):
        EquiLinear(-1, 2)
    with pytest.raises(ValueError, match="num_heads"):
        GeometricAttention(2, 2, num_heads=0)
