"""CliffordAlgebra against a brute-force blade construction (the oracle), plus algebraic identities."""

import itertools
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from geomlin.algebra import CliffordAlgebra
from tests.blade_oracle import brute_blade_product

METRICS = [(0, 1, 1, 1), (1, 1, 1), (1, -1, -1, -1), (1, 1, 1, 1, 1)]
DT = torch.float64


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
                    "fat_dot": gc == abs(ga - gb), "scalar": gc == 0}[kind]
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
@pytest.mark.parametrize("kind", ["geometric", "outer", "left_contraction", "fat_dot", "scalar"])
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
    # De Morgan: complement(x v y) = complement(x) ^ complement(y), the wedge by brute force
    lhs = alg.complement(alg.regressive_product(x, y))
    cx, cy = alg.complement(x), alg.complement(y)
    rhs = torch.stack([brute_product(alg, cx[i], cy[i], "outer") for i in range(5)])
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
    # (in an indefinite metric the form is a difference of squares: the rounding error scales with
    # the Euclidean size of the image, not with the form's value)
    moved = rho(v, vec)
    scale = max(1.0, float(moved.pow(2).sum()))
    torch.testing.assert_close(alg.norm_squared(moved), alg.norm_squared(vec), rtol=0, atol=1e-9 * scale)


def test_six_dimensional_algebra():
    alg = CliffordAlgebra((1, 1, 1, -1, -1, 0))
    assert alg.dim == 64 and alg.nnz("geometric") < 64 * 64
    a, b, c = torch.randn(3, 2, 64, dtype=DT)
    gp = alg.geometric_product
    want = torch.stack([brute_product(alg, a[i], b[i], "geometric") for i in range(2)])
    for method in ("sparse", "dense"):
        torch.testing.assert_close(gp(a, b, method), want, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(gp(gp(a, b), c), gp(a, gp(b, c)), rtol=1e-10, atol=1e-10)


def test_selection_matrices_are_the_terms_of_a_table():
    """Oracle: the product table summed term by term."""
    from geomlin.algebra.blades import selection_matrices

    alg = CliffordAlgebra((1, 1, 1))
    table = alg.table("geometric")
    a, b = torch.randn(2, 4, 8, dtype=DT)
    sa, sb, r = selection_matrices(table)
    assert sa.shape == (8, 64) and r.shape == (64, 8)
    torch.testing.assert_close(((a @ sa) * (b @ sb)) @ r, torch.einsum("ni,nj,ijk->nk", a, b, table))
    # only the terms of vectors (components 1..3) times anything, padded to a multiple of 8
    sa, sb, r = selection_matrices(table, left=(1, 2, 3), multiple=5)
    assert sa.shape == (8, 25) and sa[:, 24].abs().sum() == 0
    vec = a * torch.tensor([0, 1, 1, 1, 0, 0, 0, 0], dtype=DT)
    torch.testing.assert_close(((vec @ sa) * (b @ sb)) @ r, torch.einsum("ni,nj,ijk->nk", vec, b, table))


# ---------------------------------------------------------------- quaternion types (GLGENN)
@pytest.mark.parametrize("n", range(1, 9))
def test_quaternion_type_dimensions_match_the_closed_forms(n):
    """GLGENN (Filimoshina and Shirokov), dimensions of the subspaces of types 1 and 2:
    2^(n-2) + 2^(n/2-1) sin(pi n / 4) and 2^(n-2) - 2^(n/2-1) cos(pi n / 4); types 0 and 3 complete
    the even and odd halves."""
    alg = CliffordAlgebra((1.0,) * n)
    d1 = 2 ** (n - 2) + 2 ** (n / 2 - 1) * math.sin(math.pi * n / 4)
    d2 = 2 ** (n - 2) - 2 ** (n / 2 - 1) * math.cos(math.pi * n / 4)
    want = (2 ** (n - 1) - d2, d1, d2, 2 ** (n - 1) - d1)
    assert alg.quaternion_type_dims() == tuple(round(w) for w in want)
    assert [int((alg.quaternion_types == t).sum()) for t in range(4)] == list(alg.quaternion_type_dims())


def test_quaternion_types_are_the_sign_classes_of_involution_and_reversion():
    alg = CliffordAlgebra((1, -1, 0, 1, 1, -1))
    x = torch.randn(3, alg.dim, dtype=DT)
    signs = {0: (1, 1), 1: (-1, 1), 2: (1, -1), 3: (-1, -1)}
    for t, (inv, rev) in signs.items():
        xt = alg.quaternion_projection(x, t)
        torch.testing.assert_close(alg.grade_involution(xt), inv * xt)
        torch.testing.assert_close(alg.reverse(xt), rev * xt)
    torch.testing.assert_close(sum(alg.quaternion_projection(x, t) for t in range(4)), x)
    torch.testing.assert_close(alg.quaternion_projection(x, [0, 1, 2, 3]), x)


def _grade_paths_by_formula(n: int) -> int:
    """Euclidean grade paths: <e_A e_B> has grades |i-j|, |i-j|+2, ..., min(i+j, 2n-i-j)."""
    return sum(len(range(abs(i - j), min(i + j, 2 * n - i - j) + 1, 2)) for i in range(n + 1) for j in range(n + 1))


@pytest.mark.parametrize("n,grade_paths", [(3, 20), (5, 56), (6, 84), pytest.param(8, 165, marks=pytest.mark.slow)])
def test_product_path_counts(n, grade_paths):
    alg = CliffordAlgebra((1.0,) * n)
    assert int(alg.product_paths("geometric", "grade").sum()) == grade_paths == _grade_paths_by_formula(n)
    # types: a product of types (a, b) lands in the two types of parity a + b -> at most 4 * 4 * 2
    quaternion = int(alg.product_paths("geometric", "quaternion").sum())
    assert quaternion == (20 if n == 3 else 32)
    assert alg.num_subspaces("quaternion") == 4 and alg.num_subspaces("grade") == n + 1


# ---------------------------------------------------------------- outermorphisms and O(p,q,r)
def _brute_outermorphism(alg: CliffordAlgebra, A: torch.Tensor) -> torch.Tensor:
    """Column C = A e_c1 ^ A e_c2 ^ ... (wedge of the images, by the engine's outer product)."""
    cols = []
    for blade in alg.blades:
        out = torch.zeros(alg.dim, dtype=DT)
        out[0] = 1.0
        for i in blade:
            out = alg.outer_product(out, alg.embed_vector(A[:, i]))
        cols.append(out)
    return torch.stack(cols, 1)


@pytest.mark.parametrize("metric", [(1, 1, 1, 1, 1), (1, 1, 1, -1), (0, 1, 1, 1), (0, 0, 1)])
def test_outermorphism_is_the_wedge_of_images(metric):
    alg = CliffordAlgebra(metric)
    A = torch.randn(alg.n, alg.n, dtype=DT)
    torch.testing.assert_close(alg.outermorphism(A), _brute_outermorphism(alg, A), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("metric", [(1, 1, 1, 1, 1), (1, 1, 1, -1), (0, 1, 1, 1), (0, 0, 1)])
def test_orthogonal_matrices_act_as_algebra_automorphisms(metric):
    from geomlin.groups import PseudoOrthogonalGroup

    alg = CliffordAlgebra(metric)
    g, h = PseudoOrthogonalGroup(alg).sample(2, generator=torch.Generator().manual_seed(3))
    G = torch.diag(torch.tensor(alg.metric, dtype=DT))
    torch.testing.assert_close(g.T @ G @ g, G, rtol=1e-12, atol=1e-12)
    x, y = torch.randn(2, 4, alg.dim, dtype=DT)
    act = alg.act
    torch.testing.assert_close(act(g, alg.geometric_product(x, y)), alg.geometric_product(act(g, x), act(g, y)),
                               rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(act(g, act(h, x)), act(g @ h, x), rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(act(g, alg.reverse(x)), alg.reverse(act(g, x)), rtol=1e-10, atol=1e-10)
    for k in range(alg.n + 1):  # grades and their quadratic forms are kept
        xk = alg.grade_projection(x, k)
        torch.testing.assert_close(act(g, xk), alg.grade_projection(act(g, x), k), rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(alg.norm_squared(act(g, xk)), alg.norm_squared(xk), rtol=1e-10, atol=1e-10)


def test_versor_action_is_the_outermorphism_of_its_vector_map():
    from geomlin.groups import CliffordGroup

    for metric in [(1, 1, 1), (1, -1, -1, -1), (0, 1, 1, 1)]:
        alg = CliffordAlgebra(metric)
        v = CliffordGroup(alg).sample(4, generator=torch.Generator().manual_seed(0))
        x = torch.randn(3, alg.dim, dtype=DT)
        for g in v:
            images = [alg.sandwich(g, alg.embed_vector(e))[alg.grade_slices[1]] for e in torch.eye(alg.n, dtype=DT)]
            A = torch.stack(images, 1)
            torch.testing.assert_close(alg.act(g, x), alg.act(A, x), rtol=1e-10, atol=1e-10)


def test_similarities_of_pga_are_outermorphisms_no_versor_realises():
    """lambda != 1 scales distances: a similarity p -> lambda R p + t of G(3,0,1) points."""
    from geomlin.algebra import pga
    from geomlin.groups import PseudoOrthogonalGroup

    g = PseudoOrthogonalGroup(pga.PGA).sample(1, generator=torch.Generator().manual_seed(5))[0]
    lam = g[0, 0].item()
    assert abs(abs(lam) - 1) > 1e-3
    pts = torch.randn(6, 3, dtype=DT)
    moved = pga.extract_point(pga.PGA.act(g, pga.embed_point(pts)))
    ratio = torch.pdist(moved) / torch.pdist(pts)
    torch.testing.assert_close(ratio, torch.full_like(ratio, ratio[0].item()))
    assert abs(ratio[0].item() - 1) > 1e-3  # a versor would keep distances


def test_act_refuses_matrices_outside_the_group_and_float32_zero_versors():
    alg = CliffordAlgebra((1, 1, 1))
    shear = torch.eye(3, dtype=DT)
    shear[0, 1] = 0.5
    with pytest.raises(ValueError, match="preserve the quadratic form"):
        alg.act(shear, torch.randn(2, 8, dtype=DT))
    pga = CliffordAlgebra((0, 1, 1, 1))
    bad = torch.eye(4, dtype=DT)
    bad[1, 0] = 1.0  # e0 -> e0 + e1 leaves the radical
    with pytest.raises(ValueError, match="preserve the quadratic form"):
        pga.act(bad, torch.randn(16, dtype=DT))
    for dtype in (torch.float32, torch.float64):  # the same refusal in both precisions
        with pytest.raises(ValueError, match="zero norm"):
            alg.sandwich(torch.zeros(8, dtype=dtype), torch.randn(8, dtype=dtype))
        with pytest.raises(ValueError, match="zero norm"):
            pga.inverse_versor(torch.eye(16, dtype=dtype)[1])


def test_instance_tables_are_copies():
    alg = CliffordAlgebra((1, 1))
    alg.grades[0] = 7
    alg.table("geometric")[0, 0, 0] = 5.0
    fresh = CliffordAlgebra((1, 1))
    assert int(fresh.grades[0]) == 0 and float(fresh.table("geometric")[0, 0, 0]) == 1.0
