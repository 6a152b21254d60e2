"""PointNet (Qi et al., CVPR 2017): a shared per-point MLP, a symmetric max pool, an MLP head.

The non-equivariant baseline of ``geomlin train pointcloud`` and the backbone
that :mod:`geomlin.frames` wraps into frame-averaged / canonicalized models.
It is permutation invariant (max pooling) but *not* rotation invariant.

Two input layouts, the same network:

* padded:  ``pos (B, N, 3)`` with an optional ``mask (B, N)`` (``True`` = real point);
* flat:    ``pos (N_total, 3)`` with ``batch (N_total,)`` graph indices ``0..B-1``
  (the PyTorch Geometric convention).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

import torch
from torch import Tensor, nn

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


def masked_max_pool(x: Tensor, mask: Tensor | None) -> Tensor:
    """Max over the point axis of ``x (B, N, C)``, ignoring points where ``mask (B, N)`` is False.

    Returns ``(B, C)``, same dtype as ``x``. A cloud with no valid points pools to zeros.
    """
    if mask is None:
        return x.amax(dim=-2)
    fill = torch.finfo(x.dtype).min
    pooled = x.masked_fill(~mask[..., None], fill).amax(dim=-2)
    return torch.where(mask.any(dim=-1, keepdim=True), pooled, torch.zeros_like(pooled))


def scatter_max_pool(x: Tensor, batch: Tensor, num_graphs: int) -> Tensor:
    """Max of ``x (N_total, C)`` over the points of each graph given by ``batch (N_total,)``.

    Returns ``(num_graphs, C)``, same dtype as ``x``; graphs without points pool to zeros.
    """
    out = torch.zeros(num_graphs, x.shape[-1], dtype=x.dtype, device=x.device)
    index = batch[:, None].expand_as(x)
    return out.scatter_reduce(0, index, x, reduce="amax", include_self=False)


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

    Every linear layer has a bias (the network is deliberately not odd).

    Shapes
    ------
    ``forward(pos, batch=None, mask=None, features=None)``:

    * ``pos``: ``(B, N, in_dim)`` padded, or ``(N_total, in_dim)`` flat with ``batch``;
    * ``batch``: ``(N_total,)`` int64 graph index per point (flat layout only);
    * ``mask``: ``(B, N)`` bool, True for real points (padded layout only);
    * ``features``: ``(B, N, feature_dim)`` or ``(N_total, feature_dim)``;
    * returns logits ``(B, num_classes)`` in the dtype of ``pos``.

    Example
    -------
    >>> net = PointNet(num_classes=5)
    >>> net(torch.randn(2, 64, 3)).shape
    torch.Size([2, 5])
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

    def _check(self, pos: Tensor, batch: Tensor | None, mask: Tensor | None,
               features: Tensor | None) -> None:
        if not isinstance(pos, Tensor) or not pos.is_floating_point():
            raise TypeError(f"pos must be a floating-point tensor, got {type(pos).__name__}"
                            + (f" of dtype {pos.dtype}" if isinstance(pos, Tensor) else ""))
        if pos.shape[-1] != self.in_dim:
            raise ValueError(f"pos must have last dimension {self.in_dim}, got shape {tuple(pos.shape)}")
        if batch is not None:
            if pos.ndim != 2:
                raise ValueError(f"with a batch vector pos must be flat (N_total, {self.in_dim}), "
                                 f"got shape {tuple(pos.shape)}")
            if batch.shape != pos.shape[:1] or batch.dtype not in (torch.int64, torch.int32):
                raise ValueError(f"batch must be an int64 tensor of shape ({pos.shape[0]},), got "
                                 f"shape {tuple(batch.shape)} and dtype {batch.dtype}")
            if mask is not None:
                raise ValueError("pass either batch (flat layout) or mask (padded layout), not both")
        elif pos.ndim != 3:
            raise ValueError(f"pos must be (B, N, {self.in_dim}) or flat (N_total, {self.in_dim}) with "
                             f"a batch vector, got shape {tuple(pos.shape)}")
        if mask is not None and mask.shape != pos.shape[:2]:
            raise ValueError(f"mask must have shape {tuple(pos.shape[:2])}, got {tuple(mask.shape)}")
        if self.feature_dim:
            want = (*pos.shape[:-1], self.feature_dim)
            if features is None or tuple(features.shape) != want:
                got = None if features is None else tuple(features.shape)
                raise ValueError(f"features must have shape {want}, got {got}")
        elif features is not None:
            raise ValueError("this PointNet was built with feature_dim=0 but features were given")

    def forward(self, pos: Tensor, batch: Tensor | None = None, mask: Tensor | None = None,
                features: Tensor | None = None, num_graphs: int | None = None) -> Tensor:
        """Logits ``(B, num_classes)``; see the class docstring for shapes.

        ``num_graphs`` (flat layout) defaults to ``batch.max() + 1``.
        """
        self._check(pos, batch, mask, features)
        x = pos if features is None else torch.cat([pos, features.to(pos.dtype)], dim=-1)
        h = self.point_mlp(x)
        if batch is not None:
            if num_graphs is None:
                num_graphs = int(batch.max()) + 1 if batch.numel() else 0
            pooled = scatter_max_pool(h, batch.long(), num_graphs)
        else:
            pooled = masked_max_pool(h, None if mask is None else mask.bool())
        return self.head(pooled)
