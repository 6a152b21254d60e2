"""Gaunt tensor products: the SH coefficients of the product of two spherical functions.

``gaunt_tensor_product(x1, x2, lmax_out)`` returns ``x3`` with

    x3_k = sum_{i, j} G[i, j, k] x1_i x2_j,     G[i, j, k] = int_{S^2} Y_i Y_j Y_k,

i.e. the coefficients of ``f1 * f2`` truncated at degree ``lmax_out``.  In terms
of Clebsch-Gordan coefficients this is the tensor product restricted to the
paths with ``l1 + l2 + l3`` even, path ``(l1, l2, l3)`` weighted by
``sqrt((2l1+1)(2l2+1)(2l3+1) / (4 pi)) |(l1 l2 l3; 0 0 0)|`` (Luo, Chen and
Krishnapriyan, "Enabling Efficient Equivariant Operations in the Fourier Basis
via Gaunt Tensor Products", ICLR 2024, eq. 3-6).

**Methods (all exact; they agree to ~1e-13 in float64)**

``"grid"``   the fast route, O(L^3): per-m Legendre GEMMs to Gauss-Legendre
             latitudes, real DFT GEMMs on a quarter of the longitude circle (four
             symmetry classes), pointwise product, the adjoint transforms back
             ([`geomlin.gaunt.grid`][]).
``"fft"``    the paper's route: SH -> 2D Fourier coefficients on
             ``e^{i(u theta + v phi)}`` (sparse per-m tables), 2D convolution by
             zero-padded ``irfft2`` / ``rfft2`` at the alias-free size, and the
             inverse table built from ``int_0^pi e^{i w theta} sin(theta)``
             ([`geomlin.gaunt.fourier`][]).
``"dense"``  the plain sphere-grid GEMM, O(L^4): three dense matrix products.
``"direct"`` contraction with the dense Gaunt tensor, O(L^6); small L only.
``"triton"`` the fast route as one fused Triton kernel (CUDA; CPU under
             ``TRITON_INTERPRET=1``), [`geomlin.gaunt.kernels`][].
``"auto"``   picks from [`geomlin.gaunt.method_tables`][] (measured per device and channel pattern).

The transform routes share one autograd rule: ``G`` is symmetric in its three indices,
so the gradient of a Gaunt product is a Gaunt product again (two per backward,
on the same route, themselves differentiable for force training); ``"dense"`` and
``"direct"`` are differentiated through their GEMMs.

When one input is the same for every channel (``x2`` of shape ``(..., 1, D2)``
against ``x1 (..., C, D1)``, e.g. the spherical harmonics of an edge), the grid
and Triton routes transform it once and broadcast it in the pointwise product, and the
direct route contracts it with the Gaunt tensor once, into the matrix of "multiply by this
function" ([`gaunt_operator`][]), which every channel then meets in one batched GEMM: ``D2 D1 Do``
multiply-adds per row plus ``D1 Do`` per channel, against ``~P (D1 + Do)`` per channel on a sphere
grid of ``P ~ 4.5 L^2`` points, so it wins at the degrees models use.
"""

from __future__ import annotations

import math
import os
from functools import cache

import torch
from torch import Tensor

from geomlin.gaunt import grid as G
from geomlin.gaunt import grid_tables as GT
from geomlin.gaunt import harmonics as T
from geomlin.gaunt.cache import device_tables, resolved_tables, table_builder, unflatten_tables
from geomlin.gaunt.method_tables import TRACED_METHOD, choose_method
from geomlin.precision import DTYPES, compute_dtype, full_precision
from geomlin.validation import (
    check_choice,
    check_finite,
    check_memory,
    check_nonnegative_int,
    check_same_device,
    check_tensor,
    shape_str,
)

#: Methods accepted by [`gaunt_tensor_product`][].
METHODS = ("auto", "grid", "fft", "dense", "direct", "triton")
#: Largest total degree ``lmax_in1 + lmax_in2 + lmax_out`` the dense Gaunt tensor (``"direct"``) is built for.
DIRECT_MAX_DEGREE = 36


# ---------------------------------------------------------------- channel patterns
def _expand_shared(x1: Tensor, x2: Tensor, channels: int, shared: int) -> tuple[Tensor, Tensor]:
    """Materialise the shared input (one row per group) as one row per channel."""
    if shared == 1:
        x1 = x1[:, None].expand(-1, channels, -1).reshape(-1, x1.shape[-1])
    elif shared == 2:
        x2 = x2[:, None].expand(-1, channels, -1).reshape(-1, x2.shape[-1])
    return x1, x2


def _reduce(out: Tensor, channels: int, reduce: bool) -> Tensor:
    return out.view(-1, channels, out.shape[-1]).sum(1) if reduce else out


# ---------------------------------------------------------------- routes
# The grid route reuses workspaces through ``out=`` views and copies with numpy, which dynamo does not
# trace: inside compiled graphs it runs as one opaque operator (the same function, its output shape
# given by the fake implementation), so an explicit ``method="grid"`` compiles as one graph. The
# operator receives a module's tables as arguments (a flat list in the order of ``GT.product_keys``;
# empty for a plain call, which reads the device cache inside the operator, untraced).
@torch.library.custom_op("geomlin::gaunt_grid", mutates_args=())
def _gaunt_grid_op(x1: Tensor, x2: Tensor, tables: list[Tensor], lmax_in1: int, lmax_in2: int, lmax_out: int,
                   channels: int, shared: int, reduce: bool) -> Tensor:
    keys = GT.product_keys(lmax_in1, lmax_in2, lmax_out)
    return G.gaunt_on_grid(x1, x2, lmax_in1, lmax_in2, lmax_out, channels, shared, reduce,
                           unflatten_tables(keys, tables) if tables else None)


@_gaunt_grid_op.register_fake
def _(x1, x2, tables, lmax_in1, lmax_in2, lmax_out, channels, shared, reduce):
    groups = x1.shape[0] // (1 if shared == 1 else channels)
    return x1.new_empty(groups * (1 if reduce else channels), T.num_coefficients(lmax_out))


@torch.library.custom_op("geomlin::gaunt_grid_backward", mutates_args=())
def _gaunt_grid_backward_op(grad: Tensor, x1: Tensor, x2: Tensor, tables: list[Tensor], lmax_in1: int, lmax_in2: int,
                            lmax_out: int, channels: int, shared: int, reduce: bool, need1: bool,
                            need2: bool) -> tuple[Tensor, Tensor]:
    keys = GT.product_keys(lmax_in1, lmax_in2, lmax_out)
    g1, g2 = G.gaunt_backward_on_grid(grad, x1, x2, lmax_in1, lmax_in2, lmax_out, channels, shared, reduce, need1, need2,
                                      unflatten_tables(keys, tables) if tables else None)
    # an operator returns tensors: an unneeded gradient is an empty one (None again in _grid_backward)
    return (x1.new_empty(0) if g1 is None else g1), (x2.new_empty(0) if g2 is None else g2)


@_gaunt_grid_backward_op.register_fake
def _(grad, x1, x2, tables, lmax_in1, lmax_in2, lmax_out, channels, shared, reduce, need1, need2):
    return (torch.empty_like(x1) if need1 else x1.new_empty(0)), (torch.empty_like(x2) if need2 else x2.new_empty(0))


def _gaunt_grid(x1, x2, lmax_in1, lmax_in2, lmax_out, channels, shared, reduce, tables):
    if torch.compiler.is_compiling():
        flat = [] if tables is None else resolved_tables(GT.product_keys(lmax_in1, lmax_in2, lmax_out), x1.device,
                                                         x1.dtype, tables)
        return _gaunt_grid_op(x1, x2, flat, lmax_in1, lmax_in2, lmax_out, channels, shared, reduce)
    return G.gaunt_on_grid(x1, x2, lmax_in1, lmax_in2, lmax_out, channels, shared, reduce, tables)


def _grid_backward(grad, x1, x2, lmax_in1, lmax_in2, lmax_out, channels, shared, reduce, need1, need2, tables):
    """Both input gradients of the grid route in one pass ([`geomlin.gaunt.grid.gaunt_backward_on_grid`][])."""
    if not torch.compiler.is_compiling():
        return G.gaunt_backward_on_grid(grad, x1, x2, lmax_in1, lmax_in2, lmax_out, channels, shared, reduce, need1, need2,
                                        tables)
    flat = [] if tables is None else resolved_tables(GT.product_keys(lmax_in1, lmax_in2, lmax_out), x1.device, x1.dtype,
                                                     tables)
    g1, g2 = _gaunt_grid_backward_op(grad, x1, x2, flat, lmax_in1, lmax_in2, lmax_out, channels, shared, reduce, need1,
                                     need2)
    return (g1 if need1 else None), (g2 if need2 else None)


def _gaunt_fft(x1, x2, lmax_in1, lmax_in2, lmax_out, channels, shared, reduce, tables):
    from geomlin.gaunt.fourier import gaunt_fourier

    return gaunt_fourier(x1, x2, lmax_in1, lmax_in2, lmax_out, channels, shared, reduce, tables)


@table_builder("dense")
@cache
def _dense_tables(lmax_in1: int, lmax_in2: int, lmax_out: int) -> tuple[Tensor, Tensor, Tensor]:
    """``Y1^T (D1, P)``, ``Y2^T (D2, P)`` and weighted ``W (P, Do)`` on an exact grid, float64.

    Read-only tensors (cached: never hand them to code that writes in place).
    """
    Y, w = T.cached_sh_on_grid(max(lmax_in1, lmax_in2, lmax_out), lmax_in1 + lmax_in2 + lmax_out)
    return (Y[:, : T.num_coefficients(lmax_in1)].T.contiguous(), Y[:, : T.num_coefficients(lmax_in2)].T.contiguous(),
            (Y[:, : T.num_coefficients(lmax_out)] * w[:, None]).contiguous())


def dense_tables(lmax_in1: int, lmax_in2: int, lmax_out: int, device=None, dtype=torch.float64) -> tuple[Tensor, ...]:
    """Copies of the tables of the plain sphere-grid GEMM ``((x1 @ Y1) * (x2 @ Y2)) @ W``.

    Returns ``Y1 (D1, P)``, ``Y2 (D2, P)``, ``W (P, Do)`` on the smallest grid exact for degree
    ``lmax_in1 + lmax_in2 + lmax_out`` (``P`` points), in ``dtype`` on ``device``.
    """
    return tuple(t.to(device=device, dtype=dtype, copy=True) for t in _dense_tables(lmax_in1, lmax_in2, lmax_out))


def _gaunt_dense(x1, x2, lmax_in1, lmax_in2, lmax_out, channels, shared, reduce, tables):
    Y1, Y2, W = device_tables(("dense", lmax_in1, lmax_in2, lmax_out), x1.device, x1.dtype, tables)
    v1, v2 = x1 @ Y1, x2 @ Y2  # the shared input is evaluated once per group, broadcast below
    P = v1.shape[-1]
    c1 = 1 if shared == 1 else channels
    c2 = 1 if shared == 2 else channels
    v = v1.view(-1, c1, P) * v2.view(-1, c2, P)
    if reduce:
        v = v.sum(1)
    return v.reshape(-1, P) @ W


@table_builder("direct")
def _direct_tables(lmax_in1: int, lmax_in2: int, lmax_out: int) -> tuple[Tensor]:
    """The Gaunt tensor as ``(D1 D2, Do)``, float64 (read-only)."""
    return (T.cached_gaunt_tensor(lmax_in1, lmax_in2, lmax_out).flatten(0, 1),)


@table_builder("operator")
def _operator_tables(lmax: int, lmax_other: int, lmax_out: int) -> tuple[Tensor]:
    """The Gaunt tensor as ``(D, Do D_other)``: row ``j`` holds ``G[i, j, k]`` at ``k D_other + i``, float64."""
    G = T.cached_gaunt_tensor(lmax_other, lmax, lmax_out)  # (D_other, D, Do)
    return (G.permute(1, 2, 0).reshape(G.shape[1], -1).contiguous(),)


def operator_key(lmax: int, lmax_other: int, lmax_out: int) -> tuple:
    """Cache key ([`geomlin.gaunt.cache`][]) of the table [`gaunt_operator`][] reads."""
    return ("operator", lmax, lmax_other, lmax_out)


def _operator(x: Tensor, lmax: int, lmax_other: int, lmax_out: int, tables=None) -> Tensor:
    """[`gaunt_operator`][] without its checks (the direct route's inner step)."""
    (Gm,) = device_tables(operator_key(lmax, lmax_other, lmax_out), x.device, x.dtype, tables)
    return (x @ Gm).unflatten(-1, (T.num_coefficients(lmax_out), T.num_coefficients(lmax_other)))


def gaunt_operator(x: Tensor, lmax_other: int, lmax_out: int, *, tables=None) -> Tensor:
    """The Gaunt product with ``f = sum x_lm Y_lm`` as a matrix: ``M[..., k, i] = sum_j G[i, j, k] x[..., j]``.

    ``gaunt_tensor_product(y, x, lmax_out)[..., k] = sum_i M[..., k, i] y[..., i]`` for every ``y`` of degree
    ``lmax_other``: one contraction of ``x`` with the Gaunt tensor, after which multiplying any
    number of functions by ``f`` is a batched GEMM (the direct route with a shared input).

    Parameters
    ----------
    x : Tensor of shape (..., (L+1)**2)
        float32/float64 SH coefficients of ``f`` (finite; under ``torch.autocast`` also half precision,
        computed in float32).
    lmax_other : int
        Degree (``>= 0``) of the functions the matrix multiplies.
    lmax_out : int
        Degree (``>= 0``) of the products.
    tables : ConstantTables, optional
        a module's tables holding `operator_key` ([`geomlin.gaunt.cache`][]); ``None`` reads the device cache.

    Returns
    -------
    Tensor of shape (..., (lmax_out+1)**2, (lmax_other+1)**2)
        in ``x``'s dtype; differentiable in ``x``. Total degree ``L + lmax_other + lmax_out`` at most
        [`DIRECT_MAX_DEGREE`][] (the Gaunt tensor is dense).
    """
    L = check_coefficients(x, "x")
    lmax_other = check_nonnegative_int(lmax_other, "lmax_other")
    lmax_out = check_nonnegative_int(lmax_out, "lmax_out")
    check_method("direct", x.device, L, lmax_other, lmax_out, x.dtype)
    x = x.to(compute_dtype(x, "x"))
    with full_precision(x):
        return _operator(x, L, lmax_other, lmax_out, tables)


def _gaunt_direct(x1, x2, lmax_in1, lmax_in2, lmax_out, channels, shared, reduce, tables):
    if shared:  # one operator per group, met by every channel in a batched GEMM
        one, many, lmax_many = (x1, x2, lmax_in2) if shared == 1 else (x2, x1, lmax_in1)
        M = _operator(one, lmax_in1 if shared == 1 else lmax_in2, lmax_many, lmax_out, tables)  # (A, Do, D_many)
        out = torch.matmul(many.view(one.shape[0], channels, -1), M.transpose(1, 2))  # (A, C, Do)
        return out.sum(1) if reduce else out.reshape(-1, out.shape[-1])
    (Gt,) = device_tables(("direct", lmax_in1, lmax_in2, lmax_out), x1.device, x1.dtype, tables)
    outer = (x1[:, :, None] * x2[:, None, :]).flatten(1)
    return _reduce(outer @ Gt, channels, reduce)


def _gaunt_triton(x1, x2, lmax_in1, lmax_in2, lmax_out, channels, shared, reduce, tables):
    from geomlin.gaunt.kernels import gaunt_grid_triton

    return gaunt_grid_triton(x1, x2, lmax_in1, lmax_in2, lmax_out, channels, shared, reduce, tables)


_IMPLEMENTATIONS = {
    "grid": _gaunt_grid,
    "fft": _gaunt_fft,
    "dense": _gaunt_dense,
    "direct": _gaunt_direct,
    "triton": _gaunt_triton,
}


# ---------------------------------------------------------------- autograd
#: Routes made of a few large differentiable ops: autograd through them reuses the forward's grid
#: values and beats two more products. The transform routes (grid, fft, triton) use ``_GauntFunction``.
_AUTOGRAD_THROUGH = ("dense", "direct")

def gaunt_rows(x1: Tensor, x2: Tensor, lmax_in1: int, lmax_in2: int, lmax_out: int, method: str,
               channels: int = 1, shared: int = 0, reduce: bool = False, tables=None) -> Tensor:
    """Gaunt products of rows: the differentiable core behind [`gaunt_tensor_product`][].

    ``x1 (A * c1, D1)``, ``x2 (A * c2, D2)`` with ``c1, c2`` as in
    [`geomlin.gaunt.grid.gaunt_on_grid`][] (``shared`` in 0, 1, 2; ``reduce``
    sums over the ``channels`` of each group); returns ``(A * channels, Do)`` (``(A, Do)`` when ``reduce``),
    zero above degree ``lmax_in1 + lmax_in2``.  ``method`` is a concrete method (not ``"auto"``);
    ``tables``: a module's tables of `table_keys` ([`geomlin.gaunt.cache`][]), ``None`` the device cache.
    """
    lo = min(lmax_out, lmax_in1 + lmax_in2)
    with full_precision(x1):
        if method in _AUTOGRAD_THROUGH:
            out = _IMPLEMENTATIONS[method](x1, x2, lmax_in1, lmax_in2, lo, channels, shared, reduce, tables)
        else:
            out = _GauntFunction.apply(x1, x2, lmax_in1, lmax_in2, lo, method, channels, shared, reduce, tables)
    if lo < lmax_out:
        out = torch.nn.functional.pad(out, (0, T.num_coefficients(lmax_out) - T.num_coefficients(lo)))
    return out


class _GauntFunction(torch.autograd.Function):
    """Gaunt product whose gradients are Gaunt products again.

    ``G[i, j, k] = int Y_i Y_j Y_k`` is symmetric, so for an output gradient ``g``
    ``dL/dx1 = gaunt(g, x2)`` truncated at ``L1`` and ``dL/dx2 = gaunt(g, x1)`` at ``L2``,
    with the channel pattern transposed (a shared input's gradient sums over the channels, a
    summed output's gradient is shared).  The backward is two products on the same route
    and is itself differentiable (double backward for force training).
    """

    @staticmethod
    def forward(ctx, x1, x2, lmax_in1, lmax_in2, lmax_out, method, channels, shared, reduce, tables):
        ctx.save_for_backward(x1, x2)
        ctx.meta = (lmax_in1, lmax_in2, lmax_out, method, channels, shared, reduce, tables)
        return _IMPLEMENTATIONS[method](x1.contiguous(), x2.contiguous(), lmax_in1, lmax_in2, lmax_out,
                                        channels, shared, reduce, tables)

    @staticmethod
    def backward(ctx, grad):
        x1, x2 = ctx.saved_tensors
        lmax_in1, lmax_in2, lmax_out, method, C, shared, reduce, tables = ctx.meta
        if method == "grid" and not torch.is_grad_enabled():
            # first-order backward: both products in one pass, the output gradient transformed once
            # (with create_graph=True the two products below keep the graph for double backward)
            with full_precision(grad):
                grads = _grid_backward(grad.contiguous(), x1.contiguous(), x2.contiguous(), lmax_in1, lmax_in2, lmax_out,
                                       C, shared, reduce, ctx.needs_input_grad[0], ctx.needs_input_grad[1], tables)
            return (*grads, None, None, None, None, None, None, None, None)
        g1 = g2 = None
        if ctx.needs_input_grad[0]:
            g1 = _transposed(grad, x2, lmax_out, lmax_in2, lmax_in1, method, C, shared, reduce, 1, tables)
        if ctx.needs_input_grad[1]:
            g2 = _transposed(grad, x1, lmax_out, lmax_in1, lmax_in2, method, C, shared, reduce, 2, tables)
        return g1, g2, None, None, None, None, None, None, None, None


def _transposed(grad, other, lmax_grad, lmax_other, lmax_want, method, C, shared, reduce, own, tables):
    """Gradient of input ``own`` (1 or 2): ``gaunt(grad, other)`` with the transposed channel pattern."""
    if shared == own:  # this input was shared: sum its gradient over the channels
        return gaunt_rows(grad, other, lmax_grad, lmax_other, lmax_want, method, C, 0, True, tables)
    if reduce:  # the output was summed over channels: its gradient is shared
        return gaunt_rows(grad, other, lmax_grad, lmax_other, lmax_want, method, C, 1, False, tables)
    return gaunt_rows(grad, other, lmax_grad, lmax_other, lmax_want, method, C, 2 if shared else 0, False, tables)


# ---------------------------------------------------------------- tables of modules
def route_keys(method: str, lmax_in1: int, lmax_in2: int, lmax_out: int) -> list[tuple]:
    """Cache keys ([`geomlin.gaunt.cache`][]) of the tables one product on a concrete route reads."""
    lo = min(lmax_out, lmax_in1 + lmax_in2)
    if method == "grid":
        return GT.product_keys(lmax_in1, lmax_in2, lo)  # with those of the fused first-order backward
    if method == "fft":
        from geomlin.gaunt.fourier import table_keys

        return table_keys(lmax_in1, lmax_in2, lo)
    if method == "dense":
        return [("dense", lmax_in1, lmax_in2, lo)]
    if method == "direct":
        if lmax_in1 + lmax_in2 + lo > DIRECT_MAX_DEGREE:
            return []  # the forward refuses (with the reason)
        return [("direct", lmax_in1, lmax_in2, lo), operator_key(lmax_in1, lmax_in2, lo), operator_key(lmax_in2, lmax_in1, lo)]
    if method == "triton":
        from geomlin.gaunt.kernels import triton_available, triton_supports

        if not triton_available() or not triton_supports(lmax_in1, lmax_in2, lo, torch.float32):
            return []  # the forward refuses (with the reason)
        from geomlin.gaunt.kernels.triton_grid import table_keys

        return table_keys(lmax_in1, lmax_in2, lo)
    raise ValueError(f"method must be a concrete route, one of {', '.join(_IMPLEMENTATIONS)}, got {method!r}")


def table_keys(method: str, lmax_in1: int, lmax_in2: int, lmax_out: int) -> list[tuple]:
    """Keys of every table a product reads, forward and backward (twice differentiable).

    ``method`` may be ``"auto"``: then the routes it picks on the CPU, on CUDA, on other
    accelerators and inside compiled graphs are all included (a module does not know where it
    will run).
    """
    if method == "auto":
        methods = dict.fromkeys([*(choose_method(lmax_in1, lmax_in2, lmax_out, device, torch.float32, shared)
                                   for device in ("cpu", "cuda", "accelerator") for shared in (False, True)),
                                 TRACED_METHOD])
    else:
        methods = {method: None}
    lo = min(lmax_out, lmax_in1 + lmax_in2)
    # the gradients are products of the output gradient with the other input (see _transposed)
    triples = ((lmax_in1, lmax_in2, lo), (lo, lmax_in2, min(lmax_in1, lo + lmax_in2)), (lo, lmax_in1, min(lmax_in2, lo + lmax_in1)))
    return list(dict.fromkeys(k for m in methods for t in triples for k in route_keys(m, *t)))


# ---------------------------------------------------------------- public API
def check_coefficients(x, name: str) -> int:
    """Degree of SH coefficients ``x (..., (L+1)**2)``; refuses other dtypes than [`compute_dtype`][] accepts."""
    check_tensor(x, name, min_ndim=1, dtype="any", what="real SH coefficients (..., (L+1)**2)")
    compute_dtype(x, name)
    check_finite(x, name)
    return T.lmax_from_size(x.shape[-1], name)


def common_dtype(x1: Tensor, x2: Tensor) -> torch.dtype:
    """The dtype both inputs are computed in: their common float32 / float64 (half precision under
    autocast counts as float32); ``TypeError`` when they differ otherwise."""
    if x1.dtype != x2.dtype and x1.dtype in DTYPES and x2.dtype in DTYPES:
        raise TypeError(f"x1 and x2 must have the same dtype, got {x1.dtype} and {x2.dtype}")
    return torch.promote_types(compute_dtype(x1, "x1"), compute_dtype(x2, "x2"))


def resolve_method(method: str, lmax_in1: int, lmax_in2: int, lmax_out: int, device, dtype, shared: bool = False) -> str:
    """The concrete method ``"auto"`` stands for (others are validated and returned); ``shared``: one
    input is shared by every channel ([`geomlin.gaunt.method_tables.choose_method`][])."""
    check_choice(method, "method", METHODS)
    if method != "auto":
        return method
    return choose_method(lmax_in1, lmax_in2, lmax_out, torch.device(device).type, dtype, shared)


def _check_triton(device, lmax_in1, lmax_in2, lmax_out, dtype) -> None:
    from geomlin.gaunt.kernels import triton_available, triton_supports

    if not triton_available():
        raise ValueError("method='triton' needs the optional triton package: pip install 'geomlin[gpu]'")
    if device.type != "cuda" and os.environ.get("TRITON_INTERPRET", "0") != "1":
        raise ValueError(f"method='triton' runs on CUDA devices (or on the CPU under TRITON_INTERPRET=1), got "
                         f"tensors on {device}; use method='grid' there")
    if not triton_supports(lmax_in1, lmax_in2, lmax_out, dtype):
        raise ValueError(f"method='triton' handles float32/float64 and degrees up to its MAX_LMAX, got lmax "
                         f"({lmax_in1}, {lmax_in2}, {lmax_out}) in {dtype}; use method='grid'")


def check_method(method: str, device, lmax_in1: int, lmax_in2: int, lmax_out: int, dtype: torch.dtype) -> None:
    """Refuse a concrete route that cannot run these sizes here (Triton off CUDA, ``"direct"`` beyond
    [`DIRECT_MAX_DEGREE`][]), naming the route to use instead."""
    if method == "triton":
        _check_triton(device, lmax_in1, lmax_in2, lmax_out, dtype)
    if method == "direct" and lmax_in1 + lmax_in2 + lmax_out > DIRECT_MAX_DEGREE:
        raise ValueError(f"method='direct' builds the dense Gaunt tensor; lmax_in1 + lmax_in2 + lmax_out must be <= "
                         f"{DIRECT_MAX_DEGREE}, got {lmax_in1 + lmax_in2 + lmax_out} (use 'grid')")


def _shared_split(shape1: tuple, shape2: tuple, batch: tuple) -> tuple[int, int]:
    """``(shared, k)``: input ``shared`` (1 or 2) equals the broadcast shape on all but its last
    ``k`` leading axes, where it has size 1 (one row per group of ``prod(batch[-k:])`` channels);
    ``(0, 0)`` when neither input is shared that way."""
    n = len(batch)
    for which, shape in ((2, shape2), (1, shape1)):
        shape = (1,) * (n - len(shape)) + tuple(shape)
        if shape == batch:
            continue
        k = 0
        while k < n and shape[n - 1 - k] == 1:
            k += 1
        if k and shape[: n - k] == batch[: n - k] and math.prod(batch[n - k:]) > 1:
            return which, k
    return 0, 0


def gaunt_tensor_product(x1: Tensor, x2: Tensor, lmax_out: int | None = None, method: str = "auto", *,
                         tables=None) -> Tensor:
    """Coefficients of the product of two spherical functions (the Gaunt tensor product).

    Parameters
    ----------
    x1 : Tensor of shape (..., (L1+1)**2)
        float32/float64, e3nn real SH layout (under ``torch.autocast``
        also float16/bfloat16, computed in float32).
    x2 : Tensor of shape (..., (L2+1)**2)
        same dtype and device; leading axes broadcast.  An input
        whose trailing leading axes have size 1 (``(N, 1, D2)`` against ``(N, C, D1)``) is
        transformed once per row and shared by the channels (grid and Triton routes).
    lmax_out : int, optional
        Degree of the result; defaults to ``L1 + L2`` (the exact product).
        Degrees above ``L1 + L2`` are zero.
    method : {"auto", "grid", "fft", "dense", "direct", "triton"}
        the route (all exact; see the module docstring).
    tables : ConstantTables, optional
        a module's tables of `table_keys` ([`geomlin.gaunt.cache`][]); ``None`` reads the device cache.

    Returns
    -------
    Tensor of shape (broadcast(...), (lmax_out+1)**2)
        dtype of the inputs (float32 for half-precision
        inputs under autocast), device of the inputs.  No host synchronisation on any device.
        An output above [`geomlin.validation.MEMORY_LIMIT_BYTES`][] is
        refused with its estimate.
    """
    lmax_in1 = check_coefficients(x1, "x1")
    lmax_in2 = check_coefficients(x2, "x2")
    dtype = common_dtype(x1, x2)
    check_same_device("x1", x1, "x2", x2)
    x1, x2 = x1.to(dtype), x2.to(dtype)
    lmax_out = lmax_in1 + lmax_in2 if lmax_out is None else check_nonnegative_int(lmax_out, "lmax_out")
    try:
        batch = tuple(torch.broadcast_shapes(x1.shape[:-1], x2.shape[:-1]))
    except RuntimeError as err:
        raise ValueError(f"leading shapes of x1 {tuple(x1.shape)} and x2 {tuple(x2.shape)} do not broadcast") from err
    shared, k = _shared_split(tuple(x1.shape[:-1]), tuple(x2.shape[:-1]), batch)
    method = resolve_method(method, lmax_in1, lmax_in2, lmax_out, x1.device, x1.dtype, bool(shared))
    check_method(method, x1.device, lmax_in1, lmax_in2, lmax_out, x1.dtype)
    Do = T.num_coefficients(lmax_out)
    check_memory(math.prod(batch) * Do * x1.element_size(),
                 f"gaunt_tensor_product's output {shape_str(batch + (Do,))} (lmax_out={lmax_out})",
                 f"degrees above lmax_in1 + lmax_in2 = {lmax_in1 + lmax_in2} are zero; use a smaller lmax_out")
    if math.prod(batch) == 0:
        return x1.new_zeros(*batch, Do)
    if shared:
        C = math.prod(batch[len(batch) - k:])
        head = batch[: len(batch) - k] + (1,) * k
        a = x1.expand(*(batch if shared == 2 else head), x1.shape[-1]).reshape(-1, x1.shape[-1])
        b = x2.expand(*(head if shared == 2 else batch), x2.shape[-1]).reshape(-1, x2.shape[-1])
        out = gaunt_rows(a, b, lmax_in1, lmax_in2, lmax_out, method, C, shared, tables=tables)
    else:
        a = x1.expand(*batch, x1.shape[-1]).reshape(-1, x1.shape[-1])
        b = x2.expand(*batch, x2.shape[-1]).reshape(-1, x2.shape[-1])
        out = gaunt_rows(a, b, lmax_in1, lmax_in2, lmax_out, method, tables=tables)
    return out.reshape(*batch, Do)


def gaunt_parity_product(a: tuple[Tensor, Tensor], b: tuple[Tensor, Tensor], lmax_out: int | None = None,
                         method: str = "auto") -> tuple[Tensor, Tensor]:
    """Gaunt product of parity-split functions ``(natural, pseudo)``: returns ``(natural, pseudo)``.

    ``natural = a_n b_n + a_p b_p`` and ``pseudo = a_n b_p + a_p b_n``: O(3)-equivariant
    for every parity assignment.  All four tensors ``(..., C, (L+1)**2)`` broadcast.
    """
    for name, pair in (("a", a), ("b", b)):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(f"{name} must be a (natural, pseudo) pair of tensors, as split_parity returns")
    nn_ = gaunt_tensor_product(a[0], b[0], lmax_out, method)
    pp = gaunt_tensor_product(a[1], b[1], lmax_out, method)
    np_ = gaunt_tensor_product(a[0], b[1], lmax_out, method)
    pn = gaunt_tensor_product(a[1], b[0], lmax_out, method)
    return nn_ + pp, np_ + pn
