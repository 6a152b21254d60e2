"""An ASE calculator for every energy model geomlin trains or loads (optional extra ``ase``).

    from ase.md.verlet import VelocityVerlet
    from geomlin.deploy.calculator import GeomlinCalculator

    atoms.calc = GeomlinCalculator("model.pt2")          # a package, a checkpoint or a module
    VelocityVerlet(atoms, timestep=0.5 * ase.units.fs).run(1000)

Energies come back in eV and forces in eV/Angstrom, converted from the units the checkpoint or
package records ([`ModelCard`][geomlin.deploy.card.ModelCard]); positions go in as Angstrom, converted
to the model's length unit. Species come from the atoms' atomic numbers through the model's
species map (the elements it was trained on: any other element is refused).

Periodic cells (``atoms.pbc`` any, with ``atoms.cell``): the calculator finds the neighbours itself,
outside the model's graph ([`geomlin.neighbors.neighbor_list`][], the model's cutoff, float64 on
the CPU), and hands ``edge_index``, ``shift`` and ``cell`` to the model's periodic program
([`PeriodicStep`][geomlin.models.energy.PeriodicStep]: eager for a module or checkpoint, compiled
for a package exported from a periodic run), which returns the energy, the forces and the stress
(``stress`` in eV/Angstrom^3, ASE's Voigt order and sign), the derivative of the energy by a strain
of the cell (refused, with the atoms' ``pbc`` and cell lengths, for free atoms and for a cell of
zero volume, such as a slab with no third vector). A package exported for free molecules is refused
for periodic atoms, naming the way out. A cell too small for the cutoff is refused with its height
and the cutoff.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import numpy as np
import torch
from torch import nn

from geomlin.deploy.packaged import PackagedModel
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
    from ase.stress import full_3x3_to_voigt_6_stress
except ImportError as err:  # pragma: no cover - the optional extra
    raise ImportError("geomlin.deploy.calculator needs ASE: pip install 'geomlin[ase]' (or pip install ase)") from err


def has_volume(atoms) -> bool:
    """Whether ``atoms`` are periodic in a cell of nonzero volume (the stress is per volume)."""
    return bool(np.any(atoms.pbc)) and atoms.cell.rank == 3


def refuse_stress(atoms) -> None:
    """The stress is the energy's derivative by a strain of the cell, per volume: refused without one."""
    if not has_volume(atoms):
        raise ValueError(f"the stress needs periodic atoms in a cell of nonzero volume; these have "
                         f"pbc={atoms.pbc.tolist()} and cell lengths {np.round(atoms.cell.lengths(), 6).tolist()}: "
                         "ask for energy and forces only, or set atoms.cell and atoms.pbc")


def periodic_step(step: nn.Module) -> tuple[nn.Module, float, bool]:
    """The periodic program of a calculator's step and the ``(cutoff, loop)`` of its neighbour list.

    A package runs its own (one exported for periodic runs) and records the settings; an eager or
    compiled step runs its potential eagerly in a [`PeriodicStep`][geomlin.models.energy.PeriodicStep].
    """
    from geomlin.models.edges import neighbor_settings
    from geomlin.models.energy import PeriodicStep

    if isinstance(step, PackagedModel):
        if not step.is_periodic:
            raise ValueError(f"package {step.path} was exported for free molecules and these atoms are periodic "
                             f"(pbc set): export a checkpoint trained on periodic frames (geomlin export writes its "
                             f"periodic program), or use the checkpoint itself")
        settings = step.metadata["neighbors"]
        return step, float(settings["cutoff"]), bool(settings["loop"])
    cutoff, loop = neighbor_settings(step)
    return PeriodicStep(inner_module(step)).eval(), cutoff, loop


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
    One molecule per call (``pos (1, N, 3)``), or one periodic cell (edges found here, see the
    module docstring; ``stress`` too); ASE's integrators and optimizers (``VelocityVerlet``,
    ``Langevin``, ``BFGS``, cell filters) run it unchanged.
    """

    implemented_properties: ClassVar[list[str]] = ["energy", "free_energy", "forces", "stress"]

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
        self._periodic: tuple | None = None

    def _species(self, atoms) -> torch.Tensor:
        numbers = tuple(int(z) for z in atoms.numbers)
        if numbers != self._numbers:
            self._species_tensor = species_of(numbers, self.species, self.num_species)[None].to(self.device)
            self._numbers = numbers
        return self._species_tensor

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        if "stress" in properties:
            refuse_stress(self.atoms)
        species = self._species(self.atoms)
        pos = torch.as_tensor(np.ascontiguousarray(self.atoms.positions) / self.units.length_to_angstrom,
                              dtype=self.dtype, device=self.device)
        if np.any(self.atoms.pbc):
            energy, forces, stress = self._in_cell(pos, species[0])
        elif isinstance(self.step, PackagedModel) and self.step.is_periodic:
            raise ValueError(f"package {self.step.path} was exported for periodic cells and these atoms are free "
                             "(no pbc): set atoms.cell and atoms.pbc, or export a model trained on free molecules")
        else:
            energy, forces = self.step(pos[None], species)
            stress = None
        energy = float(energy.detach().to(torch.float64).reshape(())) * self.units.energy_to_ev
        forces = forces.detach().to(torch.float64).reshape(-1, 3).cpu().numpy() * self.units.force_to_ev_per_angstrom
        self.results = {"energy": energy, "free_energy": energy, "forces": forces}
        if stress is not None and has_volume(self.atoms):
            per_volume = self.units.energy_to_ev / self.units.length_to_angstrom ** 3
            self.results["stress"] = full_3x3_to_voigt_6_stress(
                stress.detach().to(torch.float64).reshape(3, 3).cpu().numpy() * per_volume)

    def _in_cell(self, pos: torch.Tensor, species: torch.Tensor):
        """Energy, forces and stress of the periodic atoms: the neighbour search here, the rest in the program."""
        from geomlin.neighbors import neighbor_list

        if self._periodic is None:
            self._periodic = periodic_step(self.step)
        step, cutoff, loop = self._periodic
        cell = torch.as_tensor(np.asarray(self.atoms.cell.array) / self.units.length_to_angstrom,
                               dtype=torch.float64)[None]
        edge_index, shift = neighbor_list(pos.detach().to("cpu", torch.float64), cutoff, cell=cell,
                                          pbc=tuple(bool(p) for p in self.atoms.pbc), loop=loop)
        return step(pos, species, edge_index.to(self.device), shift.to(self.device),
                    cell.to(device=self.device, dtype=self.dtype))

    def __repr__(self) -> str:
        return f"GeomlinCalculator({type(inner_module(self.step)).__name__}, {self.dtype}, {self.units})"
