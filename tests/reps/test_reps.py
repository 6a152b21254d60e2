"""Representations: homomorphism, Lie algebra derivative, duals, algebra, e3nn bridge."""

import pytest
import torch
from e3nn import o3

from geomlin.groups import SO, Lorentz, O, S, Sp
from geomlin.reps import IrrepsRep, Scalar, SumRep, V, wigner_D_from_matrix

GROUPS = [O(3), SO(4), Sp(2), Lorentz(), S(4)]


def _reps(G):
    v = V(G)
    return [v, 2 * Scalar + v, v ** 2, v * v.dual(), (v + Scalar) ** 2, v.dual() ** 2 + v]


@pytest.mark.parametrize("G", GROUPS, ids=repr)
def test_rho_is_a_homomorphism(G):
    a, b = G.sample(3), G.sample(3)
    for rep in _reps(G):
        lhs = rep.rho(a @ b)
        rhs = rep.rho(a) @ rep.rho(b)
        assert torch.allclose(lhs, rhs, atol=1e-9 * max(1.0, rhs.abs().max().item())), rep


@pytest.mark.parametrize("G", [g for g in GROUPS if g.lie_algebra.shape[0]], ids=repr)
def test_drho_exponentiates_to_rho(G):
    A = torch.einsum("k,kij->ij", 0.3 * torch.randn(G.lie_algebra.shape[0], dtype=torch.float64), G.lie_algebra)
    for rep in _reps(G):
        assert torch.allclose(torch.linalg.matrix_exp(rep.drho(A)), rep.rho(torch.linalg.matrix_exp(A)),
                              atol=1e-10), rep


def test_dual_is_inverse_transpose_and_differs_for_lorentz():
    G = Lorentz()
    g = G.sample(2)
    v = V(G)
    assert torch.allclose(v.dual().rho(g), torch.linalg.inv(g).transpose(-1, -2))
    assert not torch.allclose(v.dual().rho(g), v.rho(g))
    assert v.dual().dual() == v


def test_sizes_and_algebra():
    G = O(3)
    v = V(G)
    assert (3 * v).size == 9 and (v ** 3).size == 27 and (v ** 0) is Scalar
    assert (2 * Scalar + v ** 2).size == 11
    assert (v * Scalar) == v
    assert isinstance(v + v, SumRep) and len((v + (v + Scalar)).blocks) == 3
    assert repr(2 * Scalar + v ** 2) == "2*Scalar + V[O(3)]**2"


def test_mixing_groups_is_an_error():
    with pytest.raises(ValueError, match="different groups"):
        V(O(3)) + V(SO(3))
    with pytest.raises(ValueError, match="different groups"):
        V(O(3)) * V(O(2))


def test_bad_rep_inputs():
    v = V(O(3))
    with pytest.raises(TypeError):
        v + 3.0
    with pytest.raises(ValueError):
        v ** -1
    with pytest.raises(ValueError):
        v.rho(torch.eye(4, dtype=torch.float64))
    with pytest.raises(ValueError):
        v.rho(torch.ones(3, 4, dtype=torch.float64))
    with pytest.raises(TypeError):
        V(3)
    with pytest.raises(ValueError, match="unknown group"):
        V("X(3)")  # no such group (U(3) is one now)
    assert V("O3") == v  # strings are documented aliases of the groups


def test_irreps_bridge_matches_e3nn_up_to_its_precision():
    irreps = o3.Irreps("2x0e + 1o + 2e + 3o")
    rep = IrrepsRep(irreps)
    g = O(3).sample(5)
    # e3nn's own D_from_matrix goes through Euler angles: only ~1e-6 accurate
    assert torch.allclose(rep.rho(g), irreps.D_from_matrix(g), atol=1e-5)
    assert rep.to_irreps() == irreps
    assert V(O(3)).to_irreps() == o3.Irreps("1o")
    assert torch.allclose(IrrepsRep("1o").rho(g), g, atol=1e-14)


def test_exact_wigner_matrices_are_homomorphisms_and_match_spherical_harmonics():
    irreps = o3.Irreps("0e + 1o + 2e + 3o + 4e")
    a, b = O(3).sample(4), O(3).sample(4)
    Da, Db, Dab = (wigner_D_from_matrix(irreps, g) for g in (a, b, a @ b))
    assert torch.allclose(Dab, Da @ Db, atol=1e-13)
    x = torch.randn(10, 3, dtype=torch.float64)
    for g, D in zip(a, Da):  # spherical harmonics are the independent oracle
        lhs = o3.spherical_harmonics(irreps, x @ g.T, normalize=True)
        rhs = o3.spherical_harmonics(irreps, x, normalize=True) @ D.T
        assert torch.allclose(lhs, rhs, atol=1e-13)


def test_wigner_at_rotation_by_pi():
    R = torch.diag(torch.tensor([1.0, -1.0, -1.0], dtype=torch.float64))
    assert torch.allclose(wigner_D_from_matrix(o3.Irreps("1o"), R), R, atol=1e-14)


def test_irreps_rep_errors():
    with pytest.raises(ValueError):
        IrrepsRep("1o", group=O(2))
    with pytest.raises(ValueError):
        IrrepsRep("not irreps")


def test_reps_copy_and_pickle():
    import copy
    import pickle

    G = O(3)
    rep = 2 * Scalar + V(G) ** 2 + V(G).dual()
    assert copy.deepcopy(rep) == rep
    assert pickle.loads(pickle.dumps(rep)) == rep
    assert copy.deepcopy(V(G) * V(G).dual()) == V(G) * V(G).dual()


# ------------------------------------------------------------------------- group-free reps
def test_group_free_reps_bind_like_emlp():
    from geomlin.reps import T

    G = O(5)
    free = 4 * T(0) + 2 * T(1) + T(2)
    bound = free(G)
    assert bound == 4 * Scalar + 2 * V(G) + V(G) ** 2 and bound.size == 4 + 10 + 25
    assert repr(free) == "4*Scalar + 2*V + V**2"
    assert T(2, 1)(Lorentz()) == V(Lorentz()) ** 2 * V(Lorentz()).dual()
    assert T(1, group=G) == V(G) and T(0)(G) is Scalar
    assert (V ** 2 + V)(G) == V(G) ** 2 + V(G)  # V alone is group-free, V(G) binds it
    assert V(G) + T(2) == V(G) + V(G) ** 2  # mixing binds to the bound rep's group
    assert (Scalar + T(1))(G) == Scalar + V(G)
    assert bound(G) is bound  # binding a bound rep checks the group
    with pytest.raises(ValueError, match="not of"):
        bound(O(3))
    assert hash(T(1) + T(2)) == hash(V + V ** 2) and T(1) * T(1) == T(2)


def test_group_free_reps_transform_correctly_once_bound():
    from geomlin.reps import T

    G = Lorentz()
    rep = (T(1, 1) + 2 * T(0, 1))(G)
    g = G.sample(3, generator=torch.Generator().manual_seed(0))
    ginvT = torch.linalg.inv(g).transpose(-1, -2)
    expected = torch.block_diag(*[torch.kron(a, b) for a, b in [(g[0], ginvT[0])]], ginvT[0], ginvT[0])
    assert torch.allclose(rep.rho(g[0]), expected, atol=1e-10)


def test_dual_powers_print_unambiguously():
    v = V(O(3))
    assert repr(v.dual() ** 2) == "V[O(3)].dual()**2"
    assert repr(v * v.dual()) == "V[O(3)]*V[O(3)].dual()"
    assert repr((v + Scalar).dual()) == "V[O(3)].dual() + Scalar"
    assert repr((v ** 2).dual()) == "V[O(3)].dual()**2"
    assert "***" not in repr(v.dual() ** 3)
    assert repr(V.dual() ** 2) == "V.dual()**2"


def test_a_dual_brackets_only_what_prints_as_several_terms():
    from geomlin.reps.base import DualRep
    from geomlin.reps.irreps import IrrepsRep

    irreps = IrrepsRep("1x1o")
    assert repr(DualRep(irreps)) == f"{irreps!r}.dual()"  # one term: no brackets
    pair = V(O(3)) * V(O(3))
    assert repr(DualRep(pair)) == f"({pair!r}).dual()"


def test_rho_refuses_non_members():
    with pytest.raises(ValueError, match="orthogonal"):
        IrrepsRep("1o + 2e").rho(torch.eye(3, dtype=torch.float64) + 0.1)  # a shear, not a rotation
    with pytest.raises(ValueError, match="determinant"):
        (V(SO(3)) ** 2).rho(torch.diag(torch.tensor([1.0, 1.0, -1.0], dtype=torch.float64)))
    with pytest.raises(ValueError, match="form-preserving"):
        V(Lorentz()).dual().rho(O(4).sample(1)[0])
    with pytest.raises(ValueError, match="orthogonal"):
        wigner_D_from_matrix("1o", 2 * torch.eye(3, dtype=torch.float64))


def test_so3_generators_leave_the_default_dtype_alone():
    from geomlin.reps.irreps import _so3_generators_table, so3_generators_float64

    _so3_generators_table.cache_clear()
    before = torch.get_default_dtype()
    X = so3_generators_float64(3)
    assert torch.get_default_dtype() is before and X.dtype == torch.float64
    # oracle: the so(3) commutation relations [X_i, X_j] = eps_ijk X_k (e3nn's order x, y, z)
    for i, j, k in [(0, 1, 2), (1, 2, 0), (2, 0, 1)]:
        assert torch.allclose(X[i] @ X[j] - X[j] @ X[i], X[k], atol=1e-13)
    # and e3nn's own float32 generators agree to their precision
    assert torch.allclose(X.float(), o3.so3_generators(3), atol=1e-5)
    X.zero_()  # a copy: the cached table is untouched
    assert so3_generators_float64(3).abs().sum() > 0
