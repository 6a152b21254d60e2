"""PointNet (Qi et al., CVPR 2017): a shared per-point MLP, a symmetric max pool, an MLP head.

The non-equivariant baseline of ``geomlin train pointcloud`` and the backbone
that [`geomlin.frames`][] wraps into frame-averaged / canonicalized models.
It is permutation invariant (max pooling) but *not* rotation invariant.

Three input forms, the same network ([`geomlin.models.inputs`][]):

* padded:  ``pos (B, N, 3)`` with an optional ``mask (B, N)`` (``True`` = real point);
* flat:    ``pos (N_total, 3)`` with ``batch``, PyG's batch vector ``(N_total,)`` or its planned
  [`BatchLayout`][geomlin.batching.BatchLayout];
* a PyG ``Data`` / ``Batch`` with ``pos`` (and ``x``, the per-point features, when ``feature_dim > 0``).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

import torch
from torch import Tensor, nn

from geomlin.batching import BatchLayout, batch_layout, pool_max, pool_mean, to_padded
from geomlin.models.inputs import graph_fields, is_graph_data, model_layout
from geomlin.validation import (
    check_finite,
    check_nonnegative_int,
    check_positive_float,
    check_positive_int,
    check_tensor,
)

#: Per-point feature widths of the shared MLP (the original uses 64, 64, 64, 128, 1024).
DEFAULT_POINT_WIDTHS = (64, 128, 256)
#: Hidden widths of the classification head.
DEFAULT_HEAD_WIDTHS = (128,)


def _mlp(widths: Sequence[int], final_activation: bool, dropout: float = 0.0) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(pairwise(widths)):
        layers.append(nn.Linear(a, b, bias=True))
        last = i == len(widths) - 2
        if not last or final_activation:
            layers.append(nn.SiLU())
            if dropout > 0 and not last:
                layers.append(nn.Dropout(dropout))
    return nn.Sequential(*layers)


class PointNet(nn.Module):
    """PointNet classifier / regressor: per-point MLP -> max pool -> MLP head.

    Parameters
    ----------
    num_classes : int
        Output width (logits for classification, targets for regression).
    in_dim : int
        Coordinate dimension of ``pos`` (3 for point clouds).
    feature_dim : int
        Width of optional per-point features concatenated to ``pos`` (0 = none).
    point_widths, head_widths : sequence of int
        Hidden widths of the shared per-point MLP and of the head.
    dropout : float
        Dropout in the head (0 = off).

    Shapes
    ------
    ``forward(pos, mask=None, batch=None, features=None)``:

    * ``pos``: ``(B, N, in_dim)`` padded, or ``(N_total, in_dim)`` flat with ``batch``, or a PyG
      ``Data`` / ``Batch``;
    * ``mask``: ``(B, N)`` bool, True for real points (padded layout only);
    * ``batch``: ``(N_total,)`` int64 graph index per point, sorted, or its planned
      [`BatchLayout`][geomlin.batching.BatchLayout] (flat layout only; planned there, the forward
      reads nothing back from an accelerator);
    * ``features``: ``(B, N, feature_dim)`` or ``(N_total, feature_dim)``;
    * returns logits ``(B, num_classes)`` in the dtype of ``pos``.

    Example
    -------
    >>> net = PointNet(num_classes=5)
    >>> net(torch.randn(2, 64, 3)).shape
    torch.Size([2, 5])

    Notes
    -----
    Every linear layer has a bias (the network is deliberately not odd).
    """

    def __init__(self, num_classes: int, in_dim: int = 3, feature_dim: int = 0,
                 point_widths: Sequence[int] = DEFAULT_POINT_WIDTHS,
                 head_widths: Sequence[int] = DEFAULT_HEAD_WIDTHS, dropout: float = 0.0):
        super().__init__()
        for name, value in (("num_classes", num_classes), ("in_dim", in_dim)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if not isinstance(feature_dim, int) or feature_dim < 0:
            raise ValueError(f"feature_dim must be a non-negative int, got {feature_dim!r}")
        if len(point_widths) == 0:
            raise ValueError("point_widths must name at least one hidden width, got an empty sequence")
        self.num_classes = num_classes
        self.in_dim = in_dim
        self.feature_dim = feature_dim
        self.point_mlp = _mlp([in_dim + feature_dim, *point_widths], final_activation=True)
        self.head = _mlp([point_widths[-1], *head_widths, num_classes], final_activation=False,
                         dropout=dropout)

    def _check(self, pos: Tensor, features: Tensor | None) -> None:
        if not isinstance(pos, Tensor) or not pos.is_floating_point():
            raise TypeError(f"pos must be a floating-point tensor, got {type(pos).__name__}"
                            + (f" of dtype {pos.dtype}" if isinstance(pos, Tensor) else ""))
        if pos.shape[-1] != self.in_dim:
            raise ValueError(f"pos must have last dimension {self.in_dim}, got shape {tuple(pos.shape)}")
        check_finite(pos, "pos")
        if features is not None:
            check_tensor(features, "features", finite=True)
        if self.feature_dim:
            want = (*pos.shape[:-1], self.feature_dim)
            if features is None or tuple(features.shape) != want:
                got = None if features is None else tuple(features.shape)
                raise ValueError(f"features must have shape {want}, got {got}")
        elif features is not None:
            raise ValueError("this PointNet was built with feature_dim=0 but features were given")

    def forward(self, pos: Tensor, mask: Tensor | None = None, batch: Tensor | BatchLayout | None = None,
                features: Tensor | None = None) -> Tensor:
        """Logits ``(B, num_classes)``; see the class docstring for shapes.

        A flat batch vector (not a planned layout) is planned here: free on the CPU, one read of the
        device on an accelerator.
        """
        if is_graph_data(pos):
            fields = ("pos", "x") if self.feature_dim else ("pos",)
            (pos, *rest), batch = graph_fields(pos, fields, "PointNet", mask=mask, batch=batch, features=features)
            features = rest[0] if rest else None
        self._check(pos, features)
        layout = model_layout(pos, mask, batch)
        x = pos if features is None else torch.cat([pos, features.to(pos.dtype)], dim=-1)
        return self.head(pool_max(self.point_mlp(x), layout))


#: Vector channels per point of [`VNPointNetClassifier`][]: ``x, C x, C^2 x`` (global moments) and
#: ``m, L x, L m, L C x`` (local: neighbourhood offset mean ``m`` and covariance ``L``).
VN_INPUT_CHANNELS = 7
#: Radius of the neighbourhoods of [`local_moment_features`][], relative to the RMS radius of the cloud.
NEIGHBORHOOD_SCALE = 0.5


def local_moment_features(x: Tensor, mask: Tensor | None = None, scale: float = NEIGHBORHOOD_SCALE) -> Tensor:
    """Equivariant per-point vectors of a centred padded cloud ``x (B, N, 3)`` -> ``(B, N, 7, 3)``.

    ``x_i``, ``C x_i``, ``C^2 x_i`` with the cloud's covariance ``C`` (normalised by its trace) and,
    over a smooth neighbourhood ``a_ij ~ (1 - |x_j - x_i|^2 / r^2)_+^2`` (``r = scale`` times the RMS
    radius; padding excluded; every point is its own neighbour), the mean offset
    ``m_i = sum_j a_ij (x_j - x_i)`` and, with the local covariance
    ``L_i = sum_j a_ij (x_j - x_i)(x_j - x_i)^T / tr C``, the vectors ``L_i x_i``, ``L_i m_i``,
    ``L_i C x_i``. Everything commutes with O(3), and the weights are continuous in the points.
    """
    from geomlin.frames.vector_neurons import VN_EPS, moment_features

    glob = moment_features(x, batch_layout(mask))  # (B, N, 3, 3): x, Cx, C^2 x
    sq = (x * x).sum(-1)  # (B, N)
    if mask is None:
        trace = sq.mean(1)
    else:
        trace = (sq * mask.to(x.dtype)).sum(1) / mask.sum(1).clamp_min(1).to(x.dtype)  # tr C
    d2 = torch.baddbmm(sq[:, :, None] + sq[:, None, :], x, x.transpose(-1, -2), alpha=-2.0)
    a = (1 - d2 / (scale ** 2 * trace[:, None, None] + VN_EPS)).clamp_min(0).square()
    if mask is not None:
        a = a * mask[:, None, :].to(x.dtype)
    a = a / a.sum(-1, keepdim=True).clamp_min(VN_EPS)  # rows sum to 1 (the point itself has weight 1)
    mean_x = a @ x  # sum_j a_ij x_j
    m = mean_x - x
    second = (a @ (x[..., :, None] * x[..., None, :]).flatten(-2)).unflatten(-1, (3, 3))  # sum_j a_ij x_j x_j^T
    outer = lambda u, v: u[..., :, None] * v[..., None, :]
    L = (second - outer(x, mean_x) - outer(mean_x, x) + outer(x, x)) / (trace[:, None, None, None] + VN_EPS)
    cx = glob[:, :, 1]
    local = [m, (L @ x[..., None])[..., 0], (L @ m[..., None])[..., 0], (L @ cx[..., None])[..., 0]]
    return torch.cat([glob, torch.stack(local, dim=-2)], dim=-2)


class VNPointNetClassifier(nn.Module):
    """An E(3)-invariant point-cloud classifier: vector neurons and their invariants (Deng et al. 2021).

    Per point: the seven equivariant vectors of [`local_moment_features`][] (the point, its
    images under the cloud's covariance, and the offset and covariance of its neighbourhood), then
    ``num_blocks`` vector-neuron layers (``VNLinear`` + ``VNLeakyReLU``) with ``hidden_channels``
    vectors; the invariant layer is the Gram matrix of all these vectors (every inner product, the
    complete set of O(3) invariants of a list of vectors), divided by the cloud's mean squared
    radius; then a PointNet on the invariants (per-point MLP with biases, max and mean pooling,
    MLP head). The cloud is centred and every vector operation commutes with O(3), so the logits
    are exactly E(3) invariant (and scale invariant).

    ``forward(pos (B, N, 3), mask=None) -> logits (B, num_classes)``.
    """

    def __init__(self, num_classes: int, hidden_channels: int = 8, num_blocks: int = 1,
                 point_widths: Sequence[int] = (32, 64, 128), head_widths: Sequence[int] = (64,),
                 neighborhood_scale: float = NEIGHBORHOOD_SCALE):
        super().__init__()
        from geomlin.frames.vector_neurons import VNLeakyReLU, VNLinear

        self.num_classes = check_positive_int(num_classes, "num_classes")
        h = check_positive_int(hidden_channels, "hidden_channels")
        num_blocks = check_nonnegative_int(num_blocks, "num_blocks")
        if len(point_widths) == 0:
            raise ValueError("point_widths must name at least one hidden width, got an empty sequence")
        self.neighborhood_scale = check_positive_float(neighborhood_scale, "neighborhood_scale")
        layers: list[nn.Module] = []
        for k in range(num_blocks):
            layers += [VNLinear(VN_INPUT_CHANNELS if k == 0 else h, h), VNLeakyReLU(h)]
        self.vn = nn.Sequential(*layers)
        vectors = VN_INPUT_CHANNELS + (h if num_blocks else 0)
        upper = torch.triu_indices(vectors, vectors)
        self.register_buffer("pairs", upper[0] * vectors + upper[1], persistent=False)  # flat (a, b), a <= b
        self.point_mlp = _mlp([self.pairs.shape[0], *point_widths], final_activation=True)
        self.head = _mlp([2 * point_widths[-1], *head_widths, self.num_classes], final_activation=False)
        from geomlin.groups import E3
        from geomlin.reps.types import Positions, Scalars

        self.type_in = Positions(3, E3())
        self.type_out = Scalars(self.num_classes)

    def example_inputs(self, generator=None, dtype=torch.float64):
        pos = torch.randn(3, 20, 3, generator=generator, dtype=dtype) * torch.tensor([1.5, 1.0, 0.5], dtype=dtype)
        return (pos,), {"mask": torch.arange(20)[None] < torch.tensor([20, 17, 12])[:, None]}

    def invariants(self, pos: Tensor, mask: Tensor | None = None) -> Tensor:
        """Per-point invariants ``(B, N, V (V + 1) / 2)``: the Gram matrices of the point's vectors."""
        from geomlin.frames.pca import check_positions

        check_positions(pos, 3, batch_layout(mask))
        w = None if mask is None else mask[..., None].to(pos.dtype)
        counts = max(pos.shape[1], 1) if mask is None else w.sum(1, keepdim=True).clamp_min(1)  # 0 points: no 0/0
        centroid = (pos if w is None else pos * w).sum(1, keepdim=True) / counts
        x = pos - centroid
        if w is not None:
            x = x * w
        v = local_moment_features(x, mask, self.neighborhood_scale)  # (B, N, 7, 3)
        if len(self.vn):
            v = torch.cat([v, self.vn(v)], dim=-2)
        radius2 = (x * x).sum(-1).sum(1) / (counts.reshape(-1) if mask is not None else counts)
        B, N, V, _ = v.shape
        flat = v.reshape(B * N, V, 3)
        gram = (flat @ flat.transpose(1, 2)).reshape(B, N, V * V)[..., self.pairs]  # <v_a, v_b>, a <= b
        return gram / radius2.clamp_min(torch.finfo(pos.dtype).tiny)[:, None, None]

    def forward(self, pos: Tensor, mask: Tensor | None = None, batch: Tensor | BatchLayout | None = None) -> Tensor:
        """Logits ``(B, num_classes)`` of padded clouds ``pos (B, N, 3)`` (``mask (B, N)`` bool, True = point),
        of flat ones ``(N_total, 3)`` with ``batch``, or of a PyG ``Data`` / ``Batch`` with ``pos``.

        The neighbourhoods are dense (``N x N`` per cloud), so a flat batch is padded first
        ([`geomlin.batching.to_padded`][]).
        """
        if is_graph_data(pos):
            (pos,), batch = graph_fields(pos, ("pos",), "VNPointNetClassifier", mask=mask, batch=batch)
        layout = model_layout(pos, mask, batch)
        if layout.is_flat:
            pos, real = to_padded(pos, layout)
            layout = batch_layout(real)
        h = self.point_mlp(self.invariants(pos, layout.mask))
        return self.head(torch.cat([pool_max(h, layout), pool_mean(h, layout)], dim=-1))
