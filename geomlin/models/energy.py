"""[`MoleculeEnergyModel`][]: an invariant energy network as a potential, energy and forces in data units.

The networks of [`geomlin.models`][] predict a standardised energy ``net(pos, species)``; the wrapper
adds the energy scale and shift of the data (a mean, per-element reference energies) and returns the
forces ``-dE/dpos`` by autograd, so every potential (Gaunt, PONITA, EGNN) is trained, evaluated,
exported and run in molecular dynamics the same way.
"""

from __future__ import annotations

import inspect

import torch
from torch import Tensor, nn

from geomlin.models.md import require_autograd
from geomlin.reps import Labels, Positions, Scalars, Vectors
from geomlin.reps.declarations import ExportShapes

__all__ = ["EXAMPLE_ATOMS", "MoleculeEnergyModel", "accepts_mask"]

#: Atoms per example molecule of [`MoleculeEnergyModel.example_inputs`][].
EXAMPLE_ATOMS = 6


def accepts_mask(net: nn.Module | type) -> bool:
    """True when ``net.forward`` takes a ``mask`` keyword (padded molecules of different sizes)."""
    forward = (net if isinstance(net, type) else type(net)).forward
    return "mask" in inspect.signature(forward).parameters


class MoleculeEnergyModel(nn.Module):
    """Wraps an invariant energy network: standardised energy -> physical energy and forces.

    ``E(pos, species) = energy_mean + sum_i atom_energies[species_i] + scale * net(pos, species)``.

    ``forward(pos (B, N, 3), species (B, N) int64, mask=None) -> (energy (B,), forces (B, N, 3))`` with
    ``forces = -dE/dpos`` (graph kept for training). ``mask (B, N)`` bool marks real atoms of
    padded molecules (nets that accept a ``mask``); ``compute_forces=False`` returns
    ``(energy, None)`` without the gradient. Declared types: positions ``Positions(3)`` and
    species ``Labels(num_species)`` -> energy ``Scalars()`` (E(3) invariant) and forces
    ``Vectors(3)`` (E(3) equivariant).
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

    def energy(self, pos: Tensor, species: Tensor, mask: Tensor | None = None) -> Tensor:
        """Energy ``(B,)`` in data units."""
        out = self.net(pos, species) if mask is None else self.net(pos, species, mask=mask)
        ref = self.atom_energies.to(pos.dtype)[species]
        if mask is not None:
            ref = ref * mask.to(pos.dtype)
        return self.energy_mean.to(pos.dtype) + ref.sum(dim=-1) + self.scale.to(pos.dtype) * out

    def forward(self, pos: Tensor, species: Tensor, mask: Tensor | None = None,
                compute_forces: bool = True) -> tuple[Tensor, Tensor | None]:
        if not compute_forces:
            return self.energy(pos, species, mask), None
        require_autograd("MoleculeEnergyModel")
        with torch.enable_grad():
            if not pos.requires_grad:
                pos = pos.detach().requires_grad_(True)
            e = self.energy(pos, species, mask)
            (grad,) = torch.autograd.grad(e.sum(), pos, create_graph=self.training)
        return e, -grad
