"""The fast factored product against the dense matrices, and the dense matrices against the groups.

Oracles: ``diagram_matrix`` (built entry by entry from the definition, independent of the
factored code) and the group action ``g ⊗ .. ⊗ g`` of geomlin.groups.
"""

import pytest
import torch

from geomlin.linear.diagrams import apply_diagram, diagram_matrix, levi_civita_diagrams, spanning_diagrams
from geomlin.linear.diagrams.apply import levi_civita_matrix
from geomlin.linear.diagrams.dense import levi_civita

from .helpers import group_for, rho

MAX_ORDER = 6  # every diagram with k + l <= 6
SIZES = {"S": [1, 2, 3, 4, 5], "O": [1, 2, 3, 4, 5], "SO": [1, 2, 3, 4, 5], "Sp": [2, 4]}
CASES = [(name, n) for name, sizes in SIZES.items() for n in sizes]


def _diagrams(name, k, l, n):
    ds = spanning_diagrams(name, k, l, n)
    return [d for d in ds if not d.free or len(d.free) == n]


def _check(d, n, name, x, orbit=False):
    l = d.l
    D = diagram_matrix(d, n, name, orbit=orbit)
    ref = (x.reshape(x.shape[0], -1) @ D.T).reshape(x.shape[0], *([n] * l))
    y = apply_diagram(d, x, n, name, orbit=orbit)
    assert y.shape == ref.shape and y.dtype == torch.float64
    scale = max(1.0, ref.abs().max().item())
    assert (y - ref).abs().max().item() <= 1e-12 * scale, f"{name} n={n} {d} orbit={orbit}"


@pytest.mark.parametrize("name,n", CASES)
def test_apply_equals_dense_for_every_diagram(name, n):
    gen = torch.Generator().manual_seed(n)
    count = 0
    for m in range(MAX_ORDER + 1):
        for k in range(m + 1):
            l = m - k
            x = torch.randn(2, *([n] * k), generator=gen, dtype=torch.float64)
            for d in _diagrams(name, k, l, n):
                _check(d, n, name, x)
                count += 1
    assert count > 0


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_orbit_apply_equals_dense_orbit_matrix(n):
    gen = torch.Generator().manual_seed(n)
    for k, l in [(0, 3), (1, 1), (2, 2), (3, 1), (1, 3), (2, 3), (3, 2), (3, 3)]:
        if n == 4 and k + l == 6:
            continue  # covered at n <= 3; the Möbius sum over 203 coarsenings is slow
        x = torch.randn(2, *([n] * k), generator=gen, dtype=torch.float64)
        for d in spanning_diagrams("S", k, l, n):
            _check(d, n, "S", x, orbit=True)


def test_orbit_matrices_partition_the_diagram_matrix():
    """D_π = Σ_{σ ≥ π} X_σ, and X_π = 0 exactly when π has more than n blocks."""
    n = 3
    ds = spanning_diagrams("S", 2, 2, n)
    X = {d: diagram_matrix(d, n, "S", orbit=True) for d in ds}
    for d in ds:
        assert (X[d].abs().sum() == 0) == (d.num_blocks > n)
    # the orbit matrices have disjoint supports covering everything: sum = all-ones
    total = sum(X.values())
    assert torch.equal(total, torch.ones_like(total))


@pytest.mark.parametrize("name,n", [("S", 3), ("O", 3), ("SO", 3), ("SO", 2), ("SO", 4), ("Sp", 2), ("Sp", 4)])
def test_dense_diagram_matrices_commute_with_the_group(name, n):
    """ρ_l(g) D = D ρ_k(g) for sampled g, reflections included for O(n)."""
    G = group_for(name, n)
    gs = G.sample(4, generator=torch.Generator().manual_seed(1))
    if name == "O":
        refl = torch.eye(n, dtype=torch.float64)
        refl[0, 0] = -1
        gs = torch.cat([gs, refl[None]])
    for k, l in [(1, 1), (2, 1), (1, 2), (2, 2), (0, 2), (3, 1), (0, 4), (2, 3)]:
        for d in _diagrams(name, k, l, n):
            D = diagram_matrix(d, n, name)
            for g in gs:
                lhs, rhs = rho(g, l) @ D, D @ rho(g, k)
                assert torch.allclose(lhs, rhs, atol=1e-9 * max(1.0, D.abs().max().item() * g.abs().max().item() ** (k + l))), \
                    f"{name}({n}) {d}"


def test_levi_civita_tables_agree():
    for n in range(1, 5):
        eps = levi_civita(n)
        for s in range(n + 1):
            E = levi_civita_matrix(n, s)
            assert torch.equal(E, eps.reshape(n ** s, n ** (n - s)))
            assert torch.equal(levi_civita_matrix(n, s, sparse=True).to_dense(), E)
    assert levi_civita(3)[0, 1, 2] == 1 and levi_civita(3)[1, 0, 2] == -1 and levi_civita(3)[0, 0, 1] == 0


def test_apply_handles_batches_dtypes_and_gradients():
    d = spanning_diagrams("S", 2, 2, 3)[5]
    x = torch.randn(4, 5, 3, 3, dtype=torch.float64, requires_grad=True)
    assert apply_diagram(d, x, 3, "S").shape == (4, 5, 3, 3)
    assert apply_diagram(d, x.float(), 3, "S").dtype == torch.float32
    for name, n, dd in [("S", 3, d), ("Sp", 4, spanning_diagrams("Sp", 2, 2, 4)[0]),
                        ("SO", 3, spanning_diagrams("SO", 2, 1, 3)[0])]:
        xs = torch.randn(2, *([n] * dd.k), dtype=torch.float64, requires_grad=True)
        assert torch.autograd.gradcheck(lambda t, dd=dd, n=n, name=name: apply_diagram(dd, t, n, name), (xs,))


def test_apply_errors_name_the_problem():
    d = spanning_diagrams("O", 2, 2, 3)[0]
    x = torch.randn(2, 3, 3, dtype=torch.float64)
    with pytest.raises(ValueError, match="trailing axes of size n = 3"):
        apply_diagram(d, torch.randn(2, 3, 4), 3, "O")
    with pytest.raises(ValueError, match="trailing axes"):
        apply_diagram(spanning_diagrams("O", 3, 1, 3)[0], x, 3, "O")
    with pytest.raises(TypeError, match="floating point"):
        apply_diagram(d, torch.ones(2, 3, 3, dtype=torch.long), 3, "O")
    with pytest.raises(ValueError, match="unknown group"):
        apply_diagram(d, x, 3, "GL")
    with pytest.raises(ValueError, match="Brauer diagrams"):
        apply_diagram(spanning_diagrams("S", 2, 2, 3)[-1], x, 3, "O")
    with pytest.raises(ValueError, match="n = 2m even"):
        apply_diagram(d, x, 3, "Sp")
    eps = spanning_diagrams("SO", 2, 1, 3)[-1]
    with pytest.raises(ValueError, match="needs n = 3"):
        apply_diagram(eps, torch.randn(2, 4, 4), 4, "SO")
    with pytest.raises(ValueError, match="only SO"):
        apply_diagram(eps, x, 3, "O")
    with pytest.raises(ValueError, match="orbit"):
        apply_diagram(d, x, 3, "O", orbit=True)
    with pytest.raises(ValueError, match="use apply_diagram"):
        diagram_matrix(spanning_diagrams("O", 3, 3, 40)[0], 40, "O")


def test_sparse_levi_civita_path_matches_dense(monkeypatch):
    """Large n stores ε sparse (n! nonzeros); force that path on SO(3) and compare with the dense matrix."""
    from geomlin.linear.diagrams import apply as apply_module

    monkeypatch.setattr(apply_module, "MAX_DENSE_LEVI_CIVITA", 0)
    apply_module._levi_civita_matrix.cache_clear()
    try:
        gen = torch.Generator().manual_seed(3)
        for k, l in [(2, 1), (1, 2), (3, 0), (0, 3), (3, 2)]:
            x = torch.randn(2, *([3] * k), generator=gen, dtype=torch.float64)
            for d in levi_civita_diagrams(k, l, 3):
                assert apply_module.levi_civita_matrix(3, sum(v < l for v in d.free)).is_sparse
                _check(d, 3, "SO", x)
    finally:
        apply_module._levi_civita_matrix.cache_clear()
