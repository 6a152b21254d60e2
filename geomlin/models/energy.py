"""[`MoleculeEnergyModel`][]: an invariant energy network as a potential, energy and forces in data units.

The networks of [`geomlin.models`][] predict a standardised energy ``net(pos, species)``; the wrapper
adds the energy scale and shift of the data (a mean, per-element reference energies) and returns the
forces ``-dE/dpos`` by autograd, so every potential (Gaunt, PONITA, EGNN) is trained, evaluated,
exported and run in molecular dynamics the same way.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from geomlin.batching import BatchLayout, pool_sum
from geomlin.models.inputs import MOLECULE_FIELDS, graph_fields, is_graph_data, model_layout
from geomlin.models.md import require_autograd
from geomlin.reps import Labels, Positions, Scalars, Vectors
from geomlin.reps.declarations import ExportShapes

__all__ = ["EXAMPLE_ATOMS", "MoleculeEnergyModel"]

#: Atoms per example molecule of [`MoleculeEnergyModel.example_inputs`][].
EXAMPLE_ATOMS = 6


class MoleculeEnergyModel(nn.Module):
    """Wraps an invariant energy network: standardised energy -> physical energy and forces.

    ``E(pos, species) = energy_mean + sum_i atom_energies[species_i] + scale * net(pos, species)``.

    ``forward(pos (B, N, 3), species (B, N) int64, mask=None) -> (energy (B,), forces (B, N, 3))`` with
    ``forces = -dE/dpos`` (graph kept for training). ``mask (B, N)`` bool marks real atoms of
    padded molecules. Flat molecules ``pos (N_total, 3)``, ``species (N_total,)`` with ``batch=``,
    or a PyG ``Data`` / ``Batch`` with ``pos`` and ``z`` ([`geomlin.models.inputs`][]), give
    ``forces (N_total, 3)``; the network sees the same layout (every potential of
    [`geomlin.models`][] takes all three). ``compute_forces=False`` returns ``(energy, None)``
    without the gradient. Declared types: positions ``Positions(3)`` and species
    ``Labels(num_species)`` -> energy ``Scalars()`` (E(3) invariant) and forces ``Vectors(3)``
    (E(3) equivariant).
    """

    #: Exported programs take molecules of 3 atoms or more (geomlin.deploy).
    export_shapes = ExportShapes(min_items=3, reason="the dense pair list has N - 1 neighbours per atom; PyTorch "
                                 "specialises a size of 1, so a program for any N >= 3 cannot also take N = 2 "
                                 "(pad a diatomic molecule to 3 atoms)")

    def __init__(self, net: nn.Module, energy_mean: float = 0.0, scale: float = 1.0,
                 atom_energies: Tensor | list[float] | None = None):
        super().__init__()
        self.net = net
        self.num_species = int(net.num_species)
        self.register_buffer("energy_mean", torch.tensor(float(energy_mean), dtype=torch.float64))
        self.register_buffer("scale", torch.tensor(float(scale), dtype=torch.float64))
        ref = torch.zeros(self.num_species, dtype=torch.float64)
        if atom_energies is not None:
            given = torch.as_tensor(atom_energies, dtype=torch.float64).reshape(-1)
            if given.numel() > self.num_species:
                raise ValueError(f"atom_energies has {given.numel()} entries for {self.num_species} species")
            ref[:given.numel()] = given
        self.register_buffer("atom_energies", ref)
        self.type_in = (Positions(3), Labels(self.num_species))
        self.type_out = (Scalars(), Vectors(3))

    def example_inputs(self, generator: torch.Generator | None = None, dtype: torch.dtype = torch.float64):
        """Two molecules of [`EXAMPLE_ATOMS`][] atoms: ``(pos (2, 6, 3), species (2, 6))``."""
        pos = 1.5 * torch.randn(2, EXAMPLE_ATOMS, 3, generator=generator, dtype=dtype)
        species = torch.randint(self.num_species, (2, EXAMPLE_ATOMS), generator=generator)
        return (pos, species), {}

    def energy(self, pos: Tensor, species: Tensor | None = None, mask: Tensor | None = None, *,
               batch: Tensor | BatchLayout | None = None) -> Tensor:
        """Energy ``(B,)`` in data units (padded, flat or PyG inputs, as [`forward`][])."""
        if is_graph_data(pos):
            (pos, species), batch = graph_fields(pos, MOLECULE_FIELDS, "MoleculeEnergyModel", species=species,
                                                 mask=mask, batch=batch)
        if batch is None:
            out = self.net(pos, species, mask=mask)
            layout = None
        else:
            layout = model_layout(pos, mask, batch)
            out = self.net(pos, species, batch=layout)
        ref = self.atom_energies.to(pos.dtype)[species]
        if layout is not None:
            ref = pool_sum(ref, layout).to(pos.dtype)
        elif mask is not None:
            ref = (ref * mask.to(pos.dtype)).sum(dim=-1)
        else:
            ref = ref.sum(dim=-1)
        return self.energy_mean.to(pos.dtype) + ref + self.scale.to(pos.dtype) * out

    def forward(self, pos: Tensor, species: Tensor | None = None, mask: Tensor | None = None,
                compute_forces: bool = True, *, batch: Tensor | BatchLayout | None = None
                ) -> tuple[Tensor, Tensor | None]:
        """``(energy (B,), forces)``: padded ``(B, N, 3)`` forces, or flat ``(N_total, 3)`` for flat and PyG inputs
        (see the class docstring); ``(energy, None)`` with ``compute_forces=False``."""
        if is_graph_data(pos):
            (pos, species), batch = graph_fields(pos, MOLECULE_FIELDS, "MoleculeEnergyModel", species=species,
                                                 mask=mask, batch=batch)
        if batch is not None:
            batch = model_layout(pos, mask, batch)  # planned once, for the network and the reference energies
        if not compute_forces:
            return self.energy(pos, species, mask, batch=batch), None
        require_autograd("MoleculeEnergyModel")
        with torch.enable_grad():
            if not pos.requires_grad:
                pos = pos.detach().requires_grad_(True)
            e = self.energy(pos, species, mask, batch=batch)
            (grad,) = torch.autograd.grad(e.sum(), pos, create_graph=self.training)
        return e, -grad
