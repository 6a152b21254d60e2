"""GATr layers against the reference GATr's layer formulas written out with brute-force blade
algebra (tests/gatr/pga_oracle.py), and Pin(3,0,1) equivariance from their declared types."""

import math

import pytest
import torch
import torch.nn.functional as F

from geomlin.batching import batch_layout
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
from tests.gatr import pga_oracle as O
from tests.randomized import randomized

DT = torch.float64
TOL = {"rtol": 1e-10, "atol": 1e-10}

# ------------------------------------------------------------------ the formulas written out
def linear_oracle(layer: EquiLinear, x, s):
    """The reference ``EquiLinear``: basis maps, scalars onto <mv>_0, <mv>_0 and scalars onto scalars."""
    out = torch.einsum("oib,bkl,...il->...ok", layer.weight, O.reference_equi_linear_basis(), x)
    if layer.bias_mv is not None:
        out[..., 0] = out[..., 0] + layer.bias_mv
    if layer.s_to_mv is not None:
        out[..., 0] = out[..., 0] + s @ layer.s_to_mv.T
    s_out = None
    if layer.out_s:
        s_out = x[..., 0] @ layer.mv_to_s.T + (layer.bias_s if layer.bias_s is not None else 0)
        if layer.s_to_s is not None:
            s_out = s_out + s @ layer.s_to_s.T
    return out, s_out


def norm_oracle(x, s):
    sq = O.inner_product(x, x).mean(-2, keepdim=True).clamp_min(0.01)
    return x / sq.sqrt(), (None if s is None else F.layer_norm(s, s.shape[-1:]))


def bilinear_oracle(layer: GeometricBilinear, x, s, ref):
    ops, _ = linear_oracle(layer.proj_in, x, s)
    a, b, c, d = ops.split(layer.hidden, -2)
    hidden = torch.cat([O.product(a, b), O.reference_join(c, d, ref)], -2)
    return linear_oracle(layer.proj_out, hidden, s)


def mlp_oracle(layer: GeometricMLP, x, s, ref):
    h, hs = bilinear_oracle(layer.bilinear, x, s, ref)
    gate = h[..., :1]
    h = h * 0.5 * gate * (1 + torch.tanh(math.sqrt(2 / math.pi) * (gate + 0.044715 * gate ** 3)))
    return linear_oracle(layer.out, h, None if hs is None else F.gelu(hs))


def attention_oracle(layer: GeometricAttention, x, s, keep):
    """Per item pair and head: inner product of 7 components, weighted reference distance
    vectors, scalars; softmax over unmasked keys; ``x (B, N, C, 16)``, ``keep (B, N)``."""
    qkv, qkv_s = linear_oracle(layer.qkv, x, s)
    H, c, cs = layer.heads, layer.head_mv, layer.head_s
    kv = 1 if layer.multi_query else H
    q, k, v = qkv.split((H * c, kv * c, kv * c), -2)
    qs, ks, vs = qkv_s.split((H * cs, kv * cs, kv * cs), -1)
    B, N = x.shape[:2]
    w = layer.log_distance_weights.exp()
    ipc, tri = O.REFERENCE_IP_WITHOUT_TRIVECTOR, O.REFERENCE_TRIVECTOR
    out_mv = torch.zeros(B, N, H * c, 16, dtype=DT)
    out_s = torch.zeros(B, N, H * cs, dtype=DT)
    for b in range(B):
        for h in range(H):
            hk = 0 if kv == 1 else h
            qh = q[b, :, h * c:(h + 1) * c]
            kh, vh = k[b, :, hk * c:(hk + 1) * c], v[b, :, hk * c:(hk + 1) * c]
            logits = (qs[b, :, None, h * cs:(h + 1) * cs] * ks[b, None, :, hk * cs:(hk + 1) * cs]).sum(-1)
            logits = logits + (qh[:, None, :, ipc] * kh[None, :, :, ipc]).sum((-1, -2))
            dq = O.reference_distance_vector(qh[..., tri], "query") * w[h][:, None]
            dk = O.reference_distance_vector(kh[..., tri], "key")
            logits = logits + (dq[:, None] * dk[None]).sum((-1, -2))
            att = (logits / math.sqrt(12 * c + cs)).masked_fill(~keep[b][None, :], float("-inf")).softmax(-1)
            out_mv[b, :, h * c:(h + 1) * c] = torch.einsum("ij,jcx->icx", att, vh)
            out_s[b, :, h * cs:(h + 1) * cs] = att @ vs[b, :, hk * cs:(hk + 1) * cs]
    return linear_oracle(layer.out, out_mv, out_s)


# ------------------------------------------------------------------ layers == their formulas
def test_equi_linear_is_the_reference_formula():
    x, s = torch.randn(2, 6, 3, 16, dtype=DT), torch.randn(2, 6, 2, dtype=DT)
    for layer, args in ((randomized(EquiLinear(3, 4, 2, 5), 0.5, torch.float64), (x, s)), (randomized(EquiLinear(3, 4, 0, 5), 0.5, torch.float64), (x, None)),
                        (randomized(EquiLinear(3, 4, 2, 0), 0.5, torch.float64), (x, s)), (randomized(EquiLinear(3, 4), 0.5, torch.float64), (x, None))):
        got, want = layer(*args), linear_oracle(layer, *args)
        torch.testing.assert_close(got[0], want[0], **TOL)
        assert (got[1] is None) == (want[1] is None)
        if got[1] is not None:
            torch.testing.assert_close(got[1], want[1], **TOL)


def test_layer_norm_bilinear_and_mlp_are_the_reference_formulas():
    x, s = torch.randn(2, 5, 3, 16, dtype=DT), torch.randn(2, 5, 4, dtype=DT)
    for got, want in zip(EquiLayerNorm(mv_channels=3, s_channels=4)(x, s), norm_oracle(x, s)):
        torch.testing.assert_close(got, want, **TOL)
    ref = P.join_reference(x)
    bil = randomized(GeometricBilinear(3, 6, 4, 2, hidden_mv_channels=3), 0.5, torch.float64)
    for got, want in zip(bil(x, s, ref), bilinear_oracle(bil, x, s, ref)):
        torch.testing.assert_close(got, want, **TOL)
    mlp = randomized(GeometricMLP(3, 4), 0.5, torch.float64)
    for got, want in zip(mlp(x, s, ref), mlp_oracle(mlp, x, s, ref)):
        torch.testing.assert_close(got, want, **TOL)
    # a reference per item (flat layout) works the same
    per_item = torch.randn(2, 5, 1, 16, dtype=DT)
    for got, want in zip(mlp(x, s, per_item), mlp_oracle(mlp, x, s, per_item)):
        torch.testing.assert_close(got, want, **TOL)


@pytest.mark.parametrize("multi_query", [True, False])
def test_attention_is_the_reference_formula(multi_query):
    att = randomized(GeometricAttention(3, 2, 4, 3, num_heads=2, multi_query=multi_query), 0.5, torch.float64)
    x, s = torch.randn(2, 6, 3, 16, dtype=DT), torch.randn(2, 6, 4, dtype=DT)
    keep = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], dtype=torch.bool)
    want = attention_oracle(att, x, s, keep)
    for mask in (batch_layout(keep), P.attention_mask(batch_layout(keep))):
        got = att(x, s, attn_mask=mask)
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, **TOL)
    all_keep = torch.ones(2, 6, dtype=torch.bool)
    for g, w in zip(att(x, s), attention_oracle(att, x, s, all_keep)):
        torch.testing.assert_close(g, w, **TOL)


def test_block_is_the_reference_formula():
    block = randomized(GATrBlock(4, 3, num_heads=2), 0.5, torch.float64)
    x, s = torch.randn(2, 5, 4, 16, dtype=DT), torch.randn(2, 5, 3, dtype=DT)
    keep = torch.ones(2, 5, dtype=torch.bool)
    ref = P.join_reference(x)
    h, hs = norm_oracle(x, s)
    a, as_ = attention_oracle(block.attention, h, hs, keep)
    x1, s1 = x + a, s + as_
    h, hs = norm_oracle(x1, s1)
    m, ms = mlp_oracle(block.mlp, h, hs, ref)
    got = block(x, s, ref)
    torch.testing.assert_close(got[0], x1 + m, **TOL)
    torch.testing.assert_close(got[1], s1 + ms, **TOL)
    no_scalars = randomized(GATrBlock(4, 0, num_heads=2), 0.5, torch.float64)
    out, out_s = no_scalars(x, None, ref)
    assert out.shape == x.shape and out_s is None


# ------------------------------------------------------------------ equivariance from the declarations
@pytest.mark.parametrize("make", [
    lambda: EquiLinear(3, 4, 2, 5), lambda: EquiLinear(2, 3), lambda: EquiLayerNorm(mv_channels=3, s_channels=2),
    lambda: GeometricBilinear(3, 4, 2, 2), lambda: GeometricMLP(3, 2), lambda: GeometricAttention(3, 2, 4, 3, 2),
    lambda: GeometricAttention(3, 2, 4, 3, 2, multi_query=False), lambda: GATrBlock(4, 3, num_heads=2)])
def test_layers_are_equivariant_from_their_declarations(make):
    assert_equivariant(randomized(make(), 0.5, torch.float64))


def test_padding_does_not_leak():
    att = randomized(GeometricAttention(3, 2, 4, 3, num_heads=2), 0.5, torch.float64)
    x, s = torch.randn(2, 6, 3, 16, dtype=DT), torch.randn(2, 6, 4, dtype=DT)
    keep = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], dtype=torch.bool)
    x2, s2 = x.clone(), s.clone()
    x2[0, 4:] = 100.0
    s2[0, 4:] = -7.0
    for a, b in zip(att(x, s, attn_mask=batch_layout(keep)), att(x2, s2, attn_mask=batch_layout(keep))):
        torch.testing.assert_close(a[0, :4], b[0, :4])
    # a padded row without any real item stays finite instead of NaN
    empty = torch.zeros(2, 6, dtype=torch.bool)
    assert torch.isfinite(att(x, s, attn_mask=batch_layout(empty))[0]).all()


def test_block_compiles():
    """torch.compile captures one block as a single graph (fullgraph) and matches eager."""
    block = GATrBlock(2, 2, num_heads=1).eval()
    x, s = torch.randn(1, 4, 2, 16), torch.randn(1, 4, 2)
    ref = P.join_reference(x)
    eager = block(x, s, ref)  # warms the constant tables
    compiled = torch.compile(block, backend="eager", fullgraph=True)
    for a, b in zip(compiled(x, s, ref), eager):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_block_compiles_inductor():
    block = GATrBlock(4, 4, num_heads=2).eval()
    x, s = torch.randn(2, 8, 4, 16), torch.randn(2, 8, 4)
    ref = P.join_reference(x)
    eager = block(x, s, ref)
    compiled = torch.compile(block, fullgraph=True)
    for a, b in zip(compiled(x, s, ref), eager):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
