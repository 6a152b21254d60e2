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
from geomlin.gatr import GATr, orientations, set_layout
from geomlin.models.graphs import count_graphs, scatter_sum
from geomlin.reps import Positions, Scalars, Vectors
from geomlin.reps.declarations import ExportShapes
from geomlin.validation import check_batch_vector, check_bool, check_positive_int, check_tensor

#: Systems and particles of the example inputs of [`GATrDynamics`][].
EXAMPLE_SYSTEMS, EXAMPLE_PARTICLES = 2, 5


class GATrClassifier(nn.Module):
    """GATr on points embedded as PGA multivectors; mean-pooled invariant scalars -> MLP head.

    ``forward(pos (B, N, 3)) -> logits (B, num_classes)`` (padded layout) or
    ``forward(pos (N_total, 3), batch (N_total,), num_graphs) -> logits (num_graphs, num_classes)``
    (flat PyG layout), E(3) invariant: declared types ``Positions(3)`` -> ``Scalars(num_classes)``.

    Attention costs ``O(N^2)`` and GATr's layers are heavy per point, so a cloud is at most
    ``max_points`` points: the padded layout uses the first ``max_points`` of each cloud (the clouds
    of the point-cloud task are i.i.d. surface samples, so this is a uniform subsample); the flat
    layout refuses larger clouds (subsample before batching) and plans its attention from the two
    bounds ``num_graphs`` and ``max_points``, so it reads nothing back from an accelerator.

    Parameters
    ----------
    num_classes : int
        output logits.
    hidden_mv_channels, hidden_s_channels : int
        GATr's hidden multivector and scalar channels (the pooled scalars feed the head).
    num_blocks, num_heads : int
        GATr blocks and attention heads.
    max_points : int
        points per cloud (above).
    average_orientations : bool
        run both orientations of the embedded points (module docstring).
    """

    #: An exported program takes at most ``max_points`` points (geomlin.deploy).
    export_shapes = ExportShapes(max_items_attr="max_points", reason="the classifier reads only its first "
                                 "max_points points; a program takes at most that many (subsample larger clouds "
                                 "before the call)")

    def __init__(self, num_classes: int, hidden_mv_channels: int = 8, hidden_s_channels: int = 16,
                 num_blocks: int = 2, num_heads: int = 4, max_points: int = 32, *,
                 average_orientations: bool = True):
        super().__init__()
        self.average_orientations = check_bool(average_orientations, "average_orientations")
        self.max_points = check_positive_int(max_points, "max_points")
        self.net = GATr(in_mv_channels=1, out_mv_channels=1, hidden_mv_channels=hidden_mv_channels,
                        in_s_channels=0, out_s_channels=hidden_s_channels, hidden_s_channels=hidden_s_channels,
                        num_blocks=num_blocks, num_heads=num_heads)
        self.head = nn.Sequential(nn.Linear(hidden_s_channels, hidden_s_channels), nn.SiLU(),
                                  nn.Linear(hidden_s_channels, num_classes))
        self.type_in = Positions(3)
        self.type_out = Scalars(num_classes)

    def example_inputs(self, generator: torch.Generator | None = None, dtype: torch.dtype = torch.float64):
        """Two clouds of 12 points ``(2, 12, 3)``."""
        return (torch.randn(2, 12, 3, generator=generator, dtype=dtype),), {}

    def forward(self, pos: Tensor, batch: Tensor | None = None, num_graphs: int | None = None) -> Tensor:
        """Logits ``(B, num_classes)``; see the class docstring for the two layouts.

        ``num_graphs`` (flat layout) defaults to ``batch[-1] + 1``
        ([`count_graphs`][geomlin.models.graphs.count_graphs]), which reads a value back from an
        accelerator; pass it (PyG's ``Batch.num_graphs``) and the forward never waits for the device.
        """
        if batch is None:
            if num_graphs is not None:
                raise ValueError("num_graphs is for the flat layout (with batch); padded pos (B, N, 3) has B clouds")
            return self._padded(pos)
        check_tensor(pos, "pos", shape=(None, 3), what="flat points (N_total, 3) with a batch vector")
        if num_graphs is None:
            num_graphs = count_graphs(batch)  # a host sync on accelerators
        num_graphs = check_positive_int(num_graphs, "num_graphs")
        batch = check_batch_vector(batch, "batch", pos.shape[0], num_graphs=num_graphs).long()
        mv = pga.embed_point(pos)[:, None, :]  # (N, 1, 16)
        sets = num_graphs
        if self.average_orientations:
            mv, batch, sets = orientations.both_orientations(mv), orientations.orientation_batch(batch, sets), 2 * sets
        layout = set_layout(batch=batch, num_sets=sets, max_items=self.max_points)
        _, s = self.net(mv, layout=layout)
        counts = scatter_sum(torch.ones_like(s[:, :1]), batch, sets)
        pooled = (scatter_sum(s, batch, sets) / counts.clamp_min(1.0)).to(s.dtype)
        if self.average_orientations:
            pooled = orientations.mean_over_orientations(pooled)
        return self.head(pooled)

    def _padded(self, pos: Tensor) -> Tensor:
        check_tensor(pos, "pos", shape=(None, None, 3), what="B clouds of N points")
        if pos.shape[1] > self.max_points:  # a test, not a bare slice: exported items <= max_points stay free
            pos = pos[:, : self.max_points]
        mv = pga.embed_point(pos)[..., None, :]  # (B, N, 1, 16)
        if not self.average_orientations:
            return self.head(self.net(mv)[1].mean(dim=-2))
        _, s = self.net(orientations.both_orientations(mv))
        return self.head(orientations.mean_over_orientations(s.mean(dim=-2)))


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

    def forward(self, pos: Tensor, vel: Tensor, charges: Tensor) -> Tensor:
        """``pos (..., n, 3), vel (..., n, 3), charges (..., n, 1) -> pos' (..., n, 3)``."""
        check_tensor(pos, "pos", shape=(..., None, 3))
        check_tensor(vel, "vel", shape=tuple(pos.shape))
        mv = torch.stack([pga.embed_point(pos), pga.embed_translation(vel)], dim=-2)  # (B, n, 2, 16)
        scalars = charges.to(pos.dtype)
        if not self.average_orientations:
            return pga.extract_point(self.net(mv, scalars=scalars)[0][..., 0, :])
        lead = mv.shape[:-3]
        mv, scalars = mv.reshape(-1, *mv.shape[-3:]), scalars.reshape(-1, *scalars.shape[-2:])
        out, _ = self.net(orientations.both_orientations(mv), scalars=orientations.repeat_for_orientations(scalars))
        pos_out = orientations.mean_over_orientations(pga.extract_point(out[..., 0, :]))
        return pos_out.reshape(*lead, *pos_out.shape[-2:])
