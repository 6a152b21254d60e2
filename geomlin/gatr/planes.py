"""GATr's kernels: every map of the architecture, once, on the component-major ("planes") layout.

The public tensors are ``(..., channels, 16)``. The kernels store the same numbers as
``planes (16, M, channels)``, ``M`` the number of items over all leading axes: each component of
the algebra is one contiguous ``(M, channels)`` matrix. In this layout

* an equivariant linear map is two batched matmuls over planes (grade weights, ``e0`` maps)
  with no transposes around them ([`equi_linear_planes`][]);
* the geometric product and the join are products of ``(16, N)`` matrices with small tables
  ([`geomlin.algebra.pga.geometric_product_columns`][geomlin.algebra.pga.products.geometric_product_columns],
  [`geomlin.algebra.pga.join_columns`][geomlin.algebra.pga.products.join_columns]);
* layer norm, gating, residuals and the attention features are elementwise on planes.

[`to_planes`][] copies ``(..., channels, 16)`` into planes once; [`from_planes`][] returns a
*view* ``(..., channels, 16)`` of planes, and [`to_planes`][] of such a view is free. So GATr's
layers take and return ``(..., channels, 16)`` tensors, each converting at its boundary, and a
chain of layers (a block, the model) keeps its activations in planes with no copies between
layers. The pure functions of [`geomlin.gatr.primitives`][] on ``(..., 16)`` tensors are these
kernels seen through the row layout. Scalars stay ``(M, s_channels)``.

The kernels check shapes and dtypes only (no finiteness: they run inside every block). Constant
tables come from a module's [`tables`][] (buffers that move with ``module.to(device)``) or, without
``tables=``, from a per-(device, dtype) cache.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F
from torch import Tensor

from geomlin.algebra import pga
from geomlin.precision import at_least_float32, full_precision, output_dtype
from geomlin.tables import ConstantTables, table_on
from geomlin.validation import check_choice, check_float, check_tensor

#: Number of Pin(3,0,1)-equivariant linear maps of G(3,0,1) (5 grade projections + 4 e0 maps).
NUM_LINEAR_BASIS = 9
#: Components of the attention inner product: the e0-free blades except ``e123``, which enters
#: through the distance features instead (the reference's ``_INNER_PRODUCT_WO_TRI_IDX``).
ATTENTION_IP_COMPONENTS = (pga.SCALAR, pga.E1, pga.E2, pga.E3, pga.E12, pga.E13, pga.E23)
#: The homogeneous weight of a point and its position components (``e023, e013, e012``).
TRIVECTOR_WEIGHT = pga.E123
TRIVECTOR_POSITION = pga.POINT_COMPONENTS
#: Distance-aware features per multivector channel ([`distance_features_planes`][]).
NUM_DISTANCE_FEATURES = 5
#: Default ``eps`` of the normaliser ``w / (w^2 + eps)`` of the distance features (reference value).
DISTANCE_EPS = 1e-3
#: Default lower clamp of the mean squared norm in [`equi_layer_norm_planes`][] (reference value).
LAYER_NORM_EPS = 0.01
#: The SDPA head width is padded to a multiple of this (fused kernels vectorise over it).
HEAD_DIM_MULTIPLE = 8


# ---------------------------------------------------------------------- tables
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
        # column l of e0 * <e_l>_g, as a (16 out, 16 in) matrix
        basis[5 + g] = pga.PGA.geometric_product(e0.expand(pga.DIM, pga.DIM), basis[g].T.contiguous()).T
    return basis


def linear_basis(dtype: torch.dtype = torch.float64, device=None) -> Tensor:
    """The 9 equivariant linear maps as ``(9, 16, 16)`` matrices ``B[b, out, in]`` (a fresh copy).

    Order: grade projections 0..4, then ``x -> e0 <x>_k`` for ``k = 0..3`` (GATr Prop. 2). Unlike
    the reference GATr's basis these are not normalised: the reference's map ``b`` is
    ``B[b] / |B[b]|_F`` ([`reference_basis_norms`][]).
    """
    return _linear_basis().to(dtype=dtype, device=device, copy=True)


def reference_basis_norms(dtype: torch.dtype = torch.float64, device=None) -> Tensor:
    """``(9,)`` Frobenius norms of the basis maps: a reference GATr weight ``w_ref[..., b]`` equals
    ``w[..., b] * norms[b]`` for the same linear map (the reference normalises its basis)."""
    return _linear_basis().flatten(1).norm(dim=1).to(dtype=dtype, device=device)


@functools.cache
def _linear_plan() -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Index plan of [`equi_linear_planes`][], read off the basis.

    ``grade_of (16,)``: basis index of the grade projection that keeps component ``k``;
    ``source (8,)``, ``target (8,)``, ``e0_map (8,)``: the map ``x -> e0 <x>_g`` sends component
    ``source[j]`` (no ``e0``) to component ``target[j]`` (with ``e0``) through basis map
    ``e0_map[j]``, with coefficient ``+1`` in G(3,0,1) (``e0 e_l = +e_{0l}``; checked here);
    ``target_and_scalar (9,)``: ``target`` followed by the scalar component (where a scalar bias goes).
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
    return (grade_of, torch.tensor(source), torch.tensor(target), torch.tensor(which),
            torch.tensor(target + [pga.SCALAR]))


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
_TABLES = {"gatr:linear": _linear_plan, "gatr:nondegenerate": _nondegenerate_mask, "gatr:grades": _grades,
           "gatr:attention": _attention_indices}


def tables(*keys: str) -> ConstantTables:
    """The constant tables the kernels read through ``tables=``, as a module's buffers.

    ``keys``: ``"gatr:linear"`` ([`equi_linear_planes`][]), ``"gatr:nondegenerate"`` ([`inner_product_planes`][],
    [`equi_layer_norm_planes`][]), ``"gatr:grades"`` ([`grade_dropout_planes`][]), ``"gatr:attention"``
    ([`attention_features_planes`][]), ``"pga:geometric_product"`` ([`geometric_product_planes`][]),
    ``"pga:join"`` ([`join_planes`][], [`equivariant_join_planes`][]), or any other key of
    [`geomlin.algebra.pga.tables`][geomlin.algebra.pga.products.tables]. Without ``tables=`` the
    kernels read a per-(device, dtype) cache filled on the first call.
    """
    own = {key: _TABLES[key]() for key in keys if key in _TABLES}
    return ConstantTables({**own, **pga.table_entries(*(key for key in keys if key not in _TABLES))})


def _table(key: str, device, dtype=None, index: int = 0, tables: ConstantTables | None = None) -> Tensor:
    return table_on(key, _TABLES[key], device, dtype, index, tables)


# ---------------------------------------------------------------------- layout
def _check_planes(xp, name: str = "planes") -> Tensor:
    """Boundary check of planes ``(16, M, channels)`` (shape and dtype only; cheap)."""
    if not isinstance(xp, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(xp).__name__}")
    if not xp.is_floating_point():
        raise TypeError(f"{name} must have a floating-point dtype, got {xp.dtype}")
    if xp.ndim != 3 or xp.shape[0] != pga.DIM:
        raise ValueError(f"{name} must be planes of shape (16, items, channels), got {tuple(xp.shape)}")
    return xp


def to_planes(x: Tensor) -> Tensor:
    """``(..., channels, 16) -> (16, M, channels)``: one copy, none for a view made by [`from_planes`][]."""
    pga.check_mv(x, "x")
    if x.ndim < 2:
        raise ValueError(f"x must have a channel axis, (..., channels, 16), got shape {tuple(x.shape)}")
    return x.reshape(-1, x.shape[-2], pga.DIM).permute(2, 0, 1).contiguous()


def from_planes(p: Tensor, lead: tuple) -> Tensor:
    """``(16, M, channels) -> (*lead, channels, 16)``, a view of ``p`` (``M = prod(lead)``)."""
    _check_planes(p)
    return p.permute(1, 2, 0).reshape(*lead, p.shape[-1], pga.DIM)


def _columns(xp: Tensor) -> Tensor:
    """Planes ``(16, M, C)`` as ``(16, M * C)`` columns (a view of contiguous planes)."""
    return xp.reshape(pga.DIM, -1)


# ---------------------------------------------------------------------- linear maps
def equi_linear_planes(xp: Tensor, weight: Tensor, scalar_bias: Tensor | None = None, *,
                tables: ConstantTables | None = None) -> Tensor:
    """Pin(3,0,1)-equivariant linear map of planes ``(16, M, in) -> (16, M, out)``.

    ``out[o, k] = sum_{i, b} weight[o, i, b] sum_l B[b, k, l] x[i, l]`` with the basis ``B`` of
    [`linear_basis`][] (GATr Prop. 2). Component-major: one batched matmul applies each
    component's grade weight (``16 in out`` multiply-adds per item), a second one the ``e0`` maps
    on the 8 components that have one (``8 in out``), against ``256 in out`` for a full
    ``(in 16, out 16)`` matrix.

    Parameters
    ----------
    xp : Tensor of shape (16, M, in)
        planes.
    weight : Tensor of shape (out, in, 9)
        coefficients of the basis maps.
    scalar_bias : Tensor of shape (out,) or (M, out), optional
        added to the scalar plane.
    tables : ConstantTables, optional
        a module's [`tables`][] (``"gatr:linear"``).

    Returns
    -------
    Tensor of shape (16, M, out)
        in ``xp``'s dtype.
    """
    _check_planes(xp, "xp")
    if not isinstance(weight, Tensor) or weight.shape[1:] != (xp.shape[2], NUM_LINEAR_BASIS):
        raise ValueError(f"weight must have shape (out, {xp.shape[2]}, {NUM_LINEAR_BASIS}), got "
                         f"{tuple(weight.shape) if isinstance(weight, Tensor) else type(weight).__name__}")
    grade_of, source, target, which = (_table("gatr:linear", xp.device, None, i, tables) for i in range(4))
    weight = weight.to(xp.dtype)
    out = torch.bmm(xp, weight[:, :, grade_of].permute(2, 1, 0))
    extra = torch.bmm(xp.index_select(0, source), weight[:, :, which].permute(2, 1, 0))
    if scalar_bias is not None:
        extra = torch.cat([extra, scalar_bias.to(extra.dtype).expand(1, xp.shape[1], weight.shape[0])])
        target = _table("gatr:linear", xp.device, None, 4, tables)
    # in place on a fresh (non-view) tensor: the backward pass needs no copy of it
    return out.index_add_(0, target, extra)


# ---------------------------------------------------------------------- invariants and norms
def inner_product_planes(xp: Tensor, yp: Tensor, *, tables: ConstantTables | None = None) -> Tensor:
    """Invariant inner product ``<~x y>_0`` per item and channel: ``(16, M, C) x (16, M, C) -> (M, C)``.

    In G(3,0,1) every e0-free blade squares (with reversion) to ``+1``, so this is a dot product
    over [`geomlin.algebra.pga.NONDEGENERATE`][geomlin.algebra.pga.basis.NONDEGENERATE] (a masked
    sum, no gather).
    """
    prod = _check_planes(xp, "xp") * _check_planes(yp, "yp")
    mask = _table("gatr:nondegenerate", xp.device, prod.dtype, tables=tables)
    return (mask[None, :] @ prod.reshape(pga.DIM, -1)).reshape(prod.shape[1:])


def equi_layer_norm_planes(xp: Tensor, eps: float = LAYER_NORM_EPS, *, tables: ConstantTables | None = None) -> Tensor:
    """Equivariant layer norm (GATr eq. 5): ``x / sqrt(max(mean_channels <x, x>, eps))`` on planes
    ``(16, M, C)``, the mean over the channels.

    The clamp from below (not an added ``eps``) is the reference's: components with ``e0`` do not
    enter the norm, so a multivector can be large with a tiny norm. The norm follows
    [`geomlin.precision`][]'s rule (float32 at least, autocast off); like the reference's, the result is
    in that precision under autocast and in ``xp``'s dtype otherwise.
    """
    _check_planes(xp, "xp")
    with full_precision(xp):
        wide = at_least_float32(xp)
        out = wide * inner_product_planes(wide, wide, tables=tables).mean(-1, keepdim=True).clamp_min(eps).rsqrt()
    return out.to(output_dtype(xp))


# ---------------------------------------------------------------------- nonlinearity, dropout
def scalar_gated_gelu_planes(xp: Tensor, gates: Tensor | None = None, approximate: str = "tanh") -> Tensor:
    """Scalar-gated GELU (GATr sec. 3.2): ``x * gelu(gates)`` on planes ``(16, M, C)``, with
    ``gates (M, C)`` the scalar plane ``<x>_0`` by default; ``approximate="tanh"`` as the reference
    (``"none"``: the exact GELU)."""
    _check_planes(xp, "xp")
    check_choice(approximate, "approximate", ("tanh", "none"))
    if gates is None:
        gates = xp[pga.SCALAR]
    else:
        check_tensor(gates, "gates", shape=tuple(xp.shape[1:]))
    return xp * F.gelu(gates, approximate=approximate)


def grade_dropout_planes(xp: Tensor, p: float, generator: torch.Generator | None = None, *,
                  tables: ConstantTables | None = None) -> Tensor:
    """Dropout of whole grades on planes ``(16, M, C)``: one Bernoulli draw per item, channel and
    grade, survivors scaled by ``1 / (1 - p)``; equivariant for each fixed draw (the Pin action
    preserves grades)."""
    _check_planes(xp, "xp")
    p = check_float(p, "dropout probability", minimum=0.0, maximum=1.0, strict_maximum=True)
    keep = torch.rand(5, *xp.shape[1:], dtype=xp.dtype, device=xp.device, generator=generator) >= p
    return xp * keep[_table("gatr:grades", xp.device, tables=tables)].to(xp.dtype) / (1.0 - p)


# ---------------------------------------------------------------------- bilinear maps
def geometric_product_planes(a: Tensor, b: Tensor, *, tables: ConstantTables | None = None) -> Tensor:
    """Geometric product of planes ``(16, M, C) x (16, M, C) -> (16, M, C)``: the complex 2x2
    product of
    [`geomlin.algebra.pga.geometric_product_columns`][geomlin.algebra.pga.products.geometric_product_columns]
    (float32 under autocast for half-precision planes)."""
    _check_planes(a, "a")
    _check_planes(b, "b")
    out = pga.geometric_product_columns(_columns(a), _columns(b), tables=tables)
    return out.view(pga.DIM, a.shape[1], a.shape[2])


def join_planes(a: Tensor, b: Tensor, *, tables: ConstantTables | None = None) -> Tensor:
    """Join of planes ``(16, M, C) x (16, M, C) -> (16, M, C)``:
    [`geomlin.algebra.pga.join_columns`][geomlin.algebra.pga.products.join_columns]."""
    _check_planes(a, "a")
    _check_planes(b, "b")
    out = pga.join_columns(_columns(a), _columns(b), tables=tables)
    return out.view(pga.DIM, a.shape[1], a.shape[2])


def equivariant_join_planes(a: Tensor, b: Tensor, reference_weight: Tensor, *,
                     tables: ConstantTables | None = None) -> Tensor:
    """``<ref>_{e123} (a v b)`` (GATr eq. 4) on planes ``(16, M, C)``, with ``reference_weight``
    the ``e123`` component of the join reference per item, broadcastable to ``(M, C)``.

    The join flips sign under odd versors, and so does the ``e123`` component of a reference that
    transforms with the data (for a point it is the homogeneous weight, ``-1`` after a
    reflection), so the product is equivariant. This is the reference GATr's choice; the
    pseudoscalar ``e0123`` would flip too but vanishes for point clouds (it would switch the join
    off).
    """
    jn = join_planes(a, b, tables=tables)
    return jn * reference_weight.to(jn.dtype)


# ---------------------------------------------------------------------- attention
def distance_features_planes(xp: Tensor, role: str, eps: float | None = DISTANCE_EPS, *,
                      tables: ConstantTables | None = None) -> Tensor:
    """Distance-aware attention features (GATr sec. 3.3) of component-major multivectors
    ``(16, ...) -> (5, ...)``.

    With ``w = <x>_{e123}``, ``p`` the ``e0ij`` components of the trivector and both scaled by the
    reference's normaliser ``w / (w^2 + eps)`` (``eps=None``: unscaled),
    ``distance_features_planes(q, "query") . distance_features_planes(k, "key") = -|w_k p_q - w_q p_k|^2``
    (summed over the first axis), minus the squared Euclidean distance of two points (up to
    ``(1 + eps)^-4`` for unit weights). The product is Pin(3,0,1)-invariant, though the two
    factors are not; the normaliser is even in the trivector, so reflections (which negate it)
    leave it unchanged. Computed by [`geomlin.precision`][]'s rule, float32 at least with autocast off
    (squared distances are differences of large terms).

    Parameters
    ----------
    xp : Tensor of shape (16, ...)
        multivectors, component axis first (planes ``(16, M, C)``, or ``x.movedim(-1, 0)``).
    role : str
        ``"query"`` or ``"key"``.
    eps : float or None
        ``eps`` of the normaliser; ``None`` leaves the features unscaled.
    tables : ConstantTables, optional
        a module's [`tables`][] (``"gatr:attention"``).

    Returns
    -------
    Tensor of shape (5, ...)
        the features in their role: query ``(|p|^2, w^2, w p)``, key ``(-w^2, -|p|^2, 2 w p)``.
    """
    if not isinstance(xp, Tensor) or xp.ndim == 0 or xp.shape[0] != pga.DIM:
        raise ValueError(f"xp must be multivectors with the component axis first, (16, ...), got "
                         f"{tuple(xp.shape) if isinstance(xp, Tensor) else type(xp).__name__}")
    if role not in ("query", "key"):
        raise ValueError(f"role must be 'query' or 'key', got {role!r}")
    if eps is not None:
        eps = check_float(eps, "eps", minimum=0.0)
    with full_precision(xp):
        w = at_least_float32(xp[TRIVECTOR_WEIGHT])
        pos = at_least_float32(xp.index_select(0, _table("gatr:attention", xp.device, index=2, tables=tables)))
        if eps is not None:
            scale = w / (w * w + eps)
            w, pos = w * scale, pos * scale
        pp = (pos * pos).sum(0)
        if role == "query":
            return torch.cat([pp[None], (w * w)[None], w * pos])
        return torch.cat([-(w * w)[None], -pp[None], 2.0 * w * pos])


def _head_width(qk: int, v: int) -> int:
    width = max(qk, v)
    return -(-width // HEAD_DIM_MULTIPLE) * HEAD_DIM_MULTIPLE


def _pad(parts: list[Tensor], width: int) -> Tensor:
    """Concatenate ``parts`` on the last axis and zero-pad to ``width`` in the same copy."""
    have = sum(p.shape[-1] for p in parts)
    if have < width:
        parts = parts + [parts[0].new_zeros(*parts[0].shape[:-1], width - have)]
    return torch.cat(parts, -1) if len(parts) > 1 else parts[0]


def _flat(x: Tensor) -> Tensor:
    """``(n, ..., C) -> (..., n C)``: component-major features per item, in ``(n, C)`` order."""
    return x.movedim(0, -2).flatten(-2)


def attention_features_planes(q: Tensor, k: Tensor, v: Tensor, q_s: Tensor | None = None, k_s: Tensor | None = None,
                       v_s: Tensor | None = None, use_distance: bool = True, distance_weights: Tensor | None = None,
                       eps: float | None = DISTANCE_EPS, *, tables: ConstantTables | None = None
                       ) -> tuple[Tensor, Tensor, Tensor, float]:
    """Queries, keys and values of geometric attention (GATr sec. 3.3) as flat features of one width.

    Features per multivector channel: the 7 inner-product components
    ([`ATTENTION_IP_COMPONENTS`][]) and the 5 [`distance_features_planes`][] (8 components, the full inner
    product, with ``use_distance=False``); then the scalars. Queries, keys and values are
    zero-padded to one width (a multiple of [`HEAD_DIM_MULTIPLE`][]), so PyTorch's fused attention
    kernels apply. The logit ``q . k * scale`` is then
    ``(sum_c [<q_c, k_c>_7 + w_c d(q_c) . d(k_c)] + q_s . k_s) / sqrt(n)`` with
    ``n = 12 channels + s_channels`` (the reference's ``geometric_attention``).

    Parameters
    ----------
    q, k : Tensor of shape (16, ..., channels)
        query and key multivectors, component axis first (any layout after it: planes of heads
        ``(16, M, heads, channels)`` in the layers).
    v : Tensor of shape (16, ..., v_channels)
        value multivectors.
    q_s, k_s, v_s : Tensor of shape (..., s_channels), optional
        scalar channels of queries, keys and values (queries and keys together or neither).
    use_distance : bool
        add the distance features (else the full 8-component inner product).
    distance_weights : Tensor, optional
        non-negative weights of the query distance features, broadcastable to ``q.shape[1:]``
        (one per head and channel: the reference's ``exp(log_weights)``).
    eps : float or None
        ``eps`` of [`distance_features_planes`][].
    tables : ConstantTables, optional
        a module's [`tables`][] (``"gatr:attention"``).

    Returns
    -------
    q, k, v : Tensor of shape (..., width)
        the features (in a head-internal order of their own; values unpacked by
        [`attention_values`][]).
    scale : float
        ``1 / sqrt(n)``, the softmax scale.
    """
    if (q_s is None) != (k_s is None):
        raise ValueError("give scalar queries and keys together (q_s and k_s), or neither")
    idx = _table("gatr:attention", q.device, index=0 if use_distance else 1, tables=tables)
    qf, kf = [_flat(q.index_select(0, idx))], [_flat(k.index_select(0, idx))]
    if use_distance:
        qd = distance_features_planes(q, "query", eps, tables=tables)
        if distance_weights is not None:
            qd = qd * distance_weights.to(qd.dtype)
        qf.append(_flat(qd))
        kf.append(_flat(distance_features_planes(k, "key", eps, tables=tables)))
    if q_s is not None and q_s.shape[-1]:
        qf.append(q_s)
        kf.append(k_s)
    vf = [_flat(v)]
    if v_s is not None and v_s.shape[-1]:
        vf.append(v_s)
    n_qk = sum(f.shape[-1] for f in qf)
    width = _head_width(n_qk, sum(f.shape[-1] for f in vf))
    dtype = functools.reduce(torch.promote_types, [f.dtype for f in qf + kf + vf])
    return (_pad([f.to(dtype) for f in qf], width), _pad([f.to(dtype) for f in kf], width),
            _pad([f.to(dtype) for f in vf], width), 1.0 / math.sqrt(n_qk))


def attention_values(out: Tensor, v_channels: int, v_s_channels: int = 0) -> tuple[Tensor, Tensor | None]:
    """Unpack attended values ``(..., width)`` (the layout of [`attention_features_planes`][]) into
    component-major multivectors ``(16, ..., v_channels)`` (a view) and scalars
    ``(..., v_s_channels)`` (``None`` without scalars)."""
    n_mv = pga.DIM * v_channels
    mv = out[..., :n_mv].unflatten(-1, (pga.DIM, v_channels)).movedim(-2, 0)
    s = out[..., n_mv:n_mv + v_s_channels] if v_s_channels else None
    return mv, s
