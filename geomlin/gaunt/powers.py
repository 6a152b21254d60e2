"""Gaunt powers ``f^nu`` of spherical functions and MACE-style many-body features built from them.

[`gaunt_power`][] forms ``f^nu`` on one sphere grid exact for its degree (or by divide and conquer
with the pairwise product), [`power_sum`][] the weighted sum ``sum_k w_k f^(k+1)`` on one grid, and
[`ManyBodyGaunt`][] is the layer that learns those weights per channel.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from geomlin.gaunt import grid as G
from geomlin.gaunt import grid_tables as GT
from geomlin.gaunt import harmonics as T
from geomlin.gaunt.cache import device_tables, route_tables, table_builder
from geomlin.gaunt.layout import check_layout, degree_index
from geomlin.gaunt.method_tables import choose_power_method
from geomlin.gaunt.product import METHODS, check_coefficients, gaunt_tensor_product
from geomlin.precision import compute_dtype, full_precision
from geomlin.reps.types import SphereCoefficients
from geomlin.validation import check_choice, check_nonnegative_int, check_positive_int

__all__ = ["POWER_ROUTES", "ManyBodyGaunt", "gaunt_power", "power_sum"]

#: Methods of [`gaunt_power`][] that form the power on one grid ([`power_sum`][]).
POWER_ROUTES = ("auto", "grid", "dense")


def gaunt_power(x: Tensor, nu: int, lmax_out: int | None = None, method: str = "auto") -> Tensor:
    """Coefficients of ``f^nu`` for ``f = sum x_lm Y_lm``, exact up to ``lmax_out``.

    ``method="grid"`` evaluates ``f`` once on a half grid exact for degree ``nu L + lmax_out`` and
    projects ``f^nu`` once, ``"dense"`` does the same on the full grid with plain GEMMs, and
    ``"auto"`` picks one of the two ([`power_sum`][]); other methods use divide and conquer
    (``f^nu = f^a f^b``, ``a = nu // 2``) with the pairwise product, keeping every intermediate to
    the degree the final result needs.

    Parameters
    ----------
    x : Tensor of shape (..., (L+1)**2)
        float32/float64 (half precision under autocast: computed in float32).
    nu : int
        the power, ``>= 1``.
    lmax_out : int, optional
        default ``nu * L``.
    method : str
        one of [`METHODS`][].

    Returns
    -------
    Tensor of shape (..., (lmax_out+1)**2)
        .
    """
    L = check_coefficients(x, "x")
    x = x.to(compute_dtype(x, "x"))
    nu = check_positive_int(nu, "nu")
    lmax_out = nu * L if lmax_out is None else check_nonnegative_int(lmax_out, "lmax_out")
    check_choice(method, "method", METHODS)
    if method in POWER_ROUTES:
        return power_sum(x, L, nu, lmax_out, None, method)
    return _power_divide(x, L, nu, lmax_out, method)


def _power_divide(x: Tensor, L: int, nu: int, need: int, method: str) -> Tensor:
    if nu == 1:
        if need >= L:
            return torch.nn.functional.pad(x, (0, T.num_coefficients(need) - x.shape[-1]))
        return x[..., : T.num_coefficients(need)]
    a, b = nu // 2, nu - nu // 2
    pa = _power_divide(x, L, a, min(a * L, need + b * L), method)
    pb = pa if b == a else _power_divide(x, L, b, min(b * L, need + a * L), method)
    return gaunt_tensor_product(pa, pb, need, method)


def power_sum(x: Tensor, L: int, nu: int, lmax_out: int, weights: Tensor | None, method: str = "auto", *,
              tables=None) -> Tensor:
    """``sum_k weights[..., k] f^(k+1)`` (or ``f^nu`` when ``weights`` is None) on one sphere grid.

    ``x (..., (L+1)**2)`` float32/float64 (computed in its dtype, autocast off); ``weights``
    broadcasts against ``x.shape[:-1] + (nu,)``. Exact (the grid integrates degree
    ``nu L + lmax_out``); differentiable (exact adjoints). Two ways (``method`` one of
    [`POWER_ROUTES`][]; ``"auto"`` asks
    [`choose_power_method`][geomlin.gaunt.method_tables.choose_power_method]): plain GEMMs on the full
    grid (values, pointwise powers, projection; what compiled graphs run, and the CPU up to a measured
    degree), or the half-grid transforms of [`geomlin.gaunt.grid`][] (one synthesis, ``nu - 1``
    pointwise products at ``phi`` and ``-phi``, one projection). ``tables``: a module's tables of both
    ways' keys ([`geomlin.gaunt.cache`][]); ``None`` reads the device cache.
    """
    batch = x.shape[:-1]
    flat = x.reshape(-1, x.shape[-1])
    B = flat.shape[0]
    if B == 0:
        return x.new_zeros(*batch, T.num_coefficients(lmax_out))
    with full_precision(x):
        if method == "auto":
            method = choose_power_method(L, nu, lmax_out, x.device.type)
        if method == "dense" or torch.compiler.is_compiling():
            return _power_dense(flat, weights, batch, L, nu, lmax_out, tables)
        num_theta, num_phi = GT.exact_grid_size(nu * L + lmax_out)
        return _power_on_grid(flat, weights, batch, L, nu, lmax_out, num_theta, num_phi, tables)


@table_builder("dense.power")
def _dense_power_tables(L: int, nu: int, lmax_out: int) -> tuple[Tensor, Tensor]:
    """``Y^T (D, P)`` of degree ``L`` and weighted ``W (P, Do)`` on the smallest sphere grid exact for
    degree ``nu L + lmax_out`` (``P`` points), float64."""
    Y, w = T.cached_sh_on_grid(max(L, lmax_out), nu * L + lmax_out)
    return (Y[:, : T.num_coefficients(L)].T.contiguous(), (Y[:, : T.num_coefficients(lmax_out)] * w[:, None]).contiguous())


def dense_power_key(L: int, nu: int, lmax_out: int) -> tuple:
    """Cache key ([`geomlin.gaunt.cache`][]) of the tables [`power_sum`][] reads inside compiled graphs."""
    return ("dense.power", L, nu, lmax_out)


def _power_dense(flat: Tensor, weights: Tensor | None, batch, L: int, nu: int, lmax_out: int, tables) -> Tensor:
    """[`power_sum`][] as plain GEMMs on the full sphere grid (what compiled graphs run; autograd
    differentiates it): values ``f = x Y^T``, the (weighted) powers pointwise, projection ``@ W``."""
    Y, W = device_tables(dense_power_key(L, nu, lmax_out), flat.device, flat.dtype, tables)
    f = flat @ Y                                                           # (B, P)
    if weights is None:
        total = f ** nu
    else:
        w = weights.expand(*batch, nu).reshape(-1, nu)                     # (B, nu)
        term, total = f, w[:, :1] * f
        for k in range(1, nu):
            term = term * f
            total = total + w[:, k: k + 1] * term
    return (total @ W).reshape(*batch, T.num_coefficients(lmax_out))


def _power_on_grid(flat: Tensor, weights: Tensor | None, batch, L: int, nu: int, lmax_out: int, num_theta: int,
                   num_phi: int, tables) -> Tensor:
    B = flat.shape[0]
    E, O = G.synthesize(flat, L, num_theta, num_phi, tables)  # (K, nt, B)
    plus, minus = E + O, E - O  # values at +phi and -phi
    if weights is None:
        tp, tm = plus, minus
        for _ in range(nu - 1):
            tp, tm = tp * plus, tm * minus
    else:
        w = weights.expand(*batch, nu).reshape(B, nu).T  # (nu, B)
        pp, pm = plus, minus
        tp, tm = w[0] * plus, w[0] * minus
        for k in range(1, nu):
            pp, pm = pp * plus, pm * minus
            tp, tm = tp + w[k] * pp, tm + w[k] * pm
    out = G.analyze((tp + tm) * 0.5, (tp - tm) * 0.5, lmax_out, num_theta, num_phi, tables=tables)
    return out.reshape(*batch, T.num_coefficients(lmax_out))


class ManyBodyGaunt(nn.Module):
    """MACE-style many-body features ``sum_{nu=1..correlation} w[c, nu] (f_c)^nu`` via Gaunt powers.

    Every power is formed on one half grid (exact for degree ``correlation * L + lmax_out``):
    one synthesis, ``correlation - 1`` pointwise products, the weighted sum, and one projection.
    Learnable per-(channel, degree) weights on the input and output, per-(channel, nu) weights
    on the powers.

    Input ``(..., C, (lmax_in+1)**2)`` natural-parity features; output ``(..., C, (lmax_out+1)**2)``.
    """

    def __init__(self, lmax_in: int, lmax_out: int, channels: int, correlation: int = 3):
        super().__init__()
        self.lmax_in = check_nonnegative_int(lmax_in, "lmax_in")
        self.lmax_out = check_nonnegative_int(lmax_out, "lmax_out")
        self.channels = check_positive_int(channels, "channels")
        self.correlation = check_positive_int(correlation, "correlation")
        self.weight_in = nn.Parameter(torch.ones(channels, lmax_in + 1))
        self.weight_nu = nn.Parameter(torch.ones(channels, correlation) / correlation)
        self.weight_out = nn.Parameter(torch.ones(channels, lmax_out + 1))
        self.register_buffer("degree_in", degree_index(lmax_in), persistent=False)
        self.register_buffer("degree_out", degree_index(lmax_out), persistent=False)
        self.tables = route_tables([*GT.power_keys(self.lmax_in, self.correlation, self.lmax_out),
                                    dense_power_key(self.lmax_in, self.correlation, self.lmax_out)])
        self.type_in = SphereCoefficients(self.lmax_in, channels)
        self.type_out = SphereCoefficients(self.lmax_out, channels)

    def forward(self, x: Tensor) -> Tensor:
        x = x.to(check_layout(x, "x", self.channels, self.lmax_in))
        a = x * self.weight_in[:, self.degree_in].to(x.dtype)
        out = power_sum(a, self.lmax_in, self.correlation, self.lmax_out, self.weight_nu.to(x.dtype), tables=self.tables)
        return out * self.weight_out[:, self.degree_out].to(x.dtype)

    def extra_repr(self) -> str:
        return (f"lmax_in={self.lmax_in}, lmax_out={self.lmax_out}, channels={self.channels}, "
                f"correlation={self.correlation}")
