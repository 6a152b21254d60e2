"""GATr primitives against independent oracles: brute-force blade algebra, the reference GATr's
formulas written out (tests/gatr/pga_oracle.py), naive attention loops; Pin(3,0,1) equivariance."""

import math

import pytest
import torch

from geomlin.algebra import pga
from geomlin.batching import batch_layout
from geomlin.gatr import planes as PL
from geomlin.gatr import primitives as P
from geomlin.groups import Pin301
from geomlin.reps import Multivectors, Scalars
from geomlin.testing import assert_equivariant, assert_invariant
from tests.gatr import pga_oracle as O

DT = torch.float64
PIN = Pin301()
MV = Multivectors(pga.PGA)
TOL = {"rtol": 1e-10, "atol": 1e-10}


def mv(*shape):
    return torch.randn(*shape, 16, dtype=DT)


# ------------------------------------------------------------------ the reference's formulas, 1e-10
def test_products_match_brute_force_blade_algebra():
    x, y = mv(6, 3), mv(6, 3)
    torch.testing.assert_close(P.geometric_product(x, y), O.product(x, y), **TOL)
    torch.testing.assert_close(P.outer_product(x, y), O.product(x, y, "outer"), **TOL)
    torch.testing.assert_close(P.inner_product(x, y), O.inner_product(x, y), **TOL)
    assert P.inner_product(x, y).shape == (6, 3, 1)
    # broadcasting one multivector against a batch
    torch.testing.assert_close(P.geometric_product(x[0, 0], y), O.product(x[0, 0].expand_as(y), y), **TOL)
    torch.testing.assert_close(P.inner_product(x[:1], y), O.inner_product(x[:1].expand_as(y), y), **TOL)


def test_join_is_the_reference_formula():
    x, y, ref = mv(5, 4), mv(5, 4), mv(5, 1)
    want = O.reference_join(x, y, ref)
    torch.testing.assert_close(P.equivariant_join(x, y, ref), want, **TOL)
    unit = torch.eye(16, dtype=DT)[14]
    torch.testing.assert_close(P.join(x, y), O.reference_join(x, y, unit), **TOL)
    # long inputs run over several column chunks
    xl, yl = mv(3 * pga.CHUNK_COLUMNS + 5), mv(3 * pga.CHUNK_COLUMNS + 5)
    torch.testing.assert_close(P.join(xl, yl), O.reference_join(xl, yl, unit), **TOL)
    torch.testing.assert_close(P.geometric_product(xl, yl), O.product(xl, yl), **TOL)


def test_point_embedding_and_extraction_are_the_reference_formulas():
    coords = torch.randn(7, 3, dtype=DT) * 3
    torch.testing.assert_close(pga.embed_point(coords), O.reference_embed_point(coords), **TOL)
    x = mv(50)
    x[:5, pga.E123] = 1e-4 * torch.rand(5, dtype=DT)  # small positive weights: both clamp to +threshold
    torch.testing.assert_close(pga.extract_point(x), O.reference_extract_point(x), **TOL)
    # the one documented difference: small negative weights keep their sign here
    x[0, pga.E123] = -1e-4
    torch.testing.assert_close(pga.extract_point(x[:1]), -O.reference_extract_point(x[:1]), **TOL)


def test_linear_basis_is_the_reference_basis_and_a_copy():
    basis = PL.linear_basis()
    torch.testing.assert_close(basis, O.reference_equi_linear_basis(), rtol=0, atol=0)
    basis[0, 0, 0] = 7.0  # the cached table is not handed out
    assert PL.linear_basis()[0, 0, 0] == 1.0
    norms = PL.reference_basis_norms()
    torch.testing.assert_close(norms, O.reference_equi_linear_basis().flatten(1).norm(dim=1), **TOL)


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
    flat = PL.linear_basis().reshape(9, -1)
    assert torch.linalg.matrix_rank(flat) == 9
    assert (A @ flat.T).abs().max() < 1e-9  # each basis map commutes with every versor


def test_equi_linear_against_the_basis_written_out():
    x = mv(2, 5, 3)
    w = torch.randn(4, 3, 9, dtype=DT)
    bias = torch.randn(4, dtype=DT)
    basis = O.reference_equi_linear_basis()
    want = torch.einsum("oib,bkl,...il->...ok", w, basis, x)
    want[..., 0] += bias
    torch.testing.assert_close(P.equi_linear(x, w, scalar_bias=bias), want, **TOL)
    planes = PL.equi_linear_planes(PL.to_planes(x), w, bias)
    torch.testing.assert_close(PL.from_planes(planes, (2, 5)), want, **TOL)
    # a bias per item
    per_item = torch.randn(2, 5, 4, dtype=DT)
    want = torch.einsum("oib,bkl,...il->...ok", w, basis, x)
    want[..., 0] += per_item
    torch.testing.assert_close(P.equi_linear(x, w, per_item), want, **TOL)
    assert_equivariant(lambda a: P.equi_linear(a, w), PIN, MV, MV, inputs=x)


def test_distance_features_are_the_reference_vectors():
    x, y = mv(9), mv(9)
    tri = list(O.REFERENCE_TRIVECTOR)
    for role, z in (("query", x), ("key", y)):
        got = P.distance_features(z, role)
        want = O.reference_distance_vector(z[..., tri], role)
        # the same 5 numbers up to the order of the three ideal components: compare the products
        assert got.shape == want.shape == (9, 5)
    dot = (P.distance_features(x, "query") * P.distance_features(y, "key")).sum(-1)
    ref_dot = (O.reference_distance_vector(x[..., tri], "query") * O.reference_distance_vector(y[..., tri], "key")).sum(-1)
    torch.testing.assert_close(dot, ref_dot, **TOL)
    # for points of unit weight: minus the squared distance, scaled by the normaliser (1 + eps)^-4
    p, q = torch.randn(2, 6, 3, dtype=DT)
    d = (P.distance_features(pga.embed_point(p), "query") * P.distance_features(pga.embed_point(q), "key")).sum(-1)
    torch.testing.assert_close(d, -((p - q) ** 2).sum(-1) / (1 + P.DISTANCE_EPS) ** 4, **TOL)

    def pair(a, b):
        return (P.distance_features(a, "query") * P.distance_features(b, "key")).sum(-1)
    assert_invariant(pair, PIN, (MV, MV), inputs=(x, y))


# ------------------------------------------------------------------ equivariance, norms, dropout
def test_products_are_equivariant_and_the_plain_join_flips_sign():
    x, y = mv(2, 5, 3), mv(2, 5, 3)
    assert_equivariant(P.geometric_product, PIN, (MV, MV), MV, inputs=(x, y))
    ref = mv(2, 1, 1)
    assert_equivariant(P.equivariant_join, PIN, (MV,) * 3, MV, inputs=(x, y, ref))
    g = Pin301(parity="odd").sample(1)[0]
    torch.testing.assert_close(P.join(MV.act(g, x), MV.act(g, y)), -MV.act(g, P.join(x, y)))
    # the e123 reference flips with odd versors too: a point's weight becomes -1
    point = pga.embed_point(torch.randn(3, dtype=DT))
    assert MV.act(g, point)[pga.E123] == pytest.approx(-1.0)


def _tanh_gelu(gate):
    """The tanh approximation of GELU written out (the reference's ``approximate="tanh"``)."""
    return 0.5 * gate * (1 + torch.tanh(math.sqrt(2 / math.pi) * (gate + 0.044715 * gate ** 3)))


def test_planes_kernels_are_the_reference_formulas():
    a, b = mv(300, 5), mv(300, 5)  # > CHUNK_COLUMNS columns: several chunks
    pa, pb = PL.to_planes(a), PL.to_planes(b)
    weight = torch.rand(300, 1, dtype=DT)
    torch.testing.assert_close(PL.from_planes(PL.geometric_product_planes(pa, pb), (300,)), O.product(a, b), **TOL)
    torch.testing.assert_close(PL.from_planes(PL.join_planes(pa, pb), (300,)),
                               O.reference_join(a, b, torch.eye(16, dtype=DT)[14]), **TOL)
    ref = torch.zeros(300, 1, 16, dtype=DT)
    ref[..., 14] = weight
    torch.testing.assert_close(PL.from_planes(PL.equivariant_join_planes(pa, pb, weight), (300,)), O.reference_join(a, b, ref),
                               **TOL)
    torch.testing.assert_close(PL.inner_product_planes(pa, pb), O.inner_product(a, b)[..., 0], **TOL)
    sq = O.inner_product(a, a).mean(-2, keepdim=True).clamp_min(0.01)
    torch.testing.assert_close(PL.from_planes(PL.equi_layer_norm_planes(pa, 0.01), (300,)), a / sq.sqrt(), **TOL)
    torch.testing.assert_close(PL.from_planes(PL.scalar_gated_gelu_planes(pa), (300,)), a * _tanh_gelu(a[..., :1]), **TOL)


def test_a_view_from_planes_goes_back_without_a_copy():
    """The layers hand views of their output planes to the next layer: converting back is free."""
    p = torch.randn(16, 12, 3, dtype=DT)
    view = PL.from_planes(p, (3, 4))
    assert view.shape == (3, 4, 3, 16) and view.data_ptr() == p.data_ptr()
    back = PL.to_planes(view)
    assert back.data_ptr() == p.data_ptr() and torch.equal(back, p)
    rows = torch.randn(3, 4, 3, 16, dtype=DT)  # row-major input: one copy
    torch.testing.assert_close(PL.from_planes(PL.to_planes(rows), (3, 4)), rows, rtol=0, atol=0)


def test_layer_norm_and_gelu_are_the_reference_formulas():
    x = mv(4, 3)
    sq = O.inner_product(x, x).mean(-2, keepdim=True).clamp_min(0.01)  # the reference clamps, not adds
    torch.testing.assert_close(P.equi_layer_norm(x), x / sq.sqrt(), **TOL)
    small = 1e-3 * x
    torch.testing.assert_close(P.equi_layer_norm(small), small / math.sqrt(0.01), **TOL)
    # the mean over another channel axis
    sq0 = O.inner_product(x, x).mean(0, keepdim=True).clamp_min(0.01)
    torch.testing.assert_close(P.equi_layer_norm(x, channel_dim=0), x / sq0.sqrt(), **TOL)
    torch.testing.assert_close(P.scalar_gated_gelu(x), x * _tanh_gelu(x[..., :1]), **TOL)
    gates = torch.randn(4, 3, 1, dtype=DT)
    torch.testing.assert_close(P.scalar_gated_gelu(x, gates), x * _tanh_gelu(gates), **TOL)
    exact = 0.5 * gates * (1 + torch.erf(gates / math.sqrt(2)))
    torch.testing.assert_close(P.scalar_gated_gelu(x, gates, "none"), x * exact, **TOL)
    assert_equivariant(P.equi_layer_norm, PIN, MV, MV, inputs=x)
    assert_equivariant(P.scalar_gated_gelu, PIN, MV, MV, inputs=x)


def test_grade_dropout():
    x = mv(50, 4)
    y = P.grade_dropout(x, 0.5, generator=torch.Generator().manual_seed(0))
    for sl in pga.GRADE_SLICES:  # every grade block is either zero or scaled by 2
        block, orig = y[..., sl], x[..., sl]
        zero = block.abs().amax(-1) == 0
        torch.testing.assert_close(block[~zero], 2 * orig[~zero])
        assert zero.any() and (~zero).any()
    assert torch.equal(P.grade_dropout(x, 0.5, training=False), x)

    def fixed_draw(a):
        return P.grade_dropout(a, 0.3, generator=torch.Generator().manual_seed(7))
    assert_equivariant(fixed_draw, PIN, MV, MV, inputs=x)


# ------------------------------------------------------------------ attention
def naive_attention(q_mv, k_mv, v_mv, q_s, k_s, v_s, keep, weights):
    """The reference's attention logit written out, explicit softmax: ``(B, H, N, C, 16)`` inputs,
    ``k/v`` with one head (multi-query), ``keep (B, N)`` key mask, ``weights (H, C)``."""
    ipc = O.REFERENCE_IP_WITHOUT_TRIVECTOR
    tri = O.REFERENCE_TRIVECTOR
    B, H, N, C, _ = q_mv.shape
    logits = torch.zeros(B, H, N, N, dtype=DT)
    for b, h, i, j in torch.cartesian_prod(torch.arange(B), torch.arange(H), torch.arange(N), torch.arange(N)).tolist():
        total = (q_s[b, h, i] * k_s[b, 0, j]).sum()
        for c in range(C):
            total = total + (q_mv[b, h, i, c, ipc] * k_mv[b, 0, j, c, ipc]).sum()
            dq = O.reference_distance_vector(q_mv[b, h, i, c, tri], "query")
            dk = O.reference_distance_vector(k_mv[b, 0, j, c, tri], "key")
            total = total + weights[h, c] * (dq * dk).sum()
        logits[b, h, i, j] = total / math.sqrt(12 * C + q_s.shape[-1])
    logits = logits.masked_fill(~keep[:, None, None, :], float("-inf"))
    att = logits.softmax(-1)
    return torch.einsum("bhij,bjcx->bhicx", att, v_mv[:, 0]), torch.einsum("bhij,bjc->bhic", att, v_s[:, 0])


def test_attention_matches_the_written_out_formula_and_is_equivariant():
    B, H, N, C, S = 2, 3, 5, 2, 4
    q = mv(B, H, N, C)
    k, v = mv(B, 1, N, C), mv(B, 1, N, C)
    qs = torch.randn(B, H, N, S, dtype=DT)
    ks, vs = torch.randn(2, B, 1, N, S, dtype=DT)
    keep = torch.ones(B, N, dtype=torch.bool)
    keep[1, 3:] = False
    weights = torch.rand(H, C, dtype=DT) + 0.5
    want_mv, want_s = naive_attention(q, k, v, qs, ks, vs, keep, weights)
    for mask in (batch_layout(keep), P.attention_mask(batch_layout(keep))):
        out_mv, out_s = P.geometric_attention(q, k, v, qs, ks, vs, attn_mask=mask, distance_weights=weights)
        torch.testing.assert_close(out_mv, want_mv, **TOL)
        torch.testing.assert_close(out_s, want_s, **TOL)

    def fn(a, b, c, d, e, f):
        return P.geometric_attention(a, b, c, d, e, f, attn_mask=batch_layout(keep), distance_weights=weights)
    assert_equivariant(fn, PIN, (MV,) * 3 + (Scalars(),) * 3, (MV, Scalars()),
                       inputs=(q, k, v, qs, ks, vs))


@pytest.mark.parametrize("method", ["bucketed", "chunked", "masked"])
def test_flat_layouts_equal_attention_per_set(method, monkeypatch):
    sizes = [3, 7, 1, 12, 7, 30]  # several size groups, a singleton, an uneven mix
    batch = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes))
    n = len(batch)
    q, k, v = torch.randn(1, n, 2, 8, dtype=DT), torch.randn(1, n, 1, 8, dtype=DT), torch.randn(1, n, 1, 8, dtype=DT)
    layout = batch_layout(batch=batch, method=method)
    import geomlin.gatr.attention as A
    got = A.attend(q, k, v, layout, 0.3)
    start = 0
    for size in sizes:
        sl = slice(start, start + size)
        want = A.attend(q[:, sl], k[:, sl], v[:, sl], None, 0.3)
        torch.testing.assert_close(got[:, sl], want, **TOL)
        start += size
    torch.testing.assert_close(A.attend_masked(q, k, v, P.attention_mask(layout), 0.3), got, **TOL)
    if method == "chunked":  # query chunks smaller than the sets, crossing set borders
        monkeypatch.setattr(A, "CHUNK_ITEMS", 5)
        small = A._attend_chunked(q[0], k[0], v[0], layout, 0.3, chunk=5)
        torch.testing.assert_close(small[None], got, **TOL)


def test_bucketed_layout_builds_no_items_by_items_mask(monkeypatch):
    import geomlin.gatr.attention as A
    seen = []
    real = A.F.scaled_dot_product_attention

    def spy(q, k, v, attn_mask=None, **kw):
        seen.append(None if attn_mask is None else attn_mask.numel())
        return real(q, k, v, attn_mask=attn_mask, **kw)
    monkeypatch.setattr(A.F, "scaled_dot_product_attention", spy)
    n_sets, size = 4, 64
    batch = torch.arange(n_sets).repeat_interleave(size)
    layout = batch_layout(batch=batch)
    assert len(layout.groups) == 1 and layout.groups[0].index is None  # a reshape, no copy, no mask
    q = torch.randn(1, n_sets * size, 2, 8)
    A.attend(q, q[:, :, :1], q[:, :, :1], layout, 1.0)
    assert seen == [None]
    uneven = torch.repeat_interleave(torch.arange(3), torch.tensor([40, 50, 64]))
    A.attend(q[:, :154], q[:, :154, :1], q[:, :154, :1], batch_layout(batch=uneven), 1.0)
    assert max(s for s in seen if s is not None) <= 3 * 64  # a key mask per set, not items x items


def test_join_reference_per_set():
    batch = torch.tensor([0, 0, 0, 1, 1, 2])
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
    canonical = P.canonical_reference(DT)
    assert canonical[pga.E123] == 1 and canonical[pga.E0123] == 1 and canonical.abs().sum() == 2


def cross_attention_oracle(q_mv, k_mv, v_mv, q_s, k_s, v_s, weights, keep=None):
    """The reference GATr's ``geometric_attention`` for ``Nq`` queries over ``Nk`` keys, written out:
    ``q (B, H, Nq, C, 16)``, ``k, v (B, Hk, Nk, C, 16)`` (``Hk`` 1 or ``H``), scalars likewise,
    ``weights (H, C)``, ``keep (B, Nk)`` key mask. Logit ``(q_s . k_s + sum_c [<q_c, k_c>_7 +
    w_hc d(q_c) . d(k_c)]) / sqrt(12 C + S)``, softmax over the keys."""
    ipc, tri = O.REFERENCE_IP_WITHOUT_TRIVECTOR, O.REFERENCE_TRIVECTOR
    C, S = q_mv.shape[-2], q_s.shape[-1]
    k_mv, v_mv, k_s, v_s = (t.expand(-1, q_mv.shape[1], *t.shape[2:]) for t in (k_mv, v_mv, k_s, v_s))
    ip = torch.einsum("bhicx,bhjcx->bhij", q_mv[..., ipc], k_mv[..., ipc])
    dq = O.reference_distance_vector(q_mv[..., tri], "query") * weights[None, :, None, :, None]
    dk = O.reference_distance_vector(k_mv[..., tri], "key")
    dist = torch.einsum("bhicx,bhjcx->bhij", dq, dk)
    logits = (ip + dist + torch.einsum("bhis,bhjs->bhij", q_s, k_s)) / math.sqrt(12 * C + S)
    if keep is not None:
        logits = logits.masked_fill(~keep[:, None, None, :], float("-inf"))
    att = logits.softmax(-1)
    return torch.einsum("bhij,bhjcx->bhicx", att, v_mv), torch.einsum("bhij,bhjc->bhic", att, v_s)


@pytest.mark.parametrize("kv_heads", [1, 3])
@pytest.mark.parametrize("num_queries,num_keys", [(5, 7), (7, 5), (1, 4)])
def test_cross_attention_matches_the_reference_formula(num_queries, num_keys, kv_heads):
    B, H, C, S = 2, 3, 2, 4
    q, k, v = mv(B, H, num_queries, C), mv(B, kv_heads, num_keys, C), mv(B, kv_heads, num_keys, C)
    qs = torch.randn(B, H, num_queries, S, dtype=DT)
    ks, vs = torch.randn(2, B, kv_heads, num_keys, S, dtype=DT)
    weights = torch.rand(H, C, dtype=DT) + 0.5
    want_mv, want_s = cross_attention_oracle(q, k, v, qs, ks, vs, weights)
    out_mv, out_s = P.geometric_attention(q, k, v, qs, ks, vs, distance_weights=weights)
    assert out_mv.shape == (B, H, num_queries, C, 16) and out_s.shape == (B, H, num_queries, S)
    torch.testing.assert_close(out_mv, want_mv, **TOL)
    torch.testing.assert_close(out_s, want_s, **TOL)
    # a padded key mask over the keys, as a layout and as a dense boolean mask
    keep = torch.ones(B, num_keys, dtype=torch.bool)
    keep[1, num_keys // 2 + 1:] = False
    want_mv, want_s = cross_attention_oracle(q, k, v, qs, ks, vs, weights, keep)
    for mask in (batch_layout(keep), keep[:, None, None, :]):
        out_mv, out_s = P.geometric_attention(q, k, v, qs, ks, vs, attn_mask=mask, distance_weights=weights)
        torch.testing.assert_close(out_mv, want_mv, **TOL)
        torch.testing.assert_close(out_s, want_s, **TOL)


def test_cross_attention_is_equivariant_and_refuses_mismatched_items():
    q, k, v = mv(2, 2, 5, 2), mv(2, 1, 7, 2), mv(2, 1, 7, 2)
    assert_equivariant(lambda a, b, c: P.geometric_attention(a, b, c)[0], PIN, (MV,) * 3, MV,
                       inputs=(q, k, v))
    with pytest.raises(ValueError, match="same number of items"):
        P.geometric_attention(q, k, mv(2, 1, 6, 2))
    flat = batch_layout(batch=torch.tensor([0, 0, 0, 1, 1]))
    with pytest.raises(ValueError, match="cross-attention"):
        P.geometric_attention(mv(1, 5, 2), mv(1, 7, 2), mv(1, 7, 2), attn_mask=flat)
