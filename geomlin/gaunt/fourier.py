"""The paper's route: Gaunt products as 2D convolutions of Fourier coefficients (Luo et al., ICLR 2024, sec. 3.2).

A spherical function of degree ``L`` extended to ``theta in [0, 2 pi)`` is a 2D
trigonometric polynomial ``sum_{u, v} F[u, v] e^{i (u theta + v phi)}`` with ``|u|, |v| <= L``:

1. **SH -> 2D Fourier** through sparse per-m tables: ``N_l^m P_l^m(cos theta)`` is a
   trigonometric polynomial of degree ``l`` in ``theta`` with frequencies ``u = l, l-2, ...``
   ([`theta_fourier_table`][geomlin.gaunt.harmonics.theta_fourier_table]), so column ``v = m`` of ``F`` is one
   small GEMM per ``m`` (half its entries are zero by parity);
2. **2D convolution by FFT**: both spectra zero-padded to the alias-free size
   ``N_u >= 2 (L1 + L2) + 1``, ``N_v >= L1 + L2 + Lo + 1`` ([`fft_sizes`][]), ``irfft2``
   to values, pointwise product, ``rfft2`` back;
3. **2D Fourier -> SH** with the exact inverse table built from
   ``int_0^pi e^{i w theta} sin(theta) dtheta``
   ([`theta_projection_table`][geomlin.gaunt.harmonics.theta_projection_table]).

The FFT only needs the columns ``v = 0..L`` of a real function (``rfft`` in ``phi``), and
works on the full ``theta`` circle: about 2x the points of the Gauss-Legendre grid of
[`geomlin.gaunt.grid`][] in ``theta``, and batched short FFTs instead of GEMMs.  That is
why the route loses to ``"grid"`` on a CPU at every degree measured (``bench_gaunt.py
--profile`` prints the per-stage times); its ``O(L^2 log L)`` convolution only pays off
at degrees far above those used in models.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import torch
from torch import Tensor

from geomlin.gaunt import grid_tables as GT
from geomlin.gaunt import harmonics as T
from geomlin.gaunt.cache import device_tables, table_builder

_SQRT2 = math.sqrt(2.0)
_COS, _SIN = GT.COS, GT.SIN


@cache
def fft_sizes(lmax_in1: int, lmax_in2: int, lmax_out: int) -> tuple[int, int]:
    """``(N_u, N_v)``: alias-free sizes of the zero-padded 2D FFT in ``(theta, phi)``."""
    n_u = 2 * (lmax_in1 + lmax_in2) + 1
    n_v = max(lmax_in1 + lmax_in2 + lmax_out + 1, 2 * max(lmax_in1, lmax_in2) + 1)
    return n_u, n_v


@cache
def _analysis_table(lmax: int) -> tuple[Tensor, Tensor]:
    """SH -> 2D Fourier column ``v = m`` (mirrored ``phi``), as real per-m blocks, float64.

    Returns ``table (m, 2U [re/im, u], 2(L+1) [part, l])`` with ``U = 2L + 1`` (``u = -L..L``):
    ``F[u, m] = sum_l A[m, l, u] (x_{l,m} + i x_{l,-m}) / sqrt(2)`` (``A`` from
    [`theta_fourier_table`][geomlin.gaunt.harmonics.theta_fourier_table], real for even ``m``, imaginary for
    odd), and ``gather (m, 2(L+1))`` the flat coefficient read by each column (0 where the table is zero).
    """
    A = T.theta_fourier_table(lmax)
    U = 2 * lmax + 1
    out = np.zeros((lmax + 1, 2, U, 2, lmax + 1))
    idx = np.zeros((lmax + 1, 2, lmax + 1), dtype=np.int64)
    for m in range(lmax + 1):
        s = 1.0 if m == 0 else 1.0 / _SQRT2
        if m % 2 == 0:
            a = A[m].real.T * s  # (u, l)
            out[m, 0, :, _COS] = a
            out[m, 1, :, _SIN] = a
        else:
            a = A[m].imag.T * s
            out[m, 0, :, _SIN] = -a
            out[m, 1, :, _COS] = a
        for l in range(m, lmax + 1):
            idx[m, _COS, l] = T.sh_index(l, m)
            if m > 0:
                idx[m, _SIN, l] = T.sh_index(l, -m)
    out[0, :, :, _SIN] = 0.0  # the sine part of m = 0 does not exist: its columns read x_0 with a zero table
    return (torch.from_numpy(out.reshape(lmax + 1, 2 * U, 2 * (lmax + 1))),
            torch.from_numpy(idx.reshape(lmax + 1, 2 * (lmax + 1))))


@cache
def _projection_table(lmax_out: int, u_max: int) -> tuple[Tensor, Tensor]:
    """2D Fourier columns ``v = m`` -> SH, float64.

    Returns ``table (m, 2(Lo+1) [part, l], 2U3 [re/im, u])`` for ``u = -u_max..u_max`` and
    ``scatter (Do,)``: the row of each flat output coefficient in the flattened result
    ``(m * 2(Lo+1) + part * (Lo+1) + l)``.
    """
    Theta = T.theta_projection_table(lmax_out, u_max)  # (m, l, u)
    U3 = 2 * u_max + 1
    out = np.zeros((lmax_out + 1, 2, lmax_out + 1, 2, U3))
    for m in range(lmax_out + 1):
        c = 2.0 * np.pi * (_SQRT2 if m > 0 else 1.0)
        re, im = Theta[m].real * c, Theta[m].imag * c  # (l, u)
        out[m, _COS, :, 0] = re
        out[m, _COS, :, 1] = -im
        out[m, _SIN, :, 0] = im
        out[m, _SIN, :, 1] = re
    Lp = lmax_out + 1
    rows = [abs(m) * 2 * Lp + (_COS if m >= 0 else _SIN) * Lp + l for l in range(Lp) for m in range(-l, l + 1)]
    return torch.from_numpy(out.reshape(Lp, 2 * Lp, 2 * U3)), torch.tensor(rows)


@table_builder("fourier.analysis")
@cache
def _analysis_host(lmax: int) -> tuple[Tensor, Tensor]:
    table, gather = _analysis_table(lmax)
    return table, gather.reshape(-1)


table_builder("fourier.projection")(_projection_table)


def table_keys(lmax_in1: int, lmax_in2: int, lmax_out: int) -> list[tuple]:
    """Cache keys ([`geomlin.gaunt.cache`][]) of the tables [`gaunt_fourier`][] reads for these degrees."""
    return [("fourier.analysis", lmax_in1), ("fourier.analysis", lmax_in2), ("fourier.projection", lmax_out, lmax_in1 + lmax_in2)]


def _tables(lmax_in1, lmax_in2, lmax_out, device, dtype, tables):
    """``(a1, i1, a2, i2, proj, rows)``: both analysis tables and the projection, on ``device`` in ``dtype``."""
    return tuple(t for key in table_keys(lmax_in1, lmax_in2, lmax_out) for t in device_tables(key, device, dtype, tables))


def spectrum(x: Tensor, table: Tensor, gather: Tensor, lmax: int, n_u: int, n_v: int) -> Tensor:
    """``x (n, D)`` -> zero-padded half spectrum ``(n, n_u, n_v // 2 + 1)`` complex (step 1)."""
    n = x.shape[0]
    M, U = lmax + 1, 2 * lmax + 1
    cols = x.T.index_select(0, gather).view(M, 2 * M, n)  # (m, [part, l], n)
    F = torch.bmm(table, cols).view(M, 2, U, n)  # (m, re/im, u = -L..L, n)
    spec = x.new_zeros(n, n_u, n_v // 2 + 1, 2)
    F = F.permute(3, 2, 0, 1)  # (n, u, m, re/im)
    spec[:, : lmax + 1, :M] = F[:, lmax:]
    if lmax > 0:
        spec[:, n_u - lmax:, :M] = F[:, :lmax]
    return torch.view_as_complex(spec)


def gaunt_fourier(x1: Tensor, x2: Tensor, lmax_in1: int, lmax_in2: int, lmax_out: int, channels: int = 1,
                  shared: int = 0, reduce: bool = False, tables=None) -> Tensor:
    """Gaunt product through the 2D Fourier basis (same row conventions and ``tables`` as
    [`geomlin.gaunt.grid.gaunt_on_grid`][]); exact."""
    n_u, n_v = fft_sizes(lmax_in1, lmax_in2, lmax_out)
    a1, i1, a2, i2, proj, rows = _tables(lmax_in1, lmax_in2, lmax_out, x1.device, x1.dtype, tables)
    C = channels
    c1 = 1 if shared == 1 else C
    c2 = 1 if shared == 2 else C
    v1 = torch.fft.irfft2(spectrum(x1, a1, i1, lmax_in1, n_u, n_v), s=(n_u, n_v), norm="forward")
    v2 = torch.fft.irfft2(spectrum(x2, a2, i2, lmax_in2, n_u, n_v), s=(n_u, n_v), norm="forward")
    v = v1.view(-1, c1, n_u, n_v) * v2.view(-1, c2, n_u, n_v)
    v = v.sum(1) if reduce else v.view(-1, n_u, n_v)
    spec = torch.fft.rfft2(v, norm="forward")[:, :, : lmax_out + 1]  # (n, n_u, m)
    u_max = lmax_in1 + lmax_in2
    u_index = torch.arange(-u_max, u_max + 1, device=x1.device) % n_u
    spec = torch.view_as_real(spec.index_select(1, u_index))  # (n, U3, m, re/im)
    cols = spec.permute(2, 3, 1, 0).reshape(lmax_out + 1, -1, spec.shape[0])  # (m, [re/im, u], n)
    out = torch.bmm(proj, cols)  # (m, [part, l], n)
    return out.view(-1, out.shape[-1]).index_select(0, rows).T.contiguous()
