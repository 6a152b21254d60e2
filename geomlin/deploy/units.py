"""Energy and length units of a trained potential, and their factors to ASE's eV and Angstrom.

A potential predicts energies in the units of the data it was trained on (the bundled MD
trajectories, like MD17: kcal/mol and Angstrom; QM9's energies in PyTorch Geometric's eV).
``geomlin train`` records them in the checkpoint and ``geomlin export`` in the package
([`ModelCard`][geomlin.deploy.card.ModelCard]); the ASE calculator converts with [`Units`][].
The factors are the CODATA 2018 values (the SI base units are exact since 2019).
"""

from __future__ import annotations

from dataclasses import dataclass

#: Faraday constant N_A e (C/mol): an energy in J/mol divided by it is in eV.
FARADAY = 6.02214076e23 * 1.602176634e-19
#: One unit of each energy name, in eV.
ENERGY_IN_EV = {"eV": 1.0, "meV": 1e-3, "kcal/mol": 4184.0 / FARADAY, "kJ/mol": 1000.0 / FARADAY,
                "Hartree": 27.211386245988, "Ha": 27.211386245988}
#: One unit of each length name, in Angstrom.
LENGTH_IN_ANGSTROM = {"Angstrom": 1.0, "A": 1.0, "Bohr": 0.529177210903, "nm": 10.0}
#: Boltzmann's constant in eV/K.
BOLTZMANN_EV = 8.617333262e-5
#: ``1 eV / (amu Angstrom^2)`` in ``fs^-2``: an acceleration ``F / m`` (eV/Angstrom per amu) in Angstrom/fs^2.
ACCELERATION_FS = 1.602176634e-19 / (1.66053906660e-27 * 1e-20) * 1e-30


@dataclass(frozen=True)
class Units:
    """The energy and length units of a potential; forces are in ``energy / length``.

    Parameters
    ----------
    energy : str
        One of [`ENERGY_IN_EV`][] (``"kcal/mol"``, ``"eV"``, ...).
    length : str
        One of [`LENGTH_IN_ANGSTROM`][] (``"Angstrom"``, ...).
    """

    energy: str
    length: str = "Angstrom"

    def __post_init__(self):
        if self.energy not in ENERGY_IN_EV:
            raise ValueError(f"unknown energy unit {self.energy!r}; known: {', '.join(ENERGY_IN_EV)}")
        if self.length not in LENGTH_IN_ANGSTROM:
            raise ValueError(f"unknown length unit {self.length!r}; known: {', '.join(LENGTH_IN_ANGSTROM)}")

    @property
    def energy_to_ev(self) -> float:
        """Factor from this energy unit to eV."""
        return ENERGY_IN_EV[self.energy]

    @property
    def length_to_angstrom(self) -> float:
        """Factor from this length unit to Angstrom."""
        return LENGTH_IN_ANGSTROM[self.length]

    @property
    def force_to_ev_per_angstrom(self) -> float:
        """Factor from ``energy / length`` to eV/Angstrom."""
        return self.energy_to_ev / self.length_to_angstrom

    def as_dict(self) -> dict[str, str]:
        """``{"energy": ..., "length": ...}`` (what checkpoints and packages store)."""
        return {"energy": self.energy, "length": self.length}

    @classmethod
    def parse(cls, value) -> Units | None:
        """Units from a stored ``{"energy": ..., "length": ...}``, a [`Units`][], or None (none recorded)."""
        if value is None or isinstance(value, Units):
            return value
        if not isinstance(value, dict) or "energy" not in value:
            raise ValueError(f"units must be a dict with 'energy' (and 'length'), got {value!r}")
        return cls(str(value["energy"]), str(value.get("length", "Angstrom")))

    def __str__(self) -> str:
        return f"energy {self.energy}, length {self.length}, forces {self.energy}/{self.length}"
