"""Vector neuron layers (Deng et al. 2021, "Vector Neurons: A General Framework for
SO(3)-Equivariant Networks", Sec. 3): features are lists of 3-vectors ``(..., C, 3)``.

Linear layers mix channels only (``V -> W V``, no bias), and the nonlinearity clips
each vector against a learned direction ``k = U V``:

    q' = q                                  if <q, k> >= 0
    q' = q - <q, k> / |k|^2 k               otherwise              (Eq. 5)

Both commute with every orthogonal matrix acting on the last axis, so these layers are
O(3)-equivariant (rotations and reflections), in any dimension ``d``.
Pooling helpers work on padded ``(B, N, C, d)`` batches with a mask and on flat
``(N_total, C, d)`` batches with a batch vector.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

#: Added to ``|k|^2`` so the projection is finite when the direction vanishes.
VN_EPS = 1e-12
#: Default negative slope of the vector-neuron leaky ReLU.
VN_NEGATIVE_SLOPE = 0.2
#: Input channels of :class:`VNPointNet`: ``x, C x, C^2 x`` (see :func:`moment_features`).
MOMENT_CHANNELS = 3


class VNLinear(nn.Module):
    """Channel mixing ``(..., C_in, d) -> (..., C_out, d)``, ``out = W V`` (no bias)."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_channels, in_channels) / math.sqrt(in_channels))

    def forward(self, v: Tensor) -> Tensor:
        # One (.. * d, C_in) x (C_in, C_out) GEMM on the transposed layout.
        return nn.functional.linear(v.transpose(-1, -2), self.weight.to(v.dtype)).transpose(-1, -2)


class VNLeakyReLU(nn.Module):
    """Vector-neuron leaky ReLU ``(..., C, d) -> (..., C, d)`` (Deng et al. 2021, Eq. 5-6)."""

    def __init__(self, channels: int, negative_slope: float = VN_NEGATIVE_SLOPE):
        super().__init__()
        self.direction = VNLinear(channels, channels)
        self.negative_slope = float(negative_slope)

    def forward(self, q: Tensor) -> Tensor:
        k = self.direction(q)
        dot = (q * k).sum(-1, keepdim=True)
        proj = q - dot / ((k * k).sum(-1, keepdim=True) + VN_EPS) * k
        clipped = torch.where(dot >= 0, q, proj)
        return self.negative_slope * q + (1 - self.negative_slope) * clipped


def pool_mean(v: Tensor, mask: Tensor | None = None, batch: Tensor | None = None,
              num_graphs: int | None = None) -> Tensor:
    """Mean over points: ``(B, N, ...)`` (masked) -> ``(B, ...)``, or flat ``(N_total, ...)``
    with ``batch`` -> ``(B, ...)``."""
    if batch is not None:
        B = int(batch.max()) + 1 if num_graphs is None else num_graphs
        sums = v.new_zeros(B, *v.shape[1:]).index_add(0, batch, v)
        counts = v.new_zeros(B).index_add(0, batch, torch.ones_like(v[:, 0, 0]))
        return sums / counts.clamp_min(1).reshape(B, *([1] * (v.ndim - 1)))
    if mask is None:
        return v.mean(1)
    w = mask.to(v.dtype).reshape(*mask.shape, *([1] * (v.ndim - 2)))
    return (v * w).sum(1) / w.sum(1).clamp_min(1)


def broadcast_pooled(pooled: Tensor, like: Tensor, batch: Tensor | None = None) -> Tensor:
    """Pooled ``(B, ...)`` back onto the points of ``like`` (padded ``(B, N, ...)`` or flat)."""
    if batch is not None:
        return pooled[batch]
    return pooled[:, None].expand(-1, like.shape[1], *pooled.shape[1:])


def moment_features(x: Tensor, mask: Tensor | None = None, batch: Tensor | None = None,
                    num_graphs: int | None = None) -> Tensor:
    """``(.., d)`` points -> ``(.., MOMENT_CHANNELS, d)``: ``x, C x / tr C, C^2 x / (tr C)^2``."""
    outer = x[..., :, None] * x[..., None, :]
    cov = pool_mean(outer, mask, batch, num_graphs)  # (B, d, d)
    cov = cov / (torch.diagonal(cov, dim1=-2, dim2=-1).sum(-1)[:, None, None] + VN_EPS)
    cov = broadcast_pooled(cov, x, batch)
    c1 = (cov @ x.unsqueeze(-1)).squeeze(-1)
    c2 = (cov @ c1.unsqueeze(-1)).squeeze(-1)
    return torch.stack([x, c1, c2], dim=-2)


class VNPointNet(nn.Module):
    """A small vector-neuron PointNet: positions ``(.., d)`` -> ``out_vectors`` vectors per cloud.

    The input channels of point ``x_i`` are ``x_i, C x_i / tr C, C^2 x_i / (tr C)^2`` with
    ``C = mean_i x_i x_i^T`` (equivariant: ``C -> R C R^T``). Linear vector neurons on
    ``x_i`` alone would keep every feature parallel to ``x_i``, and their mean over a
    centred cloud would vanish; the moment channels make the pooled vectors span space.
    Each layer is ``VNLeakyReLU(VNLinear([h, mean(h)]))``: per-point features
    concatenated with the cloud's mean feature, so points see global context.

    Input: ``x (B, N, d)`` (with optional mask) or flat ``(N_total, d)`` with ``batch``,
    already centred when translations matter. Output: ``(B, out_vectors, d)``.
    O(d)-equivariant: ``f(x R^T) = f(x) R^T`` for every orthogonal ``R``.
    """

    def __init__(self, out_vectors: int, hidden: int = 16, layers: int = 2):
        super().__init__()
        if layers < 1:
            raise ValueError(f"layers must be >= 1, got {layers}")
        self.inp = nn.Sequential(VNLinear(MOMENT_CHANNELS, hidden), VNLeakyReLU(hidden))
        self.blocks = nn.ModuleList(nn.Sequential(VNLinear(2 * hidden, hidden), VNLeakyReLU(hidden))
                                    for _ in range(layers))
        self.out = VNLinear(2 * hidden, out_vectors)

    def forward(self, x: Tensor, mask: Tensor | None = None, batch: Tensor | None = None,
                num_graphs: int | None = None) -> Tensor:
        h = self.inp(moment_features(x, mask, batch, num_graphs))
        for block in self.blocks:
            g = broadcast_pooled(pool_mean(h, mask, batch, num_graphs), h, batch)
            h = block(torch.cat([h, g], dim=-2))
        pooled = pool_mean(h, mask, batch, num_graphs)
        rms = pool_mean(h * h, mask, batch, num_graphs).sum(-1, keepdim=True).add(VN_EPS).sqrt()
        # Invariant norms rescale the pooled vectors: a per-cloud gate keeps O(d) equivariance.
        return self.out(torch.cat([pooled, pooled * torch.tanh(rms)], dim=-2))
