"""The fast route's transforms: synthesis against the closed-form harmonics, exact round trips, adjoints."""

import itertools

import pytest
import torch

from geomlin.gaunt import grid as G
from geomlin.gaunt import grid_tables as GT
from geomlin.gaunt import harmonics as T
from geomlin.gaunt import spherical_harmonics


def test_half_circle_values_match_harmonics_at_grid_points():
    L = 5
    nt, nphi = GT.exact_grid_size(12)
    x = torch.randn(3, (L + 1) ** 2, dtype=torch.float64)
    E, O = G.synthesize(x, L, nt, nphi)  # (K, nt, n)
    K = E.shape[0]
    points, _, _ = T.sphere_grid(nt * 2 - 2, num_phi_min=nphi)
    assert points.shape[0] == nt * nphi
    Y = spherical_harmonics(L, torch.from_numpy(points.copy())).view(nt, nphi, -1)
    ref = torch.einsum("jkd,bd->kjb", Y, x)
    torch.testing.assert_close(E + O, ref[:K], atol=1e-12, rtol=0)  # phi_k
    torch.testing.assert_close(E[1:] - O[1:], ref[nphi - torch.arange(1, K)], atol=1e-12, rtol=0)  # -phi_k


def test_round_trip_exact_at_lmax16():
    L = 16
    nt, nphi = GT.exact_grid_size(2 * L)
    x = torch.randn(2, (L + 1) ** 2, dtype=torch.float64)
    back = G.analyze(*G.synthesize(x, L, nt, nphi), L, nt, nphi)
    torch.testing.assert_close(back, x, atol=1e-12, rtol=0)


def test_unweighted_analysis_is_the_adjoint_of_synthesis():
    L, (nt, nphi) = 4, GT.exact_grid_size(10)
    x = torch.randn(3, 25, dtype=torch.float64)
    E, O = G.synthesize(x, L, nt, nphi)
    gE, gO = torch.randn_like(E), torch.randn_like(O)
    lhs = (E * gE).sum() + (O * gO).sum()
    rhs = (x * G.analyze(gE, gO, L, nt, nphi, weighted=False)).sum()
    torch.testing.assert_close(lhs, rhs, atol=1e-10, rtol=1e-12)


@pytest.mark.parametrize("degree", [0, 1, 5, 12, 33])
def test_grid_sizes_are_exact_and_quarter_compatible(degree):
    nt, nphi = GT.exact_grid_size(degree)
    assert 2 * nt - 1 >= degree and nphi >= degree + 1 and nphi % 4 == 2


def test_m_blocks_cover_every_order_once():
    for L in range(30):
        blocks = GT.m_blocks(L)
        assert blocks[0][0] == 0 and blocks[-1][1] == L + 1
        assert all(a[1] == b[0] for a, b in itertools.pairwise(blocks))


def test_chunking_does_not_change_the_result(monkeypatch):
    x1 = torch.randn(300, 16, dtype=torch.float64)
    x2 = torch.randn(300, 9, dtype=torch.float64)
    whole = G.gaunt_on_grid(x1, x2, 3, 2, 4)
    monkeypatch.setattr(G, "CHUNK_FLOATS", 1)  # every chunk the minimum size
    torch.testing.assert_close(G.gaunt_on_grid(x1, x2, 3, 2, 4), whole, atol=1e-13, rtol=0)
