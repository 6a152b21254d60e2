"""Basis sizes against the dimension formulae of the issue and the general solver.

Oracles: the hard-coded dimensions (Bell / Stirling counts for S_n, Brauer / Riordan counts for
O(n), SO(n), Sp(n)) and ``geomlin.linear.equivariant_basis`` (nullspace of the Lie algebra and
generator constraints), whose span must equal the span of the diagram basis.
"""

import numpy as np
import pytest
import torch

from geomlin.linear.diagrams import basis_size, diagram_basis, diagram_matrix, spanning_diagrams
from geomlin.linear.diagrams.basis import PRIME, evaluation_matrix, frobenius_norm_sq, independent_columns
from geomlin.reps import V

from .helpers import group_for

# (group, n, k, l, dimension) from the acceptance list
ORACLE = (
    [("S", n, 1, 1, 2) for n in (2, 3, 4, 5, 6)]
    + [("S", 2, 2, 2, 8), ("S", 3, 2, 2, 14), ("S", 4, 2, 2, 15), ("S", 5, 2, 2, 15)]
    + [("S", 4, 2, 3, 51), ("S", 4, 3, 2, 51)] + [("S", n, 2, 3, 52) for n in (5, 6, 9)]
    + [("S", 4, 3, 3, 187), ("S", 6, 3, 3, 203), ("S", 7, 3, 3, 203)]
    + [("O", n, k, l, {2: 1, 4: 3, 6: 15}[k + l]) for n in (3, 4, 5)
       for k, l in [(1, 1), (0, 2), (2, 0), (2, 2), (1, 3), (3, 1), (3, 3), (2, 4), (0, 6)]]
    + [("SO", 3, k, l, 1) for k, l in [(1, 2), (2, 1), (0, 3), (3, 0)]]
    + [("SO", 3, k, l, 6) for k, l in [(2, 3), (3, 2), (1, 4), (4, 1), (0, 5)]]
    + [("SO", 4, k, l, 4) for k, l in [(2, 2), (1, 3), (0, 4)]]
    + [("Sp", 4, k, l, 3) for k, l in [(2, 2), (1, 3), (0, 4)]]
    + [("Sp", 4, k, l, 14) for k, l in [(3, 3), (2, 4), (1, 5)]]
)

# solver comparisons that take well under a second; the rest are marked slow
FAST_SOLVER = [("S", 2, 1, 1), ("S", 3, 1, 1), ("S", 2, 2, 2), ("S", 3, 2, 2), ("O", 3, 1, 1), ("O", 3, 2, 2),
               ("O", 4, 2, 2), ("SO", 3, 1, 2), ("SO", 3, 2, 3), ("SO", 4, 2, 2), ("SO", 2, 1, 1),
               ("SO", 2, 2, 2), ("Sp", 2, 1, 1), ("Sp", 2, 2, 2), ("Sp", 4, 1, 1), ("Sp", 4, 2, 2),
               ("O", 2, 2, 2), ("S", 3, 2, 1)]
SLOW_SOLVER = [("S", 4, 2, 2), ("S", 4, 2, 3), ("S", 5, 2, 3), ("S", 4, 3, 3), ("O", 3, 3, 3), ("Sp", 4, 3, 3),
               ("SO", 3, 3, 2)]


@pytest.mark.parametrize("name,n,k,l,dim", ORACLE)
def test_basis_size_matches_dimension_formula(name, n, k, l, dim):
    assert basis_size(name, k, l, n) == dim


def _dense_basis(name, n, k, l):
    return torch.stack([diagram_matrix(d, n, name, orbit=(name == "S")).reshape(-1)
                        for d in diagram_basis(name, k, l, n)])


def _compare_with_solver(name, n, k, l):
    from geomlin.linear import equivariant_basis

    G = group_for(name, n)
    # the general solvers, never the diagram solver (that would compare diagrams with diagrams)
    method = "sampled" if G.is_compact and n ** (k + l) > 1024 else "dense"
    solved = equivariant_basis(V(G) ** k, V(G) ** l, method=method)
    ours = _dense_basis(name, n, k, l)
    assert solved.shape[0] == ours.shape[0], f"solver {solved.shape[0]} vs diagrams {ours.shape[0]}"
    assert torch.linalg.matrix_rank(ours).item() == ours.shape[0]  # a basis, not just a spanning set
    joint = torch.cat([ours, solved.reshape(solved.shape[0], -1).to(torch.float64)])
    assert torch.linalg.matrix_rank(joint).item() == ours.shape[0]  # same span


@pytest.mark.parametrize("name,n,k,l", FAST_SOLVER)
def test_basis_spans_the_solver_space(name, n, k, l):
    _compare_with_solver(name, n, k, l)


@pytest.mark.slow
@pytest.mark.parametrize("name,n,k,l", SLOW_SOLVER)
def test_basis_spans_the_solver_space_large(name, n, k, l):
    _compare_with_solver(name, n, k, l)


@pytest.mark.parametrize("name,n,k,l", [("SO", 3, 2, 3), ("SO", 3, 1, 2), ("SO", 4, 2, 2), ("Sp", 4, 3, 3),
                                        ("Sp", 2, 2, 2), ("O", 2, 2, 2), ("O", 1, 1, 1), ("SO", 2, 2, 2)])
def test_modular_selection_agrees_with_float_rank(name, n, k, l):
    span = spanning_diagrams(name, k, l, n)
    dense = torch.stack([diagram_matrix(d, n, name).reshape(-1) for d in span])
    rank = torch.linalg.matrix_rank(dense).item()
    basis = diagram_basis(name, k, l, n)
    assert len(basis) == rank
    chosen = torch.stack([diagram_matrix(d, n, name).reshape(-1) for d in basis])
    assert torch.linalg.matrix_rank(chosen).item() == rank


@pytest.mark.parametrize("name,n", [("O", 3), ("Sp", 4), ("SO", 3)])
def test_evaluation_matrix_is_the_dense_contraction_mod_p(name, n):
    """Each diagram on v_1 ⊗ .. ⊗ v_m (small integer vectors) equals the dense tensor contraction."""
    k, l = 2, 3 if name == "SO" else 2
    ds = spanning_diagrams(name, k, l, n)
    rng = np.random.default_rng(0)
    for _ in range(3):
        seed = int(rng.integers(1 << 30))
        A = evaluation_matrix(ds, n, name, num_samples=1, seed=seed)
        V_ = np.random.default_rng(seed).integers(0, PRIME, size=(1, k + l, n), dtype=np.int64)
        # centre the residues so the float64 contraction stays exact
        small = ((V_[0] + PRIME // 2) % PRIME - PRIME // 2)
        assert np.abs(small).max() > 0
        for j, d in enumerate(ds):
            T = diagram_matrix(d, n, name).reshape([n] * (k + l))
            exact = 0
            for idx in np.ndindex(*([n] * (k + l))):
                entry = int(T[idx].item())
                if entry:
                    prod = entry
                    for v, a in enumerate(idx):
                        prod = prod * int(small[v][a]) % PRIME
                    exact = (exact + prod) % PRIME
            assert int(A[0, j]) == exact % PRIME, f"{name} {d}"


def test_independent_columns_finds_dependencies():
    A = np.array([[1, 2, 3, 0], [0, 0, 0, 1], [1, 2, 3, 1]], dtype=np.int64)
    assert independent_columns(A) == [0, 3]


@pytest.mark.parametrize("name,n,k,l,orbit", [("S", 3, 2, 2, True), ("S", 3, 2, 1, False), ("O", 3, 2, 2, False),
                                              ("Sp", 4, 2, 2, False), ("SO", 3, 2, 1, False)])
def test_frobenius_norms_by_counting(name, n, k, l, orbit):
    for d in spanning_diagrams(name, k, l, n):
        if d.free and len(d.free) != n:
            continue
        D = diagram_matrix(d, n, name, orbit=orbit)
        assert frobenius_norm_sq(d, n, name, orbit) == pytest.approx((D ** 2).sum().item())


def test_basis_errors():
    with pytest.raises(ValueError, match="unknown group"):
        diagram_basis("GL", 1, 1, 3)
    with pytest.raises(ValueError, match="n = 2m even"):
        diagram_basis("Sp", 1, 1, 5)
    with pytest.raises(ValueError, match=r"n \(the dimension of R\^n\) must be >= 1"):
        diagram_basis("O", 1, 1, 0)
