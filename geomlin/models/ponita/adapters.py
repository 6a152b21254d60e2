"""PONITA for the tasks of ``geomlin train``: an interatomic potential and an n-body dynamics model."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from geomlin.batching import BatchLayout, pool_sum
from geomlin.models.inputs import molecule_inputs, particle_inputs
from geomlin.models.ponita.model import Ponita
from geomlin.validation import check_positive_int


class PonitaPotential(nn.Module):
    """An interatomic potential from [`Ponita`][]: ``forward(pos (B, N, 3), species (B, N), mask=None) -> energy (B,)``.

    One-hot species in, one scalar per atom out, summed over each molecule's atoms; forces are
    ``-dE/dpos``. ``mask (B, N)`` bool marks the real atoms of padded molecules of different sizes
    (QM9): the pairs with a padded atom get zero weight and padded atoms are left out of the sum, so
    each molecule's energy is the one it has alone (tested). Defaults (the ``ponita`` model of
    ``geomlin train molecules``): point-cloud mode, exactly E(3) invariant, all atom pairs (small
    molecules), 2 blocks of 64 channels, 64 basis functions: the best of channels {64, 128} x blocks
    {2, 4} on a validation split of the bundled ethanol trajectory (``benchmarks/bench_molecules.py
    --tune``; docs/molecules.md). At a few hundred optimiser steps point-cloud mode beat the
    fiber-bundle mode there at a fraction of its cost; ``mode="bundle"`` (default grid: the 12
    icosahedral directions) is the paper's full model.

    Flat molecules ``pos (N_total, 3)``, ``species (N_total,)`` with ``batch=`` (or a PyG ``Data`` /
    ``Batch`` with ``pos`` and ``z``; [`geomlin.models.inputs`][]) pass messages over a flat edge
    list: ``edge_index`` when given, else all pairs of every molecule (or those within ``cutoff``),
    [`graph_edges`][geomlin.models.graphs.graph_edges]. The energy is the padded one.
    """

    def __init__(self, num_species: int = 10, hidden_channels: int = 64, num_blocks: int = 2, *,
                 mode: str = "points", num_ori: int = 12, grid: str = "icosahedral", cutoff: float | None = None,
                 num_basis: int | None = 64, **kwargs):
        super().__init__()
        self.num_species = check_positive_int(num_species, "num_species")
        self.net = Ponita(self.num_species, hidden_channels, 1, num_blocks, mode=mode, num_ori=num_ori,
                          grid=grid, cutoff=cutoff, num_basis=num_basis, task_level="node", **kwargs)

    @property
    def type_in(self) -> tuple:
        """``(Positions(3), Labels(num_species))`` under the network's symmetry group."""
        from geomlin.reps.types import Labels

        return (self.net.type_in[1], Labels(self.num_species))

    @property
    def type_out(self):
        from geomlin.reps.types import Scalars

        return Scalars()

    def example_inputs(self, generator=None, dtype=torch.float64):
        pos = 1.3 * torch.randn(2, 6, 3, generator=generator, dtype=dtype)
        return (pos, torch.randint(self.num_species, (2, 6), generator=generator)), {}

    def forward(self, pos: Tensor, species: Tensor | None = None, mask: Tensor | None = None, *,
                batch: Tensor | BatchLayout | None = None, edge_index: Tensor | None = None) -> Tensor:
        """Energy ``(B,)``; see the class docstring for the input forms."""
        pos, species, layout = molecule_inputs("PonitaPotential", pos, species, mask, batch, self.num_species)
        x = nn.functional.one_hot(species, self.num_species).to(pos.dtype)
        if layout.is_flat:
            energy, _ = self.net(x, pos, batch=layout, edge_index=edge_index)
        else:
            energy, _ = self.net(x, pos, mask=mask, edge_index=edge_index)
        return pool_sum(energy[..., 0], layout).to(energy.dtype)


class PonitaDynamics(nn.Module):
    """N-body dynamics with [`Ponita`][] (the reference's n-body setup): charges as scalars,
    velocities as vectors lifted to the sphere, one vector per particle read out as the displacement.

    ``forward(pos (B, n, 3), vel (B, n, 3), charges (B, n, 1), mask=None) -> pos' (B, n, 3)``,
    ``pos + v_out``; flat ``(N_total, ...)`` with ``batch=`` or a PyG ``Data`` / ``Batch`` with
    [`PARTICLE_FIELDS`][geomlin.models.inputs.PARTICLE_FIELDS] give ``pos' (N_total, 3)``.
    Defaults (the ``ponita`` model of ``geomlin train nbody``): fiber-bundle mode on the 12 icosahedral
    directions (point-cloud mode would see only the speeds ``|v|``, not their directions), 3 blocks of
    64 channels.
    """

    def __init__(self, hidden_channels: int = 64, num_blocks: int = 3, *, mode: str = "bundle",
                 num_ori: int = 12, grid: str = "icosahedral", **kwargs):
        super().__init__()
        self.net = Ponita(1, hidden_channels, 0, num_blocks, in_vector_channels=1, out_vector_channels=1,
                          mode=mode, num_ori=num_ori, grid=grid, task_level="node", **kwargs)

    @property
    def type_in(self) -> tuple:
        """``(Positions(3), Vectors(3), Scalars(1))`` (positions, velocities, charges)."""
        from geomlin.reps.types import Scalars, Vectors

        positions = self.net.type_in[1]
        return (positions, Vectors(3, None, positions.group), Scalars(1))

    @property
    def type_out(self):
        return self.net.type_in[1]

    def example_inputs(self, generator=None, dtype=torch.float64):
        pos = torch.randn(2, 5, 3, generator=generator, dtype=dtype)
        vel = 0.5 * torch.randn(2, 5, 3, generator=generator, dtype=dtype)
        q = torch.randint(0, 2, (2, 5, 1), generator=generator).to(dtype) * 2 - 1
        return (pos, vel, q), {}

    def forward(self, pos: Tensor, vel: Tensor | None = None, charges: Tensor | None = None,
                mask: Tensor | None = None, batch: Tensor | BatchLayout | None = None) -> Tensor:
        pos, vel, charges, layout = particle_inputs("PonitaDynamics", pos, vel, charges, mask, batch)
        q = charges.to(pos.dtype)
        _, v = self.net(q, pos, vel[..., None, :], mask=layout.mask if not layout.is_flat else None,
                        batch=layout if layout.is_flat else None)
        return pos + v[..., 0, :]
