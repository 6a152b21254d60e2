"""An ASE calculator for every energy model geomlin trains or loads (optional extra ``ase``).

    from ase.md.verlet import VelocityVerlet
    from geomlin.deploy.calculator import GeomlinCalculator

    atoms.calc = GeomlinCalculator("model.pt2")          # a package, a checkpoint or a module
    VelocityVerlet(atoms, timestep=0.5 * ase.units.fs).run(1000)

Energies come back in eV and forces in eV/Angstrom, converted from the units the checkpoint or
package records ([`ModelCard`][geomlin.deploy.card.ModelCard]); positions go in as Angstrom, converted
to the model's length unit. Species come from the atoms' atomic numbers through the model's
species map (the elements it was trained on: any other element is refused). Periodic cells are
refused (the potentials see one isolated molecule).
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import numpy as np
import torch
from torch import nn

from geomlin.deploy.potential import (
    as_step,
    cast_copy,
    inner_module,
    model_device,
    model_dtype,
    num_species,
    species_map,
    species_of,
    units_of,
)
from geomlin.deploy.units import Units

try:
    from ase.calculators.calculator import Calculator, all_changes
except ImportError as err:  # pragma: no cover - the optional extra
    raise ImportError("geomlin.deploy.calculator needs ASE: pip install 'geomlin[ase]' (or pip install ase)") from err


def refuse_periodic(atoms) -> None:
    """The one place periodic systems are refused (until the potentials take periodic cells)."""
    if np.any(atoms.pbc):
        raise ValueError(f"geomlin's potentials take isolated molecules; these atoms are periodic (pbc={atoms.pbc.tolist()}, "
                         "cell set): set atoms.pbc = False for a molecule in vacuum")


class GeomlinCalculator(Calculator):
    """ASE calculator of a geomlin potential: ``energy`` (eV) and ``forces`` (eV/Angstrom).

    Parameters
    ----------
    model : nn.Module, str or Path
        An eager potential ([`MoleculeEnergyModel`][geomlin.models.energy.MoleculeEnergyModel], or an energy
        network ``net(pos, species) -> energy``), a compiled
        [`EnergyAndForces`][geomlin.models.md.EnergyAndForces], a
        [`PackagedModel`][geomlin.deploy.packaged.PackagedModel], or a path that
        [`geomlin.load`][geomlin.deploy.loading.load] reads (checkpoint, run folder or ``.pt2``).
    model_name : str, optional
        The checkpoint's model (``model=`` of ``geomlin.load``), when it holds several.
    dtype : torch.dtype, optional
        ``torch.float64`` runs an eager potential on a float64 copy (for finite-difference checks
        and long NVE runs); a package runs in the dtype it was exported in and refuses another.
        Default: the model's own.
    units : Units or dict, optional
        The model's energy and length units, when its card records none.
    species : dict, optional
        Atomic number -> species index, when its card records none (default: the atomic number).

    Notes
    -----
    One molecule per call (``pos (1, N, 3)``); ASE's integrators and optimizers
    (``VelocityVerlet``, ``Langevin``, ``BFGS``) run it unchanged.
    """

    implemented_properties: ClassVar[list[str]] = ["energy", "free_energy", "forces"]

    def __init__(self, model: nn.Module | str | Path, model_name: str | None = None,
                 dtype: torch.dtype | None = None, units: Units | dict | None = None,
                 species: dict[int, int] | None = None, **kwargs):
        super().__init__(**kwargs)
        if isinstance(model, (str, Path)):
            from geomlin.deploy.loading import load

            model = load(model, model=model_name)
        step = as_step(model)
        own = model_dtype(step)
        if dtype is not None and dtype != own:
            step = cast_copy(step, dtype)
        self.step = step.eval()
        self.dtype = dtype or own
        self.device = model_device(self.step)
        self.units = units_of(self.step, units)
        self.species = species_map(self.step, species)
        self.num_species = num_species(self.step)
        self._numbers: tuple | None = None

    def _species(self, atoms) -> torch.Tensor:
        numbers = tuple(int(z) for z in atoms.numbers)
        if numbers != self._numbers:
            self._species_tensor = species_of(numbers, self.species, self.num_species)[None].to(self.device)
            self._numbers = numbers
        return self._species_tensor

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        refuse_periodic(self.atoms)
        species = self._species(self.atoms)
        pos = torch.as_tensor(np.ascontiguousarray(self.atoms.positions) / self.units.length_to_angstrom,
                              dtype=self.dtype, device=self.device)[None]
        energy, forces = self.step(pos, species)
        energy = float(energy.detach().to(torch.float64).reshape(())) * self.units.energy_to_ev
        forces = forces.detach().to(torch.float64).reshape(-1, 3).cpu().numpy() * self.units.force_to_ev_per_angstrom
        self.results = {"energy": energy, "free_energy": energy, "forces": forces}

    def __repr__(self) -> str:
        return f"GeomlinCalculator({type(inner_module(self.step)).__name__}, {self.dtype}, {self.units})"
