"""Separable transforms between SH coefficients and an exact sphere grid, O(L^3) per function.

The grid is ``n_theta`` Gauss-Legendre latitudes times ``n_phi`` equispaced
longitudes; it integrates spherical polynomials of degree ``< min(2 n_theta, n_phi)``
exactly.  A function ``f = sum_lm x_lm Y_lm`` is synthesized in two steps

    g_{m, part}(theta_j) = sum_l N_l^m P_l^m(cos theta_j) x_{l, +-m}    (per-m Legendre, batched GEMM)
    f(theta_j, phi_k)    = sum_{m, part} Phi[k, (m, part)] g_{m, part}(theta_j)   (real DFT, one GEMM)

with ``Phi = sqrt(2) cos(m phi_k)``, ``sqrt(2) sin(m phi_k)`` (``1``, ``0`` at ``m = 0``);
projection is the adjoint with the quadrature weights.  The DFT is a GEMM
rather than an FFT because at these lengths (``n_phi <= ~100``) a GEMM over
``2 (L + 1)`` frequencies is faster on CPU and GPU than batched short FFTs.

Values are laid out ``(n_phi, B * n_theta)`` (batch-major within a longitude), so
every step is one large GEMM; these helpers are internal to :mod:`geomlin.gaunt`.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import torch
from torch import Tensor

from geomlin.gaunt import tables as T

_SQRT2 = math.sqrt(2.0)
#: Part of a per-m coefficient pair: ``x_{l, m}`` (cos) and ``x_{l, -m}`` (sin).
COS, SIN = 0, 1


@cache
def exact_grid_size(degree: int) -> tuple[int, int]:
    """Smallest ``(n_theta, n_phi)`` integrating spherical polynomials of ``degree`` exactly."""
    return degree // 2 + 1, degree + 1


def _longitudes(lmax: int, n_phi: int) -> np.ndarray:
    """``Phi (n_phi, 2 (lmax+1) [m, part])``."""
    phi = 2.0 * np.pi * np.arange(n_phi) / n_phi
    m = np.arange(lmax + 1)
    out = np.zeros((n_phi, lmax + 1, 2))
    out[:, :, COS] = _SQRT2 * np.cos(np.outer(phi, m))
    out[:, :, SIN] = _SQRT2 * np.sin(np.outer(phi, m))
    out[:, 0, COS] = 1.0
    out[:, 0, SIN] = 0.0
    return out.reshape(n_phi, 2 * (lmax + 1))


@cache
def synthesis_tables(lmax: int, n_theta: int, n_phi: int) -> tuple[Tensor, Tensor]:
    """``leg (2(L+1) [m, part], L+1, n_theta)`` and ``dft (n_phi, 2(L+1))``, float64."""
    leg = np.repeat(T.legendre_table(lmax, n_theta), 2, axis=0)
    return torch.from_numpy(leg.copy()), torch.from_numpy(_longitudes(lmax, n_phi))


@cache
def projection_tables(lmax: int, n_theta: int, n_phi: int) -> tuple[Tensor, Tensor]:
    """``dft (2(L+1), n_phi)`` (with ``2 pi / n_phi``) and ``leg (2(L+1), n_theta, L+1)`` (with GL weights)."""
    _, w = T.gauss_legendre(n_theta)
    leg = np.transpose(T.legendre_table(lmax, n_theta) * w[None, None, :], (0, 2, 1))
    dft = _longitudes(lmax, n_phi).T * (2.0 * np.pi / n_phi)
    return torch.from_numpy(dft.copy()), torch.from_numpy(np.repeat(leg, 2, axis=0).copy())


@cache
def gather_index(lmax: int) -> Tensor:
    """Columns ``(m, part, l)`` of ``x (B, (L+1)**2)``; slots with ``l < m`` (and ``m = 0`` sin) read
    column 0, whose table entries there are zero."""
    idx = torch.zeros(lmax + 1, 2, lmax + 1, dtype=torch.long)
    for m in range(lmax + 1):
        for l in range(m, lmax + 1):
            idx[m, COS, l] = T.sh_index(l, m)
            if m > 0:
                idx[m, SIN, l] = T.sh_index(l, -m)
    return idx.reshape(-1)


@cache
def scatter_index(lmax: int) -> tuple[Tensor, Tensor]:
    """For each flat output ``(l, m)``: its ``(m, part)`` row and ``l`` column in a projection result."""
    mp, ls = [], []
    for l in range(lmax + 1):
        for m in range(-l, l + 1):
            mp.append(2 * abs(m) + (COS if m >= 0 else SIN))
            ls.append(l)
    return torch.tensor(mp), torch.tensor(ls)


_CACHE: dict = {}


def _tables(kind: str, lmax: int, n_theta: int, n_phi: int, like: Tensor) -> tuple[Tensor, ...]:
    key = (kind, lmax, n_theta, n_phi, str(like.device), like.dtype)
    if key not in _CACHE:
        build = synthesis_tables if kind == "synthesis" else projection_tables
        tabs = tuple(t.to(device=like.device, dtype=like.dtype) for t in build(lmax, n_theta, n_phi))
        idx = gather_index(lmax) if kind == "synthesis" else scatter_index(lmax)
        idx = idx if isinstance(idx, tuple) else (idx,)
        _CACHE[key] = tabs + tuple(i.to(like.device) for i in idx)
    return _CACHE[key]


def to_grid(x: Tensor, lmax: int, n_theta: int, n_phi: int) -> Tensor:
    """``x (B, (lmax+1)**2)`` -> values ``(n_phi, B * n_theta)`` (row ``k``, column ``b * n_theta + j``)."""
    leg, dft, idx = _tables("synthesis", lmax, n_theta, n_phi, x)
    M2 = 2 * (lmax + 1)
    cols = x.index_select(1, idx).view(x.shape[0], M2, lmax + 1).transpose(0, 1)  # (m part, B, l)
    lat = torch.bmm(cols, leg)  # (m part, B, n_theta)
    return dft @ lat.view(M2, -1)


def from_grid(values: Tensor, lmax: int, n_theta: int, n_phi: int) -> Tensor:
    """Values ``(n_phi, B * n_theta)`` -> coefficients ``(B, (lmax+1)**2)`` by exact quadrature."""
    dft, leg, mp, ls = _tables("projection", lmax, n_theta, n_phi, values)
    lat = (dft @ values).view(2 * (lmax + 1), -1, n_theta)  # (m part, B, n_theta)
    out = torch.bmm(lat, leg)  # (m part, B, l)
    return out.transpose(0, 1)[:, mp, ls]
