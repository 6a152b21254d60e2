"""The training loop shared by every ``geomlin train`` task.

One run trains all selected models of a task side by side on the same batches
(one optimiser each), evaluates them on every evaluation set after each epoch,
and on rank 0 writes ``OUT/config.json``, ``OUT/metrics.csv`` (one row per
epoch), ``OUT/curves.png``, ``OUT/checkpoint.pt`` and ``OUT/summary.json``.

Reproducibility: model ``name`` is initialised from ``seed`` and the name alone
(so adding a model does not change the others), the data order of epoch ``e``
is a pure function of ``(seed, e)`` (``DistributedSampler.set_epoch``), and the
checkpoint stores every RNG state of every rank. Resuming therefore continues
bit-for-bit on CPU.

On an accelerator the loop never waits for the device inside an epoch (see ``docs/devices.md``):
a batch moves to the device once ([`take`][]), each model's step
([`train_step`][]) queues its forward, backward and update, and the statistics are summed where
they are computed ([`MetricSums`][]). The host reads the device at these bounded points only:

* after the run's first training step: the deferred input checks
  ([`geomlin.validation.raise_deferred`][]) and whether every model's first loss is finite;
* once per epoch, at its end: all statistics of the epoch in one collective and one read
  ([`read_epoch_means`][]), then the deferred checks again; a non-finite training loss stops
  the run there ([`TrainingDiverged`][]), before the epoch's checkpoint;
* once per epoch for the checkpoint (the models, optimisers and RNG states are copied to the host).

On the CPU reading is free, so there the loss is checked after every step and the progress bar
shows the running loss.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
import platform
import sys
import time
import zlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data.distributed import DistributedSampler

import geomlin
from geomlin import validation
from geomlin.io_atomic import FileWriteError, atomic_write
from geomlin.train import distributed as D
from geomlin.train.checkpoint import load_checkpoint, rng_state, save_checkpoint, set_rng_state
from geomlin.train.config import PRECISIONS
from geomlin.train.errors import TrainingDiverged, UserError
from geomlin.train.plots import plot_curves
from geomlin.train.tasks.base import Task, num_examples, take

#: Largest gradient norm before clipping (keeps the first epochs of small models stable).
GRAD_CLIP_NORM = 10.0
#: Device types whose timing events measure a step's device time (elsewhere the host's wall time).
TIMING_EVENT_DEVICES = ("cuda", "xpu")


def seed_everything(seed: int) -> None:
    """Seed torch, numpy and Python's ``random``."""
    import random

    import numpy as np

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def model_seed(seed: int, name: str) -> int:
    """Initialisation seed of model ``name``: depends on the run seed and the name only."""
    return (seed * 1_000_003 + zlib.crc32(name.encode())) % 2**63


def cosine_lr(base: float, epoch: int, epochs: int) -> float:
    """Learning rate of 1-based ``epoch`` of ``epochs`` on a cosine schedule to 5% of ``base``."""
    return cosine_lr_at(base, (epoch - 1) / max(1, epochs))


def cosine_lr_at(base: float, progress: float) -> float:
    """The cosine schedule to 5% of ``base`` at ``progress`` in ``[0, 1]`` (of the epochs or of a time budget)."""
    progress = min(max(progress, 0.0), 1.0)
    return base * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * progress)))


class MetricSums:
    """One model's statistics over an epoch: ``{name: [sum, count]}``, summed where they were computed.

    Sums from the model stay 0-d tensors on the training device and host counts stay Python
    numbers (see [`stat`][geomlin.train.tasks.base.stat]); [`add`][] reads nothing back.
    """

    def __init__(self) -> None:
        self.totals: dict[str, list] = {}

    def add(self, stats: Mapping[str, tuple]) -> None:
        """Add one batch's ``{name: (sum, count)}``."""
        for k, (s, c) in stats.items():
            entry = self.totals.get(k)
            if entry is None:
                self.totals[k] = [s, c]
            else:
                entry[0], entry[1] = entry[0] + s, entry[1] + c

    def mean(self, key: str) -> float:
        """The current mean of ``key`` on this process (reads the device: for the CPU progress bar)."""
        s, c = self.totals[key]
        return float(s) / float(c) if float(c) > 0 else float("nan")


def read_epoch_means(groups: Mapping[str, MetricSums], device: torch.device) -> dict[str, dict[str, float]]:
    """The means of every statistic of every group over all ranks: ``{group: {name: mean}}``.

    All sums and counts of the epoch are packed into one float64 tensor on ``device`` (host numbers
    uploaded once), summed over the ranks by one collective and read by one copy to the host: the
    loop's one read of the epoch's statistics. Collective: every rank calls it with the same groups
    and statistic names.
    """
    slots = [(g, k) for g in groups for k in sorted(groups[g].totals)]
    means: dict[str, dict[str, float]] = {g: {} for g in groups}
    if not slots:
        return means
    values = [v for g, k in slots for v in groups[g].totals[k]]
    on_device = [i for i, v in enumerate(values) if isinstance(v, Tensor)]
    on_host = [i for i, v in enumerate(values) if not isinstance(v, Tensor)]
    parts = []
    if on_device:
        parts.append(torch.stack([values[i].to(device=device, dtype=torch.float64) for i in on_device]))
    if on_host:
        parts.append(torch.tensor([float(values[i]) for i in on_host], dtype=torch.float64).to(device))
    packed = D.all_reduce_sum(torch.cat(parts), device).cpu().tolist()
    flat = [0.0] * len(values)
    for position, i in enumerate(on_device + on_host):
        flat[i] = packed[position]
    for j, (g, k) in enumerate(slots):
        means[g][k] = flat[2 * j] / flat[2 * j + 1] if flat[2 * j + 1] > 0 else float("nan")
    return means


class StepClock:
    """The training time of one model over an epoch, without waiting for the device.

    On the CPU the host's wall time around each step; on devices with timing events
    ([`TIMING_EVENT_DEVICES`][]) a pair of events around each step, read by [`seconds`][] after
    the epoch's statistics were read (which waits for the device anyway); on other accelerators the
    host's wall time (the time to queue the step where the device runs behind).
    """

    def __init__(self, device: torch.device) -> None:
        self.events = device.type in TIMING_EVENT_DEVICES
        self.device = device
        self.host = 0.0
        self.pairs: list[tuple[Any, Any]] = []

    @contextlib.contextmanager
    def step(self) -> Iterator[None]:
        if self.events:
            start, end = (torch.Event(device=self.device, enable_timing=True) for _ in range(2))
            start.record()
            yield
            end.record()
            self.pairs.append((start, end))
        else:
            t0 = time.perf_counter()
            yield
            self.host += time.perf_counter() - t0

    def seconds(self) -> float:
        """Seconds spent in the steps so far (call after the device finished them)."""
        if self.pairs:
            self.pairs[-1][1].synchronize()
            self.host += sum(a.elapsed_time(b) for a, b in self.pairs) / 1000.0
            self.pairs.clear()
        return self.host


def autocast(device: torch.device, precision: str):
    """The autocast context of ``--precision`` on ``device`` (``fp32``: none)."""
    dtype = PRECISIONS[precision]
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=dtype)


def train_step(task: Task, name: str, model: nn.Module, optimizer: torch.optim.Optimizer, batch, cfg: dict,
               *, parameters=None, device: torch.device | None = None,
               precision: str = "fp32") -> tuple[Tensor, dict]:
    """One optimiser step of model ``name`` on ``batch``; returns its loss (0-d) and statistics.

    The task's forward and loss ([`Task.train_step`][], under autocast for ``precision="bf16"``),
    backward, clipping of the gradient norm of ``parameters`` (default: the model's) to
    [`GRAD_CLIP_NORM`][], and the update. Nothing here reads the device: the loss and the
    statistics stay where they were computed. A model that refuses reduced precision (a TypeError
    mentioning "precision") becomes a [`UserError`][] naming it.
    """
    device = device if device is not None else next(model.parameters()).device
    try:
        with autocast(device, precision):
            loss, stats = task.train_step(name, model, batch, cfg)
    except TypeError as exc:  # a model that refuses reduced precision says so (geomlin's convention)
        if precision != "fp32" and "precision" in str(exc):
            raise UserError(f"model {name} cannot train with --precision {precision}: {exc}") from None
        raise
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(list(model.parameters()) if parameters is None else parameters, GRAD_CLIP_NORM)
    optimizer.step()
    return loss, stats


def _diverged(name: str, value: float, epoch: int, lr: float) -> TrainingDiverged:
    return TrainingDiverged(f"model {name}: the training loss became {value} in epoch {epoch}; "
                            f"lower --lr (now {lr:g})")


def _check_losses(losses: Mapping[str, Tensor], epoch: int, lr: float) -> None:
    """Raise [`TrainingDiverged`][] for a non-finite loss (reads every loss: one host sync)."""
    values = torch.stack([loss.detach().float().reshape(()) for loss in losses.values()]).cpu().tolist()
    for name, value in zip(losses, values):
        if not math.isfinite(value):
            raise _diverged(name, value, epoch, lr)


def _batches(indices: list[int], batch_size: int) -> list[Tensor]:
    return [torch.tensor(indices[i:i + batch_size], dtype=torch.long)
            for i in range(0, len(indices), batch_size)]


def count_parameters(model: nn.Module) -> int:
    """Number of trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def _write_csv(history: list[dict], path: Path) -> None:
    """The whole metric history, written atomically: never a file with only its header."""
    if not history:
        return
    columns = list(history[0])

    def write(fh) -> None:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        for row in history:
            writer.writerow({k: (f"{v:.8g}" if isinstance(v, float) else v) for k, v in row.items()})
    _write_file(path, write)


def _write_file(path: Path, write) -> None:
    """One run file written atomically (text); a write error is a UserError naming the file."""
    try:
        atomic_write(path, write, text=True)
    except FileWriteError as exc:
        raise UserError(str(exc)) from None


def _write_json(path: Path, value) -> None:
    _write_file(path, lambda fh: fh.write(json.dumps(value, indent=2) + "\n"))


#: Files whose presence marks an output folder as holding a finished or running run.
RUN_FILES = ("checkpoint.pt", "metrics.csv", "summary.json")


def check_fresh_output(out: Path, resume: bool, overwrite: bool) -> None:
    """Refuse to start a new run in a folder holding another run, unless resuming or overwriting.

    Raises [`UserError`][] naming the folder, the files found and the flags
    (``--resume`` / ``--overwrite``).
    """
    if resume or overwrite or not out.is_dir():
        return
    found = [name for name in RUN_FILES if (out / name).exists()]
    if found:
        raise UserError(f"--out {out} already holds a run ({', '.join(found)}); pass --resume to continue it, "
                        "--overwrite to replace it, or another --out")


def _progress(iterable, enabled: bool, **kwargs):
    if not enabled:
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, leave=False, dynamic_ncols=True, file=sys.stderr, **kwargs)


def check_output_folder(out: Path) -> None:
    """Refuse an output path that is (or lies inside) an existing file; UserError naming it."""
    for p in (out, *out.parents):
        if p.exists() and not p.is_dir():
            what = "is a file" if p == out else f"lies inside {p}, which is a file"
            raise UserError(f"--out {out} {what}; pass a folder for the run's files")


def _plain(value) -> bool:
    """A JSON-plain data fact kept in the run record: a number, string, bool or a list of them."""
    if isinstance(value, (list, tuple)):
        return all(isinstance(v, (int, float, str, bool)) for v in value)
    return isinstance(value, (int, float, str, bool))


def run_training(task: Task, cfg: dict[str, Any], resume_from: str | Path | None = None,
                 overwrite: bool = False) -> dict[str, Any]:
    """Train the models of ``task`` as configured by ``cfg``; return the summary dict.

    ``resume_from`` names a checkpoint written by an earlier run of the same task;
    training continues at the epoch after the one it stored. Without it, an output folder that
    already holds a run ([`RUN_FILES`][]) is refused unless ``overwrite`` is true.

    Everything is checked before any file is written: every option against its declaration
    ([`validate_config`][geomlin.train.config.validate_config]), the checkpoint (same task,
    models and data/model options, epochs left to run), that the data have training and
    evaluation examples, and last the output folder (so a wrong argument is reported as itself
    where an earlier run holds the folder). Problems raise [`UserError`][]; a loss that
    turns NaN raises [`TrainingDiverged`][]. Process-wide settings
    (the number of torch threads) are the caller's: the ``geomlin`` command sets ``--threads``;
    the training device is made current only for the run
    ([`device_scope`][geomlin.train.distributed.device_scope]).
    """
    from geomlin.train.config import validate_config

    cfg = {**{o.name: o.default for o in task.all_options()}, **cfg}
    cfg = validate_config(task.all_options(), cfg)
    dist = D.setup(cfg["device"])
    try:
        # the run's value checks on an accelerator stay on the device, read after the first step and each epoch
        with D.device_scope(dist.device), validation.deferred_checks():
            summary = _run(task, cfg, dist, resume_from, overwrite)
            # every rank leaves together: a rank that tears its connections down while rank 0 still
            # writes the summary can abort in gloo's shutdown (seen once in CI, SIGABRT on rank 1).
            # Only after a successful run: after an error the other ranks may never arrive.
            D.barrier()
            return summary
    finally:
        D.teardown()


def _check_data(data, what: str) -> int:
    n = num_examples(data)
    if n < 1:
        raise UserError(f"the {what} set is empty; nothing to train or evaluate on")
    return n


def _load_resume(task: Task, cfg: dict[str, Any], names: list[str], resume_from) -> dict | None:
    """The checkpoint to resume from, checked against this run (task, models, options, epochs left)."""
    from geomlin.train.config import check_resume_compatible

    if resume_from is None:
        return None
    ckpt = load_checkpoint(resume_from, map_location="cpu")
    if ckpt["task"] != task.name:
        raise UserError(f"checkpoint {resume_from} belongs to task '{ckpt['task']}', not '{task.name}'")
    if sorted(ckpt["models"]) != sorted(names):
        raise UserError(f"checkpoint {resume_from} holds models {sorted(ckpt['models'])}, "
                        f"but this run trains {sorted(names)}")
    check_resume_compatible(task.all_options(), ckpt["config"], cfg, str(resume_from))
    if int(ckpt["epoch"]) >= cfg["epochs"]:
        raise UserError(f"checkpoint {resume_from} has already trained {int(ckpt['epoch'])} of "
                        f"{cfg['epochs']} epochs; pass a larger --epochs to continue")
    return ckpt


def _check_run_data(data, dist: D.DistInfo) -> int:
    """The number of training examples; every evaluation set needs one example per process."""
    num_train = _check_data(data.train, "training")
    for set_name, fields in data.evals.items():
        if _check_data(fields, f"evaluation '{set_name}'") < dist.world_size:
            # every rank evaluates a shard, and the epoch's statistics are reduced name by name
            raise UserError(f"the evaluation set '{set_name}' has {num_examples(fields)} examples for "
                            f"{dist.world_size} processes; give it at least one example per process")
    return num_train


def _build_models(task: Task, cfg: dict[str, Any], names: list[str], info: dict, dist: D.DistInfo,
                  ckpt: dict | None, resume_from) -> tuple[dict[str, nn.Module], dict]:
    """The models (each seeded by its name) and their optimisers, restored from ``ckpt`` if given."""
    models: dict[str, nn.Module] = {}
    for name in names:
        torch.manual_seed(model_seed(cfg["seed"], name))
        models[name] = task.build_model(name, cfg, info).to(dist.device)
    optimizers = {n: torch.optim.AdamW(m.parameters(), lr=cfg["lr"], weight_decay=cfg["weight_decay"])
                  for n, m in models.items()}
    if ckpt is not None:
        for n in names:
            try:
                models[n].load_state_dict(ckpt["models"][n])
                optimizers[n].load_state_dict(ckpt["optimizers"][n])
            except (RuntimeError, ValueError, KeyError) as exc:
                raise UserError(f"checkpoint {resume_from}: model '{n}' does not fit this run "
                                f"({str(exc).strip().splitlines()[0][:200]})") from None
    return models, optimizers


def _prepare_output(out: Path, overwrite: bool, resuming: bool) -> None:
    """Create ``out`` (rank 0); with ``--overwrite`` remove every file of the run it replaces."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create --out {out}: {exc.strerror or exc}") from None
    if overwrite and not resuming:
        for name in (*RUN_FILES, "curves.png"):  # --overwrite: no file of the replaced run lingers
            (out / name).unlink(missing_ok=True)


def _run_record(task: Task, cfg: dict[str, Any], names: list[str], dist: D.DistInfo, data, num_train: int,
                models: dict[str, nn.Module]) -> dict[str, Any]:
    """What ``config.json`` and the checkpoint record about the run besides its options."""
    return {"task": task.name, "models": names, "world_size": dist.world_size,
            "device": str(dist.device), "backend": dist.backend, "precision": cfg["precision"],
            "geomlin": str(geomlin.__version__), "torch": str(torch.__version__),
            "python": platform.python_version(), "num_train": num_train,
            "num_eval": {k: num_examples(v) for k, v in data.evals.items()},
            "parameters": {n: count_parameters(m) for n, m in models.items()},
            "data": {k: v for k, v in data.info.items() if _plain(v)}}


class _Progress:
    """The counters a run carries across epochs (and across a resume, through the checkpoint)."""

    def __init__(self, names: list[str], ckpt: dict | None, budget_s: float) -> None:
        self.train_time = {n: float(ckpt.get("train_time", {}).get(n, 0.0)) if ckpt else 0.0 for n in names}
        #: training time spent against --budget-minutes (host clock around each step, resumed runs included)
        self.budget_used = float(ckpt.get("budget_used_s", 0.0)) if ckpt else 0.0
        self.budget_s = budget_s
        self.steps_done = int(ckpt.get("steps", 0)) if ckpt else 0
        self.out_of_budget = False
        self.first_step = True

    def exhausted(self) -> bool:
        return bool(self.budget_s) and self.budget_used >= self.budget_s


def _train_epoch(task: Task, cfg: dict[str, Any], names: list[str], epoch: int, batches: list[Tensor], data,
                 models: dict[str, nn.Module], wrapped: dict[str, nn.Module], optimizers: dict,
                 dist: D.DistInfo, state: _Progress, lr: float) -> tuple[dict[str, MetricSums], dict, float]:
    """One pass over ``batches``: the training sums, each model's step clock and the last learning rate."""
    show = cfg.get("progress", True) and dist.is_main
    on_cpu = dist.device.type == "cpu"  # reading values is free there: check every step, show the loss
    cosine = cfg.get("schedule", "cosine") == "cosine"
    sums = {f"{n}/train": MetricSums() for n in names}
    clocks = {n: StepClock(dist.device) for n in names}
    for m in wrapped.values():
        m.train()
    bar = _progress(batches, show, desc=f"epoch {epoch}/{cfg['epochs']} train", unit="batch")
    for index in bar:
        if state.budget_s:
            if state.exhausted():
                state.out_of_budget = True
                break
            if cosine:
                lr = cosine_lr_at(cfg["lr"], state.budget_used / state.budget_s)
                _set_lr(optimizers, lr)
        step_start = time.perf_counter()
        batch = task.augment(take(data.train, index, dist.device), cfg)
        losses = {}
        for n in names:
            with clocks[n].step():
                losses[n], stats = train_step(task, n, wrapped[n], optimizers[n], batch, cfg,
                                              parameters=models[n].parameters(), device=dist.device,
                                              precision=cfg["precision"])
            sums[f"{n}/train"].add(stats)
        if state.first_step or on_cpu:
            if state.first_step:
                validation.raise_deferred()
            _check_losses(losses, epoch, cfg["lr"])
            state.first_step = False
        if show and on_cpu:
            bar.set_postfix({n: f"{sums[f'{n}/train'].mean('loss'):.3g}" for n in names
                             if "loss" in sums[f"{n}/train"].totals})
        state.steps_done += 1
        state.budget_used += time.perf_counter() - step_start
    if hasattr(bar, "close"):
        bar.close()
    return sums, clocks, lr


def _evaluate(task: Task, cfg: dict[str, Any], names: list[str], epoch: int, data, models: dict[str, nn.Module],
              dist: D.DistInfo, sums: dict[str, MetricSums]) -> None:
    """Add each model's statistics on this rank's shard of every evaluation set to ``sums``."""
    show = cfg.get("progress", True) and dist.is_main
    for set_name, fields in data.evals.items():
        shard = list(range(dist.rank, num_examples(fields), dist.world_size))
        for n in names:
            sums[f"{n}/{set_name}"] = MetricSums()
        for m in models.values():
            m.eval()
        ebar = _progress(_batches(shard, cfg["batch_size"]), show, desc=f"epoch {epoch} eval {set_name}",
                         unit="batch")
        with torch.set_grad_enabled(task.eval_needs_grad):
            for index in ebar:
                batch = take(fields, index, dist.device)
                for n in names:
                    with autocast(dist.device, cfg["precision"]):
                        sums[f"{n}/{set_name}"].add(task.eval_step(n, models[n], batch, cfg))


def _epoch_row(cfg: dict[str, Any], names: list[str], evals, epoch: int, lr: float, state: _Progress,
               sums: dict[str, MetricSums], clocks: dict, dist: D.DistInfo, t0: float) -> dict[str, Any]:
    """Read the epoch's statistics (one collective, one read), check the losses, and make its metrics row."""
    means = read_epoch_means(sums, dist.device)
    validation.raise_deferred()
    for n in names:
        value = means[f"{n}/train"].get("loss", 0.0)
        if not math.isfinite(value):
            raise _diverged(n, value, epoch, cfg["lr"])
        state.train_time[n] += clocks[n].seconds()
    row: dict[str, Any] = {"epoch": epoch, "lr": lr, "steps": state.steps_done}
    for group in [f"{n}/train" for n in names] + [f"{n}/{e}" for e in evals for n in names]:
        row.update({f"{group}_{k}": v for k, v in means[group].items()})
    # wall time of the epoch once its statistics are read (the device has finished; under
    # torchrun the collective made every rank wait for the slowest)
    row["epoch_time_s"] = time.perf_counter() - t0
    return row


def _write_epoch(task: Task, cfg: dict[str, Any], out: Path, epoch: int, history: list[dict], models, optimizers,
                 states, state: _Progress, run_info: dict) -> None:
    """Rank 0: the metrics, the curves and the checkpoint after an epoch (each written atomically)."""
    _write_csv(history, out / "metrics.csv")
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


def _summary(task: Task, cfg: dict[str, Any], names: list[str], out: Path, epoch: int, history: list[dict],
             state: _Progress, run_info: dict) -> dict[str, Any]:
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


def _run(task: Task, cfg: dict[str, Any], dist: D.DistInfo, resume_from, overwrite: bool = False) -> dict[str, Any]:
    names = task.model_names(cfg)
    task.validate(cfg)
    ckpt = _load_resume(task, cfg, names, resume_from)
    budget_s = 60.0 * cfg.get("budget_minutes", 0.0)
    if budget_s and dist.world_size > 1:
        # each rank would stop at its own step and the gradient all-reduce would wait forever
        raise UserError(f"--budget-minutes runs in one process; this run has {dist.world_size} (use --epochs "
                        "under torchrun)")
    seed_everything(cfg["seed"])
    data = task.build_data(cfg)
    num_train = _check_run_data(data, dist)
    models, optimizers = _build_models(task, cfg, names, data.info, dist, ckpt, resume_from)
    # the output folder is checked after everything the arguments ask for (the data they read, the
    # models they build), so that a wrong option is reported as such where an earlier run holds the folder
    out = Path(cfg["out"].format(task=task.name))
    check_output_folder(out)
    check_fresh_output(out, resume_from is not None, overwrite)
    history: list[dict] = list(ckpt["history"]) if ckpt is not None else []
    start_epoch = int(ckpt["epoch"]) + 1 if ckpt is not None else 1
    if dist.is_main:
        _prepare_output(out, overwrite, resuming=ckpt is not None)
    D.barrier()
    wrapped = {n: DistributedDataParallel(m, device_ids=[dist.device.index] if dist.device.type == "cuda"
                                          else None)
               if dist.distributed else m for n, m in models.items()}
    run_info = _run_record(task, cfg, names, dist, data, num_train, models)
    if dist.is_main:
        _write_json(out / "config.json", {"config": cfg, "run": run_info})
        print(f"geomlin train {task.name}: {num_train} training examples, "
              f"eval sets {run_info['num_eval']}, models "
              + ", ".join(f"{n} ({run_info['parameters'][n]:,} params)" for n in names)
              + f", {dist.world_size} process(es) on {dist.device}", flush=True)

    sampler = DistributedSampler(range(num_train), num_replicas=dist.world_size, rank=dist.rank,
                                 shuffle=True, seed=cfg["seed"], drop_last=False)
    if ckpt is not None:
        states = ckpt["rng"]
        set_rng_state(states[dist.rank] if len(states) == dist.world_size else states[0])
    else:
        seed_everything(cfg["seed"] + 7919 * dist.rank)
    state = _Progress(names, ckpt, budget_s)
    stop_after = cfg.get("stop_after", 0) or 0
    cosine = cfg.get("schedule", "cosine") == "cosine"
    epoch = start_epoch - 1
    for epoch in range(start_epoch, cfg["epochs"] + 1):
        if state.exhausted():
            state.out_of_budget, epoch = True, epoch - 1
            break
        t0 = time.perf_counter()
        lr = cosine_lr(cfg["lr"], epoch, cfg["epochs"]) if cosine else cfg["lr"]
        _set_lr(optimizers, lr)
        sampler.set_epoch(epoch)
        batches = _batches(list(sampler), cfg["batch_size"])
        sums, clocks, lr = _train_epoch(task, cfg, names, epoch, batches, data, models, wrapped, optimizers, dist,
                                        state, lr)
        _evaluate(task, cfg, names, epoch, data, models, dist, sums)
        row = _epoch_row(cfg, names, data.evals, epoch, lr, state, sums, clocks, dist, t0)
        history.append(row)
        states = D.all_gather_objects(rng_state())
        if dist.is_main:
            _write_epoch(task, cfg, out, epoch, history, models, optimizers, states, state, run_info)
            print(_epoch_line(row, names, task), flush=True)
        if state.out_of_budget or (stop_after and epoch >= stop_after):
            break
    D.barrier()
    summary = _summary(task, cfg, names, out, epoch, history, state, run_info)
    if dist.is_main:
        _write_json(out / "summary.json", summary)
        print(format_summary(summary, task))
    return summary


def _set_lr(optimizers: dict, lr: float) -> None:
    for opt in optimizers.values():
        for group in opt.param_groups:
            group["lr"] = lr


def _epoch_line(row: dict, names: list[str], task: Task) -> str:
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
