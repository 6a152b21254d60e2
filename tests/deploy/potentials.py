"""Potentials for the deploy tests: a small Gaunt potential trained briefly on the bundled ethanol, and two
broken ones (a direct force head; an energy that reads absolute coordinates).

The trained potential has realistic forces (force MAE about 9 kcal/mol/Angstrom against an RMS of 22
after 100 Adam steps, ~15 s on 2 cores) and is built once per test session. Trained this briefly
it has no repulsive core (at 300 K two atoms of ethanol met within ~60 fs and one shot off at
10^6 K), so it carries the short-range repulsion many potentials add as a prior (``sum_{i<j}
eps (sigma / r_ij)^12``, negligible at bond lengths), which keeps 1,000-step NVE runs bound.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import torch
from torch import nn

from geomlin.deploy import ModelCard, Units
from geomlin.models import GauntPotential, MoleculeEnergyModel
from geomlin.reps import Labels, Positions, Scalars, Vectors

ROOT = Path(__file__).resolve().parents[2]
ETHANOL = ROOT / "datasets" / "md" / "xtb_md_ethanol.npz"
#: The bundled data's units (datasets/README.md).
KCAL = Units("kcal/mol", "Angstrom")
#: ethanol's elements, indexed by atomic number as geomlin train molecules does
NUM_SPECIES = 9


def ethanol(frames: slice = slice(None)):
    """``(numbers (9,), pos (M, 9, 3) float64, energy (M,), forces (M, 9, 3))`` of the bundled trajectory."""
    d = np.load(ETHANOL)
    return (torch.tensor(d["nuclear_charges"]), torch.tensor(d["coords"][frames]), torch.tensor(d["energies"][frames]),
            torch.tensor(d["forces"][frames]))


@functools.lru_cache(maxsize=1)
def _trained_state() -> tuple[dict, float, float]:
    numbers, pos, energy, forces = ethanol(slice(0, 800))
    pos, forces = pos.float(), forces.float()
    scale = float(forces.pow(2).mean().sqrt())
    torch.manual_seed(0)
    model = MoleculeEnergyModel(GauntPotential(num_species=NUM_SPECIES, hidden_channels=8, lmax=1, num_blocks=2),
                                float(energy.mean()), scale)
    opt = torch.optim.Adam(model.parameters(), lr=2e-2)
    g = torch.Generator().manual_seed(0)
    model.train()
    for _ in range(100):
        i = torch.randint(len(pos), (4,), generator=g)
        e, f = model(pos[i], numbers.expand(4, -1))
        loss = ((e - energy[i]) / scale).pow(2).mean() + 10 * ((f - forces[i]) / scale).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return {k: v.clone() for k, v in model.state_dict().items()}, float(energy.mean()), scale


class WithCore(nn.Module):
    """``model``'s energy plus a repulsive core ``sum_{i<j} eps (sigma / r_ij)^12`` (kcal/mol, Angstrom).

    ``forward(pos, species) -> (energy (B,), -dE/dpos (B, N, 3))`` like
    [`MoleculeEnergyModel`][geomlin.models.energy.MoleculeEnergyModel], whose declared types and
    export shapes it keeps.
    """

    export_shapes = MoleculeEnergyModel.export_shapes

    def __init__(self, model: MoleculeEnergyModel, eps: float = 10.0, sigma: float = 0.9):
        super().__init__()
        self.model, self.eps, self.sigma = model, eps, sigma
        self.num_species = model.num_species
        self.type_in, self.type_out = model.type_in, model.type_out

    def example_inputs(self, generator=None, dtype=torch.float64):
        return self.model.example_inputs(generator=generator, dtype=dtype)

    def energy(self, pos, species):
        eye = torch.eye(pos.shape[1], dtype=pos.dtype, device=pos.device)   # no size-dependent indices: exports
        r2 = (pos[:, :, None] - pos[:, None]).pow(2).sum(-1) + eye          # 1 on the diagonal, masked below
        core = (self.sigma ** 2 / r2).pow(6) * (1 - eye)
        return self.model.energy(pos, species) + 0.5 * self.eps * core.sum((-1, -2))

    def forward(self, pos, species):
        with torch.enable_grad():
            pos = pos if pos.requires_grad else pos.detach().requires_grad_(True)
            energy = self.energy(pos, species)
            (grad,) = torch.autograd.grad(energy.sum(), pos, create_graph=self.training)
        return energy, -grad


def trained_ethanol_potential(dtype: torch.dtype = torch.float32) -> WithCore:
    """A fresh copy of the briefly trained potential (with its core) in ``dtype``, eval mode, with a card."""
    state, mean, scale = _trained_state()
    model = MoleculeEnergyModel(GauntPotential(num_species=NUM_SPECIES, hidden_channels=8, lmax=1, num_blocks=2),
                                mean, scale)
    model.load_state_dict(state)
    out = WithCore(model)
    out.card = ModelCard(units=KCAL, species={1: 1, 6: 6, 8: 8})
    return out.to(dtype).eval()


class DirectForces(nn.Module):
    """The trained potential's energy with forces from a separate head: not ``-dE/dpos`` (non-conservative).

    Its declared types hold (energy invariant, forces equivariant: the head is an EGNN-like sum of
    invariant weights times relative vectors), so only the physics audit can tell.
    """

    def __init__(self):
        super().__init__()
        self.potential = trained_ethanol_potential(torch.float64)
        self.num_species = NUM_SPECIES
        self.card = self.potential.card
        self.type_in = (Positions(3), Labels(NUM_SPECIES))
        self.type_out = (Scalars(), Vectors(3))

    def energy(self, pos, species):
        return self.potential.energy(pos, species)

    def forward(self, pos, species):
        energy, forces = self.potential(pos, species)
        rel = pos[:, :, None] - pos[:, None]                      # (B, N, N, 3)
        weight = torch.exp(-rel.pow(2).sum(-1))                   # invariant, not a gradient of the energy
        return energy, forces + 5.0 * (weight[..., None] * rel).sum(2) * (species[..., None] == 1)


class AbsoluteEnergy(nn.Module):
    """A conservative energy that reads absolute coordinates: ``E = E_trained + k sum_i x_i`` (not invariant)."""

    def __init__(self):
        super().__init__()
        self.potential = trained_ethanol_potential(torch.float64)
        self.num_species = NUM_SPECIES
        self.card = self.potential.card
        self.type_in = (Positions(3), Labels(NUM_SPECIES))
        self.type_out = (Scalars(), Vectors(3))

    def energy(self, pos, species):
        return self.potential.energy(pos, species) + 0.5 * pos[..., 0].sum(-1)

    def example_inputs(self, generator=None, dtype=torch.float64):
        return self.potential.example_inputs(generator=generator, dtype=dtype)

    def forward(self, pos, species):
        with torch.enable_grad():
            pos = pos.detach().requires_grad_(True)
            energy = self.energy(pos, species)
            (grad,) = torch.autograd.grad(energy.sum(), pos)
        return energy, -grad
