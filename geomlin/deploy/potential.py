"""Any energy model geomlin trains or loads as one step ``(pos, species) -> (energy, forces)``, with its units
and species map: what the ASE calculator and ``geomlin audit --physics`` drive.

The three kinds of potential:

* eager: a module with an ``energy`` method whose ``forward(pos, species)`` returns
  ``(energy, forces)`` ([`MoleculeEnergyModel`][geomlin.models.energy.MoleculeEnergyModel]); a bare
  energy network ``net(pos, species) -> energy`` is wrapped in an eager
  [`EnergyAndForces`][geomlin.models.md.EnergyAndForces];
* compiled: an [`EnergyAndForces`][geomlin.models.md.EnergyAndForces] step;
* exported: a [`PackagedModel`][geomlin.deploy.packaged.PackagedModel] whose outputs are energy and forces.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
from torch import Tensor, nn

from geomlin.deploy.card import ModelCard
from geomlin.deploy.packaged import PackagedModel
from geomlin.deploy.units import Units
from geomlin.models.md import EnergyAndForces

Step = Callable[[Tensor, Tensor], tuple[Tensor, Tensor]]


def as_step(model: nn.Module) -> nn.Module:
    """``model`` as a module ``(pos (B, N, 3), species (B, N)) -> (energy (B,), forces (B, N, 3))``."""
    if isinstance(model, PackagedModel):
        if not model.is_potential:
            raise ValueError(f"package {model.path} is not a potential (its outputs are not energy and forces)")
        return model
    if isinstance(model, EnergyAndForces) or callable(getattr(model, "energy", None)):
        return model
    if isinstance(model, nn.Module):
        return EnergyAndForces(model, backend=None)
    raise TypeError(f"expected an energy model (nn.Module), got {type(model).__name__}")


def inner_module(model: nn.Module) -> nn.Module:
    """The potential inside an [`EnergyAndForces`][geomlin.models.md.EnergyAndForces] step, else ``model``."""
    return model.potential if isinstance(model, EnergyAndForces) else model


def card_of(model: nn.Module) -> ModelCard | None:
    """The [`ModelCard`][geomlin.deploy.card.ModelCard] of ``model`` (or of the potential it wraps), if any."""
    card = getattr(model, "card", None)
    if card is None:
        card = getattr(inner_module(model), "card", None)
    return card if isinstance(card, ModelCard) else None


def units_of(model: nn.Module, units: Units | dict | None = None) -> Units:
    """``units`` if given, else the units on ``model``'s card; a one-line error when neither says."""
    if units is not None:
        return Units.parse(units)
    card = card_of(model)
    if card is None or card.units is None:
        raise ValueError(f"{type(inner_module(model)).__name__} records no energy units (a checkpoint trained "
                         "on a file that does not state them, or a model built in Python): pass units=, e.g. "
                         "Units('kcal/mol', 'Angstrom')")
    return card.units


def num_species(model: nn.Module) -> int | None:
    """The number of species a model embeds (``num_species``, or a package's species input range)."""
    if isinstance(model, PackagedModel):
        return next((s["labels"] for s in model.specs if "labels" in s), None)
    n = getattr(inner_module(model), "num_species", None)
    return None if n is None else int(n)


def species_map(model: nn.Module, species: dict[int, int] | None = None) -> dict[int, int] | None:
    """Atomic number -> species index: ``species`` if given, else the card's; None means the identity."""
    if species is not None:
        return {int(k): int(v) for k, v in species.items()}
    card = card_of(model)
    return None if card is None else card.species


def species_of(numbers, mapping: dict[int, int] | None, num: int | None) -> Tensor:
    """Species indices ``(N,)`` int64 of atomic ``numbers``, or a one-line error naming the first unknown element.

    ``mapping`` None: the index is the atomic number (checked against ``num`` species).
    """
    from geomlin.datasets.elements import SYMBOLS

    numbers = [int(z) for z in numbers]
    if mapping is None:
        bad = [z for z in numbers if num is not None and not 0 <= z < num]
        if bad:
            raise ValueError(f"the model embeds {num} species (atomic numbers 0..{num - 1}), got an atom of "
                             f"element {SYMBOLS[bad[0]] if 0 < bad[0] < len(SYMBOLS) else bad[0]} (Z={bad[0]})")
        return torch.tensor(numbers, dtype=torch.int64)
    unknown = [z for z in numbers if z not in mapping]
    if unknown:
        z = unknown[0]
        known = ", ".join(SYMBOLS[k] if 0 < k < len(SYMBOLS) else str(k) for k in sorted(mapping))
        raise ValueError(f"the model was trained on the elements {known}; it cannot predict an atom of element "
                         f"{SYMBOLS[z] if 0 < z < len(SYMBOLS) else z} (Z={z})")
    return torch.tensor([mapping[z] for z in numbers], dtype=torch.int64)


def model_dtype(model: nn.Module) -> torch.dtype:
    """The floating dtype ``model`` computes in (a package's exported dtype, else its first floating parameter)."""
    if isinstance(model, PackagedModel):
        return model.dtype
    for p in list(model.parameters()) + list(model.buffers()):
        if p.is_floating_point():
            return p.dtype
    return torch.get_default_dtype()


def model_device(model: nn.Module) -> torch.device:
    """The device ``model`` computes on."""
    if isinstance(model, PackagedModel):
        return model.device
    return next((p.device for p in model.parameters()), torch.device("cpu"))


def cast_copy(step: nn.Module, dtype: torch.dtype) -> nn.Module:
    """A copy of an eager or compiled step in ``dtype`` (the model itself is untouched); a package is refused."""
    if isinstance(step, PackagedModel):
        raise TypeError(f"package {step.path} runs in {step.dtype}; it cannot run in {dtype} (export the model "
                         f"in {dtype})")
    if isinstance(step, EnergyAndForces):
        return EnergyAndForces(copy.deepcopy(step.potential).to(dtype), backend=step.backend, mode=step.mode)
    return copy.deepcopy(step).to(dtype)
