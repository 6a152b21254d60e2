"""Separable sphere-grid transforms: synthesis against the closed-form harmonics, exact round trips."""

import torch

from geomlin.gaunt import grid as G
from geomlin.gaunt import spherical_harmonics
from geomlin.gaunt import tables as T


def test_to_grid_matches_harmonics_at_grid_points():
    L, (n_theta, n_phi) = 5, G.exact_grid_size(12)
    x = torch.randn(3, (L + 1) ** 2, dtype=torch.float64)
    values = G.to_grid(x, L, n_theta, n_phi).view(n_phi, 3, n_theta)
    points, _, _ = T.sphere_grid(12)
    Y = spherical_harmonics(L, torch.from_numpy(points)).view(n_theta, n_phi, -1)
    ref = torch.einsum("jkd,bd->kbj", Y, x)
    torch.testing.assert_close(values, ref, atol=1e-12, rtol=0)


def test_round_trip_exact_at_lmax16():
    L = 16
    n_theta, n_phi = G.exact_grid_size(2 * L)
    x = torch.randn(2, (L + 1) ** 2, dtype=torch.float64)
    back = G.from_grid(G.to_grid(x, L, n_theta, n_phi), L, n_theta, n_phi)
    torch.testing.assert_close(back, x, atol=1e-12, rtol=0)


def test_half_grid_product_matches_full_grid():
    L1, L2, Lo = 4, 3, 5
    n_theta, n_phi = G.exact_grid_size(L1 + L2 + Lo)
    x1 = torch.randn(4, (L1 + 1) ** 2, dtype=torch.float64)
    x2 = torch.randn(4, (L2 + 1) ** 2, dtype=torch.float64)
    full = G.from_grid(G.to_grid(x1, L1, n_theta, n_phi) * G.to_grid(x2, L2, n_theta, n_phi), Lo, n_theta, n_phi)
    half = G.gaunt_on_half_grid(x1, x2, L1, L2, Lo, n_theta, n_phi)
    torch.testing.assert_close(half, full, atol=1e-12, rtol=0)
