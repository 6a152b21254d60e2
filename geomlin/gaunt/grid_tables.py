"""The tables of the grid route ([`geomlin.gaunt.grid`][]): the exact grid's size, the float64 Legendre and
longitude tables of the synthesis and the projection, their cache keys, and their device form.

The grid is ``num_theta`` Gauss-Legendre latitudes times the longitudes of a half circle
``k = 0..num_phi // 2`` (the other half by symmetry), or of a quarter circle in four symmetry classes
for the product (``_quarter_tables``). Each table is built once in float64 on the CPU
([`geomlin.gaunt.cache`][] registers its builder under a key); [`synthesis_on`][] and
[`projection_on`][] read a key's tables on a device, in a dtype, as one [`Synthesis`][] or
[`Projection`][].
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import cache

import numpy as np
import torch
from torch import Tensor

from geomlin.gaunt import harmonics as T
from geomlin.gaunt.cache import device_tables, table_builder

__all__ = ["Projection", "Synthesis", "exact_grid_size", "m_blocks", "power_keys", "product_keys", "projection_key",
           "projection_on", "synthesis_key", "synthesis_on", "weights_key"]

_SQRT2 = math.sqrt(2.0)
#: Part of a per-m coefficient pair: ``x_{l, m}`` (cos) and ``x_{l, -m}`` (sin).
COS, SIN = 0, 1


@cache
def exact_grid_size(degree: int) -> tuple[int, int]:
    """``(num_theta, num_phi)`` of the grid exact for spherical polynomials of ``degree``.

    ``num_theta = degree // 2 + 1`` Gauss-Legendre latitudes (exact to degree ``2 num_theta - 1``)
    and the smallest ``num_phi >= degree + 1`` with ``num_phi = 2 mod 4``: then ``phi -> pi - phi``
    maps the half circle onto itself without a fixed point, which the quarter-circle longitude
    transform of the product ([`gaunt_on_grid`][geomlin.gaunt.grid.gaunt_on_grid]) needs.
    """
    num_phi = degree + 1
    while num_phi % 4 != 2:
        num_phi += 1
    return degree // 2 + 1, num_phi


@cache
def m_blocks(lmax: int) -> tuple[tuple[int, int], ...]:
    """Orders ``0..lmax`` grouped into ``(m_start, m_stop)`` blocks for the Legendre GEMMs.

    Block ``[m0, m1)`` is padded to ``lmax + 1 - m0`` degrees; one block up to ``L = 3``,
    two up to ``L = 9``, three above (the padding then costs at most ~25% of the useful work,
    and each extra block is one more small GEMM call).
    """
    count = 1 if lmax < 4 else 2 if lmax < 10 else 3
    bounds = np.linspace(0, lmax + 1, count + 1).round().astype(int)
    return tuple((int(a), int(b)) for a, b in itertools.pairwise(bounds) if b > a)


# ----------------------------------------------------------------------------- tables (float64)
def _half_longitudes(lmax: int, num_phi: int) -> tuple[np.ndarray, np.ndarray]:
    """``Phi_cos, Phi_sin (K, lmax+1)`` at ``phi_k = 2 pi k / num_phi``, ``k = 0..num_phi // 2``."""
    phi = 2.0 * np.pi * np.arange(num_phi // 2 + 1) / num_phi
    m = np.arange(lmax + 1)
    c = _SQRT2 * np.cos(np.outer(phi, m))
    s = _SQRT2 * np.sin(np.outer(phi, m))
    c[:, 0], s[:, 0] = 1.0, 0.0
    return c, s


def _half_circle_multiplicity(num_phi: int) -> np.ndarray:
    """How many grid longitudes each half-circle point stands for (``k`` and ``-k``)."""
    half = num_phi // 2
    mult = np.full(half + 1, 2.0)
    mult[0] = 1.0
    if num_phi % 2 == 0:
        mult[half] = 1.0
    return mult


@cache
def _synthesis_tables(lmax: int, num_theta: int, num_phi: int) -> tuple:
    """Float64 tables of the synthesis of degree ``lmax`` on the half grid.

    Returns ``(legs, gather, cos, sin)``: ``legs[b] (2|b|, num_theta, K_b)`` per order block
    ``b`` (rows ``(m, part)``, columns ``l = m0..m0+K_b-1``, zero where ``l > lmax`` or at the
    sine part of ``m = 0``); ``gather (sum_b 2|b| K_b,)`` the flat coefficient index of each
    column (0 where the table is zero); ``cos, sin (K, lmax+1)`` the half-circle longitudes.
    """
    P = T.legendre_table(lmax, num_theta)  # (m, l, j)
    legs, gather = [], []
    for m0, m1 in m_blocks(lmax):
        width = lmax + 1 - m0
        leg = np.zeros((m1 - m0, 2, num_theta, width))
        idx = np.zeros((m1 - m0, 2, width), dtype=np.int64)
        for m in range(m0, m1):
            for i in range(width):
                l = m0 + i
                if m <= l <= lmax:
                    leg[m - m0, COS, :, i] = P[m, l]
                    idx[m - m0, COS, i] = T.sh_index(l, m)
                    if m > 0:
                        leg[m - m0, SIN, :, i] = P[m, l]
                        idx[m - m0, SIN, i] = T.sh_index(l, -m)
        legs.append(torch.from_numpy(leg.reshape(2 * (m1 - m0), num_theta, width)))
        gather.append(idx.reshape(-1))
    c, s = _half_longitudes(lmax, num_phi)
    return tuple(legs), torch.from_numpy(np.concatenate(gather)), torch.from_numpy(c), torch.from_numpy(s)


@cache
def _projection_tables(lmax: int, num_theta: int, num_phi: int, weighted: bool = True) -> tuple:
    """Float64 tables of the exact projection onto degree ``lmax`` from the half grid.

    Returns ``(cos_t, sin_t, legs, scatter)``: ``cos_t, sin_t (lmax+1, K)``; ``legs[b]
    (2|b|, K_b, num_theta)``; ``scatter (D,)`` the row of each flat output coefficient in the
    packed per-block result ``(sum_b 2|b| K_b, n)``.  With ``weighted`` (the projection) the
    half-circle multiplicities, ``2 pi / num_phi`` and the Gauss-Legendre weights are included;
    without, the tables are the plain transpose of ``_synthesis_tables`` (its adjoint).
    """
    P = T.legendre_table(lmax, num_theta)  # (m, l, j)
    c, s = _half_longitudes(lmax, num_phi)
    if weighted:
        _, w = T.gauss_legendre(num_theta)
        P = P * w
        scale = (_half_circle_multiplicity(num_phi) * 2.0 * np.pi / num_phi)[:, None]
        c, s = c * scale, s * scale
    legs, row_of = [], {}
    offset = 0
    for m0, m1 in m_blocks(lmax):
        width = lmax + 1 - m0
        leg = np.zeros((m1 - m0, 2, width, num_theta))
        for m in range(m0, m1):
            for i in range(width):
                l = m0 + i
                if m <= l <= lmax:
                    leg[m - m0, COS, i] = P[m, l]
                    row_of[(l, m)] = offset + ((m - m0) * 2 + COS) * width + i
                    if m > 0:
                        leg[m - m0, SIN, i] = P[m, l]
                        row_of[(l, -m)] = offset + ((m - m0) * 2 + SIN) * width + i
        legs.append(torch.from_numpy(leg.reshape(2 * (m1 - m0), width, num_theta)))
        offset += 2 * (m1 - m0) * width
    scatter = torch.tensor([row_of[(l, m)] for l in range(lmax + 1) for m in range(-l, l + 1)])
    return (torch.from_numpy(np.ascontiguousarray(c.T)), torch.from_numpy(np.ascontiguousarray(s.T)),
            tuple(legs), scatter)


@cache
def _quarter_tables(lmax: int, num_phi: int, weighted: bool) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Longitude tables of the quarter circle ``k = 0..Q-1``, ``Q = (num_phi + 2) // 4``, float64.

    Under ``phi -> pi - phi`` (``k -> h - k``, ``h = num_phi // 2``) ``cos(m phi)`` picks up
    ``(-1)^m`` and ``sin(m phi)`` ``-(-1)^m``, so the cosine part of a function is ``A + B`` at
    ``k`` and ``A - B`` at ``h - k`` (``A`` from even ``m``, ``B`` from odd ``m``), its sine part
    ``C + D`` and ``-C + D``: four classes on a quarter of the points, half the DFT work of the
    half circle.  Synthesis (``weighted=False``): ``cos_even (Q, M_even)``, ``cos_odd``,
    ``sin_even``, ``sin_odd``; projection (``weighted=True``): their transposes ``(M_*, Q)`` times
    ``2 * multiplicity * 2 pi / num_phi`` (the ``2`` counts both points of a pair).
    """
    if num_phi % 4 != 2:
        raise ValueError(f"the quarter-circle transform needs num_phi = 2 mod 4, got {num_phi}")
    Q = (num_phi + 2) // 4
    c, s = _half_longitudes(lmax, num_phi)
    c, s = c[:Q], s[:Q]
    if weighted:
        scale = (2.0 * _half_circle_multiplicity(num_phi)[:Q] * 2.0 * np.pi / num_phi)[:, None]
        c, s = (c * scale).T, (s * scale).T
        parts = (c[0::2], c[1::2], s[0::2], s[1::2])
    else:
        parts = (c[:, 0::2], c[:, 1::2], s[:, 0::2], s[:, 1::2])
    return tuple(torch.from_numpy(np.ascontiguousarray(p)) for p in parts)


@cache
def _quadrature_weights(num_theta: int, num_phi: int) -> Tensor:
    """Weights ``(K, num_theta, 1)`` of the half grid: what ``_projection_tables`` adds to the adjoint."""
    _, w = T.gauss_legendre(num_theta)
    half = _half_circle_multiplicity(num_phi) * 2.0 * np.pi / num_phi
    return torch.from_numpy(np.outer(half, w)[:, :, None])


# ----------------------------------------------------------------------------- device tables
@dataclass(frozen=True)
class Synthesis:
    """Synthesis of degree ``lmax`` on a half grid, tables on one device/dtype."""

    lmax: int
    num_theta: int
    blocks: tuple[tuple[int, int], ...]
    legs: tuple[Tensor, ...]
    gather: Tensor
    cos: Tensor
    sin: Tensor
    quarter: tuple[Tensor, ...]

    @property
    def packed(self) -> int:
        return int(self.gather.shape[0])


@dataclass(frozen=True)
class Projection:
    """Exact projection onto degree ``lmax`` from a half grid, tables on one device/dtype."""

    lmax: int
    num_theta: int
    blocks: tuple[tuple[int, int], ...]
    cos_t: Tensor
    sin_t: Tensor
    legs: tuple[Tensor, ...]
    scatter: Tensor
    quarter_t: tuple[Tensor, ...]

    @property
    def packed(self) -> int:
        return sum(int(leg.shape[0] * leg.shape[1]) for leg in self.legs)


@table_builder("grid.synthesis")
@cache
def _synthesis_host(lmax: int, num_theta: int, num_phi: int) -> tuple[Tensor, ...]:
    """``(*legs, gather, cos, sin, *quarter)``: ``_synthesis_tables`` and, when ``num_phi = 2 mod 4``,
    the synthesis ``_quarter_tables``, flat (the layout ``_synthesis`` reads)."""
    legs, gather, c, s = _synthesis_tables(lmax, num_theta, num_phi)
    quarter = _quarter_tables(lmax, num_phi, False) if num_phi % 4 == 2 else ()
    return (*legs, gather, c, s, *quarter)


@table_builder("grid.projection")
@cache
def _projection_host(lmax: int, num_theta: int, num_phi: int, weighted: bool) -> tuple[Tensor, ...]:
    """``(cos_t, sin_t, *legs, scatter, *quarter_t)`` of ``_projection_tables`` (quarter tables only
    when ``weighted`` and ``num_phi = 2 mod 4``), flat."""
    c, s, legs, scatter = _projection_tables(lmax, num_theta, num_phi, weighted)
    quarter = _quarter_tables(lmax, num_phi, True) if weighted and num_phi % 4 == 2 else ()
    return (c, s, *legs, scatter, *quarter)


@table_builder("grid.weights")
def _weights_host(num_theta: int, num_phi: int) -> tuple[Tensor]:
    return (_quadrature_weights(num_theta, num_phi),)


def synthesis_key(lmax: int, num_theta: int, num_phi: int) -> tuple:
    """Cache key ([`geomlin.gaunt.cache`][]) of the synthesis tables of ``lmax`` on a half grid."""
    return ("grid.synthesis", lmax, num_theta, num_phi)


def projection_key(lmax: int, num_theta: int, num_phi: int, weighted: bool = True) -> tuple:
    """Cache key of the projection tables (``weighted=False``: the adjoint of the synthesis)."""
    return ("grid.projection", lmax, num_theta, num_phi, bool(weighted))


def weights_key(num_theta: int, num_phi: int) -> tuple:
    """Cache key of the half grid's quadrature weights."""
    return ("grid.weights", num_theta, num_phi)


def product_keys(lmax_in1: int, lmax_in2: int, lmax_out: int) -> list[tuple]:
    """Keys of every table [`gaunt_on_grid`][geomlin.gaunt.grid.gaunt_on_grid] and [`gaunt_backward_on_grid`][geomlin.gaunt.grid.gaunt_backward_on_grid] read for these degrees."""
    nt, nphi = exact_grid_size(lmax_in1 + lmax_in2 + lmax_out)
    return ([synthesis_key(L, nt, nphi) for L in (lmax_in1, lmax_in2, lmax_out)]
            + [projection_key(L, nt, nphi) for L in (lmax_out, lmax_in1, lmax_in2)])


def power_keys(lmax: int, nu: int, lmax_out: int) -> list[tuple]:
    """Keys of every table the grid power ([`geomlin.gaunt.powers.power_sum`][]) reads, forward and
    backward (twice differentiable)."""
    nt, nphi = exact_grid_size(nu * lmax + lmax_out)
    return [synthesis_key(lmax, nt, nphi), synthesis_key(lmax_out, nt, nphi), projection_key(lmax_out, nt, nphi),
            projection_key(lmax, nt, nphi, False), projection_key(lmax_out, nt, nphi, False),
            weights_key(nt, nphi)]


def synthesis_on(lmax: int, num_theta: int, num_phi: int, device, dtype, tables=None) -> Synthesis:
    """[`Synthesis`][] tables of ``lmax`` on ``(num_theta, num_phi)`` (``tables``: see [`geomlin.gaunt.cache`][])."""
    parts = device_tables(synthesis_key(lmax, num_theta, num_phi), device, dtype, tables)
    blocks = m_blocks(lmax)
    nb = len(blocks)
    legs, (gather, c, s), quarter = parts[:nb], parts[nb:nb + 3], parts[nb + 3:]
    return Synthesis(lmax, num_theta, blocks, legs, gather, c, s, quarter)


def projection_on(lmax: int, num_theta: int, num_phi: int, device, dtype, weighted: bool = True,
                  tables=None) -> Projection:
    """[`Projection`][] tables of ``lmax`` on ``(num_theta, num_phi)`` (``weighted=False``: the adjoint
    of the synthesis; ``tables``: see [`geomlin.gaunt.cache`][])."""
    parts = device_tables(projection_key(lmax, num_theta, num_phi, weighted), device, dtype, tables)
    blocks = m_blocks(lmax)
    nb = len(blocks)
    (c, s), legs, scatter, quarter = parts[:2], parts[2:2 + nb], parts[2 + nb], parts[3 + nb:]
    return Projection(lmax, num_theta, blocks, c, s, legs, scatter, quarter)
