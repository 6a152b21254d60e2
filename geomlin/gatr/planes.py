"""Component-major ("planes") kernels: the layout of multivector activations inside GATr's layers.

The public tensors are ``(..., channels, 16)``. Inside the layers the same numbers are stored as
``planes (16, M, channels)``, ``M`` the number of items over all leading axes: each component
of the algebra is one contiguous ``(M, channels)`` matrix. In this layout

* an equivariant linear map is two batched matmuls over planes (grade weights, ``e0`` maps)
  with no transposes around them;
* the geometric product and the join are products of ``(16, R)`` matrices with small tables
  ([`geomlin.algebra.pga`][]'s complex 2x2 representation; the 81-pair join table), run
  over column chunks that stay in cache;
* layer norm, gating, residuals and the attention features are elementwise on planes.

[`GATr`][] converts its input once ([`to_planes`][]) and its output once
([`from_planes`][]); the layers' public ``forward`` methods convert at their boundary. Every
function here is the same map as its counterpart in [`geomlin.gatr.primitives`][]
(tested). Scalars stay ``(M, s_channels)``. The kernels check shapes and dtypes only (no finiteness: they
run inside every block).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from geomlin.algebra import pga
from geomlin.algebra.clifford import ConstantTables, table_on
from geomlin.gatr import primitives as P
from geomlin.validation import check_float

#: Columns (items x channels) per chunk of the bilinear products: intermediates of
#: ``(88, CHUNK_COLUMNS)`` floats stay in the L2 cache.
CHUNK_COLUMNS = 4096


def _transposed(tables) -> Callable[[], tuple[Tensor, ...]]:
    return lambda: tuple(t.T.contiguous() for t in tables())


#: Tables of the planes kernels (the pga product tables transposed for ``table @ planes``).
_BUILDERS = {"planes:geometric_product": _transposed(pga._matrix_maps), "planes:join": _transposed(pga._join_sparse)}


def tables(*keys: str) -> ConstantTables:
    """The constant tables the planes kernels read through ``tables=``, as a module's buffers.

    ``keys``: ``"planes:geometric_product"`` ([`geometric_product`][]), ``"planes:join"``
    ([`join`][]), or any key of [`geomlin.gatr.primitives.tables`][]
    (``"gatr:linear"`` for [`linear`][] and [`sources`][], ``"gatr:nondegenerate"`` for [`norm_squared`][] and
    [`layer_norm`][], ``"gatr:grades"`` for [`grade_dropout`][], ``"gatr:attention"`` for
    [`attention_features`][]). Without ``tables=`` the kernels read a per-(device, dtype) cache.
    """
    return ConstantTables(dict((key, _BUILDERS[key]()) if key in _BUILDERS else P.build_table(key) for key in keys))


def _table(key: str, device, dtype=None, index: int = 0, tables: ConstantTables | None = None) -> Tensor:
    build = _BUILDERS[key] if key in _BUILDERS else P._table_builders()[key]
    return table_on(key, build, device, dtype, index, tables)


def _p(xp, name: str = "planes") -> Tensor:
    """Boundary check of a planes tensor ``(16, M, channels)`` (shape and dtype only; cheap)."""
    if not isinstance(xp, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(xp).__name__}")
    if not xp.is_floating_point():
        raise TypeError(f"{name} must have a floating-point dtype, got {xp.dtype}")
    if xp.ndim != 3 or xp.shape[0] != pga.DIM:
        raise ValueError(f"{name} must be planes of shape (16, items, channels), got {tuple(xp.shape)}")
    return xp


def to_planes(x: Tensor) -> Tensor:
    """``(..., channels, 16) -> (16, M, channels)`` (one copy)."""
    pga.check_mv(x, "x")
    if x.ndim < 2:
        raise ValueError(f"x must have a channel axis, (..., channels, 16), got shape {tuple(x.shape)}")
    return x.reshape(-1, x.shape[-2], pga.DIM).permute(2, 0, 1).contiguous()


def from_planes(p: Tensor, lead: tuple) -> Tensor:
    """``(16, M, channels) -> (*lead, channels, 16)`` (one copy)."""
    _p(p)
    return p.permute(1, 2, 0).reshape(*lead, p.shape[-1], pga.DIM)


# ---------------------------------------------------------------------- linear
def sources(xp: Tensor, tables: ConstantTables | None = None) -> Tensor:
    """The 8 planes the ``e0`` maps read, ``(8, M, channels)`` (shared by several linear maps)."""
    _p(xp)
    return xp.index_select(0, P._plan_on(xp.device, tables)[1])


def linear(xp: Tensor, weight: Tensor, scalar_bias: Tensor | None = None, src: Tensor | None = None,
           tables: ConstantTables | None = None) -> Tensor:
    """[`equi_linear`][geomlin.gatr.primitives.equi_linear] on planes: ``(16, M, in) -> (16, M, out)``.

    ``weight (out, in, 9)``; ``scalar_bias`` ``(out,)`` or ``(M, out)`` onto the scalar plane;
    ``src`` = [`sources`][] of ``xp`` when already computed; ``tables`` see [`tables`][].
    """
    _p(xp)
    if not isinstance(weight, Tensor) or weight.shape[1:] != (xp.shape[2], P.NUM_LINEAR_BASIS):
        raise ValueError(f"weight must have shape (out, {xp.shape[2]}, {P.NUM_LINEAR_BASIS}), got "
                         f"{tuple(weight.shape) if isinstance(weight, Tensor) else type(weight).__name__}")
    grade_of, source, target, which = P._plan_on(xp.device, tables)
    weight = weight.to(xp.dtype)
    planes = torch.bmm(xp, weight[:, :, grade_of].permute(2, 1, 0))
    if src is None:
        src = xp.index_select(0, source)
    extra = torch.bmm(src, weight[:, :, which].permute(2, 1, 0))
    if scalar_bias is not None:
        extra = torch.cat([extra, scalar_bias.to(extra.dtype).expand(1, xp.shape[1], weight.shape[0])])
        target = P._targets_with_scalar_on(xp.device, tables)
    # in place on a fresh (non-view) tensor: the backward pass needs no copy of it
    return planes.index_add_(0, target, extra)


# ---------------------------------------------------------------------- unary maps
def norm_squared(xp: Tensor, tables: ConstantTables | None = None) -> Tensor:
    """``<x, x>`` per item and channel: ``(16, M, C) -> (M, C)``."""
    sq = _p(xp) * xp
    mask = _table("gatr:nondegenerate", xp.device, sq.dtype, tables=tables)
    return (mask[None, :] @ sq.reshape(pga.DIM, -1)).reshape(xp.shape[1:])


def layer_norm(xp: Tensor, eps: float, tables: ConstantTables | None = None) -> Tensor:
    """[`equi_layer_norm`][geomlin.gatr.primitives.equi_layer_norm] on planes (mean over channels).

    The norm is computed in float32 for half-precision planes and under autocast; the result has
    the dtype of ``xp``.
    """
    if xp.dtype in (torch.float32, torch.float64) and not torch.is_autocast_enabled(xp.device.type):
        return xp * norm_squared(xp, tables).mean(-1, keepdim=True).clamp_min(eps).rsqrt()
    with torch.autocast(xp.device.type, enabled=False):
        wide = P._at_least_float32(xp)
        return (wide * norm_squared(wide, tables).mean(-1, keepdim=True).clamp_min(eps).rsqrt()).to(xp.dtype)


def gated_gelu(xp: Tensor) -> Tensor:
    """[`scalar_gated_gelu`][geomlin.gatr.primitives.scalar_gated_gelu] (tanh GELU of the scalar plane)."""
    return _p(xp) * F.gelu(xp[pga.SCALAR], approximate="tanh")


def grade_dropout(xp: Tensor, p: float, generator: torch.Generator | None = None,
                  tables: ConstantTables | None = None) -> Tensor:
    """[`grade_dropout`][geomlin.gatr.primitives.grade_dropout] on planes: one draw per item, channel and grade."""
    _p(xp)
    p = check_float(p, "dropout probability", minimum=0.0, maximum=1.0, strict_maximum=True)
    keep = torch.rand(5, *xp.shape[1:], dtype=xp.dtype, device=xp.device, generator=generator) >= p
    return xp * keep[P._grade_index_on(xp.device, tables)].to(xp.dtype) / (1.0 - p)


# ---------------------------------------------------------------------- bilinear maps
def _split(t: Tensor) -> tuple[Tensor, ...]:
    """Item chunks of planes ``(16, M, C)`` of about [`CHUNK_COLUMNS`][] columns each, as
    ``(16, m * C)`` matrices (views; ``split`` rather than slicing, so the backward pass
    concatenates the chunks' gradients instead of zero-filling a full tensor per chunk).

    A symbolic item count (``torch.export`` with a dynamic batch or items size) is one chunk: the
    number of chunks would be a Python int fixed by the example's size.
    """
    if isinstance(t.shape[1], torch.SymInt):
        return (t.reshape(pga.DIM, -1),)
    step = max(1, CHUNK_COLUMNS // max(t.shape[2], 1))
    return tuple(c.reshape(pga.DIM, -1) for c in t.split(step, dim=1))


def geometric_product(a: Tensor, b: Tensor, tables: ConstantTables | None = None) -> Tensor:
    """Geometric product of planes ``(16, M, C) x (16, M, C) -> (16, M, C)``.

    The complex 2x2 representation of
    [`geomlin.algebra.pga.geometric_product`][], computed with complex
    elementwise products over column chunks (float32 / float64).
    """
    _p(a, "a")
    _p(b, "b")
    dtype = a.dtype if a.dtype in (torch.float32, torch.float64) else torch.float32
    with torch.autocast(a.device.type, enabled=False):
        a, b = a.to(dtype), b.to(dtype)
        wl, wr, wo = (_table("planes:geometric_product", a.device, dtype, i, tables) for i in range(3))
        outs = []
        for x, y in zip(_split(a), _split(b)):
            left = (wl @ x).view(3, 2, 2, 2, -1)  # (product, row, column, re/im, columns)
            right = (wr @ y).view(3, 2, 2, 2, -1)
            lc = torch.complex(left[:, :, :, 0], left[:, :, :, 1])
            rc = torch.complex(right[:, :, :, 0], right[:, :, :, 1])
            prod = lc[:, :, 0, None] * rc[:, None, 0] + lc[:, :, 1, None] * rc[:, None, 1]
            flat = torch.view_as_real(prod).movedim(-1, 3).reshape(24, -1)
            outs.append((wo @ flat).view(pga.DIM, -1, a.shape[2]))
        return torch.cat(outs, 1) if len(outs) > 1 else outs[0]


def join(a: Tensor, b: Tensor, tables: ConstantTables | None = None) -> Tensor:
    """Join [`geomlin.algebra.pga.join`][] of planes ``(16, M, C)`` (81-pair table, column chunks)."""
    _p(a, "a")
    _p(b, "b")
    sx, sy, r = (_table("planes:join", a.device, a.dtype, i, tables) for i in range(3))
    b = b.to(a.dtype)
    outs = [(r @ ((sx @ x) * (sy @ y))).view(pga.DIM, -1, a.shape[2]) for x, y in zip(_split(a), _split(b))]
    return torch.cat(outs, 1) if len(outs) > 1 else outs[0]


# ---------------------------------------------------------------------- attention
def _qk_features(p: Tensor, heads: int, channels: int, role: str, use_distance: bool, weights: Tensor | None,
                 eps: float | None, tables: ConstantTables | None) -> list[Tensor]:
    """Query or key features of planes ``p (16, M, heads * channels)`` as ``(M, heads, n)`` pieces."""
    m = p.shape[1]
    comps = P.ATTENTION_IP_COMPONENTS if use_distance else pga.NONDEGENERATE
    ip = p.index_select(0, _table("gatr:attention", p.device, index=0 if use_distance else 1, tables=tables))
    parts = [ip.view(len(comps), m, heads, channels).permute(1, 2, 0, 3).flatten(2)]
    if use_distance:
        # squared distances come from differences of large terms: computed in float32 at least
        with torch.autocast(p.device.type, enabled=False):
            w = P._at_least_float32(p[P.TRIVECTOR_WEIGHT])
            pos = P._at_least_float32(p.index_select(0, _table("gatr:attention", p.device, index=2, tables=tables)))
            if eps is not None:
                scale = w / (w * w + eps)
                w, pos = w * scale, pos * scale
            pp = (pos * pos).sum(0)
            if role == "query":
                dist = torch.cat([pp[None], (w * w)[None], w * pos])
                if weights is not None:
                    dist = dist * weights.reshape(1, 1, -1).to(dist.dtype)
            else:
                dist = torch.cat([-(w * w)[None], -pp[None], 2.0 * w * pos])
        parts.append(dist.view(P.NUM_DISTANCE_FEATURES, m, heads, channels).permute(1, 2, 0, 3).flatten(2))
    return parts


def attention_features(qkv: Tensor, qkv_s: Tensor | None, heads: int, kv_heads: int, channels: int,
                       s_channels: int, use_distance: bool = True, weights: Tensor | None = None,
                       eps: float | None = P.DISTANCE_EPS, tables: ConstantTables | None = None
                       ) -> tuple[Tensor, Tensor, Tensor, float]:
    """Queries, keys and values of [`attention_features`][geomlin.gatr.primitives.attention_features] from the
    planes of a fused projection ``qkv (16, M, (heads + 2 kv_heads) channels)`` and scalars
    ``qkv_s (M, (heads + 2 kv_heads) s_channels)``.

    Returns ``q (M, heads, D)``, ``k, v (M, kv_heads, D)`` (features in a head-internal order of
    their own; values component-major, unpacked by [`attention_values`][]) and the scale.
    """
    _p(qkv, "qkv")
    if qkv.shape[2] != (heads + 2 * kv_heads) * channels:
        raise ValueError(f"qkv must have (heads + 2 kv_heads) * channels = {(heads + 2 * kv_heads) * channels} "
                         f"channels, got {qkv.shape[2]}")
    hq, hk, c = heads * channels, kv_heads * channels, channels
    qf = _qk_features(qkv[:, :, :hq], heads, c, "query", use_distance, weights, eps, tables)
    kf = _qk_features(qkv[:, :, hq:hq + hk], kv_heads, c, "key", use_distance, None, eps, tables)
    m = qkv.shape[1]
    vf = [qkv[:, :, hq + hk:].view(pga.DIM, m, kv_heads, c).permute(1, 2, 0, 3).flatten(2)]
    if s_channels:
        cs = s_channels
        qf.append(qkv_s[:, :heads * cs].view(m, heads, cs))
        kf.append(qkv_s[:, heads * cs:(heads + kv_heads) * cs].view(m, kv_heads, cs))
        vf.append(qkv_s[:, (heads + kv_heads) * cs:].view(m, kv_heads, cs))
    n_qk = sum(f.shape[-1] for f in qf)
    width = P._head_width(n_qk, sum(f.shape[-1] for f in vf))
    dtype = functools.reduce(torch.promote_types, [f.dtype for f in qf + kf + vf])
    return (P._pad([f.to(dtype) for f in qf], width), P._pad([f.to(dtype) for f in kf], width),
            P._pad([f.to(dtype) for f in vf], width), 1.0 / n_qk ** 0.5)


def attention_values(out: Tensor, channels: int, s_channels: int) -> tuple[Tensor, Tensor | None]:
    """Unpack attention outputs ``(M, heads, D)`` into planes ``(16, M, heads * channels)`` and
    scalars ``(M, heads * s_channels)`` (or ``None``)."""
    m, heads = out.shape[0], out.shape[1]
    n_mv = pga.DIM * channels
    mv = out[..., :n_mv].reshape(m, heads, pga.DIM, channels).permute(2, 0, 1, 3).reshape(pga.DIM, m, heads * channels)
    s = out[..., n_mv:n_mv + s_channels].reshape(m, heads * s_channels) if s_channels else None
    return mv, s
