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

Each function is the kernel of [`geomlin.gatr.planes`][] (or of
[`geomlin.algebra.pga`][] for the products) seen through the row layout: the ``(..., 16)`` input
is rearranged component-major, the kernel runs, and the result comes back as a contiguous
``(..., 16)`` tensor. There is one implementation of every map; the layers call the kernels
directly. Every function takes plain tensors, checks them at its boundary and states its shapes.
"""

from __future__ import annotations

import torch
from torch import Tensor

from geomlin.algebra import pga
from geomlin.batching import BatchLayout
from geomlin.gatr import planes
from geomlin.gatr.attention import attend, attend_masked, attention_mask
from geomlin.gatr.join_references import canonical_reference, join_reference
from geomlin.gatr.planes import DISTANCE_EPS, LAYER_NORM_EPS, NUM_LINEAR_BASIS
from geomlin.validation import (
    check_float,
    check_mask,
    check_tensor,
)


def _mv(x, name: str, min_ndim: int = 1) -> Tensor:
    """A floating ``(..., 16)`` tensor with at least ``min_ndim`` dimensions (boundary check)."""
    pga.check_mv(x, name)
    if x.ndim < min_ndim:
        raise ValueError(f"{name} must have at least {min_ndim} dimensions, got shape {tuple(x.shape)}")
    return x


def _planes_of(*xs: Tensor) -> tuple[list[Tensor], torch.Size]:
    """``(..., 16)`` tensors broadcast against each other as planes ``(16, N, 1)``, and the common shape."""
    shape = torch.broadcast_shapes(*(x.shape for x in xs))
    return [planes.to_planes(x.expand(shape)[..., None, :]) for x in xs], shape


def _rows(p: Tensor, shape: torch.Size) -> Tensor:
    """Planes ``(16, N, 1)`` back to a contiguous ``shape (..., 16)``."""
    return planes.from_planes(p, (p.shape[1],))[:, 0].reshape(shape).contiguous()


# ---------------------------------------------------------------------- linear maps
def equi_linear(x: Tensor, weight: Tensor, scalar_bias: Tensor | None = None) -> Tensor:
    """Pin(3,0,1)-equivariant linear map ``(..., in_ch, 16) -> (..., out_ch, 16)``.

    ``out[..., o, k] = sum_{i, b} weight[o, i, b] * sum_l B[b, k, l] x[..., i, l]`` with the
    basis ``B`` of [`linear_basis`][geomlin.gatr.planes.linear_basis] (GATr Prop. 2);
    [`planes.equi_linear_planes`][geomlin.gatr.planes.equi_linear_planes] does the work.

    Parameters
    ----------
    x : Tensor of shape (..., in_ch, 16)
        multivector channels, floating.
    weight : Tensor of shape (out_ch, in_ch, 9)
        coefficients of the basis maps.
    scalar_bias : Tensor of shape (out_ch,), optional
        added to the scalar component (or broadcastable to ``(..., out_ch)``).

    Returns
    -------
    Tensor of shape (..., out_ch, 16)
        in ``x``'s dtype and device.
    """
    _mv(x, "x", 2)
    check_tensor(weight, "weight", shape=(None, x.shape[-2], NUM_LINEAR_BASIS),
                 what=f"(out_channels, in_channels={x.shape[-2]}, {NUM_LINEAR_BASIS})")
    lead, c_out = x.shape[:-2], weight.shape[0]
    if scalar_bias is not None:
        check_tensor(scalar_bias, "scalar_bias", shape=(..., c_out))
        if scalar_bias.ndim > 1:
            scalar_bias = scalar_bias.expand(*lead, c_out).reshape(-1, c_out)
    out = planes.equi_linear_planes(planes.to_planes(x), weight, scalar_bias)
    return planes.from_planes(out, lead).contiguous()


# ---------------------------------------------------------------------- bilinear maps
def geometric_product(x: Tensor, y: Tensor) -> Tensor:
    """Geometric product ``x y``: ``(..., 16) x (..., 16) -> (..., 16)``, the leading axes broadcast.

    The complex 2x2 product of
    [`geomlin.algebra.pga.geometric_product`][geomlin.algebra.pga.products.geometric_product].
    Half-precision inputs are multiplied in float32 (there is no complex half precision): the
    result is float32 under autocast and in the input's dtype otherwise.
    """
    return pga.geometric_product(x, y)


def outer_product(x: Tensor, y: Tensor) -> Tensor:
    """Outer (wedge) product ``x ^ y``: ``(..., 16) x (..., 16) -> (..., 16)``, the leading axes
    broadcast (81 of 256 pairs,
    [`geomlin.algebra.pga.outer_product`][geomlin.algebra.pga.products.outer_product])."""
    return pga.outer_product(x, y)


def join(x: Tensor, y: Tensor) -> Tensor:
    """Join ``x v y = J(J(x) ^ J(y))``: ``(..., 16) x (..., 16) -> (..., 16)``, the leading axes
    broadcast ([`geomlin.algebra.pga.join`][geomlin.algebra.pga.products.join]).

    Equivariant only up to sign: odd versors flip it. [`equivariant_join`][] fixes that.
    """
    return pga.join(x, y)


def equivariant_join(x: Tensor, y: Tensor, reference: Tensor) -> Tensor:
    """``<reference>_{e123} * (x v y)``: the join made Pin(3,0,1)-equivariant (GATr eq. 4,
    [`planes.equivariant_join_planes`][geomlin.gatr.planes.equivariant_join_planes]).

    Parameters
    ----------
    x, y : Tensor of shape (..., 16)
        multivectors; the leading axes broadcast.
    reference : Tensor of shape (..., 16)
        broadcastable against ``x`` and ``y`` (e.g. [`join_reference`][] of the input).

    Returns
    -------
    Tensor of shape (..., 16)
        ``<reference>_{e123} (x v y)``.
    """
    _mv(x, "x")
    _mv(y, "y")
    _mv(reference, "reference")
    (a, b, r), shape = _planes_of(x, y.to(x.dtype), reference.to(x.dtype))
    return _rows(planes.equivariant_join_planes(a, b, r[pga.E123]), shape)


# ---------------------------------------------------------------------- invariants and norms
def inner_product(x: Tensor, y: Tensor) -> Tensor:
    """Invariant inner product ``<~x y>_0`` on the 8 components without ``e0``: ``(..., 16) -> (..., 1)``
    ([`planes.inner_product_planes`][geomlin.gatr.planes.inner_product_planes]).

    Parameters
    ----------
    x, y : Tensor of shape (..., 16)
        multivectors; the leading axes broadcast.

    Returns
    -------
    Tensor of shape (..., 1)
        the invariant inner product.
    """
    _mv(x, "x")
    _mv(y, "y")
    (a, b), shape = _planes_of(x, y.to(x.dtype))
    return planes.inner_product_planes(a, b).reshape(*shape[:-1], 1)


def norm_squared(x: Tensor) -> Tensor:
    """The invariant squared norm ``inner_product(x, x)``: ``(..., 16) -> (..., 1)``."""
    return inner_product(x, x)


def equi_layer_norm(x: Tensor, channel_dim: int = -2, eps: float = LAYER_NORM_EPS) -> Tensor:
    """Equivariant layer norm (GATr eq. 5): ``x / sqrt(max(mean_channels <x, x>, eps))``
    ([`planes.equi_layer_norm_planes`][geomlin.gatr.planes.equi_layer_norm_planes]: computed in float32 at least;
    the result in that precision under autocast and in ``x``'s dtype otherwise).

    Parameters
    ----------
    x : Tensor of shape (..., channels, 16)
        multivector channels.
    channel_dim : int
        the axis the mean runs over.
    eps : float
        lower clamp of the mean squared norm.

    Returns
    -------
    Tensor of shape (..., channels, 16)
        ``x`` normalised.
    """
    _mv(x, "x", 2)
    eps = check_float(eps, "eps", minimum=0.0)
    moved = x.movedim(channel_dim, -2)
    out = planes.equi_layer_norm_planes(planes.to_planes(moved), eps)
    return planes.from_planes(out, moved.shape[:-2]).movedim(-2, channel_dim).contiguous()


def scalar_gated_gelu(x: Tensor, gates: Tensor | None = None, approximate: str = "tanh") -> Tensor:
    """Scalar-gated GELU: ``x * gelu(gates)`` with ``gates = <x>_0 (..., 1)`` by default
    ([`planes.scalar_gated_gelu_planes`][geomlin.gatr.planes.scalar_gated_gelu_planes]).

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
    if gates is not None:
        check_tensor(gates, "gates", shape=(*x.shape[:-1], 1))
        gates = gates.reshape(-1, 1)
    (p,), shape = _planes_of(x)
    return _rows(planes.scalar_gated_gelu_planes(p, gates, approximate), shape)


def grade_dropout(x: Tensor, p: float, training: bool = True, generator: torch.Generator | None = None) -> Tensor:
    """Dropout that zeroes whole grades: one Bernoulli draw per ``(..., grade)``; ``(..., 16)``
    ([`planes.grade_dropout_planes`][geomlin.gatr.planes.grade_dropout_planes]).

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

    Returns
    -------
    Tensor of shape (..., 16)
        ``x`` with dropped grades zeroed.
    """
    _mv(x, "x")
    p = check_float(p, "dropout probability", minimum=0.0, maximum=1.0, strict_maximum=True)
    if not training or p == 0.0:
        return x
    (xp,), shape = _planes_of(x)
    return _rows(planes.grade_dropout_planes(xp, p, generator), shape)


# ---------------------------------------------------------------------- attention
def distance_features(x: Tensor, role: str, eps: float | None = DISTANCE_EPS) -> Tensor:
    """Distance-aware attention features of ``x (..., 16) -> (..., 5)`` (GATr sec. 3.3):
    [`planes.distance_features_planes`][geomlin.gatr.planes.distance_features_planes] with the component axis last.

    Parameters
    ----------
    x : Tensor of shape (..., 16)
        multivectors.
    role : str
        ``"query"`` or ``"key"``.
    eps : float or None
        ``eps`` of the normaliser ``w / (w^2 + eps)``; ``None`` leaves the features unscaled.

    Returns
    -------
    Tensor of shape (..., 5)
        the features of ``x`` in its role.
    """
    _mv(x, "x")
    return planes.distance_features_planes(x.movedim(-1, 0), role, eps).movedim(0, -1)


def attention_features(q_mv: Tensor, k_mv: Tensor, v_mv: Tensor, q_s: Tensor | None = None,
                       k_s: Tensor | None = None, v_s: Tensor | None = None, use_distance: bool = True,
                       distance_weights: Tensor | None = None, eps: float | None = DISTANCE_EPS
                       ) -> tuple[Tensor, Tensor, Tensor, float]:
    """Queries, keys and values of [`geometric_attention`][] as flat features of one width:
    [`planes.attention_features_planes`][geomlin.gatr.planes.attention_features_planes] with the component axis last.

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
    return planes.attention_features_planes(q_mv.movedim(-1, 0), k_mv.movedim(-1, 0), v_mv.movedim(-1, 0), q_s, k_s, v_s,
                                     use_distance, distance_weights, eps)


def geometric_attention(q_mv: Tensor, k_mv: Tensor, v_mv: Tensor,
                        q_s: Tensor | None = None, k_s: Tensor | None = None, v_s: Tensor | None = None,
                        attn_mask: Tensor | BatchLayout | None = None, use_distance: bool = True,
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
        (cross-attention: every query attends to the keys). Values may have their own channel
        count; the leading axes broadcast.
    q_s, k_s, v_s : Tensor, optional
        scalar channels ``(..., heads or kv_heads, items, s_channels)``.
    attn_mask : Tensor | BatchLayout | None
        ``None``; a boolean tensor broadcastable to ``(..., heads, items, key_items)``
        (``True`` = attend; a float mask is refused: it would read as an additive bias); or a
        [`BatchLayout`][geomlin.batching.BatchLayout] (padding mask or PyG batch vector over the items, no
        ``items x items`` mask; cross-attention takes only a padded key mask).
    use_distance : bool
        add the distance-aware trivector features.
    distance_weights : Tensor | None
        ``(heads, channels)``-broadcastable non-negative weights of the distance
        features per query channel (the reference's ``exp(log_weights)``).
    eps : float or None
        ``eps`` of [`distance_features`][].

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
    if not (attn_mask is None or isinstance(attn_mask, (Tensor, BatchLayout))):
        raise TypeError(f"attn_mask must be a bool tensor or a BatchLayout, got {type(attn_mask).__name__}")
    if k_mv.shape[-3] != v_mv.shape[-3]:
        raise ValueError(f"k_mv and v_mv must have the same number of items, got shapes {tuple(k_mv.shape)} "
                         f"and {tuple(v_mv.shape)}")
    cross = q_mv.shape[-3] != k_mv.shape[-3]
    if cross and isinstance(attn_mask, BatchLayout) and attn_mask.is_flat:
        raise ValueError(f"cross-attention ({q_mv.shape[-3]} queries over {k_mv.shape[-3]} keys) needs a padded "
                         "key mask; a flat (batch-vector) layout pairs each query with keys of its own set")
    weights = None if distance_weights is None else distance_weights[..., None, :]  # over the items
    q, k, v, scale = attention_features(q_mv, k_mv, v_mv, q_s, k_s, v_s, use_distance, weights, eps)
    # items first, (..., items, heads, width): the layout of geomlin.gatr.attention
    q, k, v = (t.transpose(-2, -3) for t in (q, k, v))
    if isinstance(attn_mask, Tensor):
        check_mask(attn_mask, "attn_mask")
        out = attend_masked(q, k, v, attn_mask, scale)
    else:
        try:
            lead = torch.broadcast_shapes(q.shape[:-3], k.shape[:-3], v.shape[:-3])
        except RuntimeError as err:
            raise ValueError(f"the leading axes of q_mv {tuple(q_mv.shape[:-4])}, k_mv {tuple(k_mv.shape[:-4])} "
                             f"and v_mv {tuple(v_mv.shape[:-4])} do not broadcast") from err
        flat = [t.expand(*lead, *t.shape[-3:]).reshape(-1, *t.shape[-3:]) for t in (q, k, v)]
        out = attend(*flat, attn_mask, scale).reshape(*lead, *q.shape[-3:-1], -1)
    mv, s = planes.attention_values(out.transpose(-2, -3), v_mv.shape[-2], 0 if v_s is None else v_s.shape[-1])
    return mv.movedim(0, -1), s


__all__ = [
    "attention_features", "attention_mask", "canonical_reference", "distance_features",
    "equi_layer_norm", "equi_linear", "equivariant_join", "geometric_attention", "geometric_product",
    "grade_dropout", "inner_product", "join", "join_reference", "norm_squared", "outer_product",
    "scalar_gated_gelu",
]
