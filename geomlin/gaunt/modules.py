"""Gaunt layers: channel-wise products, many-body powers, and the e3nn Irreps layout bridge.

Layout
    Layers work on ``(..., channels, (L+1)**2)``: one spherical function per
    channel, in e3nn's real SH basis.  :func:`irreps_to_sphere` /
    :func:`sphere_to_irreps` move between this layout and e3nn's flat layout
    ``"C x 0e + C x 1o + C x 2e + ..."``.

Parity
    A spherical function's degree-``l`` coefficients have parity ``(-1)^l``
    under inversion ("natural": ``0e, 1o, 2e, ...``).  The Gaunt product of two
    natural functions is natural, so every layer here is O(3)-equivariant on
    natural features.  Features of the other parity (``0o, 1e, 2o, ...``,
    "pseudo") are handled by *splitting into parity classes*:
    :func:`split_parity` returns the natural and pseudo parts as two sphere
    tensors, and :func:`gaunt_parity_product` multiplies such pairs with
    ``natural * natural + pseudo * pseudo -> natural`` and
    ``natural * pseudo + pseudo * natural -> pseudo``.  :func:`irreps_to_sphere`
    refuses pseudo irreps with an error that points there.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from geomlin.gaunt import grid as G
from geomlin.gaunt import tables as T
from geomlin.gaunt.product import _check_input, _check_lmax, gaunt_tensor_product

#: Parity classes of :func:`split_parity`.
NATURAL, PSEUDO = 1, -1


# ---------------------------------------------------------------- layout helpers
def _natural_parity(l: int) -> int:
    return 1 if l % 2 == 0 else -1


def _irreps(irreps):
    from e3nn import o3

    return o3.Irreps(irreps)


def sphere_irreps(lmax: int, channels: int, parity_class: int = NATURAL):
    """e3nn ``Irreps`` ``"C x 0e + C x 1o + ..."`` (or ``"C x 0o + C x 1e + ..."`` for ``PSEUDO``)."""
    from e3nn import o3

    return o3.Irreps([(channels, (l, parity_class * _natural_parity(l))) for l in range(lmax + 1)])


def _multiplicities(irreps, parity_class: int, lmax: int | None) -> tuple[int, int, list]:
    blocks, channels, top = [], None, -1
    offset = 0
    for mul, ir in irreps:
        size = mul * ir.dim
        if ir.p == parity_class * _natural_parity(ir.l):
            blocks.append((ir.l, mul, offset))
            channels = mul if channels is None else channels
            if mul != channels:
                raise ValueError(f"every degree needs the same multiplicity (the number of channels); {irreps} "
                                 f"has {channels} and {mul}")
            top = max(top, ir.l)
        offset += size
    return (channels or 0), (top if lmax is None else lmax), blocks


def irreps_to_sphere(x: Tensor, irreps, lmax: int | None = None) -> Tensor:
    """e3nn flat features ``(..., irreps.dim)`` -> ``(..., C, (lmax+1)**2)``.

    ``irreps`` must be natural (``C x 0e + C x 1o + C x 2e ...``, any subset of
    degrees, each with the same multiplicity ``C``); missing degrees are zero.
    Pseudo irreps raise ``ValueError`` (use :func:`split_parity`).
    """
    irreps = _irreps(irreps)
    if x.shape[-1] != irreps.dim:
        raise ValueError(f"x has last dimension {x.shape[-1]} but irreps {irreps} have dimension {irreps.dim}")
    bad = [str(ir) for _, ir in irreps if ir.p != _natural_parity(ir.l)]
    if bad:
        raise ValueError(f"irreps_to_sphere needs parity (-1)^l (0e, 1o, 2e, ...), got {', '.join(bad)} in "
                         f"{irreps}; split mixed parities with geomlin.gaunt.split_parity")
    return _gather_class(x, irreps, NATURAL, lmax)


def _gather_class(x: Tensor, irreps, parity_class: int, lmax: int | None) -> Tensor:
    channels, top, blocks = _multiplicities(irreps, parity_class, lmax)
    lmax = max(top, 0)
    out = x.new_zeros(*x.shape[:-1], max(channels, 1) if blocks else 0, T.num_coefficients(lmax))
    for l, mul, offset in blocks:
        if l > lmax:
            raise ValueError(f"irreps contain degree {l} above lmax={lmax}")
        block = x[..., offset:offset + mul * (2 * l + 1)].unflatten(-1, (mul, 2 * l + 1))
        out[..., l * l:(l + 1) ** 2] = block
    return out


def sphere_to_irreps(y: Tensor, parity_class: int = NATURAL) -> Tensor:
    """``(..., C, (L+1)**2)`` -> e3nn flat ``(..., C (L+1)**2)`` in :func:`sphere_irreps`\\ ``(L, C)`` order."""
    L = T.lmax_from_size(y.shape[-1], "y")
    blocks = [y[..., l * l:(l + 1) ** 2].flatten(-2) for l in range(L + 1)]
    return torch.cat(blocks, dim=-1)


def split_parity(x: Tensor, irreps, lmax: int | None = None) -> tuple[Tensor, Tensor]:
    """Mixed-parity e3nn features ``(..., irreps.dim)`` -> ``(natural, pseudo)``, each ``(..., C, (L+1)**2)``.

    Natural collects irreps with parity ``(-1)^l``, pseudo those with ``-(-1)^l``;
    a class absent from ``irreps`` comes back with ``C = 0`` channels.
    """
    irreps = _irreps(irreps)
    if x.shape[-1] != irreps.dim:
        raise ValueError(f"x has last dimension {x.shape[-1]} but irreps {irreps} have dimension {irreps.dim}")
    if lmax is None:
        lmax = irreps.lmax
    return _gather_class(x, irreps, NATURAL, lmax), _gather_class(x, irreps, PSEUDO, lmax)


def gaunt_parity_product(a: tuple[Tensor, Tensor], b: tuple[Tensor, Tensor], lmax_out: int | None = None,
                         method: str = "auto") -> tuple[Tensor, Tensor]:
    """Gaunt product of parity-split functions ``(natural, pseudo)``: returns ``(natural, pseudo)``.

    ``natural = a_n b_n + a_p b_p`` and ``pseudo = a_n b_p + a_p b_n``: O(3)-equivariant
    for every parity assignment.  All four tensors ``(..., C, (L+1)**2)`` broadcast.
    """
    nn_ = gaunt_tensor_product(a[0], b[0], lmax_out, method)
    pp = gaunt_tensor_product(a[1], b[1], lmax_out, method)
    np_ = gaunt_tensor_product(a[0], b[1], lmax_out, method)
    pn = gaunt_tensor_product(a[1], b[0], lmax_out, method)
    return nn_ + pp, np_ + pn


# ---------------------------------------------------------------- powers
def gaunt_power(x: Tensor, nu: int, lmax_out: int | None = None, method: str = "auto") -> Tensor:
    """Coefficients of ``f^nu`` for ``f = sum x_lm Y_lm``, exact up to ``lmax_out``.

    ``method="grid"`` (and ``"auto"``) evaluates ``f`` once on a grid exact for
    degree ``nu L + lmax_out`` and projects ``f^nu`` once; other methods use
    divide and conquer (``f^nu = f^a f^b``, ``a = nu // 2``) with the pairwise
    product, keeping every intermediate to the degree the final result needs.

    Parameters
    ----------
    x : Tensor ``(..., (L+1)**2)``, floating.
    nu : int >= 1.
    lmax_out : int, default ``nu * L``.

    Returns
    -------
    Tensor ``(..., (lmax_out+1)**2)``.
    """
    L = _check_input(x, "x")
    if isinstance(nu, bool) or not isinstance(nu, int) or nu < 1:
        raise ValueError(f"nu must be an int >= 1, got {nu!r}")
    lmax_out = nu * L if lmax_out is None else lmax_out
    _check_lmax(lmax_out, "lmax_out")
    if method in ("auto", "grid"):
        return _powers_on_grid(x, L, nu, lmax_out, None)
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


def _powers_on_grid(x: Tensor, L: int, nu: int, lmax_out: int, weights: Tensor | None) -> Tensor:
    """``sum_k weights[..., k] f^(k+1)`` (or ``f^nu`` when ``weights`` is None) by one synthesis and one projection.

    ``weights`` broadcasts against ``x.shape[:-1] + (nu,)``.
    """
    n_theta, n_phi = G.exact_grid_size(nu * L + lmax_out)
    batch = x.shape[:-1]
    flat = x.reshape(-1, x.shape[-1])
    B = flat.shape[0]
    f = G.to_grid(flat, L, n_theta, n_phi).view(n_phi, B, n_theta)
    if weights is None:
        total = f
        for _ in range(nu - 1):
            total = total * f
    else:
        w = weights.expand(*batch, nu).reshape(B, nu).T[:, None, :, None]  # (nu, 1, B, 1)
        power, total = f, w[0] * f
        for k in range(1, nu):
            power = power * f
            total = total + w[k] * power
    out = G.from_grid(total.reshape(n_phi, B * n_theta), lmax_out, n_theta, n_phi)
    return out.reshape(*batch, T.num_coefficients(lmax_out))


# ---------------------------------------------------------------- modules
def _degree_index(lmax: int) -> Tensor:
    return torch.repeat_interleave(torch.arange(lmax + 1), torch.arange(lmax + 1) * 2 + 1)


def _check_layout(x: Tensor, name: str, channels: int, lmax: int) -> None:
    if not isinstance(x, Tensor) or not x.is_floating_point():
        raise TypeError(f"{name} must be a floating tensor, got "
                        f"{x.dtype if isinstance(x, Tensor) else type(x).__name__}")
    if x.ndim < 2 or x.shape[-2:] != (channels, T.num_coefficients(lmax)):
        raise ValueError(f"{name} must have shape (..., {channels} channels, {T.num_coefficients(lmax)}) "
                         f"(lmax {lmax}), got {tuple(x.shape)}")


class GauntTensorProduct(nn.Module):
    """Channel-wise Gaunt product with learnable per-(channel, degree) weights.

    ``out[c] = w_out[c, l] * gaunt(w1[c, l1] x1[c], w2[c, l2] x2[c])`` (weights
    broadcast over the orders ``m`` of each degree), i.e. the e3nn "uuu"
    tensor product restricted to Gaunt paths, with the paths reweighted through
    the degree weights (Luo et al., ICLR 2024, sec. 3.3).

    Inputs ``x1 (..., C, (L1+1)**2)``, ``x2 (..., C, (L2+1)**2)`` (leading axes
    broadcast); output ``(..., C, (Lo+1)**2)``; float32/float64.
    """

    def __init__(self, lmax1: int, lmax2: int, lmax_out: int, channels: int, method: str = "auto"):
        super().__init__()
        for name, value in (("lmax1", lmax1), ("lmax2", lmax2), ("lmax_out", lmax_out)):
            _check_lmax(value, name)
        if not isinstance(channels, int) or channels < 1:
            raise ValueError(f"channels must be a positive int, got {channels!r}")
        self.lmax1, self.lmax2, self.lmax_out, self.channels, self.method = lmax1, lmax2, lmax_out, channels, method
        self.weight1 = nn.Parameter(torch.ones(channels, lmax1 + 1))
        self.weight2 = nn.Parameter(torch.ones(channels, lmax2 + 1))
        self.weight_out = nn.Parameter(torch.ones(channels, lmax_out + 1))
        for L in {lmax1, lmax2, lmax_out}:
            self.register_buffer(f"degree_index_{L}", _degree_index(L), persistent=False)

    def _expand(self, weight: Tensor, lmax: int) -> Tensor:
        return weight[:, getattr(self, f"degree_index_{lmax}")]

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        _check_layout(x1, "x1", self.channels, self.lmax1)
        _check_layout(x2, "x2", self.channels, self.lmax2)
        a = x1 * self._expand(self.weight1, self.lmax1).to(x1.dtype)
        b = x2 * self._expand(self.weight2, self.lmax2).to(x2.dtype)
        out = gaunt_tensor_product(a, b, self.lmax_out, self.method)
        return out * self._expand(self.weight_out, self.lmax_out).to(out.dtype)

    def extra_repr(self) -> str:
        return (f"lmax1={self.lmax1}, lmax2={self.lmax2}, lmax_out={self.lmax_out}, channels={self.channels}, "
                f"method={self.method!r}")


class ManyBodyGaunt(nn.Module):
    """MACE-style many-body features ``sum_{nu=1..correlation} w[c, nu] (f_c)^nu`` via Gaunt powers.

    Every power is formed on one sphere grid (exact for degree
    ``correlation * L + lmax_out``): one synthesis, ``correlation - 1`` pointwise
    products (the divide-and-conquer powers collapse to running products there),
    the weighted sum, and one projection.  Learnable per-(channel, degree)
    weights on the input and output, per-(channel, nu) weights on the powers.

    Input ``(..., C, (L+1)**2)``; output ``(..., C, (lmax_out+1)**2)``.
    """

    def __init__(self, lmax_in: int, lmax_out: int, channels: int, correlation: int = 3):
        super().__init__()
        _check_lmax(lmax_in, "lmax_in")
        _check_lmax(lmax_out, "lmax_out")
        if not isinstance(correlation, int) or correlation < 1:
            raise ValueError(f"correlation must be an int >= 1, got {correlation!r}")
        if not isinstance(channels, int) or channels < 1:
            raise ValueError(f"channels must be a positive int, got {channels!r}")
        self.lmax_in, self.lmax_out, self.channels, self.correlation = lmax_in, lmax_out, channels, correlation
        self.weight_in = nn.Parameter(torch.ones(channels, lmax_in + 1))
        self.weight_nu = nn.Parameter(torch.ones(channels, correlation) / correlation)
        self.weight_out = nn.Parameter(torch.ones(channels, lmax_out + 1))
        self.register_buffer("degree_in", _degree_index(lmax_in), persistent=False)
        self.register_buffer("degree_out", _degree_index(lmax_out), persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        _check_layout(x, "x", self.channels, self.lmax_in)
        a = x * self.weight_in[:, self.degree_in].to(x.dtype)
        out = _powers_on_grid(a, self.lmax_in, self.correlation, self.lmax_out, self.weight_nu.to(x.dtype))
        return out * self.weight_out[:, self.degree_out].to(x.dtype)

    def extra_repr(self) -> str:
        return (f"lmax_in={self.lmax_in}, lmax_out={self.lmax_out}, channels={self.channels}, "
                f"correlation={self.correlation}")
