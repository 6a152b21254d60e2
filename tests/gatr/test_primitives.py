"""GATr primitives: equivariance under Pin(3,0,1) (geomlin.testing) and independent oracles."""

import math

import pytest
import torch

from geomlin.algebra import Pin301, pga, pin_action
from geomlin.gatr import primitives as P
from geomlin.testing import assert_equivariant, assert_invariant

DT = torch.float64
PIN = Pin301()


def mv(*shape):
    return torch.randn(*shape, 16, dtype=DT)


def test_linear_basis_spans_the_commutant():
    """Oracle: the null space of ``M X = X M`` over sampled versor matrices has dimension 9
    (GATr Prop. 2) and our 9 maps span it."""
    g = PIN.sample(12, generator=torch.Generator().manual_seed(3))
    eye = torch.eye(16, dtype=DT)
    rows = []
    for i in range(12):
        M = pga.versor_matrix(g[i]).T.contiguous()  # x -> M x on column vectors
        rows.append(torch.kron(M, eye) - torch.kron(eye, M.T.contiguous()))
    A = torch.cat(rows)
    s = torch.linalg.svdvals(A)
    assert int((s < 1e-9 * s.max()).sum()) == 9
    B = P.linear_basis()  # (9, 16, 16) maps x -> B x
    flat = B.reshape(9, -1)
    assert torch.linalg.matrix_rank(flat) == 9
    assert (A @ flat.T).abs().max() < 1e-9  # each basis map commutes with every versor


def test_equi_linear_fast_matches_dense_and_is_equivariant():
    x = mv(2, 5, 3)
    w = torch.randn(4, 3, 9, dtype=DT)
    torch.testing.assert_close(P.equi_linear(x, w), P.equi_linear(x, w, "dense"))
    assert_equivariant(lambda a: P.equi_linear(a, w), PIN, pin_action, pin_action, inputs=x)


def test_products_are_equivariant():
    x, y = mv(2, 5, 3), mv(2, 5, 3)
    assert_equivariant(P.geometric_product, PIN, (pin_action, pin_action), pin_action, inputs=(x, y))
    ref = mv(2, 1, 1)
    assert_equivariant(P.equivariant_join, PIN, (pin_action,) * 3, pin_action, inputs=(x, y, ref))
    # the plain join is equivariant only up to the sign of odd versors
    g = Pin301(parity="odd").sample(1)[0]
    torch.testing.assert_close(P.join(pin_action(g, x), pin_action(g, y)), -pin_action(g, P.join(x, y)))
    for method in ("auto", "dense"):
        torch.testing.assert_close(P.geometric_product(x, y, method), pga.PGA.geometric_product(x, y, "dense"))
        torch.testing.assert_close(P.join(x, y, method), pga.PGA.regressive_product(x, y, "dense"))


def test_inner_product_and_norms():
    x, y = mv(4, 3), mv(4, 3)
    # oracle: <~x y>_0 over the full algebra (e0 parts square to zero)
    torch.testing.assert_close(P.inner_product(x, y), pga.PGA.scalar_product(pga.reverse(x), y))
    assert_invariant(P.inner_product, PIN, (pin_action, pin_action), inputs=(x, y))
    assert_equivariant(P.equi_layer_norm, PIN, pin_action, pin_action, inputs=x)
    normed = P.equi_layer_norm(x)
    torch.testing.assert_close(P.norm_squared(normed).mean(-2), torch.ones(4, 1, dtype=DT), rtol=1e-5, atol=1e-5)
    assert_equivariant(P.scalar_gated_gelu, PIN, pin_action, pin_action, inputs=x)


def test_grade_dropout():
    x = mv(50, 4)
    y = P.grade_dropout(x, 0.5, generator=torch.Generator().manual_seed(0))
    # every grade block is either zero or scaled by 2
    for sl in pga.GRADE_SLICES:
        block, orig = y[..., sl], x[..., sl]
        zero = block.abs().amax(-1) == 0
        torch.testing.assert_close(block[~zero], 2 * orig[~zero])
        assert zero.any() and (~zero).any()
    assert torch.equal(P.grade_dropout(x, 0.5, training=False), x)

    def fixed_draw(a):
        return P.grade_dropout(a, 0.3, generator=torch.Generator().manual_seed(7))
    assert_equivariant(fixed_draw, PIN, pin_action, pin_action, inputs=x)
    with pytest.raises(ValueError, match="probability"):
        P.grade_dropout(x, 1.0)


def test_distance_features_give_minus_squared_distance():
    p, q = torch.randn(2, 6, 3, dtype=DT)
    dot = (P.distance_features(pga.embed_point(p), "query") * P.distance_features(pga.embed_point(q), "key")).sum(-1)
    torch.testing.assert_close(dot, -((p - q) ** 2).sum(-1))
    x, y = mv(6), mv(6)

    def pair(a, b):
        return (P.distance_features(a, "query") * P.distance_features(b, "key")).sum(-1)
    assert_invariant(pair, PIN, (pin_action, pin_action), inputs=(x, y))


def naive_attention(q_mv, k_mv, v_mv, q_s, k_s, v_s, allowed):
    """Per-head loops, explicit softmax: the oracle for geometric_attention."""
    idx = list(pga.NONDEGENERATE)
    logits = (q_mv[..., idx][..., :, None, :, :] * k_mv[..., idx][..., None, :, :, :]).sum((-1, -2))
    dq, dk = P.distance_features(q_mv, "query"), P.distance_features(k_mv, "key")
    logits = logits + (dq[..., :, None, :, :] * dk[..., None, :, :, :]).sum((-1, -2))
    logits = logits + q_s @ k_s.transpose(-1, -2)
    n_feat = q_mv.shape[-2] * 13 + q_s.shape[-1]
    logits = logits / math.sqrt(n_feat)
    logits = logits.masked_fill(~allowed, float("-inf"))
    att = logits.softmax(-1)
    return torch.einsum("...ij,...jcx->...icx", att, v_mv), att @ v_s


def test_attention_matches_naive_and_is_equivariant():
    B, H, N, C, S = 2, 3, 7, 2, 4
    q, k, v = mv(B, H, N, C), mv(B, H, N, C), mv(B, H, N, C)
    qs, ks, vs = torch.randn(3, B, H, N, S, dtype=DT)
    mask = torch.ones(B, N, dtype=torch.bool)
    mask[1, 5:] = False
    am = P.attention_mask(mask)
    out_mv, out_s = P.geometric_attention(q, k, v, qs, ks, vs, attn_mask=am)
    want_mv, want_s = naive_attention(q, k, v, qs, ks, vs, am)
    torch.testing.assert_close(out_mv, want_mv)
    torch.testing.assert_close(out_s, want_s)

    def fn(a, b, c, d, e, f):
        return P.geometric_attention(a, b, c, d, e, f, attn_mask=am)
    assert_equivariant(fn, PIN, (pin_action,) * 3 + ("scalar",) * 3, (pin_action, "scalar"),
                       inputs=(q, k, v, qs, ks, vs))


def test_block_diagonal_mask_and_join_reference():
    batch = torch.tensor([0, 0, 0, 1, 1, 2])
    m = P.attention_mask(batch=batch)
    assert m.shape == (1, 6, 6) and m[0, 0, 2] and not m[0, 0, 3] and m[0, 4, 3] and not m[0, 5, 4]
    x = mv(6, 2)
    ref = P.join_reference(x, batch=batch)
    assert ref.shape == (6, 1, 16)
    torch.testing.assert_close(ref[4, 0], x[3:5].mean((0, 1)))
    padded = mv(2, 4, 2)
    mask = torch.tensor([[True, True, False, False], [True, True, True, True]])
    r = P.join_reference(padded, mask)
    assert r.shape == (2, 1, 1, 16)
    torch.testing.assert_close(r[0, 0, 0], padded[0, :2].mean((0, 1)))
    torch.testing.assert_close(r[1, 0, 0], padded[1].mean((0, 1)))
    with pytest.raises(ValueError, match="method"):
        P.equi_linear(x, torch.randn(2, 2, 9, dtype=DT), method="sparse")
