"""GATr models on coordinates: a point-cloud classifier and an n-body dynamics model.

Both embed coordinates as G(3,0,1) multivectors ([`geomlin.algebra.pga`][]), run a
[`GATr`][geomlin.gatr.model.GATr] and read an orientation-blind quantity back (pooled invariant
scalars, extracted points). With ``average_orientations=True`` (the default) they run both
orientations of the embedded points ([`geomlin.gatr.orientations`][]), which makes them exactly
E(3)-equivariant on coordinates, reflections included, at twice the cost; without it reflections
are exact only up to ~1e-6 relative. Channel names follow the reference GATr
(``hidden_mv_channels`` / ``hidden_s_channels``).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from geomlin.algebra import pga
from geomlin.batching import BatchLayout, broadcast_pooled, pool_mean
from geomlin.gatr import GATr, orientations
from geomlin.models.inputs import graph_fields, is_graph_data, model_layout, particle_inputs
from geomlin.reps import Positions, Scalars, Vectors
from geomlin.validation import check_bool, check_tensor

#: Systems and particles of the example inputs of [`GATrDynamics`][].
EXAMPLE_SYSTEMS, EXAMPLE_PARTICLES = 2, 5


class GATrClassifier(nn.Module):
    """GATr on points embedded as PGA multivectors, each with its squared distance to the cloud's centroid as
    an invariant scalar input; mean-pooled invariant scalars -> MLP head.

    ``forward(pos (B, N, 3), mask=None) -> logits (B, num_classes)`` (padded layout),
    ``forward(pos (N_total, 3), batch=...) -> logits (B, num_classes)`` (flat PyG layout) or
    ``forward(data)`` (a PyG ``Data`` / ``Batch`` with ``pos``; see [`geomlin.models.inputs`][]);
    E(3) invariant: declared types ``Positions(3)`` -> ``Scalars(num_classes)``.

    The scalar input matters: GATr's invariant scalars of embedded points alone are (at initialisation and
    under its layer norms) nearly constant, so without it the logits barely depend on the cloud
    (measured: changes of 1e-11). Every point of every cloud is attended to (attention costs ``O(N^2)`` per
    cloud and GATr's
    layers are heavy per point: subsample large clouds before the call, as ``geomlin train
    pointcloud --gatr-points`` does). A flat batch's attention is planned by its
    [`BatchLayout`][geomlin.batching.BatchLayout]; plan it at the data boundary
    (``batch=batch_layout(batch=batch, num_graphs=..., max_items=...)`` on an accelerator) and the
    forward reads nothing back from the device.

    Parameters
    ----------
    num_classes : int
        output logits.
    hidden_mv_channels, hidden_s_channels : int
        GATr's hidden multivector and scalar channels (the pooled scalars feed the head).
    num_blocks, num_heads : int
        GATr blocks and attention heads.
    average_orientations : bool
        run both orientations of the embedded points (module docstring).
    """

    def __init__(self, num_classes: int, hidden_mv_channels: int = 8, hidden_s_channels: int = 16,
                 num_blocks: int = 2, num_heads: int = 4, *, average_orientations: bool = True):
        super().__init__()
        self.average_orientations = check_bool(average_orientations, "average_orientations")
        self.net = GATr(in_mv_channels=1, out_mv_channels=1, hidden_mv_channels=hidden_mv_channels,
                        in_s_channels=1, out_s_channels=hidden_s_channels, hidden_s_channels=hidden_s_channels,
                        num_blocks=num_blocks, num_heads=num_heads)
        self.head = nn.Sequential(nn.Linear(hidden_s_channels, hidden_s_channels), nn.SiLU(),
                                  nn.Linear(hidden_s_channels, num_classes))
        self.type_in = Positions(3)
        self.type_out = Scalars(num_classes)

    def example_inputs(self, generator: torch.Generator | None = None, dtype: torch.dtype = torch.float64):
        """Two clouds of 12 points ``(2, 12, 3)``."""
        return (torch.randn(2, 12, 3, generator=generator, dtype=dtype),), {}

    def forward(self, pos: Tensor, mask: Tensor | None = None, batch: Tensor | BatchLayout | None = None) -> Tensor:
        """Logits ``(B, num_classes)``; see the class docstring for the layouts.

        A flat batch vector (not a planned layout) is planned here: free on the CPU, one read of the
        device on an accelerator.
        """
        if is_graph_data(pos):
            (pos,), batch = graph_fields(pos, ("pos",), "GATrClassifier", mask=mask, batch=batch)
        layout = model_layout(pos, mask, batch)
        check_tensor(pos, "pos", shape=(..., 3), finite=True, what="points")
        mv = pga.embed_point(pos)[..., None, :]  # (..., items, 1, 16)
        offset = pos - broadcast_pooled(pool_mean(pos, layout), pos, layout)
        spread = (offset * offset).sum(-1, keepdim=True)  # (..., items, 1): E(3) invariant
        if self.average_orientations:
            mv, layout = orientations.both_orientations(mv), orientations.orientation_layout(layout)
            spread = orientations.repeat_for_orientations(spread)
        _, s = self.net(mv, scalars=spread, batch=layout)
        pooled = pool_mean(s, layout)
        if self.average_orientations:
            pooled = orientations.mean_over_orientations(pooled)
        return self.head(pooled)


class GATrDynamics(nn.Module):
    """GATr for n-body dynamics: each particle is one token carrying a point, a velocity and a charge.

    ``forward(pos (B, n, 3), vel (B, n, 3), charges (B, n, 1)) -> pos' (B, n, 3)``, E(3)
    equivariant: declared types ``Positions(3)``, ``Vectors(3)``, ``Scalars(1)`` ->
    ``Positions(3)``. Points and velocities enter as ``embed_point`` and ``embed_translation``;
    the output token's point is read back with
    [`extract_point`][geomlin.algebra.pga.embeddings.extract_point].

    Parameters
    ----------
    hidden_mv_channels, hidden_s_channels : int
        GATr's hidden multivector and scalar channels.
    num_blocks, num_heads : int
        GATr blocks and attention heads.
    average_orientations : bool
        run both orientations of the embedded points (module docstring).
    """

    def __init__(self, hidden_mv_channels: int = 8, hidden_s_channels: int = 16, num_blocks: int = 4,
                 num_heads: int = 4, *, average_orientations: bool = True):
        super().__init__()
        self.average_orientations = check_bool(average_orientations, "average_orientations")
        self.net = GATr(in_mv_channels=2, out_mv_channels=1, hidden_mv_channels=hidden_mv_channels,
                        in_s_channels=1, out_s_channels=0, hidden_s_channels=hidden_s_channels,
                        num_blocks=num_blocks, num_heads=num_heads)
        self.type_in = (Positions(3), Vectors(3), Scalars(1))
        self.type_out = Positions(3)

    def example_inputs(self, generator: torch.Generator | None = None, dtype: torch.dtype = torch.float64):
        """Two systems of 5 charged particles: ``pos, vel (2, 5, 3)``, charges ``(2, 5, 1)`` in ``{-1, +1}``."""
        shape = (EXAMPLE_SYSTEMS, EXAMPLE_PARTICLES)
        pos = torch.randn(*shape, 3, generator=generator, dtype=dtype)
        vel = 0.5 * torch.randn(*shape, 3, generator=generator, dtype=dtype)
        charges = torch.randint(0, 2, (*shape, 1), generator=generator).to(dtype) * 2 - 1
        return (pos, vel, charges), {}

    def forward(self, pos: Tensor, vel: Tensor | None = None, charges: Tensor | None = None,
                mask: Tensor | None = None, batch: Tensor | BatchLayout | None = None) -> Tensor:
        """``pos, vel (B, n, 3), charges (B, n, 1) -> pos' (B, n, 3)`` (``mask (B, n)`` bool marks the real
        particles), flat ``(N_total, ...)`` with ``batch=``, or a PyG ``Data`` / ``Batch`` with
        [`PARTICLE_FIELDS`][geomlin.models.inputs.PARTICLE_FIELDS] -> ``pos' (N_total, 3)``."""
        pos, vel, charges, layout = particle_inputs("GATrDynamics", pos, vel, charges, mask, batch)
        mv = torch.stack([pga.embed_point(pos), pga.embed_translation(vel)], dim=-2)  # (..., n, 2, 16)
        scalars = charges.to(pos.dtype)
        if not self.average_orientations:
            return pga.extract_point(self.net(mv, scalars=scalars, batch=layout)[0][..., 0, :])
        out, _ = self.net(orientations.both_orientations(mv), scalars=orientations.repeat_for_orientations(scalars),
                          batch=orientations.orientation_layout(layout))
        return orientations.mean_over_orientations(pga.extract_point(out[..., 0, :]))
