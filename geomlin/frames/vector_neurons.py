"""Vector neuron layers (Deng et al. 2021, "Vector Neurons: A General Framework for
SO(3)-Equivariant Networks", Sec. 3): features are lists of d-vectors ``(..., C, d)``.

Linear layers mix channels only (``V -> W V``, no bias), and the nonlinearity clips
each vector against a learned direction ``k = U V``:

    q' = q                                  if <q, k> >= 0
    q' = q - <q, k> / |k|^2 k               otherwise              (Eq. 5)

Both commute with every orthogonal matrix acting on the last axis, so these layers are
O(d)-equivariant (rotations and reflections).
Pooling over the points of padded ``(B, N, C, d)`` or flat ``(N_total, C, d)`` batches is that of
[`geomlin.batching`][] (``pool_mean``, ``pool_softmax``).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from geomlin.batching import BatchLayout, broadcast_pooled, pool_mean, pool_softmax
from geomlin.frames.pca import cloud_layout
from geomlin.validation import check_choice, check_nonnegative_int, check_positive_int, check_tensor

#: Added to ``|k|^2`` so the projection is finite when the direction vanishes.
VN_EPS = 1e-12
#: Default negative slope of the vector-neuron leaky ReLU.
VN_NEGATIVE_SLOPE = 0.2
#: Input channels of [`VNPointNet`][]: ``x, C x, C^2 x`` (see [`moment_features`][]).
MOMENT_CHANNELS = 3
#: Pooling of [`VNPointNet`][]'s output vectors.
POOLINGS = ("mean", "attention")
#: Width of the invariant MLP that scores points for attention pooling.
ATTENTION_HIDDEN = 16


def _orthogonal_group(d: int):
    from geomlin.groups import O

    return O(d)


class VNLinear(nn.Module):
    """Channel mixing ``(..., C_in, d) -> (..., C_out, d)``, ``out = W V`` (no bias; a bias would
    not be equivariant). ``d`` only sets the declared types (``Vectors(d, C)`` under O(d))."""

    def __init__(self, in_channels: int, out_channels: int, d: int = 3):
        super().__init__()
        in_channels = check_positive_int(in_channels, "in_channels")
        out_channels = check_positive_int(out_channels, "out_channels")
        d = check_positive_int(d, "d")
        self.weight = nn.Parameter(torch.randn(out_channels, in_channels) / math.sqrt(in_channels))
        from geomlin.reps.types import Vectors

        group = _orthogonal_group(d)
        self.type_in = Vectors(d, in_channels, group)
        self.type_out = Vectors(d, out_channels, group)

    def forward(self, v: Tensor) -> Tensor:
        """``v (..., C_in, d)`` -> ``(..., C_out, d)``."""
        check_tensor(v, "v", shape=(..., self.weight.shape[1], None), what="vector-neuron features (..., C_in, d)")
        return torch.einsum("oc,...cd->...od", self.weight.to(v.dtype), v)


class VNLeakyReLU(nn.Module):
    """Vector-neuron leaky ReLU ``(..., C, d) -> (..., C, d)`` (Deng et al. 2021, Eq. 5-6)."""

    def __init__(self, channels: int, negative_slope: float = VN_NEGATIVE_SLOPE, d: int = 3):
        super().__init__()
        self.direction = VNLinear(channels, channels, d)
        self.negative_slope = float(negative_slope)
        self.type_in = self.type_out = self.direction.type_in

    def forward(self, q: Tensor) -> Tensor:
        """``q (..., C, d)`` -> ``(..., C, d)``."""
        k = self.direction(q)
        dot = (q * k).sum(-1, keepdim=True)
        # slope q + (1 - slope) clip(q) = q - (1 - slope) min(<q,k>, 0) / |k|^2 k: one full-size update
        coef = dot.clamp(max=0) / ((k * k).sum(-1, keepdim=True) + VN_EPS)
        return q - (1 - self.negative_slope) * coef * k


def moment_features(x: Tensor, layout: BatchLayout | None = None) -> Tensor:
    """``(.., d)`` points -> ``(.., MOMENT_CHANNELS, d)``: ``x, C x / tr C, C^2 x / (tr C)^2``.

    ``x`` padded ``(B, N, d)`` or flat ``(N_total, d)`` as ``layout`` says (None: padded, all real).
    """
    outer = x[..., :, None] * x[..., None, :]
    cov = pool_mean(outer, layout)  # (B, d, d)
    cov = cov / (torch.diagonal(cov, dim1=-2, dim2=-1).sum(-1)[:, None, None] + VN_EPS)
    cov = broadcast_pooled(cov, x, layout)
    c1 = (cov @ x.unsqueeze(-1)).squeeze(-1)
    c2 = (cov @ c1.unsqueeze(-1)).squeeze(-1)
    return torch.stack([x, c1, c2], dim=-2)


def _invariants(h: Tensor, g: Tensor) -> Tensor:
    """Per-point invariants of vector features ``h (.., C, d)`` and the cloud's mean ``g (.., C, d)``:
    ``|h_c|^2`` and ``<h_c, g_c>`` -> ``(.., 2C)``."""
    return torch.cat([(h * h).sum(-1), (h * g).sum(-1)], dim=-1)


class VNPointNet(nn.Module):
    """A vector-neuron PointNet: positions ``(.., d)`` -> ``out_channels`` vectors per cloud.

    The input channels of point ``x_i`` are ``x_i, C x_i / tr C, C^2 x_i / (tr C)^2`` with
    ``C = mean_i x_i x_i^T`` (equivariant: ``C -> R C R^T``). Linear vector neurons on
    ``x_i`` alone would keep every feature parallel to ``x_i``, and their mean over a
    centred cloud would vanish; the moment channels make the pooled vectors span space.
    Each block is ``VNLeakyReLU(VNLinear([h, mean(h)]))``: per-point features
    concatenated with the cloud's mean feature, so points see global context.

    Pooling of the output: ``"mean"`` (a gated mean of the point features) or ``"attention"``:
    every output vector is a softmax-weighted mean of the point features, with weights from an
    MLP on per-point *invariants* (``|h_i|^2``, ``<h_i, mean h>``). A mean of an equivariant
    function over a cloud with a rotational symmetry (a cube) is fixed by that symmetry, so it
    cannot single out a pose; a sharp softmax over invariant scores can (it picks points, e.g. the
    corners), while staying exactly equivariant.

    Parameters
    ----------
    out_channels : int
        number of output vectors.
    hidden_channels : int
        vector channels of the hidden layers.
    num_blocks : int
        number of blocks after the input layer.
    pooling : str
        ``"mean"`` or ``"attention"``.
    d : int
        dimension of the points.

    Shapes
    ------
    Input ``x (B, N, d)`` (with optional ``mask (B, N)`` bool) or flat ``(N_total, d)`` with
    ``batch`` (a batch vector ``(N_total,)`` or its [`BatchLayout`][geomlin.batching.BatchLayout]),
    already centred when translations matter. Output: ``(B, out_channels, d)``.
    O(d)-equivariant: ``f(x R^T) = f(x) R^T`` for every orthogonal ``R``.
    """

    def __init__(self, out_channels: int, hidden_channels: int = 16, num_blocks: int = 2, *,
                 pooling: str = "mean", frame_channels: int = 0, d: int = 3):
        super().__init__()
        out_channels = check_positive_int(out_channels, "out_channels")
        hidden_channels = check_positive_int(hidden_channels, "hidden_channels")
        num_blocks = check_positive_int(num_blocks, "num_blocks")
        self.pooling = check_choice(pooling, "pooling", POOLINGS)
        self.d = check_positive_int(d, "d")
        self.frame_channels = check_nonnegative_int(frame_channels, "frame_channels")
        h = hidden_channels
        self.inp = nn.Sequential(VNLinear(MOMENT_CHANNELS + self.frame_channels, h, d), VNLeakyReLU(h, d=d))
        self.blocks = nn.ModuleList(nn.Sequential(VNLinear(2 * h, h, d), VNLeakyReLU(h, d=d))
                                    for _ in range(num_blocks))
        self.out = VNLinear(2 * h, out_channels, d)
        if self.pooling == "attention":
            self.score = nn.Sequential(nn.Linear(2 * h, ATTENTION_HIDDEN), nn.SiLU(),
                                       nn.Linear(ATTENTION_HIDDEN, out_channels))
        from geomlin.reps.types import Vectors

        group = _orthogonal_group(self.d)
        self.type_in = Vectors(self.d, None, group)
        self.type_out = Vectors(self.d, out_channels, group)

    def example_inputs(self, generator=None, dtype=torch.float64):
        """Three centred anisotropic clouds ``(3, 12, d)`` and a mask with varying sizes."""
        x = torch.randn(3, 12, self.d, generator=generator, dtype=dtype)
        x = x * torch.linspace(1.5, 0.5, self.d, dtype=dtype)
        mask = torch.arange(12)[None] < torch.tensor([12, 9, 7])[:, None]
        return (x,), {"mask": mask}

    def forward(self, x: Tensor, mask: Tensor | None = None, batch: Tensor | BatchLayout | None = None,
                frame: Tensor | None = None) -> Tensor:
        """``(B, out_channels, d)`` vectors; see the class docstring.

        ``frame (B, frame_channels, d)``: per-cloud equivariant vectors (e.g. the moment axes of
        [`pca_frames`][geomlin.frames.pca.pca_frames]) added to every point's input channels.
        """
        layout = cloud_layout(x, self.d, mask, batch)
        feats = moment_features(x, layout)
        if self.frame_channels:
            if frame is None or frame.shape[-2:] != (self.frame_channels, self.d):
                raise ValueError(f"this VNPointNet needs frame (B, {self.frame_channels}, {self.d}), got "
                                 f"{None if frame is None else tuple(frame.shape)}")
            clouds = layout.num_graphs if layout.is_flat else x.shape[0]
            check_tensor(frame, "frame", shape=(clouds, self.frame_channels, self.d), finite=True,
                         what="one set of frame vectors per cloud")
            feats = torch.cat([feats, broadcast_pooled(frame.to(x.dtype), x, layout)], dim=-2)
        elif frame is not None:
            raise ValueError("frame was given but this VNPointNet was built with frame_channels=0")
        h = self.inp(feats)
        for block in self.blocks:
            g = broadcast_pooled(pool_mean(h, layout), h, layout)
            h = block(torch.cat([h, g], dim=-2))
        pooled = pool_mean(h, layout)
        if self.pooling == "attention":
            scores = self.score(_invariants(h, broadcast_pooled(pooled, h, layout)))  # (.., K)
            picked = pool_softmax(scores, h, layout)  # (B, K, C, d)
            both = torch.cat([picked, pooled[:, None].expand_as(picked)], dim=-2)  # (B, K, 2C, d)
            # output vector k mixes the channels of its own attention-pooled features
            return torch.einsum("kc,bkcd->bkd", self.out.weight.to(x.dtype), both)
        rms = pool_mean(h * h, layout).sum(-1, keepdim=True).add(VN_EPS).sqrt()
        # Invariant norms rescale the pooled vectors: a per-cloud gate keeps O(d) equivariance.
        return self.out(torch.cat([pooled, pooled * torch.tanh(rms)], dim=-2))
