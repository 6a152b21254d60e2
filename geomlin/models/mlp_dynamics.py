"""A non-equivariant n-body baseline: the flattened system through an MLP."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from geomlin.batching import BatchLayout, to_flat, to_padded
from geomlin.models.inputs import particle_inputs
from geomlin.reps.declarations import ExportShapes
from geomlin.validation import check_condition, check_positive_int, check_tensor


class MLPDynamics(nn.Module):
    """Non-equivariant baseline: flattened ``(pos, vel, charges)`` -> MLP -> displacement.

    ``forward(pos (B, n, 3), vel (B, n, 3), charges (B, n, 1)) -> pos' (B, n, 3)``, predicting
    ``pos + vel + MLP(...)``. Makes no symmetry claim (it declares no feature types); ``geomlin
    audit`` measures it against the n-body task's E(3) symmetry. The particle count is part of the
    weights: every system has ``num_particles`` particles (a ``mask`` must mark them all). Flat
    systems ``(N_total, ...)`` with ``batch=``, or a PyG ``Data`` / ``Batch`` with
    [`PARTICLE_FIELDS`][geomlin.models.inputs.PARTICLE_FIELDS], give ``pos' (N_total, 3)``.

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

    def forward(self, pos: Tensor, vel: Tensor | None = None, charges: Tensor | None = None,
                mask: Tensor | None = None, batch: Tensor | BatchLayout | None = None) -> Tensor:
        """``pos, vel (B, n, 3), charges (B, n, 1) -> pos' (B, n, 3)`` (or flat, see the class docstring)."""
        pos, vel, charges, layout = particle_inputs("MLPDynamics", pos, vel, charges, mask, batch)
        n = self.num_particles
        if layout.is_flat:
            (pos, mask), vel, charges = to_padded(pos, layout), to_padded(vel, layout)[0], to_padded(charges, layout)[0]
        check_tensor(pos, "pos", shape=(None, n, 3), what=f"systems of {n} particles")
        if mask is not None:
            check_condition(mask.all(), f"MLPDynamics takes systems of exactly {n} particles (its weights fix the "
                                        "count), got a system with fewer")
        B = pos.shape[0]
        x = torch.cat([pos, vel, charges.reshape(B, n, 1).to(pos.dtype)], dim=-1).reshape(B, -1)
        out = pos + vel + self.net(x).reshape(B, n, 3)
        return to_flat(out, layout) if layout.is_flat else out
