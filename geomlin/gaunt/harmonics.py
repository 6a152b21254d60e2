"""Real spherical harmonics in e3nn's basis and their tables for Gaunt products.

**Conventions (fixed by issue #7)**

Coefficients of a spherical function up to degree ``L`` are stored in
e3nn's flat layout: index ``l**2 + l + m`` for ``l = 0..L``, ``m = -l..l``,
in the real, orthonormal (``normalization="integral"``) basis of
``e3nn.o3.spherical_harmonics``.  That basis is the standard real basis
(no Condon-Shortley phase) with the polar axis along e3nn's ``y``: with
``cos(theta) = y`` and ``sin(theta) e^{i phi} = z + i x``

    Y_{l, 0}  = N_l^0 P_l(cos theta)
    Y_{l, m}  = sqrt(2) N_l^m P_l^m(cos theta) cos(m phi)     (m > 0)
    Y_{l, -m} = sqrt(2) N_l^m P_l^m(cos theta) sin(m phi)     (m > 0)

Every table here comes from that closed form, evaluated in float64 with the
stable normalized three-term recurrence; nothing depends on e3nn (whose
polynomials stop at ``l = 11``), so any ``lmax`` works.

**Tables (all float64, cached with ``functools.lru_cache`` by their integer key)**

* [`legendre_table`][]: ``N_l^m P_l^m`` at Gauss-Legendre latitudes;
* [`theta_fourier_table`][]: the 1D Fourier series in ``theta`` of
  ``N_l^m P_l^m(cos theta)`` (a trigonometric polynomial of degree ``l``
  with frequencies ``u = l, l-2, ...``), from an alias-free DFT;
* [`theta_projection_table`][]: ``int_0^pi e^{i u theta} N_l^m P_l^m sin(theta) dtheta``
  for the inverse map, using ``int_0^pi e^{i w theta} sin(theta) dtheta``
  = ``2 / (1 - w^2)`` (``w`` even), ``+- i pi / 2`` (``w = +-1``), ``0`` otherwise.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import torch
from torch import Tensor

from geomlin.precision import compute_dtype, full_precision
from geomlin.validation import check_memory, check_nonnegative_int, check_positive_int, check_tensor

#: Default dtype of every table before it is moved to an input's dtype.
TABLE_DTYPE = torch.float64


def num_coefficients(lmax: int) -> int:
    """Number ``(lmax + 1)**2`` of real SH coefficients up to degree ``lmax``."""
    return (lmax + 1) ** 2


def lmax_from_size(size: int, name: str = "x") -> int:
    """Degree ``L`` with ``(L + 1)**2 == size``; ``ValueError`` if there is none."""
    size = int(size)
    root = math.isqrt(max(size, 0))
    if size < 1 or root * root != size:
        raise ValueError(f"{name} must have last dimension (L+1)**2 (1, 4, 9, 16, ...) holding real SH "
                         f"coefficients up to degree L, got {size}")
    return root - 1


def sh_index(l: int, m: int) -> int:
    """Flat e3nn index of degree ``l``, order ``m``."""
    return l * l + l + m


def _sectoral_constants(lmax: int) -> np.ndarray:
    """``N_m^m (2m-1)!!`` for ``m = 0..lmax`` (the start of the recurrence), float64."""
    out = np.empty(lmax + 1)
    value = math.sqrt(1.0 / (4.0 * math.pi))
    for m in range(lmax + 1):
        if m > 0:
            value *= math.sqrt((2.0 * m - 1.0) / (2.0 * m))
        out[m] = value * math.sqrt(2.0 * m + 1.0)
    return out


def _associated_polynomials(lmax: int, c):
    """``Q[l][m](c)`` with ``N_l^m P_l^m(cos t) = Q_l^m(cos t) sin(t)^m`` (no sin factor).

    Works on numpy arrays and torch tensors (differentiable); returns a nested
    list ``Q[m][l - m]``.
    """
    start = _sectoral_constants(lmax)
    rows = []
    for m in range(lmax + 1):
        q_prev2 = None
        q_prev = start[m] * (c * 0 + 1)
        row = [q_prev]
        for l in range(m + 1, lmax + 1):
            a = math.sqrt((4.0 * l * l - 1.0) / (l * l - m * m))
            if q_prev2 is None:
                q = a * c * q_prev
            else:
                b = math.sqrt(((l - 1.0) ** 2 - m * m) / (4.0 * (l - 1.0) ** 2 - 1.0))
                q = a * (c * q_prev - b * q_prev2)
            row.append(q)
            q_prev2, q_prev = q_prev, q
        rows.append(row)
    return rows


def spherical_harmonics(lmax: int, vectors: Tensor, normalize: bool = True) -> Tensor:
    """Real spherical harmonics in e3nn's basis, any ``lmax``.

    Equals ``e3nn.o3.spherical_harmonics(range(lmax + 1), vectors, normalize,
    normalization="integral")`` where e3nn has them (``lmax <= 11``), computed as
    polynomials of ``(x, y, z)`` (smooth everywhere, also at the poles).

    Parameters
    ----------
    lmax : int
        largest degree.
    vectors : Tensor of shape (..., 3)
        float32/float64 (half precision under ``torch.autocast``: computed
        in float32).
    normalize : bool
        ``True``: functions of the direction only, ``Y_l(r / |r|)``; ``False``: the homogeneous
        polynomials ``|r|^l Y_l(r / |r|)`` (e3nn's two conventions).

    Returns
    -------
    Tensor of shape (..., (lmax + 1)**2)
        same dtype (float32 for half precision under autocast) and
        device as ``vectors``; no host synchronisation. **The zero vector** has no direction: its row
        is ``Y_0 = 1 / sqrt(4 pi) = 0.2821`` followed by zeros for every ``l > 0``, with either
        ``normalize`` (e3nn's convention, the limit of ``|r|^l Y_l`` at ``r = 0``; a padded or
        masked edge of length 0 then carries only its ``l = 0`` part). Screen such vectors out (or
        mask their rows) where a direction is needed.
    """
    lmax = check_nonnegative_int(lmax, "lmax")
    check_tensor(vectors, "vectors", shape=(..., 3), dtype="any", what="3D vectors")
    check_memory(math.prod(vectors.shape[:-1]) * num_coefficients(lmax) * max(vectors.element_size(), 4),
                 f"spherical_harmonics(lmax={lmax}) of {math.prod(vectors.shape[:-1])} vectors",
                 "use a smaller lmax")
    vectors = vectors.to(compute_dtype(vectors, "vectors"))
    with full_precision(vectors):
        return _spherical_harmonics(lmax, vectors, normalize)


def _spherical_harmonics(lmax: int, vectors: Tensor, normalize: bool) -> Tensor:
    norm = torch.linalg.vector_norm(vectors, dim=-1, keepdim=True)
    vectors = vectors / norm.clamp_min(torch.finfo(vectors.dtype).tiny)
    # per column: 1 for l = 0; (|r| > 0) or |r|^l for l > 0 (built on the device: no upload, no sync)
    degrees = torch.arange(lmax + 1, dtype=vectors.dtype, device=vectors.device).repeat_interleave(
        2 * torch.arange(lmax + 1, device=vectors.device) + 1, output_size=num_coefficients(lmax))
    radial = (norm > 0).to(vectors.dtype) ** degrees if normalize else norm ** degrees
    x, y, z = vectors.unbind(-1)
    q = _associated_polynomials(lmax, y)
    # (z + i x)^m = sin(theta)^m e^{i m phi}, as real and imaginary parts
    cos_parts, sin_parts = [torch.ones_like(x)], [torch.zeros_like(x)]
    for _ in range(lmax):
        cm, sm = cos_parts[-1], sin_parts[-1]
        cos_parts.append(cm * z - sm * x)
        sin_parts.append(sm * z + cm * x)
    columns = []
    sqrt2 = math.sqrt(2.0)
    for l in range(lmax + 1):
        for m in range(-l, l + 1):
            a = abs(m)
            if m == 0:
                columns.append(q[0][l])
            elif m > 0:
                columns.append(sqrt2 * q[a][l - a] * cos_parts[a])
            else:
                columns.append(sqrt2 * q[a][l - a] * sin_parts[a])
    return torch.stack(columns, dim=-1) * radial


def normalized_legendre(lmax: int, cos_theta: np.ndarray, sin_theta: np.ndarray) -> np.ndarray:
    """``N_l^m P_l^m`` as ``(lmax+1 [m], lmax+1 [l], n)``; zero where ``l < m``.

    ``sin_theta`` may be negative: the result is then the trigonometric
    polynomial ``Q_l^m(cos t) sin(t)^m`` continued to ``t in (pi, 2 pi)``.
    """
    q = _associated_polynomials(lmax, cos_theta)
    out = np.zeros((lmax + 1, lmax + 1, cos_theta.shape[0]))
    for m in range(lmax + 1):
        for l in range(m, lmax + 1):
            out[m, l] = q[m][l - m] * sin_theta ** m
    return out


def _frozen(*arrays: np.ndarray):
    """Mark cached numpy tables read-only (an in-place edit would corrupt every later call)."""
    for a in arrays:
        a.flags.writeable = False
    return arrays[0] if len(arrays) == 1 else arrays


@cache
def gauss_legendre(num: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Legendre nodes ``cos(theta_j)`` (ascending) and weights ``(num,)``, float64, read-only.

    Exact for polynomials of degree ``2 num - 1`` in ``cos(theta)``.
    """
    check_positive_int(num, "num")
    nodes, weights = np.polynomial.legendre.leggauss(num)
    return _frozen(nodes, weights)


@cache
def _legendre_table(lmax: int, num_theta: int) -> np.ndarray:
    c, _ = gauss_legendre(num_theta)
    return _frozen(normalized_legendre(lmax, c, np.sqrt(1.0 - c * c)))


def legendre_table(lmax: int, num_theta: int) -> np.ndarray:
    """``N_l^m P_l^m(cos theta_j)`` at ``num_theta`` Gauss-Legendre latitudes: ``(lmax+1, lmax+1, num_theta)``.

    Indexed ``[m, l, j]``, zero where ``l < m``; float64, read-only (cached).
    """
    return _legendre_table(check_nonnegative_int(lmax, "lmax"), check_positive_int(num_theta, "num_theta"))


@cache
def theta_fourier_table(lmax: int) -> np.ndarray:
    """Fourier coefficients in ``theta`` of ``N_l^m P_l^m(cos theta)``: complex ``(m, l, u)``, read-only.

    ``N_l^m P_l^m(cos t) = sum_u A[m, l, u + lmax] e^{i u t}`` for ``u = -lmax..lmax``;
    ``A`` is real for even ``m``, imaginary for odd ``m``, and zero unless
    ``u = l mod 2`` and ``|u| <= l``.  The DFT on ``2 lmax + 2`` points is exact
    because the function is a trigonometric polynomial of degree ``l``.
    """
    check_nonnegative_int(lmax, "lmax")
    n = 2 * lmax + 2
    t = 2.0 * np.pi * np.arange(n) / n
    values = normalized_legendre(lmax, np.cos(t), np.sin(t))  # (m, l, n)
    spectrum = np.fft.fft(values, axis=-1) / n
    u = np.arange(-lmax, lmax + 1)
    out = spectrum[..., u % n]
    out[np.abs(out) < 1e-15 * max(1.0, np.abs(out).max())] = 0.0
    return _frozen(out)


def sine_moments(w: np.ndarray) -> np.ndarray:
    """``int_0^pi e^{i w t} sin(t) dt`` for integer ``w`` (complex array)."""
    w = np.asarray(w)
    out = np.zeros(w.shape, dtype=np.complex128)
    even = (w % 2) == 0
    out[even] = 2.0 / (1.0 - w[even].astype(np.float64) ** 2)
    out[w == 1] = 0.5j * np.pi
    out[w == -1] = -0.5j * np.pi
    return out


@cache
def theta_projection_table(lmax: int, u_max: int) -> np.ndarray:
    """``Theta[m, l, u + u_max] = int_0^pi e^{i u t} N_l^m P_l^m(cos t) sin(t) dt``, complex ``(m, l, u)``, read-only.

    For ``u = -u_max..u_max`` and ``l, m <= lmax`` (zero where ``l < m``).
    """
    A = theta_fourier_table(lmax)  # (m, l, u')
    u = np.arange(-u_max, u_max + 1)
    up = np.arange(-lmax, lmax + 1)
    moments = sine_moments(u[:, None] + up[None, :])  # (u, u')
    return _frozen(np.einsum("mlp,up->mlu", A, moments))


@cache
def _sphere_grid(degree: int, num_phi_min: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    num_theta = degree // 2 + 1
    num_phi = max(degree + 1, num_phi_min, 1)
    c, w = gauss_legendre(num_theta)
    s = np.sqrt(1.0 - c * c)
    phi = 2.0 * np.pi * np.arange(num_phi) / num_phi
    y = np.repeat(c, num_phi)
    z = np.outer(s, np.cos(phi)).ravel()
    x = np.outer(s, np.sin(phi)).ravel()
    weights = np.repeat(w, num_phi) * (2.0 * np.pi / num_phi)
    return _frozen(np.stack([x, y, z], axis=-1), weights, np.array([num_theta, num_phi]))


def sphere_grid(lmax_exact: int, num_phi_min: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Product grid exact for spherical polynomials of degree ``<= lmax_exact``.

    Returns unit vectors ``(num_theta * num_phi, 3)`` in e3nn's axes, quadrature
    weights ``(num_theta * num_phi,)`` summing to ``4 pi``, and ``(num_theta, num_phi)``;
    float64, read-only (cached).  Gauss-Legendre in ``cos(theta)``
    (``num_theta = floor(lmax_exact / 2) + 1``) times ``num_phi = max(lmax_exact + 1, num_phi_min)``
    equispaced longitudes.
    """
    lmax_exact = check_nonnegative_int(lmax_exact, "lmax_exact")
    num_phi_min = check_nonnegative_int(num_phi_min, "num_phi_min")
    num_theta, num_phi = lmax_exact // 2 + 1, max(lmax_exact + 1, num_phi_min)
    # the Gauss-Legendre eigenproblem (num_theta^2) and the points and weights (4 float64 per point)
    check_memory(8 * (num_theta ** 2 + 4 * num_theta * num_phi), f"sphere_grid(lmax_exact={lmax_exact})",
                 "use a smaller degree")
    return _sphere_grid(lmax_exact, num_phi_min)


@cache
def _sh_on_grid(lmax: int, lmax_exact: int) -> tuple[Tensor, Tensor]:
    points, weights, _ = sphere_grid(lmax_exact)
    Y = spherical_harmonics(lmax, torch.from_numpy(points.copy()), normalize=False)
    return Y, torch.from_numpy(weights.copy())


def sh_on_grid(lmax: int, lmax_exact: int) -> tuple[Tensor, Tensor]:
    r"""Real SH up to ``lmax`` on [`sphere_grid`][]\ ``(lmax_exact)``: ``(num_points, (lmax+1)**2)`` and
    the weights ``(num_points,)``; float64 copies of a cached table (safe to modify)."""
    Y, w = _sh_on_grid(check_nonnegative_int(lmax, "lmax"), check_nonnegative_int(lmax_exact, "lmax_exact"))
    return Y.clone(), w.clone()


@cache
def _gaunt_tensor(lmax_in1: int, lmax_in2: int, lmax_out: int) -> Tensor:
    degree = lmax_in1 + lmax_in2 + lmax_out
    Y, w = _sh_on_grid(max(lmax_in1, lmax_in2, lmax_out), degree)
    Y1 = Y[:, : num_coefficients(lmax_in1)]
    Y2 = Y[:, : num_coefficients(lmax_in2)]
    Y3 = Y[:, : num_coefficients(lmax_out)] * w[:, None]
    # G[i, j, k] = sum_p Y1[p, i] Y2[p, j] Y3[p, k], one GEMM per block of i (bounded memory)
    D1, D2, D3 = Y1.shape[1], Y2.shape[1], Y3.shape[1]
    G = torch.empty(D1, D2, D3, dtype=Y.dtype)
    step = max(1, (1 << 22) // max(1, Y.shape[0] * D2))
    for i0 in range(0, D1, step):
        pair = (Y1[:, i0:i0 + step, None] * Y2[:, None, :]).flatten(1)  # (P, di * D2)
        G[i0:i0 + step] = (pair.T @ Y3).view(-1, D2, D3)
    G[G.abs() < 1e-14] = 0.0
    return G


def gaunt_tensor(lmax_in1: int, lmax_in2: int, lmax_out: int) -> Tensor:
    """Gaunt coefficients ``G[i, j, k] = int Y_i Y_j Y_k`` in float64: ``(D1, D2, D_out)``.

    Exact Gauss-Legendre x trapezoid quadrature of the closed-form harmonics; a copy of a
    cached table (safe to modify).
    """
    return _gaunt_tensor(check_nonnegative_int(lmax_in1, "lmax_in1"), check_nonnegative_int(lmax_in2, "lmax_in2"),
                         check_nonnegative_int(lmax_out, "lmax_out")).clone()


def cached_gaunt_tensor(lmax_in1: int, lmax_in2: int, lmax_out: int) -> Tensor:
    """The cached [`gaunt_tensor`][] itself, for library code that only reads it (never write to it)."""
    return _gaunt_tensor(lmax_in1, lmax_in2, lmax_out)


def cached_sh_on_grid(lmax: int, lmax_exact: int) -> tuple[Tensor, Tensor]:
    """The cached [`sh_on_grid`][] itself, for library code that only reads it (never write to it)."""
    return _sh_on_grid(lmax, lmax_exact)
