"""[`ModelCard`][]: what a loaded model is and what it was trained on (task, config, data, units, species).

[`geomlin.load`][geomlin.deploy.loading.load] attaches one to every model it returns (``model.card``);
[`geomlin.deploy.package`][geomlin.deploy.export.package] stores it in the package's metadata, and the ASE
calculator reads its units and species map from it. A potential built in Python gets one by
assignment: ``net.card = ModelCard(units=Units("kcal/mol"), species={1: 0, 6: 1, 8: 2})``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from geomlin.deploy.units import Units


@dataclass(frozen=True)
class ModelCard:
    """Facts about a trained model.

    Parameters
    ----------
    units : Units, optional
        Energy and length units of a potential's outputs (None: not recorded).
    species : dict, optional
        Atomic number -> the model's species index, for the elements it was trained on
        (``geomlin train molecules``: the index is the atomic number itself).
    task, name : str, optional
        The ``geomlin train`` task and the model's name in the run.
    config : dict
        The run's options.
    data : dict
        Facts about the training data (``TaskData.info``: the file, frames, atoms, energy mean).
    source : str
        The file it was loaded from.
    """

    units: Units | None = None
    species: dict[int, int] | None = None
    task: str | None = None
    name: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)
    source: str = ""

    @classmethod
    def from_run(cls, task: str, name: str, config: dict, data: dict, source: str = "") -> ModelCard:
        """The card of model ``name`` of a ``geomlin train`` run (a checkpoint's or a package's record)."""
        units = Units(data["energy_unit"], data.get("length_unit", "Angstrom")) if "energy_unit" in data else None
        numbers = data.get("atomic_numbers")
        species = None if numbers is None else {int(z): int(z) for z in numbers}
        return cls(units=units, species=species, task=task, name=name, config=dict(config), data=dict(data),
                   source=str(source))

    @classmethod
    def from_metadata(cls, meta: dict, source: str = "") -> ModelCard:
        """The card stored in a package's geomlin metadata (see [`as_metadata`][])."""
        species = meta.get("species")
        return cls(units=Units.parse(meta.get("units")),
                   species=None if species is None else {int(k): int(v) for k, v in species.items()},
                   task=meta.get("task"), name=meta.get("model"), config=dict(meta.get("config", {})),
                   data=dict(meta.get("info", {})), source=str(source))

    def as_metadata(self) -> dict[str, Any]:
        """JSON values for a package's metadata: ``task``, ``model``, ``config``, ``info``, ``units``, ``species``."""
        out: dict[str, Any] = {"config": self.config, "info": self.data}
        if self.task is not None:
            out["task"] = self.task
        if self.name is not None:
            out["model"] = self.name
        if self.units is not None:
            out["units"] = self.units.as_dict()
        if self.species is not None:
            out["species"] = {str(k): v for k, v in self.species.items()}
        return out
