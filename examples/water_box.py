"""Liquid water in a periodic box: a Gaunt potential trained on periodic xTB frames, run in ASE at 300 K.

1. ``geomlin train molecules`` trains a Gaunt potential on the bundled periodic water box
   (``datasets/md/xtb_md_water27.xyz``: 30 GFN2-xTB frames of 27 molecules in a 9.32 Angstrom cube,
   energies kcal/mol, forces kcal/mol/Angstrom; the file states no units, so they are given here);
2. the checkpoint drives the ASE calculator (in float64) on periodic atoms: the calculator finds the
   neighbours in the cell (``geomlin.neighbors``), the potential returns energy, forces and stress;
3. Langevin NVT at 300 K from the first frame, repeated ``--repeat`` times along each lattice vector
   (default 2: 216 molecules, 648 atoms, an 18.6 Angstrom cube);
4. a plot of the temperature and the potential energy per molecule, and ``metrics.json``.

Usage: ``python examples/water_box.py [--quick] [--minutes 3] [--steps 200] [--out runs/water_box]``
(needs ASE). The default trains for 3 minutes and runs the 648 atoms eagerly at one to three seconds a
step on two cores (about 10 minutes); ``--quick`` trains one short epoch and runs 20 steps
of the 27-molecule box (well under a minute): its potential is barely trained, so the run only
shows the machinery. Thirty frames of 90 fs hold far too little of liquid water for a good
potential: label more with ``geomlin.datasets.xtb`` (``langevin_trajectory(..., cell=...)``) for one.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

#: The bundled periodic frames, relative to the repository root.
DATA = Path("datasets") / "md" / "xtb_md_water27.xyz"


def run_nvt(calc, atoms, steps: int, dt_fs: float, temperature: float, seed: int):
    """``(time ps, potential energy eV, temperature K)`` of ``steps`` Langevin steps of ``atoms``."""
    from ase import units
    from ase.md.langevin import Langevin
    from ase.md.velocitydistribution import Stationary, thermalize_momenta

    atoms.calc = calc
    thermalize_momenta(atoms, temperature_K=temperature, rng=np.random.default_rng(seed))
    Stationary(atoms)
    dyn = Langevin(atoms, timestep=dt_fs * units.fs, temperature_K=temperature, friction=0.01 / units.fs,
                   fixcm=False, rng=np.random.default_rng(seed + 1))
    record = []
    dyn.attach(lambda: record.append((atoms.get_potential_energy(), atoms.get_temperature())), interval=1)
    dyn.run(steps)
    energy, temp = np.array(record).T
    return np.arange(len(energy)) * dt_fs * 1e-3, energy, temp


def plot(path: Path, t, energy, temp, molecules: int, temperature: float, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_t, ax_e) = plt.subplots(1, 2, figsize=(11, 4))
    ax_t.plot(t, temp, color="tab:orange", lw=1)
    ax_t.axhline(temperature, color="gray", lw=0.5, ls="--")
    ax_t.set(xlabel="time (ps)", ylabel="temperature (K)", title=f"Langevin NVT at {temperature:.0f} K")
    ax_e.plot(t, 1e3 * (energy - energy[0]) / molecules, color="tab:blue", lw=1)
    ax_e.set(xlabel="time (ps)", ylabel="potential energy - start (meV per molecule)", title="potential energy")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short smoke run (one quick epoch, 20 steps, 27 molecules)")
    parser.add_argument("--minutes", type=float, default=3.0, help="training budget (minutes)")
    parser.add_argument("--steps", type=int, default=200, help="Langevin steps")
    parser.add_argument("--repeat", type=int, default=2, help="copies of the box along each lattice vector")
    parser.add_argument("--dt", type=float, default=0.5, help="time step (fs)")
    parser.add_argument("--temperature", type=float, default=300.0, help="thermostat temperature (K)")
    parser.add_argument("--out", default="runs/water_box", help="output folder")
    args = parser.parse_args(argv)
    import ase.io
    import torch
    from ase.units import GPa

    from geomlin.__main__ import main as cli
    from geomlin.deploy import Units
    from geomlin.deploy.calculator import GeomlinCalculator

    data = Path(__file__).resolve().parents[1] / DATA
    out = Path(args.out)
    steps, repeat = (20, 1) if args.quick else (args.steps, args.repeat)
    train = ["--quick"] if args.quick else ["--budget-minutes", str(args.minutes), "--epochs", "1000"]
    run = out / "run"
    if cli(["train", "molecules", "--model", "gaunt", "--data", str(data), "--num-train", "24", "--num-test", "6",
            "--batch-size", "2", *train, "--out", str(run), "--overwrite", "--no-progress"]) != 0:
        raise SystemExit("training failed")
    # float64 for MD: the box's energy (-85,949 kcal/mol) in float32 steps by 0.008 kcal/mol; the units the
    # bundled file holds
    calc = GeomlinCalculator(run, dtype=torch.float64, units=Units("kcal/mol", "Angstrom"))
    atoms = ase.io.read(str(data), index=0).repeat(repeat)
    atoms.wrap()
    molecules = len(atoms) // 3
    start = time.perf_counter()
    t, energy, temp = run_nvt(calc, atoms, steps, args.dt, args.temperature, seed=0)
    seconds = time.perf_counter() - start
    force_mae = torch.load(run / "checkpoint.pt", weights_only=True)["history"][-1]["gaunt/test_force_mae"]
    figure = out / "water_box.png"
    plot(figure, t, energy, temp, molecules, args.temperature,
         f"{molecules} water molecules in a periodic {atoms.cell.lengths()[0]:.1f} A cube, Gaunt potential "
         f"(test force MAE {force_mae:.2f} kcal/mol/A)")
    half = len(temp) // 2
    results = {"molecules": molecules, "atoms": len(atoms), "steps": steps,
               "mean temperature K (second half)": float(temp[half:].mean()),
               "potential energy change eV per molecule": float((energy[-1] - energy[0]) / molecules),
               "pressure GPa (last step)": float(-atoms.get_stress()[:3].mean() / GPa),
               "steps per second": steps / seconds, "force MAE kcal/mol/A": float(force_mae),
               "plot": str(figure)}
    (out / "metrics.json").write_text(json.dumps(results, indent=2))
    for key, value in results.items():
        print(f"{key}: {value:.4g}" if isinstance(value, float) else f"{key}: {value}")
    return results


if __name__ == "__main__":
    main()
