"""CliffordAlgebra against a brute-force blade construction (the oracle), plus algebraic identities."""

import itertools
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from geomlin.algebra import CliffordAlgebra

METRICS = [(0, 1, 1, 1), (1, 1, 1), (1, -1, -1, -1), (1, 1, 1, 1, 1)]
DT = torch.float64


def brute_blade_product(a: tuple, b: tuple, metric) -> tuple[float, tuple]:
    """Multiply basis blades given as sorted index tuples by bubble-sorting the concatenation.

    Independent of the engine: swaps are counted one adjacent transposition at a time and
    equal neighbours contract to their metric square.
    """
    word = list(a) + list(b)
    sign = 1.0
    changed = True
    while changed:
        changed = False
        for i in range(len(word) - 1):
            if word[i] > word[i + 1]:
                word[i], word[i + 1] = word[i + 1], word[i]
                sign = -sign
                changed = True
    out = []
    i = 0
    while i < len(word):
        if i + 1 < len(word) and word[i] == word[i + 1]:
            sign *= metric[word[i]]
            i += 2
        else:
            out.append(word[i])
            i += 1
    return sign, tuple(out)


def brute_product(alg: CliffordAlgebra, x: torch.Tensor, y: torch.Tensor, kind: str) -> torch.Tensor:
    """Brute-force product of two single multivectors ``(dim,)``."""
    basis = sorted((c for g in range(alg.n + 1) for c in itertools.combinations(range(alg.n), g)),
                   key=lambda c: (len(c), c))
    index = {c: i for i, c in enumerate(basis)}
    out = torch.zeros(alg.dim, dtype=DT)
    for i, a in enumerate(basis):
        for j, b in enumerate(basis):
            s, c = brute_blade_product(a, b, alg.metric)
            ga, gb, gc = len(a), len(b), len(c)
            keep = {"geometric": True, "outer": gc == ga + gb, "left_contraction": gc == gb - ga,
                    "inner": gc == abs(ga - gb), "scalar": gc == 0}[kind]
            if keep and s != 0:
                out[index[c]] += s * x[i] * y[j]
    return out


@pytest.mark.parametrize("metric", METRICS)
def test_basis_order_is_grade_lexicographic(metric):
    alg = CliffordAlgebra(metric)
    expected = sorted((c for g in range(len(metric) + 1) for c in itertools.combinations(range(len(metric)), g)),
                      key=lambda c: (len(c), c))
    assert list(alg.blades) == expected
    assert alg.dim == 2 ** len(metric)
    assert [s.stop - s.start for s in alg.grade_slices] == [math.comb(len(metric), g) for g in range(len(metric) + 1)]


@pytest.mark.parametrize("metric", METRICS)
@pytest.mark.parametrize("kind", ["geometric", "outer", "left_contraction", "inner", "scalar"])
@pytest.mark.parametrize("method", ["sparse", "dense"])
def test_products_match_brute_force(metric, kind, method):
    alg = CliffordAlgebra(metric)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(3, alg.dim, generator=gen, dtype=DT)
    y = torch.randn(3, alg.dim, generator=gen, dtype=DT)
    got = alg.product(x, y, kind, method)
    want = torch.stack([brute_product(alg, x[i], y[i], kind) for i in range(3)])
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_sparse_tables_are_sparse():
    # G(3,0,1): products of two e0-blades vanish (256 - 64); outer / regressive: 3^4 pairs
    pga = CliffordAlgebra((0, 1, 1, 1))
    assert pga.nnz("geometric") == 192
    assert pga.nnz("outer") == 81
    assert pga.nnz("regressive") == 81
    assert CliffordAlgebra((1, 1, 1)).nnz("geometric") == 64


@pytest.mark.parametrize("metric", METRICS)
def test_regressive_product_is_complement_dual_of_wedge(metric):
    alg = CliffordAlgebra(metric)
    x, y = torch.randn(2, 5, alg.dim, dtype=DT)
    # De Morgan: complement(x v y) = complement(x) ^ complement(y), checked blade by blade
    lhs = alg.complement(alg.regressive_product(x, y))
    rhs = alg.outer_product(alg.complement(x), alg.complement(y), method="dense")
    torch.testing.assert_close(lhs, rhs, rtol=1e-12, atol=1e-12)
    # e_A ^ complement(e_A) = I for every blade
    eye = torch.eye(alg.dim, dtype=DT)
    wedge = alg.outer_product(eye, alg.complement(eye))
    torch.testing.assert_close(wedge, alg.pseudoscalar().expand(alg.dim, alg.dim))
    torch.testing.assert_close(alg.uncomplement(alg.complement(x)), x)


def test_regressive_of_two_pseudoscalar_complements():
    # I v x = x (the pseudoscalar is the unit of the regressive product)
    alg = CliffordAlgebra((0, 1, 1, 1))
    x = torch.randn(4, 16, dtype=DT)
    torch.testing.assert_close(alg.regressive_product(alg.pseudoscalar().expand_as(x), x), x)


def test_unary_maps_and_dual():
    alg = CliffordAlgebra((1, -1, -1, -1))
    x, y = torch.randn(2, 6, alg.dim, dtype=DT)
    gp = alg.geometric_product
    torch.testing.assert_close(alg.reverse(gp(x, y)), gp(alg.reverse(y), alg.reverse(x)))
    torch.testing.assert_close(alg.grade_involution(gp(x, y)), gp(alg.grade_involution(x), alg.grade_involution(y)))
    torch.testing.assert_close(alg.clifford_conjugate(gp(x, y)),
                               gp(alg.clifford_conjugate(y), alg.clifford_conjugate(x)))
    total = sum(alg.grade_projection(x, g) for g in range(alg.n + 1))
    torch.testing.assert_close(total, x)
    # non-degenerate dual: x I^-1, and dual(x) I = x
    ps = alg.pseudoscalar().expand_as(x)
    torch.testing.assert_close(gp(alg.dual(x), ps), x)
    # Minkowski norm of a vector: t^2 - |r|^2
    v = torch.randn(5, 4, dtype=DT)
    torch.testing.assert_close(alg.norm_squared(alg.embed_vector(v))[..., 0], v[:, 0] ** 2 - (v[:, 1:] ** 2).sum(-1))


def test_exp_of_bivectors():
    g3 = CliffordAlgebra((1, 1, 1))
    theta = torch.tensor([0.3, 2.0, 7.0], dtype=DT)
    b = torch.zeros(3, 8, dtype=DT)
    b[:, 4] = theta  # e12
    expected = torch.zeros(3, 8, dtype=DT)
    expected[:, 0], expected[:, 4] = torch.cos(theta), torch.sin(theta)
    torch.testing.assert_close(g3.exp(b), expected, rtol=1e-12, atol=1e-12)
    # a Lorentz boost: e01 squares to +1 -> cosh + sinh
    sta = CliffordAlgebra((1, -1, -1, -1))
    bb = torch.zeros(16, dtype=DT)
    bb[5] = 1.5
    e = sta.exp(bb)
    assert abs(e[0] - math.cosh(1.5)) < 1e-12 and abs(e[5] - math.sinh(1.5)) < 1e-12
    # a generic bivector of G(5): exp(B) exp(-B) = 1
    g5 = CliffordAlgebra((1, 1, 1, 1, 1))
    big = g5.grade_projection(torch.randn(32, dtype=DT), 2)
    one = torch.zeros(32, dtype=DT)
    one[0] = 1
    torch.testing.assert_close(g5.geometric_product(g5.exp(big), g5.exp(-big)), one, rtol=1e-10, atol=1e-10)


def test_bad_inputs():
    with pytest.raises(ValueError, match="1, -1 or 0"):
        CliffordAlgebra((1, 2))
    with pytest.raises(ValueError, match="between 1 and"):
        CliffordAlgebra(())
    with pytest.raises(TypeError, match="sequence"):
        CliffordAlgebra("111")
    alg = CliffordAlgebra((1, 1, 1))
    with pytest.raises(ValueError, match="last dimension 8"):
        alg.geometric_product(torch.zeros(3, 7), torch.zeros(3, 8))
    with pytest.raises(TypeError, match="floating"):
        alg.reverse(torch.zeros(3, 8, dtype=torch.long))
    with pytest.raises(ValueError, match="unknown product"):
        alg.product(torch.zeros(8), torch.zeros(8), "cross")
    with pytest.raises(ValueError, match="method"):
        alg.product(torch.zeros(8), torch.zeros(8), method="fft")
    with pytest.raises(ValueError, match="grade must be"):
        alg.grade_projection(torch.zeros(8), 4)
    with pytest.raises(ValueError, match="zero norm"):
        CliffordAlgebra((0, 1, 1, 1)).inverse_versor(torch.eye(16, dtype=DT)[1])


# ---------------------------------------------------------------- property tests
def _versor(alg: CliffordAlgebra, coeffs: list[list[float]]) -> torch.Tensor:
    """Product of vectors with the given coefficients (non-null ones only)."""
    v = None
    for c in coeffs:
        vec = alg.embed_vector(torch.tensor(c, dtype=DT))
        v = vec if v is None else alg.geometric_product(v, vec)
    return v


floats = st.floats(-2.0, 2.0, allow_nan=False)


@settings(max_examples=25, deadline=None)
@given(metric=st.sampled_from(METRICS), seed=st.integers(0, 2 ** 31 - 1))
def test_associativity(metric, seed):
    alg = CliffordAlgebra(metric)
    gen = torch.Generator().manual_seed(seed)
    a, b, c = torch.randn(3, alg.dim, generator=gen, dtype=DT)
    gp = alg.geometric_product
    torch.testing.assert_close(gp(gp(a, b), c), gp(a, gp(b, c)), rtol=1e-10, atol=1e-10)
    op = alg.outer_product
    torch.testing.assert_close(op(op(a, b), c), op(a, op(b, c)), rtol=1e-10, atol=1e-10)


@settings(max_examples=25, deadline=None)
@given(metric=st.sampled_from(METRICS), k=st.integers(1, 4), seed=st.integers(0, 2 ** 31 - 1))
def test_sandwich_identities(metric, k, seed):
    alg = CliffordAlgebra(metric)
    gen = torch.Generator().manual_seed(seed)
    vecs = []
    while len(vecs) < k:  # vectors whose square is safely away from zero
        c = torch.randn(alg.n, generator=gen, dtype=DT)
        if abs(float(sum(m * ci * ci for m, ci in zip(alg.metric, c)))) > 0.3:
            vecs.append(c.tolist())
    v = _versor(alg, vecs)
    w = _versor(alg, vecs[::-1][:1])
    x, y = torch.randn(2, alg.dim, generator=gen, dtype=DT)
    rho = alg.sandwich
    # an algebra automorphism ...
    torch.testing.assert_close(rho(v, alg.geometric_product(x, y)),
                               alg.geometric_product(rho(v, x), rho(v, y)), rtol=1e-9, atol=1e-9)
    # ... that preserves grades ...
    for g in range(alg.n + 1):
        torch.testing.assert_close(rho(v, alg.grade_projection(x, g)), alg.grade_projection(rho(v, x), g),
                                   rtol=1e-9, atol=1e-9)
    # ... and composes as a group action: rho_v rho_w = rho_{vw}
    torch.testing.assert_close(rho(v, rho(w, x)), rho(alg.geometric_product(v, w), x), rtol=1e-9, atol=1e-9)
    # vectors keep their quadratic form
    vec = alg.grade_projection(x, 1)
    torch.testing.assert_close(alg.norm_squared(rho(v, vec)), alg.norm_squared(vec), rtol=1e-9, atol=1e-9)


def test_six_dimensional_algebra():
    alg = CliffordAlgebra((1, 1, 1, -1, -1, 0))
    assert alg.dim == 64 and alg.nnz("geometric") < 64 * 64
    a, b, c = torch.randn(3, 2, 64, dtype=DT)
    gp = alg.geometric_product
    torch.testing.assert_close(gp(a, b, "sparse"), gp(a, b, "dense"))
    torch.testing.assert_close(gp(gp(a, b), c), gp(a, gp(b, c)), rtol=1e-10, atol=1e-10)
