"""Test backbones for geomlin.frames: deliberately NOT equivariant, with biases (not odd)."""

import pytest
import torch
from torch import nn

from geomlin.batching import as_layout


class PointMLP(nn.Module):
    """Per-point MLP with biases + mean pooling + MLP head.

    ``forward(pos, *extras, mask=None, batch=None, edge_index=None)``: padded ``(B, N, d)``
    or flat ``(N, d)`` (``batch`` a batch vector or a ``BatchLayout``, as geomlin's models take it); extras are per point ``(.., k)`` or ``(.., k, d)`` (flattened).
    ``level="graph"`` returns ``(B, out)``, ``level="point"`` returns ``(.., N, out)``.
    With ``edge_index`` (flat only) one round of sum message passing is added.
    """

    def __init__(self, in_dim=3, extra_dim=0, out_dim=1, level="graph", hidden=16):
        super().__init__()
        self.level = level
        self.point = nn.Sequential(nn.Linear(in_dim + extra_dim, hidden), nn.SiLU(), nn.Linear(hidden, hidden))
        self.head = nn.Sequential(nn.SiLU(), nn.Linear(2 * hidden if level == "point" else hidden, hidden),
                                  nn.Tanh(), nn.Linear(hidden, out_dim))

    def forward(self, pos, *extras, mask=None, batch=None, edge_index=None):
        feats = [pos] + [e.flatten(pos.ndim - 1) for e in extras]
        h = self.point(torch.cat([f.to(pos.dtype) for f in feats], dim=-1))
        if edge_index is not None:
            h = h + torch.zeros_like(h).index_add(0, edge_index[1], torch.tanh(h[edge_index[0]]))
        if batch is not None:
            layout = as_layout(batch=batch)
            B, batch = layout.num_graphs, layout.batch
            counts = h.new_zeros(B).index_add(0, batch, torch.ones_like(h[:, 0]))
            pooled = h.new_zeros(B, h.shape[-1]).index_add(0, batch, h) / counts[:, None]
            if self.level == "point":
                return self.head(torch.cat([h, pooled[batch]], -1))
            return self.head(pooled)
        if mask is None:
            pooled = h.mean(1)
        else:
            w = mask[..., None].to(h.dtype)
            pooled = (h * w).sum(1) / w.sum(1)
        if self.level == "point":
            return self.head(torch.cat([h, pooled[:, None].expand_as(h)], -1))
        return self.head(pooled)


@pytest.fixture
def point_mlp():
    """Factory for float64 :class:`PointMLP` backbones."""
    def make(**kwargs):
        return PointMLP(**kwargs).double()
    return make


def random_clouds(B=3, N=10, d=3, generator=None):
    """A padded batch ``(B, N, d)`` with a mask of varying sizes and the same clouds flat."""
    pos = torch.randn(B, N, d, dtype=torch.float64, generator=generator) * torch.tensor([2.0, 1.0, 0.5][:d] + [0.7] * (d - 3 if d > 3 else 0), dtype=torch.float64)
    counts = torch.tensor([N - (i % 3) * 2 for i in range(B)])
    mask = torch.arange(N)[None] < counts[:, None]
    flat = pos[mask]
    batch = torch.arange(B).repeat_interleave(counts)
    return pos, mask, flat, batch


@pytest.fixture
def clouds():
    return random_clouds
