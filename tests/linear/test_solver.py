"""The equivariant basis solver against dimension formulae and character theory."""

import time

import pytest
import torch

from geomlin.groups import SL, SO, C, D, DirectProduct, Group, Lorentz, O, S, Sp
from geomlin.linear import clear_cache, equivariant_basis
from geomlin.linear.sampled_solver import nullspace_sampled
from geomlin.reps import Scalar, V

# (group, k, l, dim): dimension of Hom((R^d)^k, (R^d)^l); depends only on k + l for the
# continuous groups (Brauer / Weyl invariant theory) and on Bell-type counts for S(n).
ORACLES = [
    (O(3), 1, 1, 1), (O(3), 2, 2, 3), (O(3), 3, 3, 15),
    (SO(3), 1, 2, 1), (SO(3), 2, 3, 6),
    (SO(2), 1, 1, 2), (SO(2), 2, 2, 6),
    (SO(4), 2, 2, 4), (SO(4), 3, 3, 25),  # 4096 unknowns: the sampled solver
    (Sp(2), 2, 2, 3),
    (Sp(1), 2, 2, 2), (Sp(1), 3, 3, 5),
    (S(2), 2, 2, 8), (S(3), 2, 2, 14), (S(4), 2, 2, 15), (S(4), 2, 3, 51),
]
# Sp(2) is not compact: 4096 unknowns of dense eigh (~15 s on 2 cores); O(5) at 15625 unknowns
SLOW_ORACLES = [(Sp(2), 3, 3, 14), (O(5), 3, 3, 15)]


@pytest.mark.parametrize("G,k,l,dim", ORACLES, ids=lambda x: repr(x))
def test_basis_dimension_oracles(G, k, l, dim):
    assert equivariant_basis(V(G) ** k, V(G) ** l).shape[0] == dim


@pytest.mark.slow
@pytest.mark.parametrize("G,k,l,dim", SLOW_ORACLES, ids=lambda x: repr(x))
def test_basis_dimension_oracles_large(G, k, l, dim):
    assert equivariant_basis(V(G) ** k, V(G) ** l).shape[0] == dim


def test_lorentz_invariant_bilinear_form_is_the_metric():
    B = equivariant_basis(V(Lorentz()) ** 2, Scalar)
    assert B.shape[0] == 1
    eta = torch.diag(torch.tensor([1.0, -1.0, -1.0, -1.0], dtype=torch.float64)) / 2
    assert torch.allclose(B[0, 0].abs(), eta.flatten().abs())


def test_so3_cross_product():
    B = equivariant_basis(V(SO(3)) ** 2, V(SO(3)))[0].reshape(3, 3, 3)
    a, b = torch.randn(3, dtype=torch.float64), torch.randn(3, dtype=torch.float64)
    out = torch.einsum("kij,i,j->k", B, a, b)
    cross = torch.linalg.cross(a, b)
    assert torch.allclose(out / out.norm(), torch.sign(out @ cross) * cross / cross.norm(), atol=1e-12)


@pytest.mark.parametrize("G", [O(3), Sp(1), Lorentz(), S(3), D(4)], ids=repr)
def test_basis_is_orthonormal_and_equivariant(G):
    v = V(G)
    rin, rout = 2 * Scalar + v + v ** 2, v ** 2 + v.dual() + Scalar
    B = equivariant_basis(rin, rout)
    gram = torch.einsum("aij,bij->ab", B, B)
    assert torch.allclose(gram, torch.eye(len(B), dtype=torch.float64), atol=1e-10)
    for g in G.sample(5):
        lhs = rout.rho(g) @ B
        rhs = B @ rin.rho(g)
        assert torch.allclose(lhs, rhs, atol=1e-9 * max(1.0, rhs.abs().max().item()))


def _character_dimension(G, rep_in, rep_out):
    """Independent oracle for finite groups: dim Hom = (1/|G|) sum_g chi_in(g) chi_out(g^-1)."""
    els = G.elements()
    chi_in = torch.diagonal(rep_in.rho(els), dim1=-2, dim2=-1).sum(-1)
    chi_out = torch.diagonal(rep_out.rho(torch.linalg.inv(els)), dim1=-2, dim2=-1).sum(-1)
    return round((chi_in * chi_out).mean().item())


def _cube_group():
    rx = torch.tensor([[1.0, 0, 0], [0, 0, -1], [0, 1, 0]])
    ry = torch.tensor([[0.0, 0, 1], [0, 1, 0], [-1, 0, 0]])
    return Group(discrete_generators=torch.stack([rx, ry]), name="Cube")


@pytest.mark.parametrize("G", [_cube_group(), D(6), C(5), S(4), DirectProduct(C(3), S(3))], ids=repr)
def test_dimension_matches_character_formula(G):
    v = V(G)
    for rin, rout in [(v, v), (v ** 2, v), (v ** 2, v ** 2), (v + Scalar, v ** 2 + v)]:
        assert equivariant_basis(rin, rout).shape[0] == _character_dimension(G, rin, rout)


def test_cache_in_memory_and_on_disk(tmp_path):
    G = SO(3)
    clear_cache()
    a = equivariant_basis(V(G) ** 2, V(G) ** 2, cache_dir=tmp_path)
    files = list(tmp_path.glob("basis-*.pt"))
    assert len(files) == 1 and not list(tmp_path.glob("*.tmp"))
    t = time.perf_counter()
    b = equivariant_basis(V(G) ** 2, V(G) ** 2)
    assert time.perf_counter() - t < 0.5 and torch.equal(a, b)
    clear_cache()
    c = equivariant_basis(V(G) ** 2, V(G) ** 2, cache_dir=tmp_path)  # read back from disk
    assert torch.equal(a, c)
    files[0].write_bytes(b"corrupt")
    clear_cache()
    d = equivariant_basis(V(G) ** 2, V(G) ** 2, cache_dir=tmp_path)  # corrupt file is rewritten
    assert torch.equal(a, d)
    assert torch.load(files[0], weights_only=True)["basis"].shape == a.shape


def test_returned_basis_is_a_copy():
    a = equivariant_basis(V(O(3)), V(O(3)))
    a.zero_()
    assert equivariant_basis(V(O(3)), V(O(3))).abs().sum() > 0


def test_solver_errors():
    with pytest.raises(ValueError, match="different groups"):
        equivariant_basis(V(O(3)), V(SO(3)))
    with pytest.raises(TypeError):
        equivariant_basis(torch.eye(3), V(O(3)))
    with pytest.raises(ValueError, match="unknowns"):  # non-compact: dense only, 10^4 unknowns
        equivariant_basis(V(SL(10)) ** 2, V(SL(10)) ** 2)


@pytest.mark.parametrize("G,k,l", [(S(4), 2, 3), (O(3), 3, 3), (C(12), 2, 2), (DirectProduct(SO(2), S(3)), 2, 2)],
                         ids=lambda x: repr(x))
def test_sampled_solver_spans_the_dense_solution(G, k, l):
    rin, rout = V(G) ** k, V(G) ** l
    dense = equivariant_basis(rin, rout).reshape(-1, rin.size * rout.size)
    sampled = nullspace_sampled(rin, rout).reshape(-1, rin.size * rout.size)
    assert sampled.shape == dense.shape
    # same span: projecting the sampled basis on the dense one changes nothing
    assert torch.allclose(sampled @ dense.T @ dense, sampled, atol=1e-12)
    assert torch.allclose(sampled @ sampled.T, torch.eye(len(sampled), dtype=torch.float64), atol=1e-12)
