"""The e3nn Irreps layout and the sphere layout of Gaunt layers, and parity classes.

**Layout**

Layers work on ``(..., channels, (L+1)**2)``: one spherical function per
channel, in e3nn's real SH basis ([`SphereCoefficients`][geomlin.reps.types.SphereCoefficients]).
[`irreps_to_sphere`][] / [`sphere_to_irreps`][] move between this layout
and e3nn's flat layout ``"C x 0e + C x 1o + C x 2e + ..."``.

**Parity**

A spherical function's degree-``l`` coefficients have parity ``(-1)^l`` under
inversion (``NATURAL``: ``0e, 1o, 2e, ...``).  The Gaunt product of
two natural functions is natural, so every layer of [`geomlin.gaunt`][] is O(3)-equivariant on
natural features.  Features of the other parity (``PSEUDO``:
``0o, 1e, 2o, ...``) are handled by *splitting into parity classes*:
[`split_parity`][] returns the natural and pseudo parts as two sphere tensors,
and [`gaunt_parity_product`][geomlin.gaunt.product.gaunt_parity_product] multiplies such pairs with
``natural * natural + pseudo * pseudo -> natural`` and
``natural * pseudo + pseudo * natural -> pseudo``.  [`GauntTensorProduct`][]
built from e3nn ``Irreps`` does this for any parities.
"""

from __future__ import annotations

import torch
from torch import Tensor

from geomlin.gaunt import harmonics as T
from geomlin.precision import compute_dtype
from geomlin.reps.types import NATURAL, PSEUDO
from geomlin.validation import check_finite, check_nonnegative_int, check_positive_int, check_tensor

__all__ = ["NATURAL", "PSEUDO", "irreps_to_sphere", "sphere_irreps", "sphere_to_irreps", "split_parity"]


def _natural_parity(l: int) -> int:
    return 1 if l % 2 == 0 else -1


def as_irreps(irreps, name: str = "irreps", keep_empty: bool = False):
    """``o3.Irreps(irreps)`` with a one-line error naming ``name``; zero multiplicities dropped unless
    ``keep_empty`` (e3nn's instructions index every entry, empty ones included)."""
    from e3nn import o3

    if not isinstance(irreps, (o3.Irreps, o3.Irrep, str, list, tuple)):
        raise TypeError(f"{name} must be e3nn Irreps or a string such as '8x0e+8x1o', got {type(irreps).__name__}")
    try:
        irreps = o3.Irreps(irreps)
    except (ValueError, AssertionError, TypeError) as err:
        raise ValueError(f"{name} could not be parsed as e3nn Irreps: {irreps!r} ({err})") from err
    # zero multiplicities ("0x0e") occupy no entries of the flat layout: dropping them keeps it
    return irreps if keep_empty else o3.Irreps([(mul, ir) for mul, ir in irreps if mul > 0])


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


def check_flat(x, dim: int, irreps: str, name: str = "x", finite: bool = False) -> None:
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
    irreps = as_irreps(irreps)
    check_flat(x, irreps.dim, str(irreps))
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
    irreps = as_irreps(irreps)
    check_flat(x, irreps.dim, str(irreps))
    lmax = irreps.lmax if lmax is None else check_nonnegative_int(lmax, "lmax")
    return _gather_class(x, irreps, NATURAL, lmax), _gather_class(x, irreps, PSEUDO, lmax)


def degree_index(lmax: int) -> Tensor:
    """Degree ``l`` of each coefficient ``0..(lmax+1)**2 - 1`` (e3nn order)."""
    return torch.repeat_interleave(torch.arange(lmax + 1), torch.arange(lmax + 1) * 2 + 1)


def check_layout(x, name: str, channels: int, lmax: int, shared_ok: bool = False) -> torch.dtype:
    """Check ``x (..., channels, (lmax+1)**2)``; returns the dtype it is computed in ([`compute_dtype`][])."""
    D = T.num_coefficients(lmax)
    check_tensor(x, name, min_ndim=2, dtype="any", what=f"{channels} channels of SH coefficients up to degree {lmax}")
    dtype = compute_dtype(x, name)
    check_finite(x, name)
    if x.shape[-1] != D or x.shape[-2] not in ((channels, 1) if shared_ok else (channels,)):
        want = f"(..., {channels}{' or 1' if shared_ok else ''}, {D})"
        raise ValueError(f"{name} must have shape {want} ({channels} channels, lmax {lmax}), got {tuple(x.shape)}")
    return dtype


def irreps_blocks(irreps) -> tuple[tuple[int, int, int, int, int], ...]:
    """``(l, parity class, mul, start, stop)`` of every irrep block of ``irreps`` in its flat layout."""
    out, offset = [], 0
    for mul, ir in irreps:
        cls = NATURAL if ir.p == _natural_parity(ir.l) else PSEUDO
        out.append((ir.l, cls, mul, offset, offset + mul * ir.dim))
        offset += mul * ir.dim
    return tuple(out)


def class_layout(irreps, parity: int) -> list[tuple[int, int, int]]:
    """``[(l, mul, offset)]`` of every irrep of ``irreps`` in one parity class (repeats allowed)."""
    out, offset = [], 0
    for mul, ir in irreps:
        if ir.p == parity * _natural_parity(ir.l):
            out.append((ir.l, mul, offset))
        offset += mul * ir.dim
    return out
