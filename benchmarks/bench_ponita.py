"""Benchmark: PONITA against the other equivariant models of ``geomlin train``, at the same budget.

Every model of a task trains on the same batches for the same number of optimiser steps (the
``geomlin train`` loop, one run, the task's default schedule) and is evaluated on the same test set:

* ``molecules``: energies and forces of the bundled GFN2-xTB ethanol trajectory; PONITA
  (fiber bundle, 12-direction icosahedral grid) against the Gaunt potential and EGNN;
* ``nbody``: charged five-body dynamics; PONITA against GATr, EGNN and the MLP baseline.

The reference implementation (``ebekkers/ponita``: torch-scatter, PyTorch Lightning 1.8, a PyG 2.3
pin) is not importable next to this torch, so it is reported as not installed; the comparison is
between models at equal steps, not between PONITA implementations.

    python benchmarks/bench_ponita.py [--quick] [--threads 1]
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
import time

import harness

from geomlin.train.loop import run_training
from geomlin.train.tasks import get_task

#: (task, models, option overrides of the full run, overrides of --quick).
RUNS = [
    ("molecules", "gaunt,egnn,ponita", {}, {"epochs": 2, "num_train": 64, "num_test": 32}),
    ("nbody", "gatr,egnn,ponita,mlp", {}, {"epochs": 2, "num_train": 256, "num_test": 128, "burn_in_steps": 100,
                                           "horizon_steps": 200}),
]
#: Metrics shown per task (keys of the run summary), with their column names.
METRICS = {"molecules": [("test_force_mae", "force MAE"), ("test_energy_mae", "energy MAE")],
           "nbody": [("test_mse", "MSE"), ("rotated_mse", "MSE after an E(3) motion")]}


def _config(task, overrides: dict, out: str, threads: int) -> dict:
    cfg = {o.name: o.default for o in task.all_options()}
    cfg.update(overrides)
    cfg.update({"out": out, "progress": False, "threads": threads, "device": "cpu"})
    return cfg


def _reference_installed() -> bool:
    try:
        import ponita  # noqa: F401
    except Exception:  # noqa: BLE001 - any import failure means "not usable here"
        return False
    return True


def main() -> None:
    p = harness.parser(__doc__.split("\n")[0])
    args = p.parse_args()
    harness.setup(args)
    print(harness.header("PONITA vs Gaunt potential, EGNN and GATr at equal optimiser steps", args, None))
    print(f"Reference PONITA (ebekkers/ponita): {'installed' if _reference_installed() else 'not installed'}.\n")
    for name, models, full, quick in RUNS:
        task = get_task(name)
        with tempfile.TemporaryDirectory() as out:
            cfg = _config(task, {"model": models, **(quick if args.quick else full)}, out, args.threads)
            t0 = time.perf_counter()
            with contextlib.redirect_stdout(sys.stderr):  # the loop's progress lines are not the table
                summary = run_training(task, cfg)
            wall = time.perf_counter() - t0
        steps = -(-cfg["num_train"] // cfg["batch_size"]) * summary["epochs_done"]
        print(f"### geomlin train {name}: {summary['epochs_done']} epochs, {steps} optimiser steps per model, "
              f"batch {cfg['batch_size']}, lr {cfg['lr']:g} (one run, {wall:.0f} s)\n")
        columns = ["model", "parameters", "train s"] + [label for _, label in METRICS[name]]
        table = harness.Table(columns)
        for model, stats in summary["models"].items():
            table.add(model, f"{stats['parameters']:,}", f"{stats['train_time_s']:.1f}",
                      *[f"{stats[key]:.4g}" if key in stats else "–" for key, _ in METRICS[name]])
        table.print()
        key, label = METRICS[name][0]
        models = summary["models"]
        if "ponita" in models and key in models["ponita"]:
            ours = models["ponita"][key]
            others = [f"{m} {stats[key]:.4g} ({(ours / stats[key] - 1) * 100:+.0f}%)"
                      for m, stats in models.items() if m != "ponita" and key in stats]
            print(f"PONITA's {label} {ours:.4g} against " + ", ".join(others)
                  + " (PONITA relative to each; negative = PONITA lower).")
        print()


if __name__ == "__main__":
    main()
