"""A non-equivariant n-body baseline: the flattened system through an MLP."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from geomlin.reps.declarations import ExportShapes
from geomlin.validation import check_positive_int, check_tensor


class MLPDynamics(nn.Module):
    """Non-equivariant baseline: flattened ``(pos, vel, charges)`` -> MLP -> displacement.

    ``forward(pos (B, n, 3), vel (B, n, 3), charges (B, n, 1)) -> pos' (B, n, 3)``, predicting
    ``pos + vel + MLP(...)``. Makes no symmetry claim (it declares no feature types); ``geomlin
    audit`` measures it against the n-body task's E(3) symmetry. The particle count is part of the
    weights.

    Parameters
    ----------
    num_particles : int
        particles per system.
    hidden_channels : int
        width of the two hidden layers.
    """

    #: The body count is part of the weights: an exported program takes the example's count only.
    export_shapes = ExportShapes(static_items=True, reason="a Linear layer reads all bodies flattened "
                                 "(in_features = 7 num_particles): the body count is part of the weights")

    def __init__(self, num_particles: int, hidden_channels: int = 128):
        super().__init__()
        num_particles = check_positive_int(num_particles, "num_particles")
        hidden_channels = check_positive_int(hidden_channels, "hidden_channels")
        self.num_particles = num_particles
        self.net = nn.Sequential(nn.Linear(7 * num_particles, hidden_channels), nn.SiLU(),
                                 nn.Linear(hidden_channels, hidden_channels), nn.SiLU(),
                                 nn.Linear(hidden_channels, 3 * num_particles))

    def forward(self, pos: Tensor, vel: Tensor, charges: Tensor) -> Tensor:
        """``pos, vel (B, n, 3), charges (B, n, 1) -> pos' (B, n, 3)``."""
        n = self.num_particles
        check_tensor(pos, "pos", shape=(None, n, 3), what=f"systems of {n} particles")
        check_tensor(vel, "vel", shape=tuple(pos.shape))
        B = pos.shape[0]
        x = torch.cat([pos, vel, charges.reshape(B, n, 1).to(pos.dtype)], dim=-1).reshape(B, -1)
        return pos + vel + self.net(x).reshape(B, n, 3)
