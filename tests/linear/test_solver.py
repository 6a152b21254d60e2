"""The equivariant basis solver against dimension formulae and character theory."""

import math

import pytest
import torch

from geomlin.groups import SL, SO, C, D, DirectProduct, Group, Lorentz, O, S, Sp
from geomlin.linear import equivariant_basis
from geomlin.linear.sampled_solver import nullspace_sampled
from geomlin.reps import Scalar, V
from geomlin.tables import clear_caches

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
# large problems through each general solver (the "auto" route reads these off diagrams):
# Sp(2) is not compact, 4096 unknowns of dense eigh (~15 s on 2 cores); O(5) 15625 unknowns sampled
SLOW_ORACLES = [(Sp(2), 3, 3, 14, "dense"), (O(5), 3, 3, 15, "sampled"), (SO(4), 3, 3, 25, "sampled")]


@pytest.mark.parametrize("G,k,l,dim", ORACLES, ids=lambda x: repr(x))
def test_basis_dimension_oracles(G, k, l, dim):
    assert equivariant_basis(V(G) ** k, V(G) ** l).shape[0] == dim


@pytest.mark.slow
@pytest.mark.parametrize("G,k,l,dim,method", SLOW_ORACLES, ids=lambda x: repr(x))
def test_basis_dimension_oracles_large(G, k, l, dim, method):
    assert equivariant_basis(V(G) ** k, V(G) ** l, method=method).shape[0] == dim


def _boost(rapidity: float, axis: int) -> torch.Tensor:
    """A Lorentz boost along ``axis`` written out: cosh/sinh in the (t, x_axis) plane."""
    g = torch.eye(4, dtype=torch.float64)
    c, s = math.cosh(rapidity), math.sinh(rapidity)
    g[0, 0] = g[axis, axis] = c
    g[0, axis] = g[axis, 0] = s
    return g


@pytest.mark.parametrize("method", ["dense", "diagrams"])
def test_lorentz_invariant_bilinear_form_is_the_metric(method):
    # oracle: the Minkowski form diag(1, -1, -1, -1) written out, signs included; a Euclidean
    # form (identity) has the same absolute values and must not pass
    B = equivariant_basis(V(Lorentz()) ** 2, Scalar, method=method)
    assert B.shape[0] == 1
    form = B[0, 0].reshape(4, 4) / B[0, 0, 0]  # normalise so the time-time entry is +1
    eta = torch.diag(torch.tensor([1.0, -1.0, -1.0, -1.0], dtype=torch.float64))
    assert torch.allclose(form, eta, atol=1e-12)
    assert not torch.allclose(form, torch.eye(4, dtype=torch.float64), atol=0.5)
    # and it is invariant under boosts written out by hand (x^T eta x is the proper time)
    for axis, rapidity in [(1, 0.7), (2, -1.3), (3, 2.0)]:
        g = _boost(rapidity, axis)
        assert torch.allclose(g.T @ form @ g, form, atol=1e-12)


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


def _no_solving(monkeypatch):
    """Make every solve fail, so a result can only come from a cache."""
    from geomlin.linear import solver

    def refuse(*args, **kwargs):
        raise AssertionError("solved again instead of reading the cache")

    monkeypatch.setattr(solver, "_solve_constraints", refuse)


def test_cache_in_memory_and_on_disk(tmp_path, monkeypatch):
    G = SO(3)
    clear_caches()
    a = equivariant_basis(V(G) ** 2, V(G) ** 2, cache_dir=tmp_path)
    files = list(tmp_path.glob("basis-*.pt"))
    assert len(files) == 1 and not list(tmp_path.glob("*.tmp"))
    with monkeypatch.context() as m:
        _no_solving(m)
        b = equivariant_basis(V(G) ** 2, V(G) ** 2)  # from memory
        clear_caches()
        c = equivariant_basis(V(G) ** 2, V(G) ** 2, cache_dir=tmp_path)  # read back from disk
    assert torch.equal(a, b) and torch.equal(a, c)
    files[0].write_bytes(b"corrupt")
    clear_caches()
    d = equivariant_basis(V(G) ** 2, V(G) ** 2, cache_dir=tmp_path)  # corrupt file is rewritten
    assert torch.equal(a, d)
    assert torch.load(files[0], weights_only=True)["basis"].shape == a.shape


def test_disk_cache_is_per_block_and_shared_by_layers(tmp_path, monkeypatch):
    from geomlin.linear import EquivariantLinear

    G = Lorentz()
    rin, rout = V(G) + V(G) ** 2, V(G).dual() + Scalar
    clear_caches()
    first = EquivariantLinear(rin, rout, cache_dir=tmp_path).double()
    assert len(list(tmp_path.glob("basis-*.pt"))) >= 3  # one file per pair of block types
    clear_caches()
    with monkeypatch.context() as m:
        _no_solving(m)
        second = EquivariantLinear(rin, rout, cache_dir=tmp_path).double()  # a new process would do this
        basis = equivariant_basis(rin, rout, cache_dir=tmp_path)
    second.load_state_dict(first.state_dict())
    x = torch.randn(3, rin.size, dtype=torch.float64)
    assert torch.equal(first(x), second(x))
    assert basis.shape[0] == first.num_coefficients


def test_returned_basis_is_a_copy():
    a = equivariant_basis(V(O(3)), V(O(3)))
    a.zero_()
    assert equivariant_basis(V(O(3)), V(O(3))).abs().sum() > 0


def test_solver_errors():
    with pytest.raises(ValueError, match="different groups"):
        equivariant_basis(V(O(3)), V(SO(3)))
    with pytest.raises(TypeError):
        equivariant_basis(torch.eye(3), V(O(3)))
    # SL(10) conjugated by a random matrix: non-compact with no diagonal generator, so the dense
    # solver only, and 10^4 unknowns are beyond it (SL(10) itself is solved on its torus weights)
    P = torch.randn(10, 10, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    skewed = Group(lie_algebra=P @ SL(10).lie_algebra @ torch.linalg.inv(P), name="SL(10)^P")
    with pytest.raises(ValueError, match="unknowns"):
        equivariant_basis(V(skewed) ** 2, V(skewed) ** 2)
    assert equivariant_basis(V(SL(10)) ** 2, V(SL(10)) ** 2).shape[0] == 2  # identity and swap
    with pytest.raises(ValueError, match="method must be one of"):
        equivariant_basis(V(O(3)), V(O(3)), method="svd")
    with pytest.raises(ValueError, match="compact"):
        equivariant_basis(V(Lorentz()) ** 3, V(Lorentz()) ** 3, method="sampled")
    with pytest.raises(ValueError, match="method='diagrams'"):
        equivariant_basis(V(SL(3)) ** 2, V(SL(3)) ** 2, method="diagrams")


def test_group_free_reps_are_bound_by_group():
    from geomlin.reps import T

    a = equivariant_basis(T(2), T(1), group="SO(3)")
    b = equivariant_basis(V(SO(3)) ** 2, V(SO(3)))
    assert torch.equal(a, b)
    with pytest.raises(ValueError, match="without a group"):
        equivariant_basis(T(2), T(1))


@pytest.mark.parametrize("G,k,l", [(S(4), 2, 3), (O(3), 3, 3), (C(12), 2, 2), (DirectProduct(SO(2), S(3)), 2, 2)],
                         ids=lambda x: repr(x))
def test_sampled_solver_spans_the_dense_solution(G, k, l):
    rin, rout = V(G) ** k, V(G) ** l
    dense = equivariant_basis(rin, rout, method="dense").reshape(-1, rin.size * rout.size)
    sampled = nullspace_sampled(rin, rout).reshape(-1, rin.size * rout.size)
    assert sampled.shape == dense.shape
    # same span: projecting the sampled basis on the dense one changes nothing
    assert torch.allclose(sampled @ dense.T @ dense, sampled, atol=1e-12)
    assert torch.allclose(sampled @ sampled.T, torch.eye(len(sampled), dtype=torch.float64), atol=1e-12)
