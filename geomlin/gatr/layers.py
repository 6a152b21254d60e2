"""GATr layers: thin ``nn.Module`` shells around :mod:`geomlin.gatr.primitives`.

Every layer maps ``(mv (..., items, mv_channels, 16), scalars (..., items, s_channels) | None)``
to the same pair. ``method`` (``"auto"`` or ``"dense"``) selects the primitive
implementations; ``"dense"`` reproduces the reference-style einsum path.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from geomlin.algebra import pga
from geomlin.gatr import primitives as P


def _check_pair(mv: Tensor, scalars: Tensor | None, mv_channels: int, s_channels: int, where: str) -> None:
    """Validate ``mv (..., mv_channels, 16)`` and ``scalars (..., s_channels)`` at a public boundary."""
    pga.check_mv(mv, f"{where}: mv")
    if mv.ndim < 2 or mv.shape[-2] != mv_channels:
        raise ValueError(f"{where}: mv must have shape (..., {mv_channels}, 16), got {tuple(mv.shape)}")
    if s_channels:
        if scalars is None:
            raise ValueError(f"{where}: expected scalars of shape (..., {s_channels}), got None")
        if scalars.shape[-1] != s_channels or scalars.shape[:-1] != mv.shape[:-2]:
            raise ValueError(f"{where}: scalars must have shape {tuple(mv.shape[:-2]) + (s_channels,)} "
                             f"to match mv {tuple(mv.shape)}, got {tuple(scalars.shape)}")
    elif scalars is not None and scalars.shape[-1] != 0:
        raise ValueError(f"{where}: built without scalar channels but got scalars of shape {tuple(scalars.shape)}")


class EquiLinear(nn.Module):
    """Equivariant linear layer on multivector and scalar channels.

    ``mv (..., in_mv, 16), scalars (..., in_s) -> mv (..., out_mv, 16), scalars (..., out_s)``.

    Multivectors mix through the 9 equivariant basis maps (:func:`~geomlin.gatr.primitives.equi_linear`);
    input scalars feed the output scalar components ``<mv>_0``; output scalars read input scalars
    and ``<mv>_0``. The multivector bias sits on the scalar component (the only invariant one).
    Missing scalar sides are ``0`` channels (``scalars=None``).
    """

    def __init__(self, in_mv_channels: int, out_mv_channels: int, in_s_channels: int = 0,
                 out_s_channels: int = 0, bias: bool = True, method: str = "auto"):
        super().__init__()
        for name, v in (("in_mv_channels", in_mv_channels), ("out_mv_channels", out_mv_channels),
                        ("in_s_channels", in_s_channels), ("out_s_channels", out_s_channels)):
            if not isinstance(v, int) or v < 0:
                raise ValueError(f"{name} must be a non-negative int, got {v!r}")
        if in_mv_channels == 0 or out_mv_channels == 0:
            raise ValueError("EquiLinear needs at least one input and one output multivector channel")
        self.in_mv, self.out_mv, self.in_s, self.out_s = in_mv_channels, out_mv_channels, in_s_channels, out_s_channels
        self.method = P._check_method(method)
        fan_in = in_mv_channels + in_s_channels
        self.weight = nn.Parameter(torch.randn(out_mv_channels, in_mv_channels, P.NUM_LINEAR_BASIS) / math.sqrt(fan_in))
        with torch.no_grad():  # e0 maps start smaller: they raise grades and magnitudes
            self.weight[..., 5:] *= 0.5
        self.s_to_mv = nn.Parameter(torch.randn(out_mv_channels, in_s_channels) / math.sqrt(fan_in)) if in_s_channels else None
        self.mv_to_s = nn.Parameter(torch.randn(out_s_channels, in_mv_channels) / math.sqrt(fan_in)) if out_s_channels else None
        self.s_to_s = (nn.Parameter(torch.randn(out_s_channels, in_s_channels) / math.sqrt(fan_in))
                       if out_s_channels and in_s_channels else None)
        self.bias_mv = nn.Parameter(torch.zeros(out_mv_channels)) if bias else None
        self.bias_s = nn.Parameter(torch.zeros(out_s_channels)) if bias and out_s_channels else None

    def extra_repr(self) -> str:
        return f"mv {self.in_mv}->{self.out_mv}, scalars {self.in_s}->{self.out_s}, method={self.method}"

    def forward(self, mv: Tensor, scalars: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """``(mv (..., in_mv, 16), scalars (..., in_s) | None) -> (mv (..., out_mv, 16), scalars (..., out_s) | None)``."""
        _check_pair(mv, scalars if self.in_s else None, self.in_mv, self.in_s, "EquiLinear")
        out = P.equi_linear(mv, self.weight.to(mv.dtype), self.method)
        scalar_part = None
        if self.s_to_mv is not None and scalars is not None:
            scalar_part = scalars @ self.s_to_mv.T.to(scalars.dtype)
        if self.bias_mv is not None:
            scalar_part = self.bias_mv.to(mv.dtype) if scalar_part is None else scalar_part + self.bias_mv.to(mv.dtype)
        if scalar_part is not None:  # onto the scalar component only
            out = out + F.pad(scalar_part[..., None], (pga.SCALAR, pga.DIM - 1 - pga.SCALAR))
        s_out = None
        if self.out_s:
            s_out = mv[..., pga.SCALAR] @ self.mv_to_s.T.to(mv.dtype)
            if self.s_to_s is not None and scalars is not None:
                s_out = s_out + scalars @ self.s_to_s.T.to(scalars.dtype)
            if self.bias_s is not None:
                s_out = s_out + self.bias_s.to(mv.dtype)
        return out, s_out


class EquiLayerNorm(nn.Module):
    """Equivariant layer norm on multivector channels plus a plain layer norm on scalars.

    ``(mv (..., channels, 16), scalars (..., s) | None) -> same shapes``.
    """

    def __init__(self, eps: float = 1e-6):
        super().__init__()
        self.eps = eps

    def forward(self, mv: Tensor, scalars: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        mv = P.equi_layer_norm(mv, eps=self.eps)
        if scalars is not None and scalars.shape[-1] > 0:
            scalars = F.layer_norm(scalars, scalars.shape[-1:], eps=self.eps)
        return mv, scalars


class GeometricBilinear(nn.Module):
    """Geometric product and equivariant join of learned projections (GATr sec. 3.2).

    ``mv (..., in_mv, 16), scalars (..., in_s), reference (..., 16)-broadcastable
    -> mv (..., out_mv, 16), scalars (..., out_s)``. One :class:`EquiLinear` produces the four
    operands (``hidden`` channels each), the outputs ``x y`` and ``<ref>_{e0123} (x' v y')``
    are concatenated and mixed by a second :class:`EquiLinear`.
    """

    def __init__(self, in_mv_channels: int, out_mv_channels: int, in_s_channels: int = 0,
                 out_s_channels: int = 0, hidden_mv_channels: int | None = None, method: str = "auto"):
        super().__init__()
        hidden = hidden_mv_channels or max(1, out_mv_channels // 2)
        self.hidden = hidden
        self.method = P._check_method(method)
        self.proj_in = EquiLinear(in_mv_channels, 4 * hidden, in_s_channels, 0, method=method)
        self.proj_out = EquiLinear(2 * hidden, out_mv_channels, in_s_channels, out_s_channels, method=method)

    def forward(self, mv: Tensor, scalars: Tensor | None, reference: Tensor) -> tuple[Tensor, Tensor | None]:
        ops, _ = self.proj_in(mv, scalars)
        a, b, c, d = ops.split(self.hidden, dim=-2)
        gp = P.geometric_product(a, b, self.method)
        jn = P.equivariant_join(c, d, reference, self.method)
        return self.proj_out(torch.cat([gp, jn], -2), scalars)


class GeometricAttention(nn.Module):
    """Multi-head geometric attention (GATr sec. 3.3) in one ``scaled_dot_product_attention`` call.

    ``mv (..., items, in_mv, 16), scalars (..., items, in_s) -> mv (..., items, out_mv, 16),
    scalars (..., items, out_s)``. Queries/keys: invariant inner-product components, the
    distance-aware trivector features and scalar channels; values: full multivectors and scalars.

    Masks: ``mask (..., items)`` bool (True = real item) for padded batches, and/or
    ``batch (items,)`` long for PyG-style flat batches (block-diagonal attention).
    """

    def __init__(self, in_mv_channels: int, out_mv_channels: int, in_s_channels: int = 0,
                 out_s_channels: int = 0, num_heads: int = 4, head_mv_channels: int | None = None,
                 head_s_channels: int | None = None, use_distance: bool = True, method: str = "auto"):
        super().__init__()
        if not isinstance(num_heads, int) or num_heads < 1:
            raise ValueError(f"num_heads must be a positive int, got {num_heads!r}")
        self.heads = num_heads
        self.head_mv = head_mv_channels or max(1, 2 * in_mv_channels // num_heads)
        self.head_s = head_s_channels if head_s_channels is not None else (
            max(1, 2 * in_s_channels // num_heads) if in_s_channels else 0)
        self.use_distance = use_distance
        self.qkv = EquiLinear(in_mv_channels, 3 * num_heads * self.head_mv, in_s_channels,
                              3 * num_heads * self.head_s, method=method)
        self.out = EquiLinear(num_heads * self.head_mv, out_mv_channels, num_heads * self.head_s,
                              out_s_channels, method=method)

    def forward(self, mv: Tensor, scalars: Tensor | None = None, attn_mask: Tensor | None = None
                ) -> tuple[Tensor, Tensor | None]:
        """``attn_mask``: boolean, from :func:`~geomlin.gatr.primitives.attention_mask`."""
        h, c, cs = self.heads, self.head_mv, self.head_s
        qkv_mv, qkv_s = self.qkv(mv, scalars)
        # (..., items, 3*h*c, 16) -> 3 x (..., h, items, c, 16)
        qkv_mv = qkv_mv.unflatten(-2, (3, h, c)).movedim(-4, 0).movedim(-4, -3)
        if cs:
            qkv_s = qkv_s.unflatten(-1, (3, h, cs)).movedim(-3, 0).movedim(-3, -2)
            qs, ks, vs = qkv_s
        else:
            qs = ks = vs = None
        out_mv, out_s = P.geometric_attention(qkv_mv[0], qkv_mv[1], qkv_mv[2], qs, ks, vs,
                                              attn_mask=attn_mask, use_distance=self.use_distance)
        out_mv = out_mv.movedim(-4, -3).flatten(-3, -2)  # (..., items, h*c, 16)
        if out_s is not None:
            out_s = out_s.movedim(-3, -2).flatten(-2)
        return self.out(out_mv, out_s)


class GeometricMLP(nn.Module):
    """Bilinear -> scalar-gated GELU -> linear: the GATr block's feed-forward part."""

    def __init__(self, mv_channels: int, s_channels: int = 0, hidden_mv_channels: int | None = None,
                 hidden_s_channels: int | None = None, method: str = "auto"):
        super().__init__()
        hidden_mv = hidden_mv_channels or 2 * mv_channels
        hidden_s = hidden_s_channels if hidden_s_channels is not None else 2 * s_channels
        self.bilinear = GeometricBilinear(mv_channels, hidden_mv, s_channels, hidden_s,
                                          hidden_mv_channels=max(1, hidden_mv // 2), method=method)
        self.out = EquiLinear(hidden_mv, mv_channels, hidden_s, s_channels, method=method)

    def forward(self, mv: Tensor, scalars: Tensor | None, reference: Tensor) -> tuple[Tensor, Tensor | None]:
        h_mv, h_s = self.bilinear(mv, scalars, reference)
        h_mv = P.scalar_gated_gelu(h_mv)
        if h_s is not None:
            h_s = F.gelu(h_s)
        return self.out(h_mv, h_s)


class GATrBlock(nn.Module):
    """Pre-norm transformer block: ``x + Attn(LN(x))`` then ``x + MLP(LN(x))``.

    ``mv (..., items, mv_channels, 16), scalars (..., items, s_channels) | None`` in and out;
    ``reference`` for the join (see :func:`~geomlin.gatr.primitives.join_reference`),
    ``attn_mask`` from :func:`~geomlin.gatr.primitives.attention_mask`.
    """

    def __init__(self, mv_channels: int, s_channels: int = 0, num_heads: int = 4,
                 head_mv_channels: int | None = None, head_s_channels: int | None = None,
                 mlp_hidden_mv_channels: int | None = None, mlp_hidden_s_channels: int | None = None,
                 dropout: float = 0.0, use_distance: bool = True, method: str = "auto"):
        super().__init__()
        self.mv_channels, self.s_channels = mv_channels, s_channels
        self.norm = EquiLayerNorm()
        self.attention = GeometricAttention(mv_channels, mv_channels, s_channels, s_channels, num_heads,
                                            head_mv_channels, head_s_channels, use_distance, method)
        self.mlp = GeometricMLP(mv_channels, s_channels, mlp_hidden_mv_channels, mlp_hidden_s_channels, method)
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.dropout = dropout

    def _drop(self, mv: Tensor, s: Tensor | None) -> tuple[Tensor, Tensor | None]:
        if not self.training or self.dropout == 0.0:
            return mv, s
        return P.grade_dropout(mv, self.dropout), (F.dropout(s, self.dropout) if s is not None else None)

    def forward(self, mv: Tensor, scalars: Tensor | None, reference: Tensor,
                attn_mask: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        h_mv, h_s = self.norm(mv, scalars)
        a_mv, a_s = self._drop(*self.attention(h_mv, h_s, attn_mask))
        mv = mv + a_mv
        scalars = scalars + a_s if scalars is not None else None
        h_mv, h_s = self.norm(mv, scalars)
        m_mv, m_s = self._drop(*self.mlp(h_mv, h_s, reference))
        mv = mv + m_mv
        scalars = scalars + m_s if scalars is not None else None
        return mv, scalars
