"""Representations: homomorphism, Lie algebra derivative, duals, algebra, e3nn bridge."""

import pytest
import torch
from e3nn import o3

from geomlin.groups import SO, Lorentz, O, S, Sp
from geomlin.reps import Rep, Scalar, SumRep, V, wigner_D_from_matrix

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
        V("O3")


def test_irreps_bridge_matches_e3nn_up_to_its_precision():
    irreps = o3.Irreps("2x0e + 1o + 2e + 3o")
    rep = Rep.from_irreps(irreps)
    g = O(3).sample(5)
    # e3nn's own D_from_matrix goes through Euler angles: only ~1e-6 accurate
    assert torch.allclose(rep.rho(g), irreps.D_from_matrix(g), atol=1e-5)
    assert rep.to_irreps() == irreps
    assert V(O(3)).to_irreps() == o3.Irreps("1o")
    assert torch.allclose(Rep.from_irreps("1o").rho(g), g, atol=1e-14)


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
        Rep.from_irreps("1o", group=O(2))
    with pytest.raises(ValueError):
        Rep.from_irreps("not irreps")


def test_reps_copy_and_pickle():
    import copy
    import pickle

    G = O(3)
    rep = 2 * Scalar + V(G) ** 2 + V(G).dual()
    assert copy.deepcopy(rep) == rep
    assert pickle.loads(pickle.dumps(rep)) == rep
    assert copy.deepcopy(V(G) * V(G).dual()) == V(G) * V(G).dual()
