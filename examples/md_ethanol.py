"""From training to a simulation: a Gaunt potential on the bundled ethanol, exported, run in ASE.

1. ``geomlin train molecules`` trains a potential briefly on the bundled GFN2-xTB ethanol
   trajectory (energies kcal/mol, forces kcal/mol/Angstrom; the checkpoint records the units);
2. ``geomlin export`` compiles it into an AOTInductor package (``.pt2``, float64 for MD);
3. ``geomlin.load`` reads the package back and the ASE calculator runs it: velocity Verlet (NVE)
   at 0.5 fs, then Langevin at 300 K, from the first frame of the trajectory;
4. a plot of the total energy's drift (NVE) and the temperature (both runs) is written.

Usage: ``python examples/md_ethanol.py [--quick] [--model gaunt] [--steps 1000] [--out runs/md_ethanol]``
(needs ASE: ``pip install ase``). The default trains for 3 minutes; ``--quick`` for one short
epoch, whose potential is nearly flat (the run then only shows the machinery).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np


def run_md(calc, numbers, positions, steps: int, dt_fs: float, temperature: float, langevin: bool, seed: int):
    """``(time ps, total energy eV, temperature K)`` of an ASE run of ``steps`` steps."""
    from ase import Atoms, units
    from ase.md.langevin import Langevin
    from ase.md.velocitydistribution import Stationary, thermalize_momenta
    from ase.md.verlet import VelocityVerlet

    atoms = Atoms(numbers=numbers, positions=positions)
    atoms.calc = calc
    thermalize_momenta(atoms, temperature_K=temperature, rng=np.random.default_rng(seed))
    Stationary(atoms)
    if langevin:
        dyn = Langevin(atoms, timestep=dt_fs * units.fs, temperature_K=temperature, friction=0.01 / units.fs,
                       fixcm=False, rng=np.random.default_rng(seed + 1))
    else:
        dyn = VelocityVerlet(atoms, timestep=dt_fs * units.fs)
    record = []
    dyn.attach(lambda: record.append((atoms.get_total_energy(), atoms.get_temperature())), interval=1)
    dyn.run(steps)
    energy, temp = np.array(record).T
    return np.arange(len(energy)) * dt_fs * 1e-3, energy, temp


def plot(path: Path, nve, langevin, num_atoms: int, temperature: float, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_e, ax_t) = plt.subplots(1, 2, figsize=(11, 4))
    t, energy, temp = nve
    drift_mev = 1e3 * (energy - energy[0]) / num_atoms
    slope = np.polyfit(t, (energy - energy[0]) / num_atoms, 1)[0]
    ax_e.plot(t, drift_mev, color="tab:blue", lw=1)
    ax_e.set(xlabel="time (ps)", ylabel="total energy - start (meV per atom)",
             title=f"NVE energy conservation: drift {slope:+.1e} eV/atom/ps")
    ax_e.axhline(0.0, color="gray", lw=0.5)
    ax_t.plot(t, temp, color="tab:blue", lw=1, label="NVE (velocity Verlet)")
    ax_t.plot(langevin[0], langevin[2], color="tab:orange", lw=1, label=f"Langevin {temperature:.0f} K")
    ax_t.axhline(temperature, color="gray", lw=0.5, ls="--")
    ax_t.set(xlabel="time (ps)", ylabel="temperature (K)", title="temperature")
    ax_t.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short smoke run (one quick epoch, 200 steps)")
    parser.add_argument("--model", default="gaunt", help="geomlin train molecules model (gaunt, egnn, ponita)")
    parser.add_argument("--minutes", type=float, default=3.0, help="training budget (minutes)")
    parser.add_argument("--steps", type=int, default=1000, help="MD steps of each run")
    parser.add_argument("--dt", type=float, default=0.5, help="time step (fs)")
    parser.add_argument("--temperature", type=float, default=300.0, help="initial / Langevin temperature (K)")
    parser.add_argument("--out", default="runs/md_ethanol", help="output folder")
    args = parser.parse_args(argv)
    import torch

    import geomlin
    from geomlin.__main__ import main as cli
    from geomlin.deploy.calculator import GeomlinCalculator
    from geomlin.deploy.physics import bundled_molecules

    out = Path(args.out)
    steps = 200 if args.quick else args.steps
    train = ["--quick"] if args.quick else ["--budget-minutes", str(args.minutes), "--epochs", "1000"]
    run = out / "run"
    if cli(["train", "molecules", "--model", args.model, *train, "--out", str(run), "--overwrite",
            "--no-progress"]) != 0:
        raise SystemExit("training failed")
    package = out / f"{args.model}.pt2"
    if cli(["export", str(run), "--out", str(package), "--dtype", "float64", "--overwrite"]) != 0:
        raise SystemExit("export failed")
    calc = GeomlinCalculator(geomlin.load(package))
    ethanol = bundled_molecules(lambda z: True)[0]
    numbers, positions = ethanol.numbers.numpy(), ethanol.pos.numpy()
    nve = run_md(calc, numbers, positions, steps, args.dt, args.temperature, langevin=False, seed=0)
    langevin = run_md(calc, numbers, positions, steps, args.dt, args.temperature, langevin=True, seed=0)
    figure = out / "md_ethanol.png"
    force_mae = torch.load(run / "checkpoint.pt", weights_only=True)["history"][-1][f"{args.model}/test_force_mae"]
    plot(figure, nve, langevin, len(numbers), args.temperature,
         f"ethanol through the {args.model} package (trained in {calc.units.energy}, run in eV), "
         f"test force MAE {force_mae:.2f} kcal/mol/Angstrom")
    drift = float(np.polyfit(nve[0], (nve[1] - nve[1][0]) / len(numbers), 1)[0])
    results = {"drift eV/atom/ps": drift, "NVE mean temperature K": float(nve[2].mean()),
               "Langevin mean temperature K": float(langevin[2][len(langevin[2]) // 2:].mean()),
               "force MAE kcal/mol/A": float(force_mae), "plot": str(figure)}
    for key, value in results.items():
        print(f"{key}: {value:.4g}" if isinstance(value, float) else f"{key}: {value}")
    return results


if __name__ == "__main__":
    main()
