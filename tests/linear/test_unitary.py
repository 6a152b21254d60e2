"""Realified U(n) and SU(n): EMLP's test cases for its complex groups, on geomlin's real reps.

geomlin's ``V(U(n))`` is C^n as R^2n, so ``T(p, q)`` are real tensors of it (see
[`geomlin.groups.U`][geomlin.groups.classical.U]). Oracles: Weyl's integration formula
(tests/linear/torus_oracle.py: the real invariants of ``(R^2n)^(x k)`` number
``sum_a binom(k, a) dim Inv(V^a (x) conj(V)^(k - a))``), EMLP's complex bases summed the same way
where EMLP is installed, and the equivariance of every solved map through [geomlin.testing][].
"""

import math

import pytest
import torch

from geomlin.groups import SU, U
from geomlin.linear import equivariant_basis
from geomlin.reps import Scalar, T, V
from geomlin.testing import assert_equivariant
from tests.linear.torus_oracle import realified_invariants, torus_invariants
from tests.oracles import require

GROUPS = [U(1), U(2), SU(2), U(3), SU(3), U(4), SU(4)]
#: EMLP's rule for test_high_rank_representations: skip when num_constraints * d^(3k) > 1e11
#: (d = 2n here, the real dimension); q > 0 is skipped for orthogonal groups, as these are.
BUDGET = 1e11


def _high_rank_cases():
    cases = []
    for G in GROUPS:
        constraints = G.lie_algebra.shape[0] + G.discrete_generators.shape[0]
        cases += [(G, k) for k in range(11) if constraints * G.d ** (3 * k) <= BUDGET]
    return cases


def _random_map(B):
    return torch.einsum("r,roi->oi", torch.randn(len(B), dtype=torch.float64), B)


@pytest.mark.parametrize("G,k", _high_rank_cases(), ids=lambda x: repr(x))
def test_emlp_high_rank_cases(G, k):
    rep = T(k)(G)
    B = equivariant_basis(Scalar, rep)
    assert len(B) == realified_invariants(G.n, k, isinstance(G, SU))
    flat = B.flatten(1)
    assert torch.allclose(flat @ flat.T, torch.eye(len(B), dtype=torch.float64), atol=1e-10)
    if len(B):
        W = _random_map(B)
        assert_equivariant(lambda x: x @ W.T, G, Scalar, rep)


def test_u1_is_so2():
    # U(1) realified is the rotation group of the plane: T(4) has binom(4, 2) = 6 invariants
    assert len(equivariant_basis(Scalar, T(4)(U(1)))) == 6 == realified_invariants(1, 4, False)


def test_complex_structure_is_the_extra_invariant_of_t11():
    # T(1, 1) of U(n): the real part (identity) and the imaginary part (J) of the Hermitian form
    G = U(3)
    B = equivariant_basis(V(G), V(G))
    assert len(B) == 2
    J = G.complex_structure
    span = B.flatten(1)
    for M in (torch.eye(6, dtype=torch.float64), J):
        m = M.flatten() / M.norm()
        assert torch.allclose(span.T @ (span @ m), m, atol=1e-12)


def test_emlp_equivariant_matrix_case_for_su3():
    # EMLP's test_equivariant_matrix: SU(3), T(2,0)+T(1,1)+T(0)+2T(0,1) -> T(1,1)+V+V*+T(0)+T(2,0)+T(0,2)
    G = SU(3)
    rin = (T(2, 0) + T(1, 1) + T(0) + 2 * T(0, 1))(G)
    rout = (T(1, 1) + V + V.dual() + T(0) + T(2, 0) + T(0, 2))(G)
    B = equivariant_basis(rin, rout)
    expected = sum(realified_invariants(3, _rank(a) + _rank(b), True) for a in rin.blocks for b in rout.blocks)
    assert len(B) == expected
    W = _random_map(B)
    assert_equivariant(lambda x: x @ W.T, G, rin, rout)


def _rank(block) -> int:
    return 0 if block is Scalar else round(math.log(block.size, block.group.d))


@pytest.mark.parametrize("G", [U(2), SU(2), U(3), SU(3)], ids=repr)
def test_emlp_sum_case(G):
    # EMLP's test_sum: the invariants of a sum of many small tensor reps
    rep = (T(0, 2) + 3 * (T(0, 0) + T(1, 0)) + T(0, 0) + T(1, 1) + 2 * T(1, 0) + T(0, 2) + T(0, 1)
           + 3 * T(0, 2) + T(2, 0))(G)
    B = equivariant_basis(Scalar, rep)
    special = isinstance(G, SU)
    assert len(B) == sum(realified_invariants(G.n, _rank(b), special) for b in rep.blocks)
    W = _random_map(B)
    assert_equivariant(lambda x: x @ W.T, G, Scalar, rep)


@pytest.mark.parametrize("G", [U(2), SU(2)], ids=repr)
def test_emlp_product_case(G):
    # EMLP's test_prod: T(0,1) T(0,0) T(1,0)^2 T(1,0) T(0,0)^3 T(0,1) = V*^2 V^3 in some order (n = 2 only:
    # EMLP skips reps with more than 10^7 squared entries)
    rep = (T(0, 1) * T(0, 0) * T(1, 0) ** 2 * T(1, 0) * T(0, 0) ** 3 * T(0, 1))(G)
    B = equivariant_basis(Scalar, rep)
    assert len(B) == realified_invariants(G.n, 5, isinstance(G, SU))


@pytest.mark.parametrize("name,n,k,special", [("SU", 2, 2, True), ("SU", 2, 3, True), ("U", 2, 2, False),
                                              ("SU", 3, 3, True)])
def test_dimension_matches_emlp_complex_bases(name, n, k, special):
    require("emlp", extra="peers")
    import emlp.groups as eg
    from emlp.reps import T as ET

    emlp_group = getattr(eg, name)(n)
    complex_dims = [ET(a, k - a)(emlp_group).equivariant_basis().shape[-1] for a in range(k + 1)]
    assert [torus_invariants(n, a, k - a, special) for a in range(k + 1)] == complex_dims
    real = len(equivariant_basis(Scalar, T(k)((SU if special else U)(n))))
    assert real == sum(math.comb(k, a) * c for a, c in enumerate(complex_dims))
