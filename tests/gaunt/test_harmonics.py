"""Tables: closed-form real SH against e3nn (oracle), exactness properties, caches that cannot be corrupted."""

import math

import numpy as np
import pytest
import torch
from e3nn import o3

from geomlin.gaunt import gaunt_tensor, sphere_irreps, spherical_harmonics
from geomlin.gaunt import harmonics as T
from geomlin.groups import O
from geomlin.reps import Vectors
from geomlin.testing import assert_equivariant


def test_spherical_harmonics_match_e3nn():
    v = torch.randn(64, 3, dtype=torch.float64)
    ours = spherical_harmonics(11, v)
    ref = o3.spherical_harmonics(list(range(12)), v, True, normalization="integral")
    torch.testing.assert_close(ours, ref, atol=1e-12, rtol=0)


@pytest.mark.parametrize("normalize", [True, False])
def test_spherical_harmonics_match_e3nn_off_the_sphere_and_at_zero(normalize):
    # vectors of many lengths, one of them zero: e3nn's two conventions (direction only, or the
    # homogeneous polynomials |r|^l Y_l) and its zero-vector value (Y_0 only)
    v = torch.randn(64, 3, dtype=torch.float64) * torch.logspace(-2, 1, 64, dtype=torch.float64)[:, None]
    v[5] = 0.0
    ours = spherical_harmonics(8, v, normalize=normalize)
    ref = o3.spherical_harmonics(list(range(9)), v, normalize, normalization="integral")
    torch.testing.assert_close(ours, ref, atol=1e-12, rtol=1e-12)
    assert ours[5, 1:].abs().max() == 0 and ours[5, 0] > 0


@pytest.mark.parametrize("lmax", [4, 16])
def test_spherical_harmonics_equivariant_beyond_e3nn_range(lmax):
    v = torch.randn(6, 3, dtype=torch.float64)
    assert_equivariant(lambda x: spherical_harmonics(lmax, x), O(3), Vectors(3), sphere_irreps(lmax, 1), inputs=(v,))


def test_spherical_harmonics_orthonormal_lmax20():
    Y, w = T.sh_on_grid(20, 40)
    gram = (Y * w[:, None]).T @ Y
    torch.testing.assert_close(gram, torch.eye(gram.shape[0], dtype=torch.float64), atol=1e-11, rtol=0)


def test_theta_fourier_table_sparsity_and_exactness():
    L = 9
    A = T.theta_fourier_table(L)
    u = np.arange(-L, L + 1)
    for m in range(L + 1):
        for l in range(L + 1):
            nonzero = np.abs(A[m, l]) > 1e-13
            if l < m:
                assert not nonzero.any()
                continue
            assert np.all((u[nonzero] - l) % 2 == 0) and np.all(np.abs(u[nonzero]) <= l)
            assert np.allclose(A[m, l].real if m % 2 == 0 else A[m, l].imag, A[m, l].real + A[m, l].imag)
    t = np.linspace(0.1, 3.0, 7)
    direct = T.normalized_legendre(L, np.cos(t), np.sin(t))
    series = np.einsum("mlu,tu->mlt", A, np.exp(1j * np.outer(t, u)))
    assert np.abs(series.imag).max() < 1e-13
    assert np.abs(series.real - direct).max() < 1e-13


def test_sine_moments_against_quadrature():
    t, w = np.polynomial.legendre.leggauss(200)
    t, w = (t + 1) * math.pi / 2, w * math.pi / 2
    for k in range(-7, 8):
        numeric = np.sum(w * np.exp(1j * k * t) * np.sin(t))
        assert abs(T.sine_moments(np.array([k]))[0] - numeric) < 1e-13


def test_gaunt_tensor_against_pointwise_products():
    """Oracle: G[i, j, k] integrates Y_i Y_j Y_k; check it reproduces products at random points."""
    G = gaunt_tensor(2, 3, 5)
    pts = torch.randn(40, 3, dtype=torch.float64)
    Y = spherical_harmonics(5, pts)
    prod = torch.einsum("ijk,pk->pij", G, Y)
    torch.testing.assert_close(prod, Y[:, :9, None] * Y[:, None, :16], atol=1e-12, rtol=0)


def test_cached_tables_cannot_be_corrupted():
    Y, w = T.sh_on_grid(3, 6)
    Y.zero_()
    w.zero_()
    assert T.sh_on_grid(3, 6)[0].abs().max() > 0 and T.sh_on_grid(3, 6)[1].sum() > 0
    G = gaunt_tensor(1, 1, 2)
    G.zero_()
    assert gaunt_tensor(1, 1, 2).abs().max() > 0
    for table in (T.legendre_table(3, 4), T.theta_fourier_table(3), T.theta_projection_table(3, 5),
                  T.sphere_grid(4)[0], T.gauss_legendre(5)[0]):
        with pytest.raises(ValueError, match="read-only"):
            table[...] = 0


def test_lmax_from_size_rejects_non_squares():
    assert T.lmax_from_size(16) == 3
    with pytest.raises(ValueError, match=r"\(L\+1\)\*\*2"):
        T.lmax_from_size(10)
