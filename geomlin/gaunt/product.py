"""Gaunt tensor products: the SH coefficients of the product of two spherical functions.

``gaunt_tensor_product(x1, x2, lmax_out)`` returns ``x3`` with

    x3_k = sum_{i, j} G[i, j, k] x1_i x2_j,     G[i, j, k] = int_{S^2} Y_i Y_j Y_k,

i.e. the coefficients of ``f1 * f2`` truncated at degree ``lmax_out``.  In terms
of Clebsch-Gordan coefficients this is the tensor product restricted to the
paths with ``l1 + l2 + l3`` even, path ``(l1, l2, l3)`` weighted by
``sqrt((2l1+1)(2l2+1)(2l3+1) / (4 pi)) |(l1 l2 l3; 0 0 0)|`` (Luo, Chen and
Krishnapriyan, "Enabling Efficient Equivariant Operations in the Fourier Basis
via Gaunt Tensor Products", ICLR 2024, eq. 3-6).

Methods (all exact; they agree to ~1e-13 in float64)
    ``"grid"``   separable sphere quadrature, O(L^3): per-m Legendre matrices
                 to Gauss-Legendre latitudes, real FFT in longitude, pointwise
                 product, real FFT back, per-m Legendre projection.
    ``"fft"``    the paper's route: SH -> 2D Fourier coefficients on
                 ``e^{i(u theta + v phi)}`` (per-m sparse tables), 2D
                 convolution by zero-padded ``irfft2`` / ``rfft2``, and the
                 inverse table built from ``int_0^pi e^{i w theta} sin(theta)``.
    ``"dense"``  the plain sphere-grid GEMM, O(L^4): three dense matrix products.
    ``"direct"`` contraction with the dense Gaunt tensor, O(L^6); small L only.
    ``"triton"`` fused Triton kernel (CUDA; or CPU under ``TRITON_INTERPRET=1``).
    ``"auto"``   picks from :mod:`geomlin.gaunt.autotune` (measured per device).

Internally the batch sits on the last axis (``(..., B)``) so that every per-m
transform is one batched GEMM with ``B`` columns.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import torch
from torch import Tensor

from geomlin.gaunt import grid as G
from geomlin.gaunt import tables as T

#: Methods accepted by :func:`gaunt_tensor_product`.
METHODS = ("auto", "grid", "fft", "dense", "direct", "triton")
_SQRT2 = math.sqrt(2.0)
_COS, _SIN = G.COS, G.SIN  # parts of a per-m coefficient pair (x_{l,m}, x_{l,-m})


# ---------------------------------------------------------------- layout maps
@cache
def _scatter_index(lmax: int, part_stride: int, l_stride: int, m_stride: int) -> Tensor:
    """For each flat output ``(l, m)``: its row in a per-m result laid out by the given strides."""
    rows = []
    for l in range(lmax + 1):
        for m in range(-l, l + 1):
            part = _COS if m >= 0 else _SIN
            rows.append(abs(m) * m_stride + l * l_stride + part * part_stride)
    return torch.tensor(rows, dtype=torch.long)


def _to_columns(x: Tensor, lmax: int) -> Tensor:
    """``(B, D)`` -> per-m columns ``(lmax+1 [m], 2 (lmax+1) [part, l], B)``."""
    B = x.shape[0]
    padded = torch.cat([x.T, x.new_zeros(1, B)], dim=0)
    return padded[G.gather_index(lmax, fill=T.num_coefficients(lmax)).to(x.device)].view(lmax + 1, 2 * (lmax + 1), B)


# ---------------------------------------------------------------- table caches
_DEVICE_CACHE: dict = {}


def _on(key, builder, device, dtype) -> tuple[Tensor, ...]:
    """Float64 tables from ``builder()`` moved to ``device``/``dtype``, cached by ``key``."""
    full_key = (key, str(device), dtype)
    if full_key not in _DEVICE_CACHE:
        _DEVICE_CACHE[full_key] = tuple(t.to(device=device, dtype=dtype) for t in builder())
    return _DEVICE_CACHE[full_key]


def _effective_lmax_out(lmax1: int, lmax2: int, lmax_out: int) -> int:
    return min(lmax_out, lmax1 + lmax2)


# ---------------------------------------------------------------- grid method
#: Grid points x batch rows per chunk of the grid route: keeps its intermediate grids in cache.
GRID_CHUNK_POINTS = 1 << 18


def _gaunt_grid(x1: Tensor, x2: Tensor, lmax1: int, lmax2: int, lmax_out: int) -> Tensor:
    n_theta, n_phi = G.exact_grid_size(lmax1 + lmax2 + lmax_out)
    chunk = max(64, GRID_CHUNK_POINTS // (n_theta * n_phi))
    outs = []
    for start in range(0, x1.shape[0], chunk):
        outs.append(G.gaunt_on_half_grid(x1[start:start + chunk], x2[start:start + chunk], lmax1, lmax2,
                                         lmax_out, n_theta, n_phi))
    return outs[0] if len(outs) == 1 else torch.cat(outs, dim=0)


# ---------------------------------------------------------------- 2D Fourier method
@cache
def fft_sizes(lmax1: int, lmax2: int, lmax_out: int) -> tuple[int, int]:
    """``(N_u, N_v)``: alias-free sizes of the zero-padded 2D FFT in ``(theta, phi)``."""
    n_u = 2 * (lmax1 + lmax2) + 1
    n_v = max(lmax1 + lmax2 + lmax_out + 1, 2 * max(lmax1, lmax2) + 1)
    return n_u, n_v


@cache
def _fft_analysis_table(lmax: int) -> Tensor:
    """``(m, 2U [re/im, u], 2(L+1) [part, l])`` real map SH -> 2D Fourier column ``v = m`` (mirrored ``phi``).

    ``F'[u, m] = sum_l A[m, l, u] (x_{l,m} + i x_{l,-m}) / sqrt(2)`` (``A`` from
    :func:`~geomlin.gaunt.tables.theta_fourier_table`); ``u = -L..L``.
    """
    A = T.theta_fourier_table(lmax)  # (m, l, u), real (even m) or imaginary (odd m)
    U = 2 * lmax + 1
    out = np.zeros((lmax + 1, 2, U, 2, lmax + 1))
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
    return torch.from_numpy(out.reshape(lmax + 1, 2 * U, 2 * (lmax + 1)))


@cache
def _fft_projection_table(lmax_out: int, u_max: int) -> Tensor:
    """``(m, 2(Lo+1) [part, l], 2U3 [re/im, u])`` real map from 2D Fourier columns back to SH."""
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
    return torch.from_numpy(out.reshape(lmax_out + 1, 2 * (lmax_out + 1), 2 * U3))


def _fft_values(x: Tensor, table: Tensor, lmax: int, n_u: int, n_v: int) -> Tensor:
    """``(B, D)`` -> values ``(n_v, n_u, B)`` on the equispaced (full-circle) ``(theta, phi)`` grid."""
    U = 2 * lmax + 1
    F = torch.bmm(table, _to_columns(x, lmax))  # (m, 2U, B)
    F = torch.complex(F[:, :U], F[:, U:])  # (m, u = -L..L, B)
    spec = F.new_zeros((n_v // 2 + 1, n_u, F.shape[-1]))
    spec[: lmax + 1, : lmax + 1] = F[:, lmax:]
    if lmax > 0:
        spec[: lmax + 1, n_u - lmax:] = F[:, :lmax]
    return torch.fft.irfftn(spec, s=(n_u, n_v), dim=(1, 0), norm="forward")


def _gaunt_fft(x1: Tensor, x2: Tensor, lmax1: int, lmax2: int, lmax_out: int) -> Tensor:
    n_u, n_v = fft_sizes(lmax1, lmax2, lmax_out)
    u_max = lmax1 + lmax2
    a1, a2, proj, u_idx = _on(
        ("fft", lmax1, lmax2, lmax_out),
        lambda: (_fft_analysis_table(lmax1), _fft_analysis_table(lmax2), _fft_projection_table(lmax_out, u_max),
                 torch.arange(-u_max, u_max + 1) % n_u),
        x1.device, x1.dtype)
    v = _fft_values(x1, a1, lmax1, n_u, n_v) * _fft_values(x2, a2, lmax2, n_u, n_v)
    spec = torch.fft.rfftn(v, dim=(1, 0), norm="forward")[: lmax_out + 1]  # (m, n_u, B)
    spec = spec[:, u_idx.long()]  # (m, U3, B)
    out = torch.bmm(proj, torch.cat([spec.real, spec.imag], dim=1))  # (m, 2(Lo+1), B)
    Lp = lmax_out + 1
    rows = _scatter_index(lmax_out, Lp, 1, 2 * Lp).to(x1.device)
    return out.reshape(-1, out.shape[-1])[rows].T


# ---------------------------------------------------------------- dense and direct
@cache
def _dense_tables(lmax1: int, lmax2: int, lmax_out: int) -> tuple[Tensor, Tensor, Tensor]:
    """``Y1^T (D1, P)``, ``Y2^T (D2, P)`` and weighted ``W (P, Do)`` on an exact grid, float64."""
    Y, w = T.sh_on_grid(max(lmax1, lmax2, lmax_out), lmax1 + lmax2 + lmax_out)
    return (Y[:, : T.num_coefficients(lmax1)].T.contiguous(), Y[:, : T.num_coefficients(lmax2)].T.contiguous(),
            (Y[:, : T.num_coefficients(lmax_out)] * w[:, None]).contiguous())


def _gaunt_dense(x1: Tensor, x2: Tensor, lmax1: int, lmax2: int, lmax_out: int) -> Tensor:
    Y1, Y2, W = _on(("dense", lmax1, lmax2, lmax_out), lambda: _dense_tables(lmax1, lmax2, lmax_out),
                    x1.device, x1.dtype)
    return ((x1 @ Y1) * (x2 @ Y2)) @ W


def _gaunt_direct(x1: Tensor, x2: Tensor, lmax1: int, lmax2: int, lmax_out: int) -> Tensor:
    (G,) = _on(("direct", lmax1, lmax2, lmax_out),
               lambda: (T.gaunt_tensor(lmax1, lmax2, lmax_out).flatten(0, 1),), x1.device, x1.dtype)
    outer = (x1[:, :, None] * x2[:, None, :]).flatten(1)
    return outer @ G


def _gaunt_triton(x1: Tensor, x2: Tensor, lmax1: int, lmax2: int, lmax_out: int) -> Tensor:
    from geomlin.gaunt.kernels import gaunt_dense_triton

    Y1, Y2, W = _on(("dense", lmax1, lmax2, lmax_out), lambda: _dense_tables(lmax1, lmax2, lmax_out),
                    x1.device, x1.dtype)
    return gaunt_dense_triton(x1, x2, Y1, Y2, W)


_IMPLEMENTATIONS = {
    "grid": _gaunt_grid,
    "fft": _gaunt_fft,
    "dense": _gaunt_dense,
    "direct": _gaunt_direct,
    "triton": _gaunt_triton,
}


# ---------------------------------------------------------------- autograd
#: Methods whose backward is computed as two Gaunt products instead of by autograd through the transforms.
_SELF_ADJOINT = ("grid", "fft")


def _gaunt_flat(x1: Tensor, x2: Tensor, lmax1: int, lmax2: int, lmax_out: int, method: str) -> Tensor:
    """``(B, D1), (B, D2) -> (B, (lmax_out+1)**2)``, zero above ``lmax1 + lmax2``."""
    lo = _effective_lmax_out(lmax1, lmax2, lmax_out)
    if method in _SELF_ADJOINT:
        out = _GauntFunction.apply(x1, x2, lmax1, lmax2, lo, method)
    else:
        out = _IMPLEMENTATIONS[method](x1, x2, lmax1, lmax2, lo)
    if lo < lmax_out:
        out = torch.nn.functional.pad(out, (0, T.num_coefficients(lmax_out) - T.num_coefficients(lo)))
    return out


class _GauntFunction(torch.autograd.Function):
    """Gaunt product whose gradients are Gaunt products again.

    ``G[i, j, k] = int Y_i Y_j Y_k`` is symmetric, so for an output gradient ``g``
    ``dL/dx1 = gaunt(g, x2)`` truncated at ``L1`` and ``dL/dx2 = gaunt(g, x1)`` at
    ``L2``: the backward costs two forward products (and is itself differentiable,
    for force training's double backward), instead of autograd through gathers
    and strided batched GEMMs.
    """

    @staticmethod
    def forward(ctx, x1, x2, lmax1, lmax2, lmax_out, method):
        ctx.save_for_backward(x1, x2)
        ctx.meta = (lmax1, lmax2, lmax_out, method)
        return _IMPLEMENTATIONS[method](x1, x2, lmax1, lmax2, lmax_out)

    @staticmethod
    def backward(ctx, grad):
        x1, x2 = ctx.saved_tensors
        lmax1, lmax2, lmax_out, method = ctx.meta
        g1 = _gaunt_flat(grad, x2, lmax_out, lmax2, lmax1, method) if ctx.needs_input_grad[0] else None
        g2 = _gaunt_flat(grad, x1, lmax_out, lmax1, lmax2, method) if ctx.needs_input_grad[1] else None
        return g1, g2, None, None, None, None


# ---------------------------------------------------------------- public API
def _check_input(x, name: str) -> int:
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must have a floating dtype (float32/float64), got {x.dtype}")
    if x.ndim < 1:
        raise ValueError(f"{name} must have shape (..., (L+1)**2), got a 0-d tensor")
    return T.lmax_from_size(x.shape[-1], name)


def _check_lmax(value, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")


def resolve_method(method: str, lmax1: int, lmax2: int, lmax_out: int, device, dtype) -> str:
    """The concrete method ``"auto"`` stands for (others are validated and returned)."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if method != "auto":
        return method
    from geomlin.gaunt.autotune import choose_method

    return choose_method(lmax1, lmax2, lmax_out, torch.device(device).type, dtype)


def gaunt_tensor_product(x1: Tensor, x2: Tensor, lmax_out: int | None = None, method: str = "auto") -> Tensor:
    """Coefficients of the product of two spherical functions (the Gaunt tensor product).

    Parameters
    ----------
    x1 : Tensor ``(..., (L1+1)**2)``, float32/float64, e3nn real SH layout.
    x2 : Tensor ``(..., (L2+1)**2)``, same dtype and device; leading axes broadcast.
    lmax_out : int, optional
        Degree of the result; defaults to ``L1 + L2`` (the exact product).
        Degrees above ``L1 + L2`` are zero.
    method : {"auto", "grid", "fft", "dense", "direct", "triton"}

    Returns
    -------
    Tensor ``(broadcast(...), (lmax_out+1)**2)``, dtype of the inputs.
    """
    lmax1 = _check_input(x1, "x1")
    lmax2 = _check_input(x2, "x2")
    if x1.dtype != x2.dtype:
        raise TypeError(f"x1 and x2 must have the same dtype, got {x1.dtype} and {x2.dtype}")
    if x1.device != x2.device:
        raise ValueError(f"x1 and x2 must be on the same device, got {x1.device} and {x2.device}")
    if lmax_out is None:
        lmax_out = lmax1 + lmax2
    _check_lmax(lmax_out, "lmax_out")
    lmax_out = int(lmax_out)
    try:
        batch = torch.broadcast_shapes(x1.shape[:-1], x2.shape[:-1])
    except RuntimeError as err:
        raise ValueError(f"leading shapes of x1 {tuple(x1.shape)} and x2 {tuple(x2.shape)} do not broadcast") from err
    method = resolve_method(method, lmax1, lmax2, lmax_out, x1.device, x1.dtype)
    a = x1.expand(*batch, x1.shape[-1]).reshape(-1, x1.shape[-1])
    b = x2.expand(*batch, x2.shape[-1]).reshape(-1, x2.shape[-1])
    if a.shape[0] == 0:
        return x1.new_zeros(*batch, T.num_coefficients(lmax_out))
    return _gaunt_flat(a, b, lmax1, lmax2, lmax_out, method).reshape(*batch, T.num_coefficients(lmax_out))
