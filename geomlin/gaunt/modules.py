"""Gaunt layers: channel-wise products, many-body powers, and the e3nn Irreps layout bridge.

**Layout**

Layers work on ``(..., channels, (L+1)**2)``: one spherical function per
channel, in e3nn's real SH basis ([`SphereCoefficients`][]).
[`irreps_to_sphere`][] / [`sphere_to_irreps`][] move between this layout
and e3nn's flat layout ``"C x 0e + C x 1o + C x 2e + ..."``.

**Parity**

A spherical function's degree-``l`` coefficients have parity ``(-1)^l`` under
inversion (``NATURAL``: ``0e, 1o, 2e, ...``).  The Gaunt product of
two natural functions is natural, so every layer here is O(3)-equivariant on
natural features.  Features of the other parity (``PSEUDO``:
``0o, 1e, 2o, ...``) are handled by *splitting into parity classes*:
[`split_parity`][] returns the natural and pseudo parts as two sphere tensors,
and [`gaunt_parity_product`][] multiplies such pairs with
``natural * natural + pseudo * pseudo -> natural`` and
``natural * pseudo + pseudo * natural -> pseudo``.  [`GauntTensorProduct`][]
built from e3nn ``Irreps`` does this for any parities.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from geomlin.gaunt import grid as G
from geomlin.gaunt import tables as T
from geomlin.gaunt.cache import RouteTables, device_tables, table_builder
from geomlin.gaunt.precision import compute_dtype, full_precision
from geomlin.gaunt.product import (
    METHODS,
    _check_coefficients,
    _common_dtype,
    gaunt_tensor_product,
    table_keys,
)
from geomlin.reps.types import NATURAL, PSEUDO, SphereCoefficients
from geomlin.validation import (
    check_choice,
    check_finite,
    check_nonnegative_int,
    check_positive_int,
    check_tensor,
)

__all__ = ["NATURAL", "PSEUDO", "GauntTensorProduct", "ManyBodyGaunt", "gaunt_parity_product", "gaunt_power",
           "irreps_to_sphere", "sphere_irreps", "sphere_to_irreps", "split_parity"]


# ---------------------------------------------------------------- layout helpers
def _natural_parity(l: int) -> int:
    return 1 if l % 2 == 0 else -1


def _irreps(irreps, name: str = "irreps"):
    from e3nn import o3

    if not isinstance(irreps, (o3.Irreps, o3.Irrep, str, list, tuple)):
        raise TypeError(f"{name} must be e3nn Irreps or a string such as '8x0e+8x1o', got {type(irreps).__name__}")
    try:
        irreps = o3.Irreps(irreps)
    except (ValueError, AssertionError, TypeError) as err:
        raise ValueError(f"{name} could not be parsed as e3nn Irreps: {irreps!r} ({err})") from err
    # zero multiplicities ("0x0e") occupy no entries of the flat layout: dropping them keeps it
    return o3.Irreps([(mul, ir) for mul, ir in irreps if mul > 0])


def _check_parity(parity, name: str = "parity") -> int:
    if parity not in (NATURAL, PSEUDO):
        raise ValueError(f"{name} must be NATURAL (1) or PSEUDO (-1), got {parity!r}")
    return parity


def sphere_irreps(lmax: int, channels: int, parity: int = NATURAL):
    """e3nn ``Irreps`` ``"C x 0e + C x 1o + ..."`` (or ``"C x 0o + C x 1e + ..."`` for ``PSEUDO``)."""
    from e3nn import o3

    lmax = check_nonnegative_int(lmax, "lmax")
    channels = check_positive_int(channels, "channels")
    parity = _check_parity(parity)
    return o3.Irreps([(channels, (l, parity * _natural_parity(l))) for l in range(lmax + 1)])


def _class_blocks(irreps, parity: int) -> tuple[int, int, list]:
    """``(channels, top degree, [(l, mul, offset)])`` of the irreps of one parity class."""
    blocks, channels, top = [], None, -1
    offset = 0
    for mul, ir in irreps:
        if ir.p == parity * _natural_parity(ir.l):
            if channels is not None and mul != channels:
                raise ValueError(f"every degree needs the same multiplicity (the number of channels); {irreps} "
                                 f"has {channels} and {mul}")
            channels = mul
            blocks.append((ir.l, mul, offset))
            top = max(top, ir.l)
        offset += mul * ir.dim
    return (channels or 0), top, blocks


def _gather_class(x: Tensor, irreps, parity: int, lmax: int | None) -> Tensor:
    channels, top, blocks = _class_blocks(irreps, parity)
    lmax = max(top, 0) if lmax is None else lmax
    if top > lmax:
        raise ValueError(f"irreps {irreps} contain degree {top} above lmax={lmax}")
    out = x.new_zeros(*x.shape[:-1], channels, T.num_coefficients(lmax))
    for l, mul, offset in blocks:
        block = x[..., offset:offset + mul * (2 * l + 1)].unflatten(-1, (mul, 2 * l + 1))
        out[..., l * l:(l + 1) ** 2] = block
    return out


def _check_flat(x, dim: int, irreps: str, name: str = "x", finite: bool = False) -> None:
    """``x (..., dim)``: e3nn features of ``irreps`` (its text; a module passes its own, made at
    construction, since ``torch.compile`` cannot guard on e3nn's ``Irreps``)."""
    check_tensor(x, name, min_ndim=1, finite=finite, what=f"e3nn features of {irreps}")
    if x.shape[-1] != dim:
        raise ValueError(f"{name} must have last dimension {dim} (irreps {irreps}), got shape {tuple(x.shape)}")


def irreps_to_sphere(x: Tensor, irreps, lmax: int | None = None) -> Tensor:
    """e3nn flat features ``(..., irreps.dim)`` -> ``(..., C, (lmax+1)**2)``.

    ``irreps`` must be natural (``C x 0e + C x 1o + C x 2e ...``, any subset of
    degrees, each with the same multiplicity ``C``); missing degrees are zero.
    Pseudo irreps raise ``ValueError`` (use [`split_parity`][]).
    """
    irreps = _irreps(irreps)
    _check_flat(x, irreps.dim, str(irreps))
    if lmax is not None:
        check_nonnegative_int(lmax, "lmax")
    bad = [str(ir) for _, ir in irreps if ir.p != _natural_parity(ir.l)]
    if bad:
        raise ValueError(f"irreps_to_sphere needs parity (-1)^l (0e, 1o, 2e, ...), got {', '.join(bad)} in "
                         f"{irreps}; split mixed parities with geomlin.gaunt.split_parity")
    return _gather_class(x, irreps, NATURAL, lmax)


def sphere_to_irreps(y: Tensor, parity: int = NATURAL) -> Tensor:
    """``(..., C, (L+1)**2)`` -> e3nn flat ``(..., C (L+1)**2)`` in [`sphere_irreps`][]\\ ``(L, C, parity)`` order.

    The layout does not depend on ``parity`` (it names the irreps the result is in).
    """
    check_tensor(y, "y", min_ndim=2, what="sphere coefficients (..., C, (L+1)**2)")
    _check_parity(parity)
    L = T.lmax_from_size(y.shape[-1], "y")
    blocks = [y[..., l * l:(l + 1) ** 2].flatten(-2) for l in range(L + 1)]
    return torch.cat(blocks, dim=-1)


def split_parity(x: Tensor, irreps, lmax: int | None = None) -> tuple[Tensor, Tensor]:
    """Mixed-parity e3nn features ``(..., irreps.dim)`` -> ``(natural, pseudo)``, each ``(..., C, (L+1)**2)``.

    Natural collects irreps with parity ``(-1)^l``, pseudo those with ``-(-1)^l``;
    a class absent from ``irreps`` comes back with ``C = 0`` channels.
    """
    irreps = _irreps(irreps)
    _check_flat(x, irreps.dim, str(irreps))
    lmax = irreps.lmax if lmax is None else check_nonnegative_int(lmax, "lmax")
    return _gather_class(x, irreps, NATURAL, lmax), _gather_class(x, irreps, PSEUDO, lmax)


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


# ---------------------------------------------------------------- powers
def gaunt_power(x: Tensor, nu: int, lmax_out: int | None = None, method: str = "auto") -> Tensor:
    """Coefficients of ``f^nu`` for ``f = sum x_lm Y_lm``, exact up to ``lmax_out``.

    ``method="grid"`` (and ``"auto"``) evaluates ``f`` once on a half grid exact for
    degree ``nu L + lmax_out`` and projects ``f^nu`` once; other methods use
    divide and conquer (``f^nu = f^a f^b``, ``a = nu // 2``) with the pairwise
    product, keeping every intermediate to the degree the final result needs.

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
    L = _check_coefficients(x, "x")
    x = x.to(compute_dtype(x, "x"))
    nu = check_positive_int(nu, "nu")
    lmax_out = nu * L if lmax_out is None else check_nonnegative_int(lmax_out, "lmax_out")
    check_choice(method, "method", METHODS)
    if method in ("auto", "grid"):
        return power_sum(x, L, nu, lmax_out, None)
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


def power_sum(x: Tensor, L: int, nu: int, lmax_out: int, weights: Tensor | None) -> Tensor:
    """``sum_k weights[..., k] f^(k+1)`` (or ``f^nu`` when ``weights`` is None) on one half grid.

    ``x (..., (L+1)**2)`` float32/float64 (computed in its dtype, autocast off); ``weights``
    broadcasts against ``x.shape[:-1] + (nu,)``.  One
    synthesis, ``nu - 1`` pointwise products at ``phi`` and ``-phi``, one projection; exact
    (the grid integrates degree ``nu L + lmax_out``); differentiable (exact adjoints).
    """
    batch = x.shape[:-1]
    flat = x.reshape(-1, x.shape[-1])
    B = flat.shape[0]
    if B == 0:
        return x.new_zeros(*batch, T.num_coefficients(lmax_out))
    with full_precision(x):
        if torch.compiler.is_compiling():
            return _power_dense(flat, weights, batch, L, nu, lmax_out)
        num_theta, num_phi = G.exact_grid_size(nu * L + lmax_out)
        return _power_on_grid(flat, weights, batch, L, nu, lmax_out, num_theta, num_phi)


@table_builder("dense.power")
def _dense_power_tables(L: int, nu: int, lmax_out: int) -> tuple[Tensor, Tensor]:
    """``Y^T (D, P)`` of degree ``L`` and weighted ``W (P, Do)`` on the smallest sphere grid exact for
    degree ``nu L + lmax_out`` (``P`` points), float64."""
    Y, w = T.cached_sh_on_grid(max(L, lmax_out), nu * L + lmax_out)
    return (Y[:, : T.num_coefficients(L)].T.contiguous(), (Y[:, : T.num_coefficients(lmax_out)] * w[:, None]).contiguous())


def dense_power_key(L: int, nu: int, lmax_out: int) -> tuple:
    """Cache key ([`geomlin.gaunt.cache`][]) of the tables [`power_sum`][] reads inside compiled graphs."""
    return ("dense.power", L, nu, lmax_out)


def _power_dense(flat: Tensor, weights: Tensor | None, batch, L: int, nu: int, lmax_out: int) -> Tensor:
    """[`power_sum`][] as plain GEMMs on the full sphere grid (what compiled graphs run; autograd
    differentiates it): values ``f = x Y^T``, the (weighted) powers pointwise, projection ``@ W``."""
    Y, W = device_tables(dense_power_key(L, nu, lmax_out), flat.device, flat.dtype)
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
                   num_phi: int) -> Tensor:
    B = flat.shape[0]
    E, O = G.synthesize(flat, L, num_theta, num_phi)  # (K, nt, B)
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
    out = G.analyze((tp + tm) * 0.5, (tp - tm) * 0.5, lmax_out, num_theta, num_phi)
    return out.reshape(*batch, T.num_coefficients(lmax_out))


# ---------------------------------------------------------------- modules
def _degree_index(lmax: int) -> Tensor:
    """Degree ``l`` of each coefficient ``0..(lmax+1)**2 - 1`` (e3nn order)."""
    return torch.repeat_interleave(torch.arange(lmax + 1), torch.arange(lmax + 1) * 2 + 1)


def _check_layout(x, name: str, channels: int, lmax: int, shared_ok: bool = False) -> torch.dtype:
    """Check ``x (..., channels, (lmax+1)**2)``; returns the dtype it is computed in ([`compute_dtype`][])."""
    D = T.num_coefficients(lmax)
    check_tensor(x, name, min_ndim=2, dtype="any", what=f"{channels} channels of SH coefficients up to degree {lmax}")
    dtype = compute_dtype(x, name)
    check_finite(x, name)
    if x.shape[-1] != D or x.shape[-2] not in ((channels, 1) if shared_ok else (channels,)):
        want = f"(..., {channels}{' or 1' if shared_ok else ''}, {D})"
        raise ValueError(f"{name} must have shape {want} ({channels} channels, lmax {lmax}), got {tuple(x.shape)}")
    return dtype


class SphereGauntProduct(nn.Module):
    """Channel-wise Gaunt product of sphere coefficients with learnable per-(channel, degree) weights.

    ``out[c] = w_out[c, l] * gaunt(w1[c, l1] x1[c], w2[c, l2] x2[c])`` (weights broadcast over the
    orders ``m`` of each degree): the e3nn "uuu" tensor product restricted to Gaunt paths,
    reweighted through the degree weights (Luo et al., ICLR 2024, sec. 3.3). For e3nn's flat
    irreps layout use [`GauntTensorProduct`][].

    Parameters
    ----------
    lmax1, lmax2, lmax_out : int
        Degrees of the two inputs and of the output.
    channels : int
        Channels ``C``, multiplied channel by channel.
    method : str
        One of [`METHODS`][geomlin.gaunt.METHODS].

    Shapes
    ------
    ``forward(x1 (..., C, (lmax1+1)**2), x2 (..., C or 1, (lmax2+1)**2)) -> (..., C, (lmax_out+1)**2)``;
    a single channel of ``x2`` is shared by all (and transformed once), leading axes broadcast;
    float32/float64.
    """

    def __init__(self, lmax1: int, lmax2: int, lmax_out: int, channels: int, method: str = "auto"):
        super().__init__()
        self.lmax1 = check_nonnegative_int(lmax1, "lmax1")
        self.lmax2 = check_nonnegative_int(lmax2, "lmax2")
        self.lmax_out = check_nonnegative_int(lmax_out, "lmax_out")
        self.channels = check_positive_int(channels, "channels")
        self.method = check_choice(method, "method", METHODS)
        self.weight1 = nn.Parameter(torch.ones(channels, lmax1 + 1))
        self.weight2 = nn.Parameter(torch.ones(channels, lmax2 + 1))
        self.weight_out = nn.Parameter(torch.ones(channels, lmax_out + 1))
        for L in {self.lmax1, self.lmax2, self.lmax_out}:
            self.register_buffer(f"degree_index_{L}", _degree_index(L), persistent=False)
        #: the tables of every route the product may take, moved with the module (see geomlin.gaunt.cache)
        self.tables = RouteTables(table_keys(self.method, self.lmax1, self.lmax2, self.lmax_out))
        self.type_in = (SphereCoefficients(self.lmax1, channels), SphereCoefficients(self.lmax2, channels))
        self.type_out = SphereCoefficients(self.lmax_out, channels)

    def _expand(self, weight: Tensor, lmax: int) -> Tensor:
        return weight[:, getattr(self, f"degree_index_{lmax}")]

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        _check_layout(x1, "x1", self.channels, self.lmax1)
        _check_layout(x2, "x2", self.channels, self.lmax2, shared_ok=True)
        dtype = _common_dtype(x1, x2)
        x1, x2 = x1.to(dtype), x2.to(dtype)
        self.tables.prime(x1.device, dtype)
        a = x1 * self._expand(self.weight1, self.lmax1).to(x1.dtype)
        b = x2 * self._expand(self.weight2, self.lmax2).to(x2.dtype)  # per-channel weights: no longer shared
        out = gaunt_tensor_product(a, b, self.lmax_out, self.method)
        return out * self._expand(self.weight_out, self.lmax_out).to(out.dtype)

    def extra_repr(self) -> str:
        return (f"lmax1={self.lmax1}, lmax2={self.lmax2}, lmax_out={self.lmax_out}, channels={self.channels}, "
                f"method={self.method!r}")


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
        self.register_buffer("degree_in", _degree_index(lmax_in), persistent=False)
        self.register_buffer("degree_out", _degree_index(lmax_out), persistent=False)
        self.tables = RouteTables([*G.power_keys(self.lmax_in, self.correlation, self.lmax_out),
                                   dense_power_key(self.lmax_in, self.correlation, self.lmax_out)])
        self.type_in = SphereCoefficients(self.lmax_in, channels)
        self.type_out = SphereCoefficients(self.lmax_out, channels)

    def forward(self, x: Tensor) -> Tensor:
        x = x.to(_check_layout(x, "x", self.channels, self.lmax_in))
        self.tables.prime(x.device, x.dtype)
        a = x * self.weight_in[:, self.degree_in].to(x.dtype)
        out = power_sum(a, self.lmax_in, self.correlation, self.lmax_out, self.weight_nu.to(x.dtype))
        return out * self.weight_out[:, self.degree_out].to(x.dtype)

    def extra_repr(self) -> str:
        return (f"lmax_in={self.lmax_in}, lmax_out={self.lmax_out}, channels={self.channels}, "
                f"correlation={self.correlation}")


# ---------------------------------------------------------------- e3nn drop-in
def _blocks(irreps) -> tuple[tuple[int, int, int, int, int], ...]:
    """``(l, parity class, mul, start, stop)`` of every irrep block of ``irreps`` in its flat layout."""
    out, offset = [], 0
    for mul, ir in irreps:
        cls = NATURAL if ir.p == _natural_parity(ir.l) else PSEUDO
        out.append((ir.l, cls, mul, offset, offset + mul * ir.dim))
        offset += mul * ir.dim
    return tuple(out)


def _class_layout(irreps, parity: int) -> list[tuple[int, int, int]]:
    """``[(l, mul, offset)]`` of every irrep of ``irreps`` in one parity class (repeats allowed)."""
    out, offset = [], 0
    for mul, ir in irreps:
        if ir.p == parity * _natural_parity(ir.l):
            out.append((ir.l, mul, offset))
        offset += mul * ir.dim
    return out


class GauntTensorProduct(nn.Module):
    """Gaunt tensor product of e3nn irreps features: a drop-in for ``o3.FullyConnectedTensorProduct``
    / ``o3.TensorProduct`` (``GauntTensorProduct(irreps_in1, irreps_in2, irreps_out)``); every spec
    ``o3.Irreps(...)`` accepts (strings, ``o3.Irreps``, lists of ``(mul, (l, p))``, zero
    multiplicities, empty irreps, whose features have size 0 and give zeros).

    ``forward(x1 (..., irreps_in1.dim), x2 (..., irreps_in2.dim), weight=None) -> (..., irreps_out.dim)``
    in e3nn's flat layout, any parities and multiplicities:

    1. each input is split into its parity classes (``NATURAL``
       ``0e, 1o, 2e``, ``PSEUDO`` ``0o, 1e, 2o``) and every irrep block
       ``mul x l`` is mixed linearly into ``channels`` spherical functions per degree (e3nn's
       ``o3.Linear`` restricted to one degree). An input whose irreps all have multiplicity 1
       and distinct degrees, e.g. spherical harmonics ``1x0e+1x1o+1x2e``, is used as it is: one
       function shared by every channel, transformed once;
    2. per class pair the channel-wise Gaunt product, with per-(channel, degree) weights on
       ``x1`` and on the output (``natural = n n + p p``, ``pseudo = n p + p n``);
    3. every output irrep block is a linear map of its degree and class.

    ``shared_weights=False`` takes the per-(channel, degree) weights from ``weight
    (..., weight_numel)`` per sample (e.g. a radial MLP in a convolution, as in e3nn);
    ``channels`` defaults to the largest multiplicity of ``irreps_in1`` and ``irreps_out``.
    Equivariant under O(3) (reflections included) for every parity assignment.
    """

    def __init__(self, irreps_in1, irreps_in2, irreps_out, channels: int | None = None,
                 shared_weights: bool = True, internal_weights: bool | None = None, method: str = "auto"):
        super().__init__()
        from geomlin.reps.irreps import IrrepsRep

        if isinstance(irreps_in1, int) and not isinstance(irreps_in1, bool):
            raise TypeError(f"irreps_in1 must be e3nn Irreps, got the int {irreps_in1}: for sphere coefficients "
                            "of given degrees use SphereGauntProduct(lmax1, lmax2, lmax_out, channels)")

        self.irreps_in1 = _irreps(irreps_in1, "irreps_in1")
        self.irreps_in2 = _irreps(irreps_in2, "irreps_in2")
        self.irreps_out = _irreps(irreps_out, "irreps_out")
        muls = [mul for mul, _ in self.irreps_in1] + [mul for mul, _ in self.irreps_out]
        self.channels = check_positive_int(max(muls, default=0) or 1 if channels is None else channels, "channels")
        self.method = check_choice(method, "method", METHODS)
        if not isinstance(shared_weights, bool):
            raise TypeError(f"shared_weights must be a bool, got {shared_weights!r}")
        internal = shared_weights if internal_weights is None else internal_weights
        if internal and not shared_weights:
            raise ValueError("internal_weights=True needs shared_weights=True (as in e3nn)")
        self.shared_weights, self.internal_weights = shared_weights, bool(internal)
        self.lmax1, self.lmax2, self.lmax_out = (max((ir.l for _, ir in irreps), default=0) for irreps in
                                                 (self.irreps_in1, self.irreps_in2, self.irreps_out))
        C = self.channels
        self.classes1 = [p for p in (NATURAL, PSEUDO) if _class_layout(self.irreps_in1, p)]
        self.classes2 = [p for p in (NATURAL, PSEUDO) if _class_layout(self.irreps_in2, p)]
        degrees2 = [ir.l for _, ir in self.irreps_in2]
        self.shared_in2 = all(mul == 1 for mul, _ in self.irreps_in2) and len(set(degrees2)) == len(degrees2)
        self.mix1 = nn.ParameterList(nn.Parameter(torch.randn(mul, C) / math.sqrt(mul))
                                     for mul, _ in self.irreps_in1)
        self.mix2 = nn.ParameterList(() if self.shared_in2 else (nn.Parameter(torch.randn(mul, C) / math.sqrt(mul))
                                                                 for mul, _ in self.irreps_in2))
        self.mix_out = nn.ParameterList(nn.Parameter(torch.randn(C, mul) / math.sqrt(C)) for mul, _ in self.irreps_out)
        self._layout1 = _blocks(self.irreps_in1)
        self._layout2 = _blocks(self.irreps_in2)
        self._layout_out = _blocks(self.irreps_out)
        self._flat_in = tuple((irreps.dim, str(irreps)) for irreps in (self.irreps_in1, self.irreps_in2))
        #: Numbers of per-sample weights: per (channel, degree) of x1, then per (channel, degree) of the output.
        self.weight_numel = C * (self.lmax1 + 1) + C * (self.lmax_out + 1)
        if self.internal_weights:
            self.weight = nn.Parameter(torch.ones(self.weight_numel))
        else:
            self.register_parameter("weight", None)
        for L in {self.lmax1, self.lmax_out}:
            self.register_buffer(f"degree_index_{L}", _degree_index(L), persistent=False)
        self.tables = RouteTables(table_keys(self.method, self.lmax1, self.lmax2, self.lmax_out))
        self.type_in = (IrrepsRep(self.irreps_in1), IrrepsRep(self.irreps_in2))
        self.type_out = IrrepsRep(self.irreps_out)

    # -- layout maps
    def _to_sphere(self, x: Tensor, layout, mixes, parity: int, lmax: int) -> Tensor:
        """Flat block(s) of one parity class -> ``(..., C, (lmax+1)**2)`` (mixed channels)."""
        degrees: list = [None] * (lmax + 1)
        for (l, cls, mul, start, stop), mix in zip(layout, mixes):
            if cls == parity:
                block = torch.einsum("...ud,uc->...cd", x[..., start:stop].unflatten(-1, (mul, 2 * l + 1)),
                                     mix.to(x.dtype))
                degrees[l] = block if degrees[l] is None else degrees[l] + block
        return self._concat(degrees, x, self.channels)

    def _shared_sphere(self, x: Tensor, parity: int) -> Tensor:
        """A multiplicity-1 input of one class -> ``(..., 1, (L2+1)**2)``, unmixed."""
        degrees: list = [None] * (self.lmax2 + 1)
        for l, cls, _, start, stop in self._layout2:
            if cls == parity:
                degrees[l] = x[..., None, start:stop]
        return self._concat(degrees, x, 1)

    @staticmethod
    def _concat(degrees: list, like: Tensor, channels: int) -> Tensor:
        """Per-degree blocks ``(..., channels, 2l+1)`` (``None``: zero) -> ``(..., channels, (L+1)**2)``."""
        batch = torch.broadcast_shapes(*(d.shape[:-2] for d in degrees if d is not None))
        return torch.cat([like.new_zeros(*batch, channels, 2 * l + 1) if d is None else d.expand(*batch, channels, 2 * l + 1)
                          for l, d in enumerate(degrees)], dim=-1)

    def forward(self, x1: Tensor, x2: Tensor, weight: Tensor | None = None) -> Tensor:
        for name, x, (dim, text) in zip(("x1", "x2"), (x1, x2), self._flat_in):
            _check_flat(x, dim, text, name, finite=True)
        dtype = _common_dtype(x1, x2)
        x1, x2 = x1.to(dtype), x2.to(dtype)
        self.tables.prime(x1.device, dtype)
        C = self.channels
        if weight is None:
            if self.weight is None:
                raise ValueError(f"this GauntTensorProduct has shared_weights={self.shared_weights}, "
                                 f"internal_weights=False: pass weight of shape (..., {self.weight_numel})")
            weight = self.weight
        else:
            check_tensor(weight, "weight", min_ndim=1, finite=True,
                         what=f"per-sample weights (..., {self.weight_numel})")
            if weight.shape[-1] != self.weight_numel:
                raise ValueError(f"weight must have last dimension weight_numel = {self.weight_numel}, "
                                 f"got shape {tuple(weight.shape)}")
        weight = weight.to(x1.dtype)
        n1 = C * (self.lmax1 + 1)
        w1 = weight[..., :n1].unflatten(-1, (C, self.lmax1 + 1))[..., self._index(self.lmax1)]
        w_out = weight[..., n1:].unflatten(-1, (C, self.lmax_out + 1))[..., self._index(self.lmax_out)]
        sph1 = {p: self._to_sphere(x1, self._layout1, self.mix1, p, self.lmax1) * w1 for p in self.classes1}
        if self.shared_in2:
            sph2 = {p: self._shared_sphere(x2, p) for p in self.classes2}
        else:
            sph2 = {p: self._to_sphere(x2, self._layout2, self.mix2, p, self.lmax2) for p in self.classes2}
        products: dict = {}
        for p1, a in sph1.items():
            for p2, b in sph2.items():
                term = gaunt_tensor_product(a, b, self.lmax_out, self.method)
                products[p1 * p2] = term if p1 * p2 not in products else products[p1 * p2] + term
        batch = torch.broadcast_shapes(x1.shape[:-1], x2.shape[:-1], weight.shape[:-1])
        sizes = [2 * l + 1 for l in range(self.lmax_out + 1)]
        by_degree = {cls: torch.split(value * w_out, sizes, dim=-1) for cls, value in products.items()}
        pieces = []
        for (l, cls, mul, _, _), mix in zip(self._layout_out, self.mix_out):
            if cls not in by_degree:
                pieces.append(x1.new_zeros(*batch, mul * (2 * l + 1)))
                continue
            block = torch.einsum("...cd,cu->...ud", by_degree[cls][l], mix.to(x1.dtype))
            pieces.append(block.expand(*batch, mul, 2 * l + 1).flatten(-2))
        return torch.cat(pieces, dim=-1) if pieces else x1.new_zeros(*batch, 0)

    def _index(self, lmax: int) -> Tensor:
        return getattr(self, f"degree_index_{lmax}")

    def example_inputs(self, generator=None, dtype=torch.float64):
        """Random features of both irreps (and per-sample weights when ``shared_weights=False``)."""
        batch = 4
        x1 = torch.randn(batch, self.irreps_in1.dim, generator=generator, dtype=dtype)
        x2 = torch.randn(batch, self.irreps_in2.dim, generator=generator, dtype=dtype)
        if self.weight is None:
            return (x1, x2), {"weight": torch.randn(batch, self.weight_numel, generator=generator, dtype=dtype)}
        return (x1, x2), {}

    def extra_repr(self) -> str:
        return (f"{self.irreps_in1} x {self.irreps_in2} -> {self.irreps_out}, channels={self.channels}, "
                f"shared_weights={self.shared_weights}, method={self.method!r}")

