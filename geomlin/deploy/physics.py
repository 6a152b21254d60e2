"""The physics a potential must obey, measured on the bundled molecules: ``geomlin audit --physics``.

For each bundled MD trajectory (``datasets/md``: ethanol, malonaldehyde, aspirin) whose elements the
model was trained on, on its first frame, in float64 (a package: in the dtype it was exported in):

* **conservative forces**: the forces against central finite differences of the energy (the
  fourth-order stencil, [`force_error`][]) for every coordinate, as the relative error
  ``||F - F_fd|| / ||F||``;
* **symmetry**: the energy's invariance and the forces' equivariance under random rotations,
  reflections and translations (measured by [`geomlin.testing.equivariance_check`][]) and under
  random permutations of atoms of the same species, as relative errors;
* **energy conservation**: velocity Verlet (NVE) from the smallest molecule's frame with
  Maxwell-Boltzmann velocities, the drift of the total energy as the slope of its least-squares
  line, in eV per atom per ps.

Each figure comes with its threshold ([`THRESHOLDS`][]); a model passes when every figure is at
or below it. A potential whose forces are not the gradient of its energy (a direct force head)
fails the first check and heats up in the last; a model that reads absolute coordinates fails
the second.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from geomlin.deploy.packaged import PackagedModel
from geomlin.deploy.potential import (
    as_step,
    cast_copy,
    model_dtype,
    num_species,
    species_map,
    species_of,
    units_of,
)
from geomlin.deploy.units import ACCELERATION_FS, BOLTZMANN_EV, Units

#: The bundled trajectories the audit runs on, smallest first.
MOLECULES = ("ethanol", "malonaldehyde", "aspirin")
#: Per dtype: finite-difference step (Angstrom), and the thresholds of the relative force error,
#: the relative symmetry errors and the NVE drift (eV/atom/ps).
THRESHOLDS = {torch.float64: {"step": 3e-3, "forces": 1e-6, "symmetry": 1e-9, "drift": 1e-4},
              torch.float32: {"step": 1e-2, "forces": 1e-2, "symmetry": 1e-4, "drift": 1e-3}}
#: NVE run of the audit: steps, time step (fs), initial temperature (K).
NVE_STEPS, NVE_DT_FS, NVE_TEMPERATURE = 800, 0.25, 300.0


@dataclass(frozen=True)
class Figure:
    """One measured figure: what, on which molecule, its value and threshold."""

    check: str
    molecule: str
    value: float
    threshold: float
    unit: str = "relative"

    @property
    def passed(self) -> bool:
        return math.isfinite(self.value) and self.value <= self.threshold


@dataclass(frozen=True)
class Molecule:
    """A bundled frame: ``numbers (N,)`` atomic numbers, ``pos (N, 3)`` Angstrom float64."""

    name: str
    numbers: Tensor
    pos: Tensor


def bundled_molecules(known, root: str | Path | None = None) -> list[Molecule]:
    """The first frame of every bundled trajectory whose atomic numbers all satisfy ``known(z)``."""
    from geomlin.datasets.md17 import read_npz_trajectory
    from geomlin.train.tasks.base import bundled_path

    out = []
    for name in MOLECULES:
        relative = Path("md") / f"xtb_md_{name}.npz"
        path = Path(root) / "datasets" / relative if root is not None else bundled_path(relative)
        if path is None or not path.is_file():
            continue
        data = read_npz_trajectory(path)
        numbers = torch.as_tensor(data["z"])
        if all(known(int(z)) for z in numbers):
            out.append(Molecule(name, numbers, torch.as_tensor(data["pos"][0], dtype=torch.float64)))
    return out


def _call(step, pos: Tensor, species: Tensor, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    energy, forces = step(pos.to(dtype), species.expand(pos.shape[0], -1))
    return energy.detach().to(torch.float64), forces.detach().to(torch.float64)


def force_error(step, pos: Tensor, species: Tensor, dtype: torch.dtype, h: float) -> float:
    """``||F - F_fd|| / ||F||`` with the fourth-order central difference of step ``h``, all frames in one batch.

    ``dE/dx_k ~ (E(x - 2h e_k) - 8 E(x - h e_k) + 8 E(x + h e_k) - E(x + 2h e_k)) / 12h``: its truncation
    error is ``O(h^4)``, so a step well above round-off (the energy carries a large constant offset)
    still resolves forces to ~1e-9 in float64.
    """
    n = pos.shape[0]
    shifts = h * torch.eye(3 * n, dtype=torch.float64).reshape(3 * n, n, 3)
    frames = torch.cat([pos[None] + c * shifts for c in (-2, -1, 1, 2)] + [pos[None]])
    energy, forces = _call(step, frames, species[None], dtype)
    e = energy[:-1].reshape(4, 3 * n)
    fd = -(e[0] - 8 * e[1] + 8 * e[2] - e[3]) / (12 * h)
    got = forces[-1].reshape(-1)
    return float(torch.linalg.vector_norm(got - fd) / torch.linalg.vector_norm(got).clamp_min(1e-300))


class _Motions:
    """Random rigid motions of one kind, as a sampler for the equivariance checker."""

    def __init__(self, kind: str):
        self.kind = kind

    def sample(self, n: int, generator=None, dtype=torch.float64):
        from geomlin.groups import RigidTransform, haar_orthogonal

        R = haar_orthogonal(n, 3, generator, special=True)
        t = torch.zeros(n, 3, dtype=torch.float64)
        if self.kind == "reflections":
            R = -R  # det -1: a rotation times the inversion
        elif self.kind == "translations":
            R = torch.eye(3, dtype=torch.float64).expand(n, 3, 3)
            t = 2.0 * torch.randn(n, 3, generator=generator, dtype=torch.float64)
        return RigidTransform(R.to(dtype), t.to(dtype))

    def __str__(self) -> str:
        return self.kind


def symmetry_errors(step, pos: Tensor, species: Tensor, dtype: torch.dtype, num_samples: int = 4,
                    seed: int = 0) -> dict[str, tuple[float, float]]:
    """``{motion: (energy error, force error)}`` for rotations, reflections, translations and permutations."""
    from geomlin.reps import Positions, Scalars, Vectors
    from geomlin.testing import equivariance_check

    def fn(p):
        return _call(step, p, species[None], dtype)

    out = {}
    g = torch.Generator().manual_seed(seed)
    for kind in ("rotations", "reflections", "translations"):
        report = equivariance_check(fn, _Motions(kind), (Positions(3),), (Scalars(), Vectors(3)), (pos[None],),
                                    num_samples=num_samples, generator=g)
        errors = torch.tensor(report.errors, dtype=torch.float64)
        out[kind] = (float(errors[:, 0].max()), float(errors[:, 1].max()))
    energy, forces = fn(pos[None])
    worst = (0.0, 0.0)
    for _ in range(num_samples):
        perm = torch.arange(pos.shape[0])
        for s in species.unique():
            idx = (species == s).nonzero().reshape(-1)
            perm[idx] = idx[torch.randperm(idx.numel(), generator=g)]
        e, f = fn(pos[perm][None])
        worst = (max(worst[0], float((e - energy).abs().max() / energy.abs().max().clamp_min(1e-300))),
                 max(worst[1], float(torch.linalg.vector_norm(f - forces[:, perm])
                                     / torch.linalg.vector_norm(forces).clamp_min(1e-300))))
    out["permutations"] = worst
    return out


def nve_drift(step, molecule: Molecule, species: Tensor, units: Units, dtype: torch.dtype,
              steps: int = NVE_STEPS, dt_fs: float = NVE_DT_FS, temperature: float = NVE_TEMPERATURE,
              seed: int = 0) -> float:
    """Drift of the total energy of a velocity-Verlet run, eV per atom per ps (slope of its least-squares line).

    Integrated in float64 in eV, Angstrom, fs and amu (the model is called in ``dtype``); initial
    velocities Maxwell-Boltzmann at ``temperature`` with the centre-of-mass motion removed.
    """
    from geomlin.datasets.xtb import ATOMIC_MASSES
    from geomlin.models.md import velocity_verlet_step

    missing = sorted({int(z) for z in molecule.numbers} - set(ATOMIC_MASSES))
    if missing:
        raise ValueError(f"no atomic mass for Z={missing[0]} in geomlin.datasets.xtb.ATOMIC_MASSES")
    masses = torch.tensor([ATOMIC_MASSES[int(z)] for z in molecule.numbers], dtype=torch.float64)[None]
    g = torch.Generator().manual_seed(seed)
    vel = torch.randn(1, len(masses[0]), 3, generator=g, dtype=torch.float64)
    vel = vel * (BOLTZMANN_EV * temperature * ACCELERATION_FS / masses[..., None]).sqrt()
    vel = vel - (masses[..., None] * vel).sum(1, keepdim=True) / masses.sum()
    length, force = units.length_to_angstrom, units.force_to_ev_per_angstrom * ACCELERATION_FS

    def model(pos, species_, mask=None):  # eV and amu Angstrom / fs^2
        energy, forces = _call(step, pos / length, species_, dtype)
        return energy * units.energy_to_ev, forces * force

    def total(energy, vel):
        return float(energy[0] + 0.5 * (masses[..., None] * vel ** 2).sum() / ACCELERATION_FS)

    pos = molecule.pos[None].clone()
    energy, forces = model(pos, species[None])
    totals = [total(energy, vel)]
    for _ in range(steps):
        pos, vel, energy, forces = velocity_verlet_step(model, pos, vel, forces, species[None], masses, dt_fs)
        totals.append(total(energy, vel))
    t = torch.arange(steps + 1, dtype=torch.float64) * dt_fs * 1e-3  # ps
    e = torch.tensor(totals, dtype=torch.float64) / masses.shape[1]
    if not torch.isfinite(e).all():
        return float("inf")
    slope = ((t - t.mean()) * (e - e.mean())).sum() / ((t - t.mean()) ** 2).sum()
    return abs(float(slope))


def physics_audit(model: nn.Module, units: Units | dict | None = None, species: dict[int, int] | None = None,
                  num_samples: int = 4, seed: int = 0, nve_steps: int = NVE_STEPS,
                  molecules: list[Molecule] | None = None) -> list[Figure]:
    """Every figure of the module docstring for ``model`` (cast to float64 unless it is a package).

    Parameters
    ----------
    model : nn.Module
        An energy model: eager, an ``EnergyAndForces`` step or a package (see
        [`geomlin.deploy.potential`][]).
    units, species
        When the model's card records none (see [`GeomlinCalculator`][geomlin.deploy.calculator.GeomlinCalculator]).
    num_samples : int
        Random group elements and permutations per check.
    nve_steps : int
        Velocity-Verlet steps of the energy-conservation run.
    molecules : list of Molecule, optional
        Default: the bundled ones the model knows.
    """
    step = as_step(model)
    if not isinstance(step, PackagedModel) and model_dtype(step) != torch.float64:
        step = cast_copy(step, torch.float64)
    dtype = model_dtype(step)
    limits = THRESHOLDS.get(dtype, THRESHOLDS[torch.float32])
    units = units_of(step, units)
    mapping, num = species_map(step, species), num_species(step)

    def known(z: int) -> bool:
        return z in mapping if mapping is not None else (num is None or z < num)

    molecules = bundled_molecules(known) if molecules is None else molecules
    if not molecules:
        raise ValueError("no bundled molecule (datasets/md: ethanol, malonaldehyde, aspirin) has only elements this "
                         "model knows")
    figures = []
    for mol in molecules:
        sp = species_of(mol.numbers.tolist(), mapping, num)
        figures.append(Figure("forces vs central differences of the energy", mol.name,
                              force_error(step, mol.pos, sp, dtype, limits["step"]), limits["forces"]))
        for kind, (e_err, f_err) in symmetry_errors(step, mol.pos, sp, dtype, num_samples, seed).items():
            figures.append(Figure(f"energy invariance under {kind}", mol.name, e_err, limits["symmetry"]))
            figures.append(Figure(f"force equivariance under {kind}", mol.name, f_err, limits["symmetry"]))
    mol = molecules[0]  # the smallest: one NVE run
    sp = species_of(mol.numbers.tolist(), mapping, num)
    figures.append(Figure(f"NVE energy drift ({nve_steps} steps of {NVE_DT_FS} fs from {NVE_TEMPERATURE:.0f} K)",
                          mol.name, nve_drift(step, mol, sp, units, dtype, nve_steps, seed=seed), limits["drift"],
                          "eV/atom/ps"))
    return figures
