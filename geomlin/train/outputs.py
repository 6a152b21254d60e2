"""What a training run writes: the run's files in ``--out`` and the lines it prints.

``config.json`` ([`run_record`][]), ``metrics.csv`` ([`write_csv`][]), ``curves.png`` and
``checkpoint.pt`` after every epoch ([`write_epoch`][]), ``summary.json`` ([`run_summary`][]), each
written atomically (a write error is a [`UserError`][geomlin.train.errors.UserError] naming the
file); the checks of the output folder before anything is written (`check_output_folder`,
`check_fresh_output`); the per-epoch line and the final table (`format_summary`).
"""

from __future__ import annotations

import csv
import json
import platform
from pathlib import Path
from typing import Any

import torch
from torch import nn

import geomlin
from geomlin.io_atomic import FileWriteError, atomic_write
from geomlin.train import distributed as D
from geomlin.train.checkpoint import save_checkpoint
from geomlin.train.errors import UserError
from geomlin.train.metrics import RunProgress
from geomlin.train.plots import plot_curves
from geomlin.train.tasks.base import Task, num_examples

#: Files whose presence marks an output folder as holding a finished or running run.
RUN_FILES = ("checkpoint.pt", "metrics.csv", "summary.json")


def check_fresh_output(out: Path, resume: bool, overwrite: bool) -> None:
    """Refuse to start a new run in a folder holding another run, unless resuming or overwriting.

    Raises [`UserError`][geomlin.train.errors.UserError] naming the folder, the files found and the flags
    (``--resume`` / ``--overwrite``).
    """
    if resume or overwrite or not out.is_dir():
        return
    found = [name for name in RUN_FILES if (out / name).exists()]
    if found:
        raise UserError(f"--out {out} already holds a run ({', '.join(found)}); pass --resume to continue it, "
                        "--overwrite to replace it, or another --out")


def check_output_folder(out: Path) -> None:
    """Refuse an output path that is (or lies inside) an existing file; UserError naming it."""
    for p in (out, *out.parents):
        if p.exists() and not p.is_dir():
            what = "is a file" if p == out else f"lies inside {p}, which is a file"
            raise UserError(f"--out {out} {what}; pass a folder for the run's files")


def prepare_output(out: Path, overwrite: bool, resuming: bool) -> None:
    """Create ``out`` (rank 0); with ``--overwrite`` remove every file of the run it replaces."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create --out {out}: {exc.strerror or exc}") from None
    if overwrite and not resuming:
        for name in (*RUN_FILES, "curves.png"):  # --overwrite: no file of the replaced run lingers
            (out / name).unlink(missing_ok=True)


def count_parameters(model: nn.Module) -> int:
    """Number of trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def is_plain(value) -> bool:
    """A JSON-plain data fact kept in the run record: a number, string, bool or a list of them."""
    if isinstance(value, (list, tuple)):
        return all(isinstance(v, (int, float, str, bool)) for v in value)
    return isinstance(value, (int, float, str, bool))


def run_record(task: Task, cfg: dict[str, Any], names: list[str], dist: D.DistInfo, data, num_train: int,
                models: dict[str, nn.Module]) -> dict[str, Any]:
    """What ``config.json`` and the checkpoint record about the run besides its options."""
    return {"task": task.name, "models": names, "world_size": dist.world_size,
            "device": str(dist.device), "backend": dist.backend, "precision": cfg["precision"],
            "geomlin": str(geomlin.__version__), "torch": str(torch.__version__),
            "python": platform.python_version(), "num_train": num_train,
            "num_eval": {k: num_examples(v) for k, v in data.evals.items()},
            "parameters": {n: count_parameters(m) for n, m in models.items()},
            "data": {k: v for k, v in data.info.items() if is_plain(v)}}


def write_csv(history: list[dict], path: Path) -> None:
    """The whole metric history, written atomically: never a file with only its header."""
    if not history:
        return
    columns = list(history[0])

    def write(fh) -> None:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        for row in history:
            writer.writerow({k: (f"{v:.8g}" if isinstance(v, float) else v) for k, v in row.items()})
    write_file(path, write)


def write_file(path: Path, write) -> None:
    """One run file written atomically (text); a write error is a UserError naming the file."""
    try:
        atomic_write(path, write, text=True)
    except FileWriteError as exc:
        raise UserError(str(exc)) from None


def write_json(path: Path, value) -> None:
    """``value`` as indented JSON, written atomically."""
    write_file(path, lambda fh: fh.write(json.dumps(value, indent=2) + "\n"))


def write_epoch(task: Task, cfg: dict[str, Any], out: Path, epoch: int, history: list[dict], models, optimizers,
                 states, state: RunProgress, run_info: dict) -> None:
    """Rank 0: the metrics, the curves and the checkpoint after an epoch (each written atomically)."""
    write_csv(history, out / "metrics.csv")
    try:
        plot_curves(history, out / "curves.png", title=f"geomlin train {task.name}")
    except FileWriteError as exc:
        raise UserError(str(exc)) from None
    save_checkpoint(out / "checkpoint.pt", {
        "task": task.name, "config": cfg, "epoch": epoch,
        "models": {n: m.state_dict() for n, m in models.items()},
        "optimizers": {n: o.state_dict() for n, o in optimizers.items()},
        "rng": states, "history": history, "train_time": state.train_time, "run": run_info,
        "steps": state.steps_done, "budget_used_s": state.budget_used})


def run_summary(task: Task, cfg: dict[str, Any], names: list[str], out: Path, epoch: int, history: list[dict],
             state: RunProgress, run_info: dict) -> dict[str, Any]:
    """The run's summary (``summary.json``): the last epoch's metrics of each model and the comparison."""
    summary = {"task": task.name, "epochs_done": epoch, "steps": state.steps_done, "out": str(out), "models": {}}
    if state.budget_s:
        summary["budget"] = {"minutes": cfg["budget_minutes"], "used_s": state.budget_used,
                             "exhausted": state.out_of_budget}
    last = history[-1] if history else {}
    for n in names:
        summary["models"][n] = {"parameters": run_info["parameters"][n], "train_time_s": state.train_time[n],
                                **{k.split("/", 1)[1]: v for k, v in last.items() if k.startswith(n + "/")}}
    summary["comparison"] = task.summary_lines(last, names)
    return summary


def epoch_line(row: dict, names: list[str], task: Task) -> str:
    """The line printed after an epoch: each model's training loss and primary metric, the epoch's time."""
    parts = [f"epoch {row['epoch']:>3}"]
    for n in names:
        bits = [f"loss {row.get(f'{n}/train_loss', float('nan')):.4g}"]
        key = f"{n}/{task.primary_metric}"
        if key in row:
            bits.append(f"{task.primary_metric} {row[key]:.4g}")
        parts.append(f"{n}: " + ", ".join(bits))
    parts.append(f"{row['epoch_time_s']:.1f}s")
    return " | ".join(parts)


def format_summary(summary: dict, task: Task) -> str:
    """The final summary as a text table: one row per model, one column per final metric."""
    models = summary["models"]
    metric_keys: list[str] = []
    for stats in models.values():
        for k in stats:
            if k not in metric_keys and k not in ("parameters", "train_time_s") and not k.startswith("train_"):
                metric_keys.append(k)
    header = ["model", "params", "train s", *metric_keys]
    rows = [[n, f"{s['parameters']:,}", f"{s['train_time_s']:.1f}",
             *[f"{s[k]:.4g}" if k in s else "-" for k in metric_keys]] for n, s in models.items()]
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    fmt = lambda r: "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)
                              for i, (c, w) in enumerate(zip(r, widths)))
    done = f"{summary['epochs_done']} epochs, {summary.get('steps', 0):,} steps"
    if "budget" in summary:
        b = summary["budget"]
        done += (f", {b['used_s'] / 60:.1f} of {b['minutes']:g} budget minutes"
                 + (" (budget reached)" if b["exhausted"] else ""))
    lines = [f"\nSummary: geomlin train {summary['task']} ({done}, files in {summary['out']})",
             fmt(header), fmt(["-" * w for w in widths]), *map(fmt, rows)]
    lines += summary.get("comparison", [])
    return "\n".join(lines)
