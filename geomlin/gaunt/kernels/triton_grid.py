"""The fast Gaunt route as Triton kernels: grid values never leave the chip.

Kernel 1 (``_latitude_kernel``) takes a block of output rows and one Gauss-Legendre
latitude ``theta_j``:

1. Legendre sums at ``theta_j`` for both inputs: ``g_{m, part} = sum_l P_l^m(theta_j) x_{l, +-m}``,
   read straight from the flat coefficients through an index table (no gather copy), one
   ``(rows, M, L + 1)`` tile contracted over the degrees;
2. the longitude transform to the half circle: ``E = g_cos @ Phi_cos^T``, ``O = g_sin @ Phi_sin^T``;
3. the pointwise product in the half-circle form ``even = E1 E2 + O1 O2``, ``odd = E1 O2 + O1 E2``
   (summed over the channels of a row group when the output is reduced);
4. the longitude projection ``lat_cos = even @ W_cos``, ``lat_sin = odd @ W_sin``,

and writes only ``lat (rows, 2 (Lo+1), num_theta)`` -- ``O(L^2)`` numbers per row, like the
input and output.  Kernel 2 (``_legendre_projection_kernel``) contracts ``lat`` with the
weighted Legendre table over the latitudes.  Every step is ``O(L^3)`` per row, as on the CPU
route of [`geomlin.gaunt.grid`][]; the half circle (not the quarter) keeps the kernel simple
where flops are cheap.

float32 uses ``tl.dot`` with ``input_precision="ieee"`` (no TF32); float64 multiplies and sums in
registers.  Runs on CUDA, and on the CPU under ``TRITON_INTERPRET=1`` (the tests).  Not timed on
a GPU yet: ``method="auto"`` does not pick it (see [`geomlin.gaunt.method_tables`][]).
"""

from __future__ import annotations

import os
from functools import cache

import numpy as np
import torch
from torch import Tensor

try:
    import triton
    import triton.language as tl
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError("the Triton Gaunt kernels need triton: pip install 'geomlin[gpu]' (or pip install triton)") from err

from geomlin.gaunt import grid_tables as GT
from geomlin.gaunt import harmonics as T
from geomlin.gaunt.cache import device_tables, table_builder

#: Largest degree (of any input or the output) the kernels are compiled for: register tiles grow
#: as ``(L + 1)`` rounded up to a power of two.
MAX_LMAX = 24
#: Output rows per program.
BLOCK_ROWS = 16
#: Output coefficients per program of the Legendre projection.
BLOCK_COEFFS = 32


def _pad(n: int) -> int:
    return max(16, triton.next_power_of_2(max(n, 1)))


def supports(lmax_in1: int, lmax_in2: int, lmax_out: int, dtype) -> bool:
    """Whether the kernels handle these degrees and dtype."""
    return dtype in (torch.float32, torch.float64) and max(lmax_in1, lmax_in2, lmax_out) <= MAX_LMAX


# ----------------------------------------------------------------------------- tables
@table_builder("triton.input")
@cache
def _input_tables(lmax: int, num_theta: int, num_phi: int) -> tuple[Tensor, ...]:
    """``idx_cos, idx_sin (M, W)`` int32, ``leg_cos, leg_sin (M, W, nt)``, ``cos_t, sin_t (M, K)``; float64.

    Row ``m``, column ``i`` stands for degree ``l = m + i`` (zero table entries where ``l > lmax``
    and for the sine part of ``m = 0``; their indices read coefficient 0).
    """
    M = lmax + 1
    P = T.legendre_table(lmax, num_theta)  # (m, l, j)
    idx_c = np.zeros((M, M), dtype=np.int32)
    idx_s = np.zeros((M, M), dtype=np.int32)
    leg_c = np.zeros((M, M, num_theta))
    leg_s = np.zeros((M, M, num_theta))
    for m in range(M):
        for i in range(M - m):
            l = m + i
            idx_c[m, i] = T.sh_index(l, m)
            leg_c[m, i] = P[m, l]
            if m > 0:
                idx_s[m, i] = T.sh_index(l, -m)
                leg_s[m, i] = P[m, l]
    cos, sin = GT._half_longitudes(lmax, num_phi)  # (K, M)
    return tuple(torch.from_numpy(np.ascontiguousarray(a)) for a in (idx_c, idx_s, leg_c, leg_s, cos.T, sin.T))


@table_builder("triton.output")
@cache
def _output_tables(lmax: int, num_theta: int, num_phi: int) -> tuple[Tensor, ...]:
    """``cos_w, sin_w (K, Mo)`` weighted longitude projections, ``leg_w (Do, nt)`` weighted Legendre
    rows of the flat outputs, ``row (Do,)`` int32 their ``2 m + part`` row in ``lat``; float64."""
    cos_t, sin_t, _, _ = GT._projection_tables(lmax, num_theta, num_phi, True)  # (Mo, K)
    _, w = T.gauss_legendre(num_theta)
    P = T.legendre_table(lmax, num_theta) * w  # (m, l, j)
    leg, row = [], []
    for l in range(lmax + 1):
        for m in range(-l, l + 1):
            leg.append(P[abs(m), l])
            row.append(2 * abs(m) + (GT.COS if m >= 0 else GT.SIN))
    return (cos_t.T.contiguous(), sin_t.T.contiguous(), torch.from_numpy(np.stack(leg)),
            torch.tensor(row, dtype=torch.int32))


def table_keys(lmax_in1: int, lmax_in2: int, lmax_out: int) -> list[tuple]:
    """Cache keys ([`geomlin.gaunt.cache`][]) of the tables one launch reads."""
    nt, nphi = GT.exact_grid_size(lmax_in1 + lmax_in2 + lmax_out)
    return [("triton.input", lmax_in1, nt, nphi), ("triton.input", lmax_in2, nt, nphi), ("triton.output", lmax_out, nt, nphi)]


def _tables(lmax_in1, lmax_in2, lmax_out, device, dtype, tables):
    return tuple(device_tables(key, device, dtype, tables) for key in table_keys(lmax_in1, lmax_in2, lmax_out))


def _check_device(x1: Tensor, x2: Tensor) -> None:
    """The kernels read raw pointers: both inputs on one CUDA device (the CPU only under the interpreter)."""
    if x1.device != x2.device:
        raise ValueError(f"x1 is on {x1.device} but x2 is on {x2.device}; move them to one device")
    if x1.device.type != "cuda" and os.environ.get("TRITON_INTERPRET", "0") != "1":
        raise ValueError(f"the Triton Gaunt kernel runs on CUDA tensors (CPU tensors only under TRITON_INTERPRET=1), "
                         f"got tensors on {x1.device}; use method='grid' there")


# ----------------------------------------------------------------------------- kernels
@triton.jit
def _matmul(a, b, USE_DOT: tl.constexpr):
    """``a (R, S) @ b (S, T)`` in the dtype of ``a``: ``tl.dot`` (IEEE float32) or multiply-and-sum."""
    if USE_DOT:
        return tl.dot(a, b, input_precision="ieee")
    else:
        return tl.sum(a[:, :, None] * b[None, :, :], axis=1)


@triton.jit
def _half_circle(x_ptr, rows, row_mask, D, idx_c, idx_s, leg_c, leg_s, cos_t, sin_t, j, NT, M, K,
                 MP: tl.constexpr, KP: tl.constexpr, USE_DOT: tl.constexpr):
    """Half-circle values ``E, O (BLOCK, KP)`` at latitude ``j`` of the rows ``x[rows]``.

    The Legendre sums contract a gathered ``(BLOCK, M, L+1)`` tile of coefficients (row ``m``,
    column ``i`` is degree ``m + i``) with the table at ``theta_j``.
    """
    m = tl.arange(0, MP)
    i = tl.arange(0, MP)
    tab_mask = (m[:, None] < M) & (i[None, :] < M)
    tab = m[:, None] * M + i[None, :]
    ic = tl.load(idx_c + tab, mask=tab_mask, other=0)
    is_ = tl.load(idx_s + tab, mask=tab_mask, other=0)
    pc = tl.load(leg_c + tab * NT + j, mask=tab_mask, other=0.0)
    ps = tl.load(leg_s + tab * NT + j, mask=tab_mask, other=0.0)
    x_mask = row_mask[:, None, None] & tab_mask[None, :, :]
    base = x_ptr + rows[:, None, None] * D
    xc = tl.load(base + ic[None, :, :], mask=x_mask, other=0.0)
    xs = tl.load(base + is_[None, :, :], mask=x_mask, other=0.0)
    gc = tl.sum(xc * pc[None, :, :], axis=2)  # (BLOCK, MP): g_{m, cos}(theta_j)
    gs = tl.sum(xs * ps[None, :, :], axis=2)
    k = tl.arange(0, KP)
    tmask = (m[:, None] < M) & (k[None, :] < K)
    ct = tl.load(cos_t + m[:, None] * K + k[None, :], mask=tmask, other=0.0)
    st = tl.load(sin_t + m[:, None] * K + k[None, :], mask=tmask, other=0.0)
    return _matmul(gc, ct, USE_DOT), _matmul(gs, st, USE_DOT)


@triton.jit
def _latitude_kernel(x1_ptr, x2_ptr, lat_ptr,
                     i1c, i1s, l1c, l1s, c1, s1,
                     i2c, i2s, l2c, l2s, c2, s2,
                     cow, sow,
                     NOUT, C, D1, D2, NT, M1, M2, MO, K,
                     BLOCK: tl.constexpr, M1P: tl.constexpr, M2P: tl.constexpr, MOP: tl.constexpr,
                     KP: tl.constexpr, SHARED: tl.constexpr, REDUCE: tl.constexpr, USE_DOT: tl.constexpr):
    pid = tl.program_id(0)
    j = tl.program_id(1)
    q = pid * BLOCK + tl.arange(0, BLOCK)
    q_mask = q < NOUT
    even = tl.zeros((BLOCK, KP), dtype=x1_ptr.dtype.element_ty)
    odd = tl.zeros((BLOCK, KP), dtype=x1_ptr.dtype.element_ty)
    if REDUCE:
        n_terms = C
    else:
        n_terms = 1
    for c in range(n_terms):
        if REDUCE:
            group = q
            r = q * C + c
        else:
            group = q // C
            r = q
        if SHARED == 1:
            r1 = group
        else:
            r1 = r
        if SHARED == 2:
            r2 = group
        else:
            r2 = r
        E1, O1 = _half_circle(x1_ptr, r1, q_mask, D1, i1c, i1s, l1c, l1s, c1, s1, j, NT, M1, K, M1P, KP, USE_DOT)
        E2, O2 = _half_circle(x2_ptr, r2, q_mask, D2, i2c, i2s, l2c, l2s, c2, s2, j, NT, M2, K, M2P, KP, USE_DOT)
        even += E1 * E2 + O1 * O2
        odd += E1 * O2 + O1 * E2
    k = tl.arange(0, KP)
    mo = tl.arange(0, MOP)
    wmask = (k[:, None] < K) & (mo[None, :] < MO)
    cw = tl.load(cow + k[:, None] * MO + mo[None, :], mask=wmask, other=0.0)
    sw = tl.load(sow + k[:, None] * MO + mo[None, :], mask=wmask, other=0.0)
    lat_c = _matmul(even, cw, USE_DOT)
    lat_s = _matmul(odd, sw, USE_DOT)
    smask = q_mask[:, None] & (mo[None, :] < MO)
    base = lat_ptr + q[:, None] * (2 * MO * NT) + j
    tl.store(base + (2 * mo[None, :]) * NT, lat_c, mask=smask)
    tl.store(base + (2 * mo[None, :] + 1) * NT, lat_s, mask=smask)


@triton.jit
def _legendre_projection_kernel(lat_ptr, leg_ptr, row_ptr, out_ptr, NOUT, DO, NT, MO,
                                BLOCK: tl.constexpr, BLOCK_D: tl.constexpr, NTP: tl.constexpr):
    pid_q = tl.program_id(0)
    pid_d = tl.program_id(1)
    q = pid_q * BLOCK + tl.arange(0, BLOCK)
    d = pid_d * BLOCK_D + tl.arange(0, BLOCK_D)
    jj = tl.arange(0, NTP)
    q_mask = q < NOUT
    d_mask = d < DO
    row = tl.load(row_ptr + d, mask=d_mask, other=0)
    w_mask = d_mask[:, None] & (jj[None, :] < NT)
    w = tl.load(leg_ptr + d[:, None] * NT + jj[None, :], mask=w_mask, other=0.0)  # (BLOCK_D, NTP)
    v = tl.load(lat_ptr + q[:, None, None] * (2 * MO * NT) + row[None, :, None] * NT + jj[None, None, :],
                mask=q_mask[:, None, None] & w_mask[None, :, :], other=0.0)  # (BLOCK, BLOCK_D, NTP)
    acc = tl.sum(v * w[None, :, :], axis=2)
    tl.store(out_ptr + q[:, None] * DO + d[None, :], acc, mask=q_mask[:, None] & d_mask[None, :])


# ----------------------------------------------------------------------------- launcher
def gaunt_grid_triton(x1: Tensor, x2: Tensor, lmax_in1: int, lmax_in2: int, lmax_out: int, channels: int = 1,
                      shared: int = 0, reduce: bool = False, tables=None) -> Tensor:
    """Gaunt product of rows with the same conventions (and ``tables``) as [`geomlin.gaunt.grid.gaunt_on_grid`][]
    (``x1 (A c1, D1)``, ``x2 (A c2, D2)`` -> ``(A C, Do)`` or ``(A, Do)`` when ``reduce``),
    on the half grid exact for degree ``lmax_in1 + lmax_in2 + lmax_out``; float32/float64."""
    if not supports(lmax_in1, lmax_in2, lmax_out, x1.dtype):
        raise ValueError(f"the Triton Gaunt kernel handles float32/float64 and degrees <= {MAX_LMAX}, got "
                         f"lmax ({lmax_in1}, {lmax_in2}, {lmax_out}) in {x1.dtype}; use method='grid'")
    _check_device(x1, x2)
    x1, x2 = x1.contiguous(), x2.contiguous()
    C = channels
    A = x1.shape[0] // (1 if shared == 1 else C)
    nout = A if reduce else A * C
    nt, nphi = GT.exact_grid_size(lmax_in1 + lmax_in2 + lmax_out)
    t1, t2, to = _tables(lmax_in1, lmax_in2, lmax_out, x1.device, x1.dtype, tables)
    K, Mo, Do = nphi // 2 + 1, lmax_out + 1, T.num_coefficients(lmax_out)
    lat = torch.empty(nout, 2 * Mo, nt, device=x1.device, dtype=x1.dtype)
    out = torch.empty(nout, Do, device=x1.device, dtype=x1.dtype)
    if nout == 0:
        return out
    use_dot = x1.dtype == torch.float32
    grid1 = (triton.cdiv(nout, BLOCK_ROWS), nt)
    _latitude_kernel[grid1](x1, x2, lat, *t1, *t2, to[0], to[1],
                            nout, C, x1.shape[1], x2.shape[1], nt, lmax_in1 + 1, lmax_in2 + 1, Mo, K,
                            BLOCK=BLOCK_ROWS, M1P=_pad(lmax_in1 + 1), M2P=_pad(lmax_in2 + 1), MOP=_pad(Mo), KP=_pad(K),
                            SHARED=shared, REDUCE=bool(reduce), USE_DOT=use_dot)
    block_d = BLOCK_COEFFS if _pad(nt) <= 32 else BLOCK_COEFFS // 2  # keep the (rows, coefficients, latitudes) tile small
    grid2 = (triton.cdiv(nout, BLOCK_ROWS), triton.cdiv(Do, block_d))
    _legendre_projection_kernel[grid2](lat, to[2], to[3], out, nout, Do, nt, Mo,
                                       BLOCK=BLOCK_ROWS, BLOCK_D=block_d, NTP=_pad(nt))
    return out
