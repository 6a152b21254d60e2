"""Benchmark: molecular dynamics in ASE, geomlin's exported package against MACE's calculator.

For each bundled trajectory (ethanol, aspirin), geomlin's Gaunt potential and MACE train on the
same frames, batches and loss for the same wall time (``bench_molecules.py``'s protocol and
helpers: :func:`bench_molecules.make_split`, :func:`bench_molecules.train_and_evaluate`), from a
fresh initialisation each. Then each runs NVE molecular dynamics through its own ASE calculator,
as a user runs it: geomlin's model exported into an AOTInductor package (float32,
``geomlin.deploy.package``) and read back by ``geomlin.load`` into ``GeomlinCalculator``; MACE's
trained module in ``mace.calculators.MACECalculator`` (float32). Both convert kcal/mol to eV the
same way (geomlin from the units its package records, MACE with ``energy_units_to_eV``).

Reported per model: parameters, training steps taken in the budget, test force MAE
(kcal/mol/Angstrom), MD steps per second of ASE's ``VelocityVerlet`` (0.5 fs, from the first
test frame at 300 K, one thread, the first steps excluded as warm-up), the energy drift of that
run (eV/atom/ps, slope of the total energy's least-squares line), and geomlin's speed-up.

MACE (``mace-torch``) pins its own e3nn, so it runs in its own virtualenv: pass its Python with
``--mace-python PATH`` (or ``GEOMLIN_MACE_PYTHON``); this script runs itself there as a worker
(``--mace-worker``) after geomlin's run, through :func:`bench_molecules.run_mace`.

    python benchmarks/bench_md.py [--quick] [--mace-python /work/.venv-mace/bin/python] [--seconds S]
                                  [--md-steps N] [--molecules ethanol,aspirin] [--model gaunt]
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

import bench_molecules as bm
import harness
import numpy as np
import torch

#: Sizes: training frames, test frames, equal training wall time (s), MD steps, batch size.
FULL = {"num_train": 800, "num_test": 200, "seconds": 180.0, "md_steps": 1000, "batch_size": 32}
QUICK = {"num_train": 64, "num_test": 32, "seconds": 3.0, "md_steps": 30, "batch_size": 8}
#: MD: time step (fs), initial temperature (K), steps excluded from the timing.
DT_FS, TEMPERATURE, WARMUP_STEPS = 0.5, 300.0, 5
#: kcal/mol in eV (CODATA 2018), the factor MACE's calculator is given.
KCAL_MOL_EV = 4184.0 / (6.02214076e23 * 1.602176634e-19)


def ase_md(calc, z: np.ndarray, pos: np.ndarray, steps: int) -> dict:
    """NVE through an ASE calculator: steps per second (after the warm-up) and the energy drift (eV/atom/ps)."""
    from ase import Atoms, units
    from ase.md.velocitydistribution import Stationary, thermalize_momenta
    from ase.md.verlet import VelocityVerlet

    atoms = Atoms(numbers=z, positions=pos)
    atoms.calc = calc
    thermalize_momenta(atoms, temperature_K=TEMPERATURE, rng=np.random.default_rng(bm.SEED))
    Stationary(atoms)
    dyn = VelocityVerlet(atoms, timestep=DT_FS * units.fs)
    totals = []
    dyn.attach(lambda: totals.append(atoms.get_total_energy()), interval=1)
    dyn.run(WARMUP_STEPS)
    start = time.perf_counter()
    dyn.run(steps)
    seconds = time.perf_counter() - start
    t = np.arange(len(totals)) * DT_FS * 1e-3
    drift = float(np.polyfit(t, np.asarray(totals) / len(z), 1)[0]) if np.isfinite(totals).all() else float("inf")
    return {"md_steps_per_s": steps / seconds, "drift": drift}


def geomlin_run(name: str, split: dict, settings: dict, folder: Path) -> dict:
    """Train geomlin's ``name`` for the budget, package it, run NVE through ``GeomlinCalculator``."""
    import geomlin
    from geomlin import deploy
    from geomlin.deploy.calculator import GeomlinCalculator

    torch.manual_seed(bm.SEED)
    model, call = bm.geomlin_model(name, split)
    result = bm.train_and_evaluate(model, call, split, 0, settings["seconds"], settings["lr"],
                                   settings["force_weight"], 3, f"geomlin {name}")
    z = torch.from_numpy(split["z"])
    model.card = deploy.ModelCard(units=deploy.Units("kcal/mol", "Angstrom"),
                                  species={int(v): int(v) for v in set(split["z"].tolist())})
    frames = torch.from_numpy(split["pos_test"][:2]).float()  # a batch of 2: a batch of 1 would be specialised
    path = folder / f"{name}.pt2"
    meta = deploy.package(model.float().eval(), path, (frames, z.expand(2, -1).clone()))
    calc = GeomlinCalculator(geomlin.load(path))
    md = ase_md(calc, split["z"], split["pos_test"][0], settings["md_steps"])
    return {**result, **md, "package_s": meta["export_seconds"] + meta["compile_seconds"]}


def mace_worker(split_path: str, out_path: str) -> None:
    """Run inside MACE's virtualenv: train MACE for the budget, run NVE through ``MACECalculator``, write JSON."""
    import mace
    from mace.calculators import MACECalculator

    args = json.loads(Path(split_path).with_suffix(".json").read_text())
    torch.set_num_threads(args["threads"])
    split = dict(np.load(split_path))
    torch.manual_seed(bm.SEED)
    model, call = bm.mace_model(split)
    result = bm.train_and_evaluate(model, call, split, 0, args["seconds"], args["lr"], args["force_weight"], 3,
                                   "mace")
    calc = MACECalculator(models=model.float().eval(), device="cpu", default_dtype="float32",
                          energy_units_to_eV=KCAL_MOL_EV)
    md = ase_md(calc, split["z"], split["pos_test"][0], args["md_steps"])
    Path(out_path).write_text(json.dumps({"version": getattr(mace, "__version__", "installed"), **result, **md}))


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--mace-worker":
        mace_worker(sys.argv[2], sys.argv[3])
        return
    p = harness.parser(__doc__.split("\n")[0])
    p.add_argument("--mace-python", default=os.environ.get("GEOMLIN_MACE_PYTHON"),
                   help="Python of a virtualenv with mace-torch (default: $GEOMLIN_MACE_PYTHON)")
    p.add_argument("--molecules", default=",".join(bm.MOLECULES), help="comma-separated subset of "
                   f"{', '.join(bm.MOLECULES)}")
    p.add_argument("--model", default="gaunt", help=f"geomlin's model ({', '.join(bm.GEOMLIN_MODELS)})")
    p.add_argument("--seconds", type=float, default=None, help=f"training seconds of each model (default "
                   f"{FULL['seconds']:g})")
    p.add_argument("--md-steps", type=int, default=None, help=f"timed NVE steps (default {FULL['md_steps']})")
    args = p.parse_args()
    harness.setup(args, seed=bm.SEED)
    sizes = {**FULL, **(QUICK if args.quick else {})}
    sizes.update({k: v for k, v in (("seconds", args.seconds), ("md_steps", args.md_steps)) if v is not None})
    molecules = [m.strip() for m in args.molecules.split(",") if m.strip()]
    if not molecules or any(m not in bm.MOLECULES for m in molecules):
        raise SystemExit(f"--molecules must name some of {', '.join(bm.MOLECULES)}, got {args.molecules!r}")
    if args.model not in bm.GEOMLIN_MODELS:
        raise SystemExit(f"--model must be one of {', '.join(bm.GEOMLIN_MODELS)}, got {args.model!r}")
    settings = {**bm.TRAIN, "batch_size": sizes["batch_size"], "seconds": sizes["seconds"],
                "md_steps": sizes["md_steps"]}
    print(harness.header("Molecular dynamics in ASE: geomlin's package vs MACE's calculator", args, None))
    print(f"{sizes['num_train']} training and {sizes['num_test']} test frames per molecule (GFN2-xTB), "
          f"{sizes['seconds']:g} s of training each (batch {settings['batch_size']}, Adam lr {settings['lr']}, "
          f"force weight {settings['force_weight']}); then {sizes['md_steps']} NVE steps of {DT_FS} fs in ASE "
          f"(VelocityVerlet from {TEMPERATURE:.0f} K, float32, {args.threads} thread(s), {WARMUP_STEPS} warm-up "
          f"steps untimed). Force MAE in kcal/mol/Angstrom on the test frames; drift in eV/atom/ps. MACE "
          f"{bm.MACE_CONFIG}, trained and run after geomlin in its own virtualenv.\n")
    table = harness.Table(["molecule", "model", "params", "train steps", "force MAE", "MD steps/s", "drift",
                           "MD speed-up"])
    for molecule in molecules:
        split = bm.make_split(bm.MOLECULES[molecule], sizes["num_train"], sizes["num_test"], sizes["batch_size"],
                              steps=1000)
        with tempfile.TemporaryDirectory() as tmp:
            ours = geomlin_run(args.model, split, settings, Path(tmp))
        theirs = bm.run_mace(args.mace_python, split, settings, args.threads, script=__file__)
        table.add(molecule, f"geomlin {args.model} (package)", f"{ours['params']:,}", ours["steps"],
                  f"{ours['force_mae']:.3f}", f"{ours['md_steps_per_s']:.0f}", f"{ours['drift']:+.1e}", "")
        if isinstance(theirs, str):
            table.add(molecule, "MACE (calculator)", theirs, "–", "–", "–", "–", "–")
        else:
            table.add(molecule, f"MACE {theirs['version']} (calculator)", f"{theirs['params']:,}", theirs["steps"],
                      f"{theirs['force_mae']:.3f}", f"{theirs['md_steps_per_s']:.0f}", f"{theirs['drift']:+.1e}",
                      f"{ours['md_steps_per_s'] / theirs['md_steps_per_s']:.1f}x")
    table.print()


if __name__ == "__main__":
    main()
