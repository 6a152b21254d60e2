"""GATr primitives: pure, Pin(3,0,1)-equivariant functions on G(3,0,1) multivectors ``(..., 16)``.

Brehmer, de Haan, Behrends, Cohen, "Geometric Algebra Transformer", NeurIPS 2023 (GATr), and
its reference implementation (``gatr.primitives``, v1.4), whose formulas these follow:

* equivariant linear maps (Prop. 2: spanned by the 5 grade projections and the 4 maps
  ``x -> e0 <x>_k``, ``k = 0..3``): [`equi_linear`][];
* geometric product, outer product and the equivariant join ``<ref>_{e123} (x v y)`` (eq. 4 with
  the reference's ``e123`` reference component): [`geometric_product`][], [`outer_product`][],
  [`equivariant_join`][];
* invariant inner product on the non-degenerate components: [`inner_product`][];
* equivariant layer norm (eq. 5), scalar-gated GELU (sec. 3.2), grade dropout;
* attention on inner-product and distance-aware features (sec. 3.3, the reference's
  ``geometric_attention``) in one fused ``scaled_dot_product_attention`` per set group:
  [`geometric_attention`][] (see [`geomlin.gatr.attention`][] for the set layouts).

Every function takes plain tensors, validates nothing inside hot loops and states its shapes.
``method="dense"`` selects the Cayley-table einsum path (the reference-style implementation the
tests compare against).
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F
from torch import Tensor

from geomlin.algebra import pga
from geomlin.algebra.clifford import ConstantTables, table_on
from geomlin.gatr.attention import SetLayout, attend, attention_mask, set_layout
from geomlin.validation import (
    check_batch_vector,
    check_choice,
    check_float,
    check_mask,
    check_positive_int,
    check_tensor,
)

#: Number of Pin(3,0,1)-equivariant linear maps of G(3,0,1) (5 grade projections + 4 e0 maps).
NUM_LINEAR_BASIS = 9
METHODS = ("auto", "fast", "dense")
#: Components of the attention inner product: the e0-free blades except ``e123``, which enters
#: through the distance features instead (the reference's ``_INNER_PRODUCT_WO_TRI_IDX``).
ATTENTION_IP_COMPONENTS = (pga.SCALAR, pga.E1, pga.E2, pga.E3, pga.E12, pga.E13, pga.E23)
#: Distance-aware features per multivector channel ([`distance_features`][]).
NUM_DISTANCE_FEATURES = 5
#: Default ``eps`` of the normaliser ``w / (w^2 + eps)`` of the distance features (reference value).
DISTANCE_EPS = 1e-3
#: Default lower clamp of the mean squared norm in [`equi_layer_norm`][] (reference value).
LAYER_NORM_EPS = 0.01
#: The SDPA head width is padded to a multiple of this (fused kernels vectorise over it).
HEAD_DIM_MULTIPLE = 8


def _check_method(method: str) -> str:
    return check_choice(method, "method", METHODS)


def _mv(x, name: str, min_ndim: int = 1) -> Tensor:
    """A floating ``(..., 16)`` tensor with at least ``min_ndim`` dimensions (boundary check)."""
    pga.check_mv(x, name)
    if x.ndim < min_ndim:
        raise ValueError(f"{name} must have at least {min_ndim} dimensions, got shape {tuple(x.shape)}")
    return x


# ---------------------------------------------------------------------- linear maps
@functools.cache
def _linear_basis() -> Tensor:
    """``(9, 16, 16)`` float64 basis ``B[b, k_out, l_in]`` of the equivariant linear maps."""
    basis = torch.zeros(NUM_LINEAR_BASIS, pga.DIM, pga.DIM, dtype=torch.float64)
    for g, sl in enumerate(pga.GRADE_SLICES):
        idx = torch.arange(pga.DIM)[sl]
        basis[g, idx, idx] = 1.0
    e0 = torch.zeros(pga.DIM, dtype=torch.float64)
    e0[pga.E0] = 1.0
    for g in range(4):
        proj = basis[g]  # grade-g projection
        # column l of e0 * <e_l>_g, as a (16 out, 16 in) matrix
        left = pga.PGA.geometric_product(e0.expand(pga.DIM, pga.DIM), proj.T.contiguous(), "dense")
        basis[5 + g] = left.T
    basis.requires_grad_(False)
    return basis


def linear_basis(dtype: torch.dtype = torch.float64, device=None) -> Tensor:
    """The 9 equivariant linear maps as ``(9, 16, 16)`` matrices ``B[b, out, in]`` (a fresh copy).

    Order: grade projections 0..4, then ``x -> e0 <x>_k`` for ``k = 0..3``. Unlike the reference
    GATr's basis these are not normalised: the reference's map ``b`` is ``B[b] / |B[b]|_F``
    ([`reference_basis_norms`][]).
    """
    return _linear_basis().to(dtype=dtype, device=device, copy=True)


def reference_basis_norms(dtype: torch.dtype = torch.float64, device=None) -> Tensor:
    """``(9,)`` Frobenius norms of the basis maps: a reference GATr weight ``w_ref[..., b]`` equals
    ``w[..., b] * norms[b]`` for the same linear map (the reference normalises its basis)."""
    return _linear_basis().flatten(1).norm(dim=1).to(dtype=dtype, device=device)


@functools.cache
def _blocked_plan() -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Index plan of the blocked linear map, read off the basis.

    ``grade_of (16,)``: basis index of the grade projection that keeps component ``k``;
    ``source (8,)``, ``target (8,)``, ``e0_map (8,)``: the map ``x -> e0 <x>_g`` sends component
    ``source[j]`` (no ``e0``) to component ``target[j]`` (with ``e0``) through basis map
    ``e0_map[j]``, with coefficient ``+1`` in G(3,0,1) (``e0 e_l = +e_{0l}``; checked here).
    """
    basis = _linear_basis()
    grade_of = pga.PGA.grades.clone()
    source, target, which = [], [], []
    for b in range(5, NUM_LINEAR_BASIS):
        k, l = basis[b].nonzero(as_tuple=True)
        if not torch.all(basis[b, k, l] == 1.0):
            raise AssertionError("the e0 maps of G(3,0,1) are expected to have coefficient +1")
        source += l.tolist()
        target += k.tolist()
        which += [b] * len(k)
    return grade_of, torch.tensor(source), torch.tensor(target), torch.tensor(which)


def _linear_plan() -> tuple[Tensor, ...]:
    """``_blocked_plan`` and the e0-map targets followed by the scalar (where a scalar bias goes)."""
    grade_of, source, target, which = _blocked_plan()
    return grade_of, source, target, which, torch.cat([target, torch.tensor([pga.SCALAR])])


def _nondegenerate_mask() -> Tensor:
    """``(16,)`` float64: 1 on the e0-free components."""
    m = torch.zeros(pga.DIM, dtype=torch.float64)
    m[list(pga.NONDEGENERATE)] = 1.0
    return m


def _attention_indices() -> tuple[Tensor, Tensor, Tensor]:
    """Components read by the attention features: inner product (7 and 8 components), point position."""
    return (torch.tensor(ATTENTION_IP_COMPONENTS), torch.tensor(pga.NONDEGENERATE), torch.tensor(TRIVECTOR_POSITION))


def _grades() -> Tensor:
    return pga.PGA.grades.clone()


#: Builders of the tables of this module by key (float64 / long CPU tensors), see [`tables`][].
_BUILDERS = {"gatr:linear": _linear_plan, "gatr:basis": _linear_basis, "gatr:nondegenerate": _nondegenerate_mask,
             "gatr:grades": _grades, "gatr:attention": _attention_indices}


def _table_builders() -> dict:
    return _BUILDERS


def tables(*keys: str) -> ConstantTables:
    """The constant tables a GATr module's forward pass reads through ``tables=``, as buffers.

    ``keys``: ``"gatr:linear"`` (index plan of [`equi_linear`][]), ``"gatr:basis"``
    (``method="dense"``), ``"gatr:nondegenerate"`` ([`inner_product`][], [`equi_layer_norm`][]),
    ``"gatr:grades"`` ([`grade_dropout`][]), ``"gatr:attention"`` ([`attention_features`][]),
    or any key of [`geomlin.algebra.pga.tables`][]. Without ``tables=`` the
    functions read a per-(device, dtype) cache filled on the first call.
    """
    return ConstantTables(dict(build_table(key) for key in keys))


def build_table(key: str) -> tuple[str, Tensor | tuple[Tensor, ...]]:
    """``(key, float64 / long CPU table)`` of a [`tables`][] key."""
    builders = _table_builders()
    return (key, builders[key]()) if key in builders else pga.build_table(key)


def _const(key: str, device, dtype=None, index: int = 0, tables: ConstantTables | None = None) -> Tensor:
    return table_on(key, _table_builders()[key], device, dtype, index, tables)


def _plan_on(device, tables: ConstantTables | None = None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    return tuple(_const("gatr:linear", device, None, i, tables) for i in range(4))


def _targets_with_scalar_on(device, tables: ConstantTables | None = None) -> Tensor:
    return _const("gatr:linear", device, None, 4, tables)


def equi_linear(x: Tensor, weight: Tensor, method: str = "auto", scalar_bias: Tensor | None = None, *,
                tables: ConstantTables | None = None) -> Tensor:
    """Pin(3,0,1)-equivariant linear map ``(..., in_ch, 16) -> (..., out_ch, 16)``.

    ``out[..., o, k] = sum_{i, b} weight[o, i, b] * sum_l B[b, k, l] x[..., i, l]`` with the
    basis ``B`` of [`linear_basis`][] (GATr Prop. 2); ``weight (out_ch, in_ch, 9)``.
    ``scalar_bias`` (``(out_ch,)`` or broadcastable to ``(..., out_ch)``) is added to the scalar
    component.

    ``method="fast"`` (``auto``) works component-major: one batched matmul applies each
    component's grade weight (``16 in_ch out_ch`` multiply-adds per item), a second one the
    ``e0`` maps on the 8 components that have one (``8 in_ch out_ch``), against ``256 in_ch
    out_ch`` for a dense ``(in_ch*16, out_ch*16)`` matrix; no in-place writes, so the backward
    pass copies nothing extra. ``method="dense"`` is the reference einsum with the ``(9, 16, 16)``
    basis.

    Parameters
    ----------
    x : Tensor of shape (..., in_ch, 16)
        multivector channels, floating.
    weight : Tensor of shape (out_ch, in_ch, 9)
        coefficients of the basis maps.
    method : str
        ``"auto"`` / ``"fast"`` or ``"dense"`` (above).
    scalar_bias : Tensor of shape (out_ch,), optional
        added to the scalar component (or broadcastable to ``(..., out_ch)``).
    tables : ConstantTables, optional
        a module's [`tables`][] (``"gatr:linear"`` / ``"gatr:basis"``); ``None`` reads a
        per-device cache.

    Returns
    -------
    Tensor of shape (..., out_ch, 16)
        in ``x``'s dtype and device.
    """
    method = _check_method(method)
    _mv(x, "x", 2)
    check_tensor(weight, "weight", shape=(None, x.shape[-2], NUM_LINEAR_BASIS),
                 what=f"(out_channels, in_channels={x.shape[-2]}, {NUM_LINEAR_BASIS})")
    if scalar_bias is not None:
        check_tensor(scalar_bias, "scalar_bias", shape=(..., weight.shape[0]))
    if method == "dense":
        basis = _const("gatr:basis", x.device, x.dtype, tables=tables)
        out = torch.einsum("oib,bkl,...il->...ok", weight.to(x.dtype), basis, x)
        if scalar_bias is not None:
            out = out + F.pad(scalar_bias.to(out.dtype)[..., None], (pga.SCALAR, pga.DIM - 1 - pga.SCALAR))
        return out
    grade_of, source, target, which = _plan_on(x.device, tables)
    lead, c_in, c_out = x.shape[:-2], x.shape[-2], weight.shape[0]
    weight = weight.to(x.dtype)
    xt = x.reshape(-1, c_in, pga.DIM).permute(2, 0, 1).contiguous()  # (16, M, in)
    m = xt.shape[1]
    planes = torch.bmm(xt, weight[:, :, grade_of].permute(2, 1, 0))  # (16, M, out)
    extra = torch.bmm(xt.index_select(0, source), weight[:, :, which].permute(2, 1, 0))  # (8, M, out)
    if scalar_bias is not None:
        sb = scalar_bias.to(x.dtype)
        sb = sb.expand(*lead, c_out).reshape(1, m, c_out) if sb.ndim > 1 else sb.expand(1, m, c_out)
        extra = torch.cat([extra, sb])
        target = _targets_with_scalar_on(x.device, tables)
    planes = planes.index_add(0, target, extra)
    return planes.permute(1, 2, 0).reshape(*lead, c_out, pga.DIM)


# ---------------------------------------------------------------------- bilinear maps
def geometric_product(x: Tensor, y: Tensor, method: str = "auto", *, tables: ConstantTables | None = None) -> Tensor:
    """Geometric product of ``(..., 16)`` tensors (broadcasting).

    ``fast``/``auto``: the complex-matrix product of
    [`geomlin.algebra.pga.geometric_product`][] (under autocast in
    float32 or float64, with autocast off: there is no complex bfloat16; half-precision inputs outside autocast use the sparse Cayley table); ``dense``: the ``16^3``
    Cayley einsum.

    Parameters
    ----------
    x, y : Tensor of shape (..., 16)
        multivectors; the leading axes broadcast.
    method : str
        ``"auto"`` / ``"fast"`` or ``"dense"`` (above).
    tables : ConstantTables, optional
        a module's [`tables`][]; ``None`` reads a per-(device, dtype) cache.

    Returns
    -------
    Tensor of shape (..., 16)
        ``x y``, leading axes broadcast.
    """
    method = _check_method(method)
    if method == "dense":
        return pga.geometric_product(x, y, "dense", tables=tables)
    if torch.is_autocast_enabled(x.device.type):
        dtype = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
        with torch.autocast(x.device.type, enabled=False):
            return pga.geometric_product(x.to(dtype), y.to(dtype), "matrix", tables=tables)
    return pga.geometric_product(x, y, "auto", tables=tables)


def outer_product(x: Tensor, y: Tensor, method: str = "auto", *, tables: ConstantTables | None = None) -> Tensor:
    """Outer (wedge) product ``x ^ y`` of ``(..., 16)`` tensors (81 of 256 pairs; ``dense``: einsum).

    Parameters
    ----------
    x, y : Tensor of shape (..., 16)
        multivectors; the leading axes broadcast.
    method : str
        ``"auto"`` / ``"fast"`` or ``"dense"``.
    tables : ConstantTables, optional
        a module's [`tables`][]; ``None`` reads a per-(device, dtype) cache.

    Returns
    -------
    Tensor of shape (..., 16)
        ``x ^ y``.
    """
    method = _check_method(method)
    return pga.outer_product(x, y, "dense" if method == "dense" else "sparse", tables=tables)


def join(x: Tensor, y: Tensor, method: str = "auto", *, tables: ConstantTables | None = None) -> Tensor:
    """Join ``x v y = J(J(x) ^ J(y))`` of ``(..., 16)`` tensors ([`geomlin.algebra.pga.join`][]).

    Equivariant only up to sign: odd versors flip it. [`equivariant_join`][] fixes that.

    Parameters
    ----------
    x, y : Tensor of shape (..., 16)
        multivectors; the leading axes broadcast.
    method : str
        ``"auto"`` / ``"fast"`` or ``"dense"``.
    tables : ConstantTables, optional
        a module's [`tables`][]; ``None`` reads a per-(device, dtype) cache.

    Returns
    -------
    Tensor of shape (..., 16)
        ``x v y``.
    """
    method = _check_method(method)
    return pga.join(x, y, "dense" if method == "dense" else "sparse", tables=tables)


def equivariant_join(x: Tensor, y: Tensor, reference: Tensor, method: str = "auto", *,
                     tables: ConstantTables | None = None) -> Tensor:
    """``<reference>_{e123} * (x v y)``: the join made Pin(3,0,1)-equivariant (GATr eq. 4).

    The join flips sign under odd versors, and so does the ``e123`` component of a reference that
    transforms with the data (for a point it is the homogeneous weight, ``-1`` after a
    reflection), so the product is equivariant. This is the reference GATr's choice; the
    pseudoscalar ``e0123`` would flip too but vanishes for point clouds (it would switch the
    join off).

    Parameters
    ----------
    x, y : Tensor of shape (..., 16)
        multivectors; the leading axes broadcast.
    reference : Tensor of shape (..., 16)
        broadcastable against ``x`` and ``y`` (e.g. [`join_reference`][] of the input).
    method : str
        ``"auto"`` / ``"fast"`` or ``"dense"``.
    tables : ConstantTables, optional
        a module's [`tables`][]; ``None`` reads a per-(device, dtype) cache.

    Returns
    -------
    Tensor of shape (..., 16)
        ``<reference>_{e123} (x v y)``.
    """
    _mv(reference, "reference")
    return reference[..., pga.E123:pga.E123 + 1] * join(x, y, method, tables=tables)


# ---------------------------------------------------------------------- invariants and norms
def inner_product(x: Tensor, y: Tensor, *, tables: ConstantTables | None = None) -> Tensor:
    """Invariant inner product ``<~x y>_0`` on the 8 components without ``e0``: ``(..., 16) -> (..., 1)``.

    In G(3,0,1) every e0-free blade squares (with reversion) to ``+1``, so this is a plain
    dot product over [`geomlin.algebra.pga.NONDEGENERATE`][] (a masked sum,
    no gather).

    Parameters
    ----------
    x, y : Tensor of shape (..., 16)
        multivectors; the leading axes broadcast.
    tables : ConstantTables, optional
        a module's [`tables`][]; ``None`` reads a per-(device, dtype) cache.

    Returns
    -------
    Tensor of shape (..., 1)
        the invariant inner product.
    """
    _mv(x, "x")
    _mv(y, "y")
    xy = x * y
    return xy @ _const("gatr:nondegenerate", x.device, xy.dtype, tables=tables)[:, None]


def norm_squared(x: Tensor, *, tables: ConstantTables | None = None) -> Tensor:
    """``inner_product(x, x)``, ``(..., 16) -> (..., 1)``.

    Parameters
    ----------
    x : Tensor of shape (..., 16)
        multivectors.
    tables : ConstantTables, optional
        a module's [`tables`][]; ``None`` reads a per-(device, dtype) cache.

    Returns
    -------
    Tensor of shape (..., 1)
        the squared norm, invariant.
    """
    return inner_product(x, x, tables=tables)


def equi_layer_norm(x: Tensor, channel_dim: int = -2, eps: float = LAYER_NORM_EPS, *,
                    tables: ConstantTables | None = None) -> Tensor:
    """Equivariant layer norm (GATr eq. 5): ``x / sqrt(max(mean_channels <x, x>, eps))``.

    ``x (..., channels, 16)``; the mean runs over ``channel_dim``. The clamp from below (not an
    added ``eps``) is the reference's: components with ``e0`` do not enter the norm, so a
    multivector can be large with a tiny norm. Half-precision inputs are normalised in float32
    (autocast off) and returned in their own dtype.

    Parameters
    ----------
    x : Tensor of shape (..., channels, 16)
        multivector channels.
    channel_dim : int
        the axis the mean runs over.
    eps : float
        lower clamp of the mean squared norm.
    tables : ConstantTables, optional
        a module's [`tables`][]; ``None`` reads a per-(device, dtype) cache.

    Returns
    -------
    Tensor of shape (..., channels, 16)
        ``x`` normalised, in its own dtype.
    """
    _mv(x, "x", 2)
    eps = check_float(eps, "eps", minimum=0.0)
    with torch.autocast(x.device.type, enabled=False):
        wide = _at_least_float32(x)
        sq = norm_squared(wide, tables=tables)  # (..., channels, 1)
        return (wide / sq.mean(dim=channel_dim, keepdim=True).clamp_min(eps).sqrt()).to(x.dtype)


def _at_least_float32(x: Tensor) -> Tensor:
    """``x`` in float32 when it is in a half precision (sums of squares lose digits or overflow there)."""
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


def scalar_gated_gelu(x: Tensor, gates: Tensor | None = None, approximate: str = "tanh") -> Tensor:
    """Scalar-gated GELU: ``x * gelu(gates)`` with ``gates = <x>_0 (..., 1)`` by default.

    Parameters
    ----------
    x : Tensor of shape (..., 16)
        multivectors.
    gates : Tensor of shape (..., 1), optional
        the gate values (default: the scalar components ``<x>_0``).
    approximate : str
        ``"tanh"`` as in the reference, or ``"none"`` for the exact GELU.

    Returns
    -------
    Tensor of shape (..., 16)
        ``x * gelu(gates)``.
    """
    _mv(x, "x")
    check_choice(approximate, "approximate", ("tanh", "none"))
    if gates is not None:
        check_tensor(gates, "gates", shape=(..., 1))
    if gates is None:
        gates = x[..., pga.SCALAR:pga.SCALAR + 1]
    return x * F.gelu(gates, approximate=approximate)


def grade_dropout(x: Tensor, p: float, training: bool = True, generator: torch.Generator | None = None, *,
                  tables: ConstantTables | None = None) -> Tensor:
    """Dropout that zeroes whole grades: one Bernoulli draw per ``(..., grade)``; ``(..., 16)``.

    Survivors are scaled by ``1 / (1 - p)``. Equivariant for each fixed draw, since the
    Pin action preserves grades.

    Parameters
    ----------
    x : Tensor of shape (..., 16)
        multivectors.
    p : float
        probability of zeroing a grade, in ``[0, 1)``.
    training : bool
        apply the dropout (``False``: return ``x`` unchanged).
    generator : torch.Generator, optional
        the random generator of the draws, on ``x``'s device.
    tables : ConstantTables, optional
        a module's [`tables`][]; ``None`` reads a per-(device, dtype) cache.

    Returns
    -------
    Tensor of shape (..., 16)
        ``x`` with dropped grades zeroed.
    """
    _mv(x, "x")
    p = check_float(p, "dropout probability", minimum=0.0, maximum=1.0, strict_maximum=True)
    if not training or p == 0.0:
        return x
    keep = torch.rand(*x.shape[:-1], 5, dtype=x.dtype, device=x.device, generator=generator) >= p
    grade_of = _grade_index_on(x.device, tables)
    return x * keep[..., grade_of].to(x.dtype) / (1.0 - p)


def _grade_index_on(device, tables: ConstantTables | None = None) -> Tensor:
    return _const("gatr:grades", device, tables=tables)


# ---------------------------------------------------------------------- attention
#: The 4 trivector components a point lives on, homogeneous weight first.
TRIVECTOR_WEIGHT = pga.E123
TRIVECTOR_POSITION = pga.POINT_COMPONENTS


def distance_features(x: Tensor, role: str, eps: float | None = DISTANCE_EPS) -> Tensor:
    """Distance-aware attention features of ``x (..., 16) -> (..., 5)`` (GATr sec. 3.3).

    With ``w = <x>_{e123}``, ``p`` the ``e0ij`` components of the trivector and both scaled by the
    reference's normaliser ``w / (w^2 + eps)`` (``eps=None``: unscaled),
    ``distance_features(q, "query") . distance_features(k, "key") = -|w_k p_q - w_q p_k|^2``,
    which is minus the squared Euclidean distance of two points (up to ``(1 + eps)^-4`` for unit
    weights). The product is Pin(3,0,1)-invariant, though the two factors are not; the
    normaliser is even in the trivector, so reflections (which negate it) leave it unchanged.

    Parameters
    ----------
    x : Tensor of shape (..., 16)
        multivectors.
    role : str
        ``"query"`` or ``"key"``.
    eps : float or None
        ``eps`` of the normaliser; ``None`` leaves the features unscaled.

    Returns
    -------
    Tensor of shape (..., 5)
        the features of ``x`` in its role.
    """
    _mv(x, "x")
    if eps is not None:
        eps = check_float(eps, "eps", minimum=0.0)
    if role not in ("query", "key"):
        raise ValueError(f"role must be 'query' or 'key', got {role!r}")
    # squared distances come from differences of large terms: computed in float32 at least
    with torch.autocast(x.device.type, enabled=False):
        x = _at_least_float32(x)
        w = x[..., TRIVECTOR_WEIGHT:TRIVECTOR_WEIGHT + 1]
        p = x.index_select(-1, _const("gatr:attention", x.device, index=2))
        if eps is not None:
            scale = w / (w * w + eps)
            w, p = w * scale, p * scale
        pp = (p * p).sum(-1, keepdim=True)
        if role == "query":
            return torch.cat([pp, w * w, w * p], -1)
        return torch.cat([-(w * w), -pp, 2.0 * w * p], -1)


def _head_width(qk: int, v: int) -> int:
    width = max(qk, v)
    return -(-width // HEAD_DIM_MULTIPLE) * HEAD_DIM_MULTIPLE


def _pad(parts: list[Tensor], width: int) -> Tensor:
    """Concatenate ``parts`` on the last axis and zero-pad to ``width`` in the same copy."""
    have = sum(p.shape[-1] for p in parts)
    if have < width:
        parts = parts + [parts[0].new_zeros(*parts[0].shape[:-1], width - have)]
    return torch.cat(parts, -1) if len(parts) > 1 else parts[0]


def attention_features(q_mv: Tensor, k_mv: Tensor, v_mv: Tensor, q_s: Tensor | None = None,
                       k_s: Tensor | None = None, v_s: Tensor | None = None, use_distance: bool = True,
                       distance_weights: Tensor | None = None, eps: float | None = DISTANCE_EPS
                       ) -> tuple[Tensor, Tensor, Tensor, float]:
    """Queries, keys and values of [`geometric_attention`][] as flat features of one width.

    ``q_mv, k_mv (..., channels, 16)`` (any leading layout), ``v_mv (..., v_channels, 16)``,
    scalars ``(..., s_channels)``; ``distance_weights`` broadcastable to ``q_mv.shape[:-1]`` (one
    non-negative weight per query channel, the reference's ``exp(log_weights)``).

    Features per multivector channel: the 7 inner-product components
    ([`ATTENTION_IP_COMPONENTS`][]) and the 5 [`distance_features`][] (8 components, the full
    inner product, with ``use_distance=False``); then the scalars. Queries, keys and values are
    zero-padded to one width (a multiple of [`HEAD_DIM_MULTIPLE`][]), so PyTorch's fused
    attention kernels apply.

    Parameters
    ----------
    q_mv, k_mv : Tensor of shape (..., channels, 16)
        query and key multivectors (any leading layout).
    v_mv : Tensor of shape (..., v_channels, 16)
        value multivectors.
    q_s, k_s, v_s : Tensor, optional
        scalar channels ``(..., s_channels)`` of queries, keys and values.
    use_distance : bool
        add the distance features (else the full 8-component inner product).
    distance_weights : Tensor, optional
        broadcastable to ``q_mv.shape[:-1]``: one non-negative weight per query channel.
    eps : float or None
        ``eps`` of [`distance_features`][].

    Returns
    -------
    q, k, v : Tensor
        the flat, zero-padded features ``(..., width)``.
    scale : float
        ``1 / sqrt(#features)``, the softmax scale.
    """
    for name, t in (("q_mv", q_mv), ("k_mv", k_mv), ("v_mv", v_mv)):
        _mv(t, name, 2)
    if q_mv.shape[-2] != k_mv.shape[-2]:
        raise ValueError(f"q_mv and k_mv must have the same channels, got {tuple(q_mv.shape)} and {tuple(k_mv.shape)}")
    if (q_s is None) != (k_s is None):
        raise ValueError("give scalar queries and keys together (q_s and k_s), or neither")
    idx = _const("gatr:attention", q_mv.device, index=0 if use_distance else 1)
    qf, kf = [q_mv.index_select(-1, idx).flatten(-2)], [k_mv.index_select(-1, idx).flatten(-2)]
    if use_distance:
        qd = distance_features(q_mv, "query", eps)
        if distance_weights is not None:
            qd = qd * distance_weights[..., None].to(qd.dtype)
        qf.append(qd.flatten(-2))
        kf.append(distance_features(k_mv, "key", eps).flatten(-2))
    if q_s is not None and q_s.shape[-1]:
        qf.append(q_s)
        kf.append(k_s)
    vf = [v_mv.flatten(-2)]
    if v_s is not None and v_s.shape[-1]:
        vf.append(v_s)
    n_qk = sum(f.shape[-1] for f in qf)
    n_v = sum(f.shape[-1] for f in vf)
    width = _head_width(n_qk, n_v)
    dtype = functools.reduce(torch.promote_types, [f.dtype for f in qf + kf + vf])
    q = _pad([f.to(dtype) for f in qf], width)
    k = _pad([f.to(dtype) for f in kf], width)
    v = _pad([f.to(dtype) for f in vf], width)
    return q, k, v, 1.0 / math.sqrt(n_qk)


def _split_values(out: Tensor, v_channels: int, v_s_channels: int) -> tuple[Tensor, Tensor | None]:
    n_mv = v_channels * pga.DIM
    mv = out[..., :n_mv].unflatten(-1, (v_channels, pga.DIM))
    s = out[..., n_mv:n_mv + v_s_channels] if v_s_channels else None
    return mv, s


def geometric_attention_items_first(q_mv: Tensor, k_mv: Tensor, v_mv: Tensor, q_s: Tensor | None = None,
                                    k_s: Tensor | None = None, v_s: Tensor | None = None,
                                    layout: SetLayout | None = None, use_distance: bool = True,
                                    distance_weights: Tensor | None = None, eps: float | None = DISTANCE_EPS
                                    ) -> tuple[Tensor, Tensor | None]:
    """[`geometric_attention`][] in the items-first layout the layers use (no transposes).

    ``q_mv (..., items, heads, channels, 16)``; ``k_mv, v_mv (..., key_items, kv_heads, ...)`` with
    ``kv_heads`` 1 (multi-query) or ``heads`` and ``key_items`` any number (cross-attention when it
    differs from ``items``; the leading axes broadcast); scalars ``(..., items, heads, s_channels)``;
    ``layout`` from [`set_layout`][] (``None``: every query attends to
    every key of its leading index; a padded layout's mask covers the keys).

    Parameters
    ----------
    q_mv : Tensor of shape (..., items, heads, channels, 16)
        query multivectors.
    k_mv, v_mv : Tensor of shape (..., key_items, kv_heads, channels, 16)
        key and value multivectors (values may have their own channel count).
    q_s, k_s, v_s : Tensor, optional
        scalar channels ``(..., items, heads, s_channels)`` (keys and values: ``key_items``,
        ``kv_heads``).
    layout : SetLayout, optional
        the attention plan from [`set_layout`][].
    use_distance : bool
        distance-aware features.
    distance_weights : Tensor, optional
        per-head, per-channel weights of the distance features.
    eps : float or None
        ``eps`` of [`distance_features`][].

    Returns
    -------
    mv : Tensor of shape (..., items, heads, v_channels, 16)
        attended multivectors.
    scalars : Tensor of shape (..., items, heads, v_s_channels) or None
        attended scalars (``None`` without value scalars).
    """
    if k_mv.shape[-4] != v_mv.shape[-4]:
        raise ValueError(f"k_mv and v_mv must have the same number of items, got shapes {tuple(k_mv.shape)} "
                         f"and {tuple(v_mv.shape)}")
    cross = q_mv.shape[-4] != k_mv.shape[-4]
    if cross and layout is not None and layout.kind != "padded":
        raise ValueError(f"cross-attention ({q_mv.shape[-4]} queries over {k_mv.shape[-4]} keys) needs layout None "
                         "or a padded key mask; a flat (batch-vector) layout pairs each query with keys of its own set")
    q, k, v, scale = attention_features(q_mv, k_mv, v_mv, q_s, k_s, v_s, use_distance, distance_weights, eps)
    try:
        lead = torch.broadcast_shapes(q.shape[:-3], k.shape[:-3], v.shape[:-3])
    except RuntimeError as err:
        raise ValueError(f"the leading axes of q_mv {tuple(q_mv.shape[:-4])}, k_mv {tuple(k_mv.shape[:-4])} and "
                         f"v_mv {tuple(v_mv.shape[:-4])} do not broadcast") from err
    n = q.shape[-3]
    q, k, v = (t.expand(*lead, *t.shape[-3:]).reshape(-1, *t.shape[-3:]) for t in (q, k, v))
    out = attend(q, k, v, layout, scale)
    out = out.reshape(*lead, n, out.shape[-2], out.shape[-1])
    return _split_values(out, v_mv.shape[-2], 0 if v_s is None else v_s.shape[-1])


def geometric_attention(q_mv: Tensor, k_mv: Tensor, v_mv: Tensor,
                        q_s: Tensor | None = None, k_s: Tensor | None = None, v_s: Tensor | None = None,
                        attn_mask: Tensor | SetLayout | None = None, use_distance: bool = True,
                        distance_weights: Tensor | None = None, eps: float | None = DISTANCE_EPS
                        ) -> tuple[Tensor, Tensor | None]:
    """Pin(3,0,1)-equivariant multi-head attention (GATr sec. 3.3), fused kernels, memory linear in items.

    Parameters
    ----------
    q_mv : Tensor
        ``(..., heads, items, channels, 16)``.
    k_mv, v_mv : Tensor
        ``(..., kv_heads, key_items, channels, 16)``, ``kv_heads`` 1 (multi-query, the
        reference's default) or ``heads``; ``key_items`` may differ from ``items``
        (cross-attention: every query attends to the keys).
    q_s, k_s, v_s : Tensor, optional
        scalar channels ``(..., heads or kv_heads, items, s_channels)``.
    attn_mask : Tensor | SetLayout | None
        ``None``; a boolean tensor broadcastable to ``(..., heads, items, key_items)``
        (``True`` = attend; a float mask is refused: it would read as an additive bias); or a
        [`SetLayout`][] (padding mask or PyG batch vector, no dense
        ``items x items`` mask).
    use_distance : bool
        add the distance-aware trivector features.
    distance_weights : Tensor | None
        ``(heads, channels)``-broadcastable non-negative weights of the distance
        features per query channel (the reference's ``exp(log_weights)``).

    Returns
    -------
    tuple[Tensor, Tensor | None]
        ``(mv (..., heads, items, v_channels, 16), scalars (..., heads, items, v_s_channels) or None)``.

    Notes
    -----
    The attention logit is ``(sum_c [<q_c, k_c>_7 + w_c d(q_c) . d(k_c)] + q_s . k_s) / sqrt(n)``
    with ``n = 12 channels + s_channels`` features (the reference's ``geometric_attention``).
    """
    for name, t in (("q_mv", q_mv), ("k_mv", k_mv), ("v_mv", v_mv)):
        _mv(t, name, 4)
    if not (attn_mask is None or isinstance(attn_mask, (Tensor, SetLayout))):
        raise TypeError(f"attn_mask must be a bool tensor or a SetLayout, got {type(attn_mask).__name__}")
    if isinstance(attn_mask, Tensor):
        check_mask(attn_mask, "attn_mask")
        q, k, v, scale = attention_features(
            q_mv, k_mv, v_mv, q_s, k_s, v_s, use_distance,
            None if distance_weights is None else distance_weights[..., None, :], eps)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, scale=scale,
                                             enable_gqa=k.shape[-3] != q.shape[-3])
        return _split_values(out, v_mv.shape[-2], 0 if v_s is None else v_s.shape[-1])

    mv, s = geometric_attention_items_first(
        q_mv.movedim(-3, -4), k_mv.movedim(-3, -4), v_mv.movedim(-3, -4),
        None if q_s is None else q_s.movedim(-2, -3), None if k_s is None else k_s.movedim(-2, -3),
        None if v_s is None else v_s.movedim(-2, -3), attn_mask, use_distance, distance_weights, eps)
    return mv.movedim(-4, -3), (None if s is None else s.movedim(-3, -2))


# ---------------------------------------------------------------------- join reference
def join_reference(mv: Tensor, mask: Tensor | None = None, batch: Tensor | None = None,
                   num_sets: int | None = None) -> Tensor:
    """Per-set mean of ``mv (..., items, channels, 16)`` for [`equivariant_join`][].

    * no mask, no batch: mean over items and channels -> ``(..., 1, 1, 16)`` (the reference's
      ``join_reference="data"``);
    * ``mask (..., items)``: mean over valid items -> ``(..., 1, 1, 16)``;
    * ``batch (items,)`` (flat layout, ``mv (items, channels, 16)``, sorted as PyG stores it): mean
      per set, gathered back -> ``(items, 1, 16)``, so every set's reference follows its own
      transformation. ``num_sets`` (an upper bound of ``batch.max() + 1``) sizes the per-set sums;
      without it the sets are numbered by their order in ``batch`` (at most ``items`` of them), so
      nothing is read back from the device.

    Parameters
    ----------
    mv : Tensor of shape (..., items, channels, 16)
        the input multivectors.
    mask : Tensor of shape (..., items), optional
        bool, True = real item.
    batch : Tensor of shape (items,), optional
        the set of each item (flat layout).
    num_sets : int, optional
        an upper bound of the number of sets of ``batch``.

    Returns
    -------
    Tensor
        ``(..., 1, 1, 16)``, or ``(items, 1, 16)`` for a flat batch.
    """
    _mv(mv, "mv", 3)
    if mask is not None:
        check_mask(mask, "mask", shape=mv.shape[:-2])
    if batch is not None:
        if mv.ndim != 3:
            raise ValueError(f"with a batch vector mv must be flat (items, channels, 16), got {tuple(mv.shape)}")
        if num_sets is not None:
            num_sets = check_positive_int(num_sets, "num_sets")
        batch = check_batch_vector(batch, "batch", mv.shape[0], num_graphs=num_sets)
    per_item = mv.mean(-2, keepdim=True)  # (..., items, 1, 16)
    if batch is not None:
        set_of = batch if num_sets is not None else _ranks(batch)
        rows = num_sets if num_sets is not None else batch.shape[0]
        w = torch.ones(batch.shape[0], dtype=mv.dtype, device=mv.device)
        if mask is not None:
            w = w * mask.to(mv.dtype)
        sums = torch.zeros(rows, pga.DIM, dtype=mv.dtype, device=mv.device)
        sums = sums.index_add(0, set_of, per_item[:, 0] * w[:, None])
        counts = torch.zeros(rows, dtype=mv.dtype, device=mv.device).index_add(0, set_of, w)
        means = sums / counts.clamp_min(1.0)[:, None]
        return means[set_of][:, None, :]
    if mask is not None:
        w = mask.to(mv.dtype)[..., None, None]  # (..., items, 1, 1)
        total = (per_item * w).sum(-3, keepdim=True)
        return total / w.sum(-3, keepdim=True).clamp_min(1.0)
    return per_item.mean(-3, keepdim=True)


def _ranks(batch: Tensor) -> Tensor:
    """The sets of a sorted batch vector renumbered ``0, 1, ...`` in order of appearance, ``(items,)``."""
    if batch.numel() < 2:
        return torch.zeros_like(batch)
    return torch.cat([batch.new_zeros(1), (batch[1:] != batch[:-1]).to(batch.dtype)]).cumsum(0)


def canonical_reference(dtype: torch.dtype = torch.float32, device=None) -> Tensor:
    """The reference GATr's ``join_reference="canonical"``: ``e123 + e0123`` as ``(16,)``.

    Constant, hence invariant under proper motions (SE(3)); a reflection flips the join but not
    this reference, so with it the model is equivariant under SE(3) only.
    """
    out = torch.zeros(pga.DIM, dtype=dtype, device=device)
    out[pga.E123] = 1.0
    out[pga.E0123] = 1.0
    return out


__all__ = [
    "ATTENTION_IP_COMPONENTS", "DISTANCE_EPS", "LAYER_NORM_EPS", "METHODS", "NUM_LINEAR_BASIS", "SetLayout",
    "attention_features", "attention_mask", "canonical_reference", "distance_features", "equi_layer_norm",
    "equi_linear", "equivariant_join", "geometric_attention", "geometric_attention_items_first",
    "geometric_product", "grade_dropout", "inner_product", "join", "join_reference", "linear_basis",
    "norm_squared", "outer_product", "reference_basis_norms", "scalar_gated_gelu", "set_layout",
]
