"""Training results: one ``geomlin train TASK`` run with its defaults, as a table.

Runs the command in a fresh process (the same one a user types, so threads and defaults are the
command's own), then prints each model's parameters, training time and final test metrics from the
run's ``summary.json``, and the wall time of the whole command. The README's and the docs' training
tables are this script's output, pasted by ``geomlin bench --record``.

    python benchmarks/bench_training.py [--task pointcloud|molecules|nbody] [--quick] [--device cuda]
                                        [--precision bf16] [--keep DIR] [-- extra train options]

``--keep DIR`` writes the run's files (checkpoint, metrics, plot) to ``DIR`` instead of a temporary
folder, so the recorded run can be audited or resumed afterwards.

``--device`` and ``--precision`` are passed to ``geomlin train`` (default: its own, ``auto`` and
``fp32``) and named in the table's title; on a GPU each model's ``train s`` comes from timing events
(see ``docs/devices.md``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import harness

TASKS = ("pointcloud", "molecules", "nbody")
#: Metrics shown first when a task reports them (the rest follow in the summary's order).
PREFERRED = ("test_acc", "rotated_test_acc", "test_energy_mae", "test_force_mae", "test_mse", "moved_test_mse")


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def main() -> None:
    p = harness.parser(__doc__.split("\n")[0])
    p.add_argument("--task", choices=TASKS, default="pointcloud")
    p.add_argument("--device", default=None, help="geomlin train --device (default: its own, auto)")
    p.add_argument("--precision", default=None, choices=("fp32", "bf16"), help="geomlin train --precision")
    p.add_argument("--keep", default=None, metavar="DIR",
                   help="keep the run's files in DIR (default: a temporary folder, removed afterwards)")
    p.add_argument("extra", nargs="*", help="options passed to geomlin train (after --)")
    args = p.parse_args()
    harness.setup(args)
    train_args = [args.task, *(["--quick"] if args.quick else []), "--threads", str(args.threads),
                  *(["--device", args.device] if args.device else []),
                  *(["--precision", args.precision] if args.precision else []), *args.extra]
    print(harness.header(f"geomlin train {' '.join(train_args)}", args, repeats=None))
    with tempfile.TemporaryDirectory() as scratch:
        out = args.keep or scratch
        command = [sys.executable, "-m", "geomlin", "train", *train_args, "--out", out]
        t0 = time.perf_counter()
        proc = subprocess.run(command, stdout=sys.stderr, check=False)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            raise SystemExit(f"geomlin train {' '.join(train_args)} failed with exit {proc.returncode}")
        summary = json.loads((Path(out) / "summary.json").read_text())
        run = json.loads((Path(out) / "config.json").read_text())["run"]
    models = summary["models"]
    keys: list[str] = []
    for stats in models.values():
        for k in stats:
            if k not in keys and k not in ("parameters", "train_time_s") and not k.startswith("train_"):
                keys.append(k)
    first_seen = {k: i for i, k in enumerate(keys)}
    keys.sort(key=lambda k: (PREFERRED.index(k) if k in PREFERRED else len(PREFERRED), first_seen[k]))
    table = harness.Table(["model", "parameters", "train s", *keys])
    for name, stats in models.items():
        table.add(f"`{name}`", f"{stats['parameters']:,}", f"{stats['train_time_s']:.1f}",
                  *[_fmt(stats[k]) if k in stats else "–" for k in keys])
    table.print()
    for line in summary.get("comparison", []):
        print(line.strip())
    print()
    done = f"{summary['epochs_done']} epochs, {summary.get('steps', 0):,} steps"
    if "budget" in summary:
        budget = summary["budget"]
        done += f" ({budget['used_s'] / 60:.1f} of {budget['minutes']:g} budget minutes)"
    print(f"`geomlin train {' '.join(train_args)}`: {done}, {run['device']}, "
          f"{run.get('world_size', 1)} process(es), {run.get('precision', 'fp32')}, {wall:.0f} s wall "
          f"for the whole command.")


if __name__ == "__main__":
    main()
