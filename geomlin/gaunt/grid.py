"""The fast route: separable transforms to an exact sphere grid and back, O(L^3) per function.

The grid is ``num_theta`` Gauss-Legendre latitudes times ``num_phi`` equispaced
longitudes; it integrates spherical polynomials of degree ``< min(2 num_theta, num_phi)``
exactly.  A function ``f = sum_lm x_lm Y_lm`` is synthesized in two steps

    g_{m, part}(theta_j) = sum_l N_l^m P_l^m(cos theta_j) x_{l, +-m}      (Legendre: per-m GEMMs)
    f(theta_j, phi_k)    = sum_m Phi_part[k, m] g_{m, part}(theta_j)       (longitude: one real-DFT GEMM)

with ``Phi_cos = sqrt(2) cos(m phi_k)`` (``1`` at ``m = 0``) and ``Phi_sin = sqrt(2) sin(m phi_k)``.
Projection is the adjoint with the quadrature weights.

Four choices make the route fast on a CPU (measured in ``benchmarks/bench_gaunt.py``):

* **Half circle.** ``cos(m phi)`` is even and ``sin(m phi)`` odd under ``phi -> -phi``, so a
  function is ``E + O`` at ``phi_k`` and ``E - O`` at ``-phi_k`` with ``E = Phi_cos g_cos`` and
  ``O = Phi_sin g_sin`` on ``k = 0..num_phi // 2`` only.  The product's even part
  ``E1 E2 + O1 O2`` carries every cosine coefficient and its odd part ``E1 O2 + O1 E2`` every
  sine coefficient ([`synthesize`][] / [`analyze`][], used for powers).
* **Quarter circle for the product.** Under ``phi -> pi - phi`` the orders pick up ``+-(-1)^m``,
  so ``E`` and ``O`` split again by the parity of ``m`` into four classes on a quarter of the
  circle (``grid_tables._quarter_tables``), which multiply as a Z2 x Z2 convolution
  ([`class_product`][]): half the longitude GEMM work again, for twice the pointwise work.
* **Blocked Legendre GEMMs.** The per-m Legendre matrices have ``L + 1 - m`` rows; orders are
  grouped into a few blocks ([`m_blocks`][geomlin.gaunt.grid_tables.m_blocks]), each one batched
  GEMM padded only to its own largest order, so the padding costs ~25% instead of ~2x.
* **Batch last, in chunks, buffers reused.** Inside a chunk the batch is the last axis
  (``(..., n)``): the coefficient gather and the output scatter are row gathers, every
  stage is one GEMM over the whole chunk with no copies between stages, and the chunk's
  intermediates (sized by [`CHUNK_FLOATS`][]) stay in the last-level cache; the same
  buffers serve every chunk.

Tried and measured slower on the 2-core EPYC: a Hadamard transform of the four classes (its
4 x 4 GEMMs are memory-bound), transforming both inputs as one set of wider GEMMs (the product
then reads strided halves), batch-first Legendre GEMMs (MKL prefers the wide batch as ``N``),
and splitting the Legendre sums by the parity of ``l + m`` (the butterfly pass costs what the
halved GEMM saves).

An input that is shared by several channels (the spherical harmonics of an edge in a
convolution, multiplied with every channel of the node features) is transformed once per
shared row and broadcast in the pointwise product.

These functions compute values only (no autograd); [`geomlin.gaunt.product`][] wraps them
in autograd functions whose backward is the same route (the exact adjoint).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from geomlin.gaunt.cache import device_tables
from geomlin.gaunt.grid_tables import (
    COS,
    SIN,
    Projection,
    Synthesis,
    exact_grid_size,
    projection_on,
    synthesis_on,
    weights_key,
)

#: Intermediate floats per chunk of the grid route (16 MiB in float32). Measured on a 2-core EPYC
#: (1 MiB L2, 32 MiB L3): chunks of 2^20..2^24 floats run within ~10% of each other, smaller ones pay
#: per-call overhead (2^17: 2-3x slower), the whole batch at once pays memory traffic (~2x slower).
CHUNK_FLOATS = 1 << 22
#: Smallest number of batch columns per chunk (below this, per-call overhead dominates).
MIN_CHUNK = 32


# ----------------------------------------------------------------------------- chunk stages
class _Workspace:
    """Buffers of one chunk, allocated once per call and reused for every chunk."""

    def __init__(self, like: Tensor):
        self.like = like
        self.buffers: dict = {}
        self.views: dict = {}  # (name, shape) -> view: every full-size chunk reuses the same view objects

    def get(self, name: str, *shape: int) -> Tensor:
        view = self.views.get((name, shape))
        if view is not None:
            return view
        numel = math.prod(shape)
        buf = self.buffers.get(name)
        if buf is None or buf.numel() < numel:
            buf = self.like.new_empty(numel)
            self.buffers[name] = buf
            self.views = {k: v for k, v in self.views.items() if k[0] != name}
        view = buf[:numel].view(shape)
        self.views[(name, shape)] = view
        return view


def legendre_chunk(x: Tensor, syn: Synthesis, ws: _Workspace, tag: str) -> Tensor:
    """Rows ``x (n, D)`` -> per-m Legendre sums ``g (M, 2 [part], num_theta * n)`` (column ``j * n + b``)."""
    n = x.shape[0]
    nt = syn.num_theta
    xt = ws.get(tag + "xt", x.shape[1], n)
    xt.copy_(x.T)
    packed = ws.get(tag + "packed", syn.packed, n)
    torch.index_select(xt, 0, syn.gather, out=packed)
    M = syn.lmax + 1
    g = ws.get(tag + "g", 2 * M, nt, n)
    offset = 0
    for (m0, m1), leg in zip(syn.blocks, syn.legs):
        rows, width = leg.shape[0], leg.shape[2]
        block = packed[offset: offset + rows * width].view(rows, width, n)
        torch.bmm(leg, block, out=g[2 * m0: 2 * m1])
        offset += rows * width
    return g.view(M, 2, nt * n)


def synthesize_chunk(x: Tensor, syn: Synthesis, ws: _Workspace, tag: str) -> tuple[Tensor, Tensor]:
    """Rows ``x (n, D)`` -> half-circle values ``E, O (K, num_theta * n)`` (column ``j * n + b``)."""
    g = legendre_chunk(x, syn, ws, tag)
    K = syn.cos.shape[0]
    E, O = ws.get(tag + "E", K, g.shape[-1]), ws.get(tag + "O", K, g.shape[-1])
    torch.mm(syn.cos, g[:, COS], out=E)
    torch.mm(syn.sin, g[:, SIN], out=O)
    return E, O


def quarter_chunk(x: Tensor, syn: Synthesis, ws: _Workspace, tag: str) -> Tensor:
    """Rows ``x (n, D)`` -> the four quarter-circle classes ``(4 [A, B, C, D], Q, num_theta * n)``.

    See ``grid_tables._quarter_tables``: ``A``/``B`` the cosine part from even/odd orders, ``C``/``D``
    the sine part from even/odd orders.
    """
    g = legendre_chunk(x, syn, ws, tag)
    cos_even, cos_odd, sin_even, sin_odd = syn.quarter
    X = ws.get(tag + "X", 4, cos_even.shape[0], g.shape[-1])
    torch.mm(cos_even, g[0::2, COS], out=X[0])
    torch.mm(cos_odd, g[1::2, COS], out=X[1])
    torch.mm(sin_even, g[0::2, SIN], out=X[2])
    torch.mm(sin_odd, g[1::2, SIN], out=X[3])
    return X


def _legendre_projection(lat: Tensor, proj: Projection, n: int, ws: _Workspace) -> Tensor:
    """Per-m latitude functions ``lat (2M [m, part], num_theta, n)`` -> coefficients ``(D, n)``."""
    packed = ws.get("out_packed", proj.packed, n)
    offset = 0
    for (m0, m1), leg in zip(proj.blocks, proj.legs):
        rows, width = leg.shape[0], leg.shape[1]
        torch.bmm(leg, lat[2 * m0: 2 * m1], out=packed[offset: offset + rows * width].view(rows, width, n))
        offset += rows * width
    out = ws.get("out", proj.scatter.shape[0], n)
    torch.index_select(packed, 0, proj.scatter, out=out)
    return out


def project_chunk(even: Tensor, odd: Tensor, proj: Projection, n: int, ws: _Workspace) -> Tensor:
    """Half-circle cosine / sine parts ``(K, num_theta * n)`` -> coefficients ``(D, n)``."""
    nt, M = proj.num_theta, proj.lmax + 1
    lat = ws.get("lat", M, 2, nt * n)
    torch.mm(proj.cos_t, even, out=lat[:, COS])
    torch.mm(proj.sin_t, odd, out=lat[:, SIN])
    return _legendre_projection(lat.view(2 * M, nt, n), proj, n, ws)


def project_quarter_chunk(P: Tensor, proj: Projection, n: int, ws: _Workspace) -> Tensor:
    """Product classes ``P (4, Q, num_theta * n)`` (cosine from even / odd orders, sine from even /
    odd orders) -> coefficients ``(D, n)``."""
    nt, M = proj.num_theta, proj.lmax + 1
    lat = ws.get("lat", M, 2, nt * n)
    cos_even, cos_odd, sin_even, sin_odd = proj.quarter_t
    torch.mm(cos_even, P[0], out=lat[0::2, COS])
    torch.mm(cos_odd, P[1], out=lat[1::2, COS])
    torch.mm(sin_even, P[2], out=lat[0::2, SIN])
    torch.mm(sin_odd, P[3], out=lat[1::2, SIN])
    return _legendre_projection(lat.view(2 * M, nt, n), proj, n, ws)


def _transpose_into(dst: Tensor, src: Tensor) -> None:
    """``dst (n, D) <- src (D, n)^T``. On the CPU numpy's strided copy measured 1.4-2x faster than
    ``Tensor.copy_`` for these shapes (the largest copy of the route)."""
    if dst.device.type == "cpu" and not dst.requires_grad and not src.requires_grad:
        np.copyto(dst.numpy(), src.numpy().T)
    else:
        dst.copy_(src.T)


def _chunk_columns(per_column: int, total: int) -> int:
    return max(MIN_CHUNK, min(total, CHUNK_FLOATS // max(per_column, 1)))


#: ``PAIRS[j]``: the ``(i, i ^ j)`` class pairs summed in product class ``j``: the four quarter classes
#: multiply like the group Z2 x Z2, ``P[j] = sum_i X1[i] X2[i ^ j]`` (16 fused multiply-adds; a
#: Hadamard transform to the four mirror points and back measured slower on CPU: its 4 x 4 GEMMs
#: are memory-bound). [`class_product`][] issues them as 9 broadcast operations.
PAIRS = tuple(tuple((i, i ^ j) for i in range(4)) for j in range(4))


def class_product(X1: Tensor, X2: Tensor, out: Tensor) -> Tensor:
    """``out[j] = sum_i X1[i] * X2[i ^ j]`` for class tensors ``(4, ...)`` (broadcasting), in 9 ops.

    With the classes as a 2 x 2 grid (``j = 2a + b``), ``i ^ j`` flips ``b`` for ``i = 1``, ``a`` for
    ``i = 2`` and both for ``i = 3``.
    """
    torch.mul(X1[0], X2, out=out)
    o, y = out.view(2, 2, *out.shape[1:]), X2.view(2, 2, *X2.shape[1:])
    for b in (0, 1):
        o[:, b].addcmul_(X1[1], y[:, 1 - b])
    for a in (0, 1):
        o[a].addcmul_(X1[2], y[1 - a])
    for a in (0, 1):
        for b in (0, 1):
            o[a, b].addcmul_(X1[3], y[1 - a, 1 - b])
    return out


# ----------------------------------------------------------------------------- the product
def gaunt_on_grid(x1: Tensor, x2: Tensor, lmax_in1: int, lmax_in2: int, lmax_out: int, channels: int = 1,
                  shared: int = 0, reduce: bool = False, tables=None) -> Tensor:
    """Gaunt product through the grid exact for degree ``lmax_in1 + lmax_in2 + lmax_out``.

    Parameters
    ----------
    x1 : Tensor of shape (A * c1, D1)
        first factor; ``c1 = 1`` if ``shared == 1`` else ``channels`` (rows ``a * c + c'``).
    x2 : Tensor of shape (A * c2, D2)
        second factor; ``c2 = 1`` if ``shared == 2`` else ``channels``.
    channels : int
        the number ``C`` of channels per row group ``a``.
    shared : int
        0 (no input shared), 1 or 2 (that input has one row per group, used by every
        channel: transformed once, broadcast in the product).
    reduce : bool
        sum the products over the ``C`` channels of each group before the projection.
    tables : ConstantTables, optional
        a module's tables of `grid_tables.product_keys` ([`geomlin.gaunt.cache`][]); ``None`` reads the device cache.

    Returns
    -------
    Tensor of shape (A * C, Do)
        or ``(A, Do)`` when ``reduce``; same dtype and device as the inputs.

    Notes
    -----
    The longitude transform runs on the quarter circle (``grid_tables._quarter_tables``); the product
    of the two functions' classes is the Z2 x Z2 convolution ``P[j] = sum_i X1[i] X2[i ^ j]``
    (``P[0]`` carries the cosine coefficients of even order, ``P[1]`` of odd order, ``P[2]``,
    ``P[3]`` the sine coefficients), see [`PAIRS`][].
    """
    C = channels
    c1 = 1 if shared == 1 else C
    c2 = 1 if shared == 2 else C
    A = x1.shape[0] // c1
    nt, nphi = exact_grid_size(lmax_in1 + lmax_in2 + lmax_out)
    dev, dt = x1.device, x1.dtype
    s1, s2 = synthesis_on(lmax_in1, nt, nphi, dev, dt, tables), synthesis_on(lmax_in2, nt, nphi, dev, dt, tables)
    pr = projection_on(lmax_out, nt, nphi, dev, dt, tables=tables)
    Q = s1.quarter[0].shape[0]
    out_cols = 1 if reduce else C
    per_group = (c1 * (s1.packed + 2 * (lmax_in1 + 1) * nt + 4 * Q * nt + x1.shape[1])
                 + c2 * (s2.packed + 2 * (lmax_in2 + 1) * nt + 4 * Q * nt + x2.shape[1])
                 + C * 4 * Q * nt + out_cols * (2 * (lmax_out + 1) * nt + pr.packed + pr.scatter.shape[0]))
    groups = _chunk_columns(per_group, A)
    out = x1.new_empty(A * out_cols, pr.scatter.shape[0])
    ws = _Workspace(x1)
    for a0 in range(0, A, groups):
        na = min(groups, A - a0)
        rows1, rows2 = x1[a0 * c1:(a0 + na) * c1], x2[a0 * c2:(a0 + na) * c2]
        # (transforming both inputs as one set of wider GEMMs measured ~10% slower: the product then
        # reads strided halves)
        X1 = quarter_chunk(rows1, s1, ws, "1").view(4, Q, nt, na, c1)
        X2 = quarter_chunk(rows2, s2, ws, "2").view(4, Q, nt, na, c2)
        P = class_product(X1, X2, ws.get("P", 4, Q, nt, na, C))
        if reduce:
            P = torch.sum(P, dim=-1, out=ws.get("P_reduced", 4, Q, nt, na))
        n = na * out_cols
        res = project_quarter_chunk(P.view(4, Q, nt * n), pr, n, ws)
        _transpose_into(out[a0 * out_cols:(a0 + na) * out_cols], res)
    return out


def gaunt_backward_on_grid(grad: Tensor, x1: Tensor, x2: Tensor, lmax_in1: int, lmax_in2: int, lmax_out: int,
                           channels: int = 1, shared: int = 0, reduce: bool = False,
                           need1: bool = True, need2: bool = True, tables=None) -> tuple[Tensor | None, Tensor | None]:
    """Both input gradients of [`gaunt_on_grid`][] in one pass (values only, not differentiable).

    ``G[i, j, k]`` is symmetric, so ``dL/dx1 = gaunt(grad, x2)`` truncated at ``lmax_in1`` and
    ``dL/dx2 = gaunt(grad, x1)`` at ``lmax_in2``, on the same grid as the forward.  Done together, the
    output gradient is transformed once instead of twice; a gradient of an input shared by the
    channels sums its products over the channels before the projection, and a summed (``reduce``)
    output's gradient is broadcast to every channel.  Shapes (and ``tables``) as [`gaunt_on_grid`][]'s inputs.
    """
    C = channels
    c1 = 1 if shared == 1 else C
    c2 = 1 if shared == 2 else C
    cg = 1 if reduce else C
    A = x1.shape[0] // c1
    nt, nphi = exact_grid_size(lmax_in1 + lmax_in2 + lmax_out)
    dev, dt = x1.device, x1.dtype
    sg = synthesis_on(lmax_out, nt, nphi, dev, dt, tables)
    s1, s2 = synthesis_on(lmax_in1, nt, nphi, dev, dt, tables), synthesis_on(lmax_in2, nt, nphi, dev, dt, tables)
    p1, p2 = projection_on(lmax_in1, nt, nphi, dev, dt, tables=tables), projection_on(lmax_in2, nt, nphi, dev, dt, tables=tables)
    Q = sg.quarter[0].shape[0]
    per_group = (cg * (sg.packed + 2 * (lmax_out + 1) * nt + 4 * Q * nt + grad.shape[1])
                 + (c1 + c2) * (max(s1.packed, s2.packed) + 2 * (max(lmax_in1, lmax_in2) + 1) * nt + 4 * Q * nt
                                + max(x1.shape[1], x2.shape[1]) + max(p1.packed, p2.packed))
                 + 2 * C * 4 * Q * nt)
    groups = _chunk_columns(per_group, A)
    out1 = x1.new_empty(A * c1, x1.shape[1]) if need1 else None
    out2 = x2.new_empty(A * c2, x2.shape[1]) if need2 else None
    ws = _Workspace(x1)
    for a0 in range(0, A, groups):
        na = min(groups, A - a0)
        Xg = quarter_chunk(grad[a0 * cg:(a0 + na) * cg], sg, ws, "g").view(4, Q, nt, na, cg)
        for need, out, own, other, s_other, p_own, c_own, c_other, tag in (
                (need1, out1, x1, x2, s2, p1, c1, c2, "b1"), (need2, out2, x2, x1, s1, p2, c2, c1, "b2")):
            if not need:
                continue
            Xo = quarter_chunk(other[a0 * c_other:(a0 + na) * c_other], s_other, ws, "o").view(4, Q, nt, na, c_other)
            P = class_product(Xg, Xo, ws.get("P", 4, Q, nt, na, C))
            if c_own == 1 and C > 1:  # this input was shared by the channels: its gradient sums over them
                P = torch.sum(P, dim=-1, out=ws.get("P_reduced", 4, Q, nt, na))
            n = na * c_own
            res = project_quarter_chunk(P.view(4, Q, nt * n), p_own, n, ws)
            _transpose_into(out[a0 * c_own:(a0 + na) * c_own], res)
    return out1, out2


# ----------------------------------------------------------------------------- differentiable transforms
def synthesize(x: Tensor, lmax: int, num_theta: int, num_phi: int, tables=None) -> tuple[Tensor, Tensor]:
    """Half-grid values ``E, O (K, num_theta, n)`` of the rows ``x (n, (lmax+1)**2)`` (differentiable).

    The function is ``E + O`` at ``phi_k`` and ``E - O`` at ``-phi_k`` (``k = 0..num_phi // 2``).
    ``tables``: a module's tables ([`geomlin.gaunt.cache`][]) of `grid_tables.power_keys`; ``None`` reads the device cache.
    """
    return _Synthesize.apply(x, lmax, num_theta, num_phi, tables)


def analyze(E: Tensor, O: Tensor, lmax: int, num_theta: int, num_phi: int, weighted: bool = True,
            tables=None) -> Tensor:
    """Coefficients ``(n, (lmax+1)**2)`` of half-grid values ``E, O (K, num_theta, n)`` (differentiable).

    ``weighted=True`` is the exact projection (quadrature); ``False`` the adjoint of [`synthesize`][].
    ``tables`` as in [`synthesize`][].
    """
    return _Analyze.apply(E, O, lmax, num_theta, num_phi, weighted, tables)


class _Synthesize(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, lmax, num_theta, num_phi, tables):
        ctx.meta = (lmax, num_theta, num_phi, tables)
        n = x.shape[0]
        syn = synthesis_on(lmax, num_theta, num_phi, x.device, x.dtype, tables)
        E, O = synthesize_chunk(x, syn, _Workspace(x), "")
        return E.view(-1, num_theta, n), O.view(-1, num_theta, n)

    @staticmethod
    def backward(ctx, gE, gO):
        lmax, num_theta, num_phi, tables = ctx.meta
        return analyze(gE, gO, lmax, num_theta, num_phi, False, tables), None, None, None, None


class _Analyze(torch.autograd.Function):
    @staticmethod
    def forward(ctx, E, O, lmax, num_theta, num_phi, weighted, tables):
        ctx.meta = (lmax, num_theta, num_phi, weighted, tables)
        K, _, n = E.shape
        proj = projection_on(lmax, num_theta, num_phi, E.device, E.dtype, weighted, tables)
        res = project_chunk(E.reshape(K, -1), O.reshape(K, -1), proj, n, _Workspace(E))
        return res.T.contiguous()

    @staticmethod
    def backward(ctx, grad):
        lmax, num_theta, num_phi, weighted, tables = ctx.meta
        gE, gO = synthesize(grad.contiguous(), lmax, num_theta, num_phi, tables)
        if weighted:
            (w,) = device_tables(weights_key(num_theta, num_phi), grad.device, grad.dtype, tables)
            gE, gO = gE * w, gO * w
        return gE, gO, None, None, None, None, None
