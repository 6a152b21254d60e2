"""The sphere's Poisson bracket: the odd paths of the tensor product (``l1 + l2 + l3`` odd) on the Gaunt routes.

The Gaunt product ``f g`` reaches only the paths with ``l1 + l2 + l3`` even: ``int Y_k Y_i Y_j``
vanishes otherwise. The other invariant product of two spherical functions is their Poisson bracket

    {f, g} = r . (grad f x grad g)                                   (on the unit sphere, r = position)

which is bilinear, antisymmetric, rotation invariant and of parity ``-(-1)^(l1 + l2)`` (``r`` is a
vector, the two gradients flip twice), so ``int Y_k {Y_i, Y_j}`` is an invariant tensor of
``l1 x l2 -> l3`` that vanishes unless ``l1 + l2 + l3`` is odd; for two vectors (``l1 = l2 = 1``) it
is their cross product. Since the invariant tensor of a path is unique up to a factor, it is the
Clebsch-Gordan coefficient times a constant, which for e3nn's ``wigner_3j`` is (checked for every
path up to ``L = 8`` in ``tests/gaunt/test_paths.py``)

    b(l1, l2, l3) = sqrt(l1 (l1+1) l2 (l2+1) (2 l1+1)(2 l2+1)(2 l3+1) / (4 pi)) |(l1 l2 l3; 1 -1 0)|

and never zero for an odd path with ``l1, l2 >= 1`` (the only kind: a constant has no gradient).

**On the Gaunt routes.** With ``F``, ``G`` the harmonic (homogeneous) extensions of ``f``, ``g``,
``r . (grad F x grad G) = sum_a (r x grad F)_a (grad G)_a``. Each ``(r x grad F)_a`` (the angular
momentum ``-i L_a`` applied to ``f``) has ``f``'s degrees, each ``(grad G)_a`` is a harmonic of one
degree less, both linear maps on the coefficients ([`derivative_tables`][], built exactly on a sphere
grid). So the bracket is three Gaunt products summed,

    {f, g} = sum_{a = x, y, z} gaunt(J_a f, D_a g)                    (J_a: degree L1, D_a: degree L2 - 1)

which every Gaunt route computes ([`gaunt_rows`][geomlin.gaunt.product.gaunt_rows] with three
channels summed before the projection): exact on the grid exact for ``L1 + (L2 - 1) + Lo``, O(L^3)
on the grid route, differentiable twice.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import torch
from torch import Tensor

from geomlin.gaunt import harmonics as T
from geomlin.gaunt.cache import device_tables, table_builder
from geomlin.gaunt.product import (
    check_coefficients,
    check_method,
    common_dtype,
    gaunt_rows,
    resolve_method,
)
from geomlin.validation import (
    check_broadcastable,
    check_memory,
    check_nonnegative_int,
    check_same_device,
    shape_str,
)

__all__ = ["derivative_tables", "gaunt_bracket"]

#: Entries of the derivative tables below this are exact zeros rounded by the quadrature.
_ZERO = 1e-13


def _gradients(lmax: int, points: Tensor) -> tuple[Tensor, Tensor]:
    """``Y (P, D)`` and ``grad F (P, D, 3)`` of the homogeneous harmonics ``F = |r|^l Y_l(r / |r|)`` at ``points``.

    Forward-mode derivatives (one dual pass per axis): exact, and no backward pass at table-building time.
    """
    import torch.autograd.forward_ad as fwAD

    grads = []
    with torch.no_grad(), fwAD.dual_level():
        for axis in range(3):
            tangent = torch.zeros_like(points)
            tangent[:, axis] = 1.0
            dual = T.spherical_harmonics(lmax, fwAD.make_dual(points, tangent), normalize=False)
            Y, dY = fwAD.unpack_dual(dual)
            grads.append(dY)
    return Y, torch.stack(grads, dim=-1)


@cache
def _derivatives(lmax: int) -> tuple[Tensor, Tensor]:
    P_, w_, _ = T.sphere_grid(2 * lmax)
    points, w = torch.from_numpy(P_.copy()), torch.from_numpy(w_.copy())
    Y, grad = _gradients(lmax, points)                                   # (P, D), (P, D, 3)
    rotation = torch.linalg.cross(points[:, None, :].expand_as(grad), grad, dim=-1)  # (r x grad F)_a
    Yw = Y * w[:, None]
    J = torch.einsum("pi,pja->aji", Yw, rotation)                        # (3, D, D): [a, input, output]
    Dg = torch.einsum("pi,pja->aji", Yw[:, : lmax * lmax], grad)         # (3, D, lmax^2)
    for t in (J, Dg):
        t[t.abs() < _ZERO] = 0.0
    return J, Dg


def derivative_tables(lmax: int) -> tuple[Tensor, Tensor]:
    """The linear maps behind the bracket, float64 copies.

    Returns
    -------
    J : Tensor of shape (3, (lmax+1)**2, (lmax+1)**2)
        ``J[a, i, i']``: coefficient ``i'`` of ``(r x grad F_i)_a``, the rotation generator about axis
        ``a`` (``x, y, z``) applied to ``Y_i``; block diagonal in the degree.
    D : Tensor of shape (3, (lmax+1)**2, lmax**2)
        ``D[a, j, j']``: coefficient ``j'`` (degree ``l - 1``) of ``d F_j / d r_a``.
    """
    J, Dg = _derivatives(check_nonnegative_int(lmax, "lmax"))
    return J.clone(), Dg.clone()


@table_builder("bracket")
def _bracket_tables(lmax: int) -> tuple[Tensor, Tensor]:
    """``(J (D, 3 D), Dg (D, 3 lmax^2))`` as right factors: ``x @ J`` gives ``(..., 3 [a], D)`` flattened."""
    J, Dg = _derivatives(lmax)
    return J.permute(1, 0, 2).reshape(J.shape[1], -1).contiguous(), Dg.permute(1, 0, 2).reshape(Dg.shape[1], -1).contiguous()


def bracket_key(lmax: int) -> tuple:
    """Cache key ([`geomlin.gaunt.cache`][]) of the derivative tables of degree ``lmax``."""
    return ("bracket", lmax)


def gaunt_bracket(x1: Tensor, x2: Tensor, lmax_out: int | None = None, method: str = "auto", *,
                  tables=None) -> Tensor:
    """Coefficients of the Poisson bracket ``{f1, f2} = r . (grad f1 x grad f2)`` of two spherical functions.

    ``out_k = sum_{i, j} B[i, j, k] x1_i x2_j`` with ``B[i, j, k] = int Y_k {Y_i, Y_j}``: the paths of the
    tensor product with ``l1 + l2 + l3`` odd, path ``(l1, l2, l3)`` equal to e3nn's ``wigner_3j`` times
    ``b(l1, l2, l3)`` (module docstring); [`gaunt_tensor_product`][geomlin.gaunt.product.gaunt_tensor_product]
    gives the even ones. Antisymmetric: ``gaunt_bracket(x1, x2) = -gaunt_bracket(x2, x1)``.

    Parameters
    ----------
    x1 : Tensor of shape (..., (L1+1)**2)
        float32/float64 real SH coefficients (e3nn layout; under ``torch.autocast`` also half
        precision, computed in float32).
    x2 : Tensor of shape (..., (L2+1)**2)
        same dtype and device; leading axes broadcast.
    lmax_out : int, optional
        Degree of the result; defaults to ``L1 + L2 - 1``, the bracket's degree (0 when an input is
        constant). Degrees above ``L1 + L2 - 1`` are zero.
    method : {"auto", "grid", "fft", "dense", "direct", "triton"}
        the Gaunt route of the three products (all exact), chosen for degrees ``(L1, L2 - 1, lmax_out)``.
    tables : ConstantTables, optional
        a module's tables of ``bracket_key(L1)``, ``bracket_key(L2)`` and the route's `table_keys`
        for ``(L1, L2 - 1, lmax_out)`` ([`geomlin.gaunt.cache`][]); ``None`` reads the device cache.

    Returns
    -------
    Tensor of shape (broadcast(...), (lmax_out+1)**2)
        dtype and device of the inputs; identically zero when ``L1 = 0`` or ``L2 = 0`` (a constant
        has no gradient). Differentiable twice; no host synchronisation.
    """
    lmax_in1 = check_coefficients(x1, "x1")
    lmax_in2 = check_coefficients(x2, "x2")
    dtype = common_dtype(x1, x2)
    check_same_device("x1", x1, "x2", x2)
    top = max(lmax_in1 + lmax_in2 - 1, 0)
    lmax_out = top if lmax_out is None else check_nonnegative_int(lmax_out, "lmax_out")
    batch = check_broadcastable(("x1", x1.shape[:-1]), ("x2", x2.shape[:-1]), what="leading shapes")
    Do = T.num_coefficients(lmax_out)
    rows = math.prod(batch)
    check_memory(rows * Do * max(x1.element_size(), 4) * 4, f"gaunt_bracket's output {shape_str(batch + (Do,))} "
                 f"(lmax_out={lmax_out}) and its three products", f"degrees above {top} are zero; use a smaller lmax_out")
    if lmax_in1 == 0 or lmax_in2 == 0 or rows == 0:
        return x1.new_zeros(*batch, Do, dtype=dtype)
    lmax_d = lmax_in2 - 1
    method = resolve_method(method, lmax_in1, lmax_d, lmax_out, x1.device, dtype)
    check_method(method, x1.device, lmax_in1, lmax_d, lmax_out, dtype)
    J1, _ = device_tables(bracket_key(lmax_in1), x1.device, dtype, tables)
    _, D2 = device_tables(bracket_key(lmax_in2), x1.device, dtype, tables)
    a = (x1.to(dtype) @ J1).unflatten(-1, (3, -1))                       # (..., 3, D1): J_a f1
    b = (x2.to(dtype) @ D2).unflatten(-1, (3, -1))                       # (..., 3, L2^2): D_a f2
    a = a.expand(*batch, *a.shape[-2:]).reshape(rows * 3, -1)
    b = b.expand(*batch, *b.shape[-2:]).reshape(rows * 3, -1)
    out = gaunt_rows(a, b, lmax_in1, lmax_d, lmax_out, method, 3, 0, True, tables)  # the three products, summed
    return out.view(*batch, Do)


def _gaunt_block(l1: int, l2: int, l3: int) -> np.ndarray:
    """``int Y_i Y_j Y_k`` over one degree each, ``(2l1+1, 2l2+1, 2l3+1)``, float64, on the exact grid."""
    Y, w = T.cached_sh_on_grid(max(l1, l2, l3), l1 + l2 + l3)
    Y, w = Y.numpy(), w.numpy()
    b1, b2, b3 = (Y[:, l * l:(l + 1) ** 2] for l in (l1, l2, l3))
    return np.einsum("pi,pj,pk->ijk", b1, b2, b3 * w[:, None])


@cache
def path_block(l1: int, l2: int, l3: int) -> np.ndarray:
    """The unnormalised coupling of one path: ``int Y_k Y_i Y_j`` (``l1 + l2 + l3`` even) or
    ``int Y_k {Y_i, Y_j}`` (odd), ``(2l1+1, 2l2+1, 2l3+1)`` float64, read-only; zero outside the triangle."""
    if (l1 + l2 + l3) % 2 == 0:
        block = _gaunt_block(l1, l2, l3)
    elif l1 == 0 or l2 == 0:
        block = np.zeros((2 * l1 + 1, 2 * l2 + 1, 2 * l3 + 1))
    else:
        J, _ = _derivatives(l1)
        _, Dg = _derivatives(l2)
        J = J[:, l1 * l1:, l1 * l1:].numpy()                              # (3, d1, d1)
        Dg = Dg[:, l2 * l2:, (l2 - 1) ** 2:].numpy()                      # (3, d2, d2 - 2)
        block = np.einsum("aip,ajq,pqk->ijk", J, Dg, _gaunt_block(l1, l2 - 1, l3))
    block[np.abs(block) < _ZERO] = 0.0
    block.flags.writeable = False
    return block
