"""PONITA for the tasks of ``geomlin train``: an interatomic potential and an n-body dynamics model."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from geomlin.batching import BatchLayout, pool_sum
from geomlin.models.edges import DENSE_BLOCK, potential_inputs
from geomlin.models.inputs import particle_inputs
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
    list. Edges and periodic cells follow [`geomlin.models.edges`][] (self-pairs added: PONITA's
    convolutions include them): all pairs of molecules of up to
    [`DENSE_BLOCK`][geomlin.models.edges.DENSE_BLOCK] atoms, the cell-list search within ``cutoff``
    beyond and in periodic cells, or the caller's ``edge_index`` (with ``shift`` and ``cell``). The
    smooth window of ``cutoff`` (default 5 Angstrom) gives pairs beyond it exactly zero weight, so
    every one of those gives the energy of all pairs. ``cutoff=None`` (no window: every pair
    interacts) is for molecules only: larger or periodic systems are refused.
    """

    #: The edges include the self-pairs ``(i, i)``, as PONITA's convolutions take them
    #: ([`geomlin.models.edges.neighbor_settings`][]).
    edge_loops = True

    def __init__(self, num_species: int = 10, hidden_channels: int = 64, num_blocks: int = 2, *,
                 mode: str = "points", num_ori: int = 12, grid: str = "icosahedral", cutoff: float | None = 5.0,
                 num_basis: int | None = 64, **kwargs):
        super().__init__()
        self.num_species = check_positive_int(num_species, "num_species")
        self.net = Ponita(self.num_species, hidden_channels, 1, num_blocks, mode=mode, num_ori=num_ori,
                          grid=grid, cutoff=cutoff, num_basis=num_basis, task_level="node", **kwargs)

    @property
    def cutoff(self) -> float | None:
        """The network's cutoff (None: every pair interacts)."""
        return self.net.cutoff

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
                batch: Tensor | BatchLayout | None = None, edge_index: Tensor | None = None,
                shift: Tensor | None = None, cell: Tensor | None = None, pbc=None) -> Tensor:
        """Energy ``(B,)``; see the class docstring for the input forms."""
        inputs = potential_inputs("PonitaPotential", pos, species, mask, batch, self.num_species,
                                  edge_index=edge_index, shift=shift, cell=cell, pbc=pbc)
        if inputs.padded():
            x = nn.functional.one_hot(inputs.species, self.num_species).to(inputs.pos.dtype)
            energy, _ = self.net(x, inputs.pos, mask=inputs.mask)
            return pool_sum(energy[..., 0], inputs.layout).to(energy.dtype)
        cutoff = self.cutoff
        if cutoff is None and inputs.edge_index is None:
            if inputs.cell is not None or inputs.largest() > DENSE_BLOCK:
                raise ValueError(f"PonitaPotential(cutoff=None) lets every pair of atoms interact: periodic cells and "
                                 f"systems of more than {DENSE_BLOCK} atoms need a cutoff")
            cutoff = float("inf")                          # unused: small free molecules take all pairs
        graph = inputs.graph(cutoff, loop=self.edge_loops)
        x = nn.functional.one_hot(graph.species, self.num_species).to(graph.pos.dtype)
        energy, _ = self.net(x, graph.pos, batch=graph.layout, edge_index=graph.edge_index, edge_vec=graph.vectors())
        return pool_sum(energy[..., 0], graph.layout).to(energy.dtype)


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
