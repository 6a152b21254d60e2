"""EquivariantMLP: gated + bilinear blocks are equivariant for any group, sized like EMLP, and can learn."""

import warnings

import pytest
import torch

from geomlin.groups import SO, Group, Lorentz, O, S, Sp
from geomlin.linear import (
    EquivariantBilinear,
    EquivariantMLP,
    GatedNonlinearity,
    clear_cache,
    uniform_rep,
    with_gates,
)
from geomlin.linear.mlp import rank_counts
from geomlin.reps import Scalar, T, V
from geomlin.testing import assert_equivariant


def _cube():
    rx = torch.tensor([[1.0, 0, 0], [0, 0, -1], [0, 1, 0]])
    ry = torch.tensor([[0.0, 0, 1], [0, 1, 0], [-1, 0, 0]])
    return Group(discrete_generators=torch.stack([rx, ry]), name="Cube")


@pytest.mark.parametrize("G", [O(3), SO(3), Lorentz(), Sp(1), S(4)], ids=repr)
def test_mlp_is_equivariant(G):
    v = V(G)
    rin, rout = 2 * Scalar + 2 * v, v ** 2 + v + Scalar
    mlp = EquivariantMLP(rin, rout, hidden_channels=12, num_blocks=2).double()
    assert_equivariant(mlp, G, rin, rout, num_samples=10)
    assert_equivariant(mlp)  # from the declared types alone


def test_lorentz_mlp_produces_invariants():
    # no linear invariant exists for V -> Scalar; the bilinear layer must create x^T eta x
    G = Lorentz()
    mlp = EquivariantMLP(V(G), Scalar, hidden_channels=12, num_blocks=1).double()
    x = torch.randn(64, 4, dtype=torch.float64)
    y = mlp(x)
    assert y.std() > 1e-6
    assert_equivariant(mlp, G, V(G), Scalar)


def test_gated_nonlinearity_shapes():
    G = O(3)
    rep = 2 * Scalar + V(G) + V(G) ** 2
    gate = GatedNonlinearity(rep)
    x = torch.randn(5, with_gates(rep).size)
    assert gate(x).shape == (5, rep.size)
    assert gate.type_in == with_gates(rep) and gate.type_out == rep


def test_mlp_fits_a_quadratic_invariant():
    G = O(3)
    torch.manual_seed(0)
    mlp = EquivariantMLP(V(G), Scalar, hidden_channels=24, num_blocks=1)
    opt = torch.optim.Adam(mlp.parameters(), lr=2e-2)
    x = torch.randn(128, 3)
    y = (x ** 2).sum(-1, keepdim=True)
    first = None
    for _ in range(60):
        loss = (mlp(x) - y).pow(2).mean()
        first = first if first is not None else loss.item()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.1 * first


def test_user_group_mlp():
    G = _cube()
    mlp = EquivariantMLP(V(G) + Scalar, V(G) ** 2, hidden_channels=Scalar * 4 + 2 * V(G), num_blocks=1).double()
    assert_equivariant(mlp, G, V(G) + Scalar, V(G) ** 2)


# ----------------------------------------------------------------- EMLP's channel heuristic
# oracle: what emlp 1.0.3 prints for emlp.nn.uniform_rep(ch, G) (its remainder is random for
# non-orthogonal groups, so only orthogonal groups are compared term by term)
EMLP_UNIFORM_REP = [
    (O(5), 384, [134, 25, 5]),
    (O(5), 100, [40, 7, 1]),
    (O(5), 16, [11, 1]),
    (O(5), 8, [8]),
    (SO(3), 384, [102, 34, 11, 3]),
    (SO(3), 100, [37, 12, 3]),
    (O(3), 16, [10, 2]),
    (O(3), 8, [5, 1]),
]


@pytest.mark.parametrize("G, ch, counts", EMLP_UNIFORM_REP, ids=lambda x: repr(x))
def test_uniform_rep_matches_emlp(G, ch, counts):
    rep = uniform_rep(ch, G)
    assert rep.size == ch
    expected = [c * T(r) for r, c in enumerate(counts) if c]
    assert rep == sum(expected[1:], expected[0])(G)


def test_uniform_rep_for_non_orthogonal_groups_splits_ranks_binomially():
    # EMLP: Lorentz, 384 -> 112 V0 + 14 V + 14 V* + six rank-2 + one rank-3 tensors (size 384)
    rep = uniform_rep(384, Lorentz())
    assert rep.size == 384
    assert rank_counts(384, 4) == [112, 28, 6, 1]
    ranks = {}
    for b in rep.blocks:
        r = 0 if b.is_scalar else len(getattr(b, "factors", [b]))
        ranks[r] = ranks.get(r, 0) + 1
    assert ranks == {0: 112, 1: 28, 2: 6, 3: 1}
    assert sum(1 for b in rep.blocks if b == V(Lorentz()).dual()) == 14
    assert uniform_rep(384, Lorentz()) == rep  # deterministic, unlike EMLP's random remainder


def test_hidden_channels_is_the_hidden_size():
    mlp = EquivariantMLP(2 * T(1), T(0), hidden_channels=384, num_blocks=3, group=O(5))
    assert mlp.hidden.size == 384 and len(mlp.blocks) == 3  # EMLP's ch=384, not 7,104
    counts = mlp.parameter_counts()
    assert counts["total"] == sum(p.numel() for p in mlp.parameters())
    assert counts["linear"] > 0 and counts["bilinear"] > 0
    assert "bilinear=" in repr(mlp)
    explicit = EquivariantMLP(2 * T(1), T(0), hidden_channels=[3 * T(0) + T(1), 8], group="O(5)")
    assert explicit.hidden_reps[0] == 3 * Scalar + V(O(5)) and explicit.hidden_reps[1].size == 8


def test_bilinear_warns_where_it_leaves_a_product_out():
    G = _cube()
    rep = Scalar + V(G) ** 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        full = EquivariantBilinear(rep)  # 729 unknowns at most: nothing is dropped
    assert not full.dropped
    with pytest.warns(UserWarning, match=r"left out 1 product.*729 unknowns.*max_unknowns"):
        small = EquivariantBilinear(rep, max_unknowns=100)
    assert [u for *_, u in small.dropped] == [729]
    # products of tensor reps of O(n) are read off diagrams, whatever their size
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        big = EquivariantBilinear(Scalar + V(O(5)) ** 2)
    # all six products are non-zero for O(5): Hom(V**4, V**2) alone has 15 Brauer diagrams
    assert not big.dropped and len(big.triples) == 6


def test_mlp_reads_its_bases_from_cache_dir(tmp_path, monkeypatch):
    from geomlin.linear import solver

    G = Lorentz()
    clear_cache()
    first = EquivariantMLP(V(G), Scalar, hidden_channels=20, num_blocks=1, cache_dir=tmp_path)
    assert list(tmp_path.glob("basis-*.pt"))
    clear_cache()

    def refuse(*args, **kwargs):
        raise AssertionError("solved again instead of reading cache_dir")

    monkeypatch.setattr(solver, "_solve_constraints", refuse)
    second = EquivariantMLP(V(G), Scalar, hidden_channels=20, num_blocks=1, cache_dir=tmp_path)
    second.load_state_dict(first.state_dict())
    x = torch.randn(5, 4)
    assert torch.equal(first(x), second(x))


def test_mlp_errors():
    with pytest.raises(ValueError, match="num_blocks must be >= 1"):
        EquivariantMLP(V(O(3)), Scalar, hidden_channels=4, num_blocks=0)
    with pytest.raises(TypeError, match="hidden_channels"):
        EquivariantMLP(V(O(3)), Scalar, hidden_channels="big")
    with pytest.raises(ValueError, match="without a group"):
        EquivariantMLP(T(1), T(0))
    with pytest.raises(ValueError, match="num_blocks"):
        EquivariantMLP(V(O(3)), Scalar, hidden_channels=[8, 8], num_blocks=3)
    mlp = EquivariantMLP(V(O(3)), Scalar, hidden_channels=8, num_blocks=1)
    with pytest.raises(ValueError, match="NaN"):
        mlp(torch.full((1, 3), float("inf")))
