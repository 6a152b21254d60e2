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
def gather_index(lmax: int, fill: int = 0) -> Tensor:
    """Columns ``(m, part, l)`` of a flat coefficient vector ``(.., (L+1)**2)``, flattened.

    Slots without a coefficient (``l < m``, and the sine part of ``m = 0``) read
    index ``fill``: column 0 for the grid transforms (whose table entries there
    are zero), or the index of an appended zero row.
    """
    idx = torch.full((lmax + 1, 2, lmax + 1), fill, dtype=torch.long)
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


# ---------------------------------------------------------------- the product with longitude symmetry
@cache
def half_longitude_tables(lmax1: int, lmax2: int, lmax_out: int, n_phi: int) -> tuple[Tensor, ...]:
    """Real DFTs on the half circle ``k = 0..n_phi // 2``, float64.

    ``cos(m phi)`` is even and ``sin(m phi)`` odd under ``phi -> -phi``, so a
    function is ``E[k] + O[k]`` at ``phi_k`` and ``E[k] - O[k]`` at ``-phi_k`` with
    ``E = Phi_c @ g_cos`` and ``O = Phi_s @ g_sin`` on the half circle only.  The
    product's even part ``E1 E2 + O1 O2`` carries every cosine coefficient and its
    odd part ``E1 O2 + O1 E2`` every sine coefficient: half the DFT work of the
    full circle, same exactness.

    Returns ``cos1, sin1 (K, L1+1)``, ``cos2, sin2 (K, L2+1)`` and the projections
    ``cos_out, sin_out (Lo+1, K)`` (with the half-circle multiplicities and ``2 pi / n_phi``).
    """
    half = n_phi // 2
    k = np.arange(half + 1)
    phi = 2.0 * np.pi * k / n_phi

    def synth(L):
        m = np.arange(L + 1)
        c = _SQRT2 * np.cos(np.outer(phi, m))
        c[:, 0] = 1.0
        s = _SQRT2 * np.sin(np.outer(phi, m))
        s[:, 0] = 0.0
        return c, s

    mult = np.full(half + 1, 2.0)
    mult[0] = 1.0
    if n_phi % 2 == 0:
        mult[half] = 1.0
    c1, s1 = synth(lmax1)
    c2, s2 = synth(lmax2)
    co, so = synth(lmax_out)
    scale = (mult * 2.0 * np.pi / n_phi)[:, None]
    return tuple(torch.from_numpy(np.ascontiguousarray(a)) for a in (c1, s1, c2, s2, (co * scale).T, (so * scale).T))


def _latitudes(x: Tensor, lmax: int, n_theta: int, n_phi: int) -> Tensor:
    """``x (B, D)`` -> per-m Legendre sums ``(L+1 [m], 2 [part], B * n_theta)``."""
    leg, _, idx = _tables("synthesis", lmax, n_theta, n_phi, x)
    M2 = 2 * (lmax + 1)
    cols = x.index_select(1, idx).view(x.shape[0], M2, lmax + 1).transpose(0, 1)  # (m part, B, l)
    return torch.bmm(cols, leg).view(lmax + 1, 2, -1)


def gaunt_on_half_grid(x1: Tensor, x2: Tensor, lmax1: int, lmax2: int, lmax_out: int,
                       n_theta: int, n_phi: int) -> Tensor:
    """Gaunt product ``(B, D1), (B, D2) -> (B, Do)`` through the half-longitude grid (see
    :func:`half_longitude_tables`); exact when ``(n_theta, n_phi)`` is exact for degree ``L1 + L2 + Lo``."""
    key = ("half", lmax1, lmax2, lmax_out, n_theta, n_phi, str(x1.device), x1.dtype)
    if key not in _CACHE:
        _, leg = projection_tables(lmax_out, n_theta, n_phi)  # rows (m, part); the half route wants (part, m)
        leg = torch.cat([leg[COS::2], leg[SIN::2]])
        mp, ls = scatter_index(lmax_out)
        mp = (mp % 2) * (lmax_out + 1) + mp // 2
        _CACHE[key] = tuple(t.to(device=x1.device, dtype=x1.dtype)
                            for t in half_longitude_tables(lmax1, lmax2, lmax_out, n_phi) + (leg,)) + (
            mp.to(x1.device), ls.to(x1.device))
    c1, s1, c2, s2, co, so, leg, mp, ls = _CACHE[key]
    g1 = _latitudes(x1, lmax1, n_theta, n_phi)
    g2 = _latitudes(x2, lmax2, n_theta, n_phi)
    e1, o1 = c1 @ g1[:, COS], s1 @ g1[:, SIN]  # (K, B n_theta)
    e2, o2 = c2 @ g2[:, COS], s2 @ g2[:, SIN]
    Mo = lmax_out + 1
    even, odd = torch.addcmul(e1 * e2, o1, o2), torch.addcmul(e1 * o2, o1, e2)
    if torch.is_grad_enabled() and (x1.requires_grad or x2.requires_grad):
        lat = torch.stack([co @ even, so @ odd])  # (part, m, B n_theta)
    else:  # write both halves in place (out= has no autograd)
        lat = x1.new_empty(2, Mo, e1.shape[1])
        torch.mm(co, even, out=lat[COS])
        torch.mm(so, odd, out=lat[SIN])
    out = torch.bmm(lat.view(2 * Mo, -1, n_theta), leg)  # (part m, B, l)
    return out.transpose(0, 1)[:, mp, ls]
