"""The diagram solver: bases of tensor reps read off diagrams, against the general solvers.

Oracles: the dense null-space solver (an independent computation from the generators), the
dimension formulae of invariant theory, and the equivariance of every basis element under random
group elements (reflections, time reversal and boosts included).
"""

import pytest
import torch

from geomlin.groups import SO, Lorentz, O, S, SO13p, Sp
from geomlin.linear import equivariant_basis
from geomlin.linear.diagram_solver import applies, diagram_solution, tensor_slots
from geomlin.linear.solver import basis_method
from geomlin.reps import Scalar, T, V

GROUPS = [O(3), SO(3), S(3), Sp(1), Lorentz(), SO13p(), SO(4), Sp(2)]


def _pairs(G):
    v = V(G)
    pairs = [(v ** 2, v ** 2), (v.dual() ** 2, Scalar), (v ** 2 * v.dual(), v * v.dual()), (v ** 2, v.dual() ** 2)]
    if G.d <= 3:  # 4-dimensional groups: keep the dense comparisons small (< 300 unknowns)
        pairs += [(v * v.dual(), v.dual() * v ** 2), (v ** 3, v), (v.dual() * v ** 2, v)]
    return pairs


def _equivariance_error(G, rin, rout, B):
    g = G.sample(4, generator=torch.Generator().manual_seed(1))
    lhs = rout.rho(g)[:, None] @ B
    rhs = B @ rin.rho(g)[:, None]
    return ((lhs - rhs).abs().max() / rin.rho(g).abs().max() / rout.rho(g).abs().max()).item()


@pytest.mark.parametrize("G", GROUPS, ids=repr)
def test_diagram_bases_span_the_dense_solution(G):
    for rin, rout in _pairs(G):
        ours = equivariant_basis(rin, rout, method="diagrams").flatten(1)
        dense = equivariant_basis(rin, rout, method="dense").flatten(1)
        assert ours.shape == dense.shape, (rin, rout)
        if len(ours):
            eye = torch.eye(len(ours), dtype=torch.float64)
            assert torch.allclose(ours @ ours.T, eye, atol=1e-12)
            assert torch.allclose(ours @ dense.T @ dense, ours, atol=1e-10)  # same span
            assert _equivariance_error(G, rin, rout, ours.reshape(-1, rout.size, rin.size)) < 1e-12


@pytest.mark.parametrize("G, k, l, dim", [(O(5), 3, 3, 15), (SO(3), 3, 4, 36), (S(4), 3, 3, 187),
                                         (Lorentz(), 3, 3, 15), (Sp(2), 2, 4, 14)], ids=repr)
def test_large_problems_are_read_off_diagrams(G, k, l, dim):
    rin, rout = V(G) ** k, V(G) ** l
    assert rin.size * rout.size > 1024 and basis_method(rin, rout) == "diagrams"
    B = equivariant_basis(rin, rout)
    # Brauer (k+l-1)!!, SO(3) Riordan numbers (..., 15, 36, 91), S(4) partitions with <= 4 blocks
    assert B.shape[0] == dim
    assert _equivariance_error(G, rin, rout, B) < 1e-12


def test_what_the_diagram_solver_covers():
    assert tensor_slots(V(O(3)) ** 2 * V(O(3)).dual()) == (True, True, False)
    assert tensor_slots(Scalar) == ()
    assert tensor_slots(V(O(3)) + Scalar) is None  # sums are split into blocks before
    from geomlin.groups import SL, C

    assert not applies(V(SL(3)) ** 2, V(SL(3)) ** 2)  # no diagram theory here
    assert not applies(V(C(4)) ** 2, V(C(4)))
    assert diagram_solution(V(C(4)) ** 2, V(C(4))) is None
    assert not applies(T(10)(O(5)), T(10)(O(5)))  # beyond the size limit: the general solvers decide


def test_lorentz_mixed_tensors_match_the_dense_solver():
    G = Lorentz()
    for rin, rout in [(T(2, 1)(G), T(0, 1)(G)), (T(1, 2)(G), T(1, 0)(G)), (T(1, 1)(G), T(0, 2)(G))]:
        ours = equivariant_basis(rin, rout, method="diagrams").flatten(1)
        dense = equivariant_basis(rin, rout, method="dense").flatten(1)
        assert ours.shape == dense.shape == (3, rin.size * rout.size)  # upper and lower slots mixed
        assert torch.allclose(ours @ dense.T @ dense, ours, atol=1e-9)
    # and at 4,096 unknowns against the dimension formula (6 slots: 15 Brauer diagrams)
    rep = T(2, 1)(G)
    B = equivariant_basis(rep, rep)
    assert B.shape[0] == 15 and _equivariance_error(G, rep, rep, B) < 1e-12
