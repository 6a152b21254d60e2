"""The training loop shared by every ``geomlin train`` task.

One run trains all selected models of a task side by side on the same batches
(one optimiser each), evaluates them on every evaluation set after each epoch,
and on rank 0 writes ``OUT/config.json``, ``OUT/metrics.csv`` (one row per
epoch), ``OUT/curves.png``, ``OUT/checkpoint.pt`` and ``OUT/summary.json``
([`geomlin.train.outputs`][]; the statistics are those of [`geomlin.train.metrics`][]).

Reproducibility: model ``name`` is initialised from ``seed`` and the name alone
(so adding a model does not change the others), the data order of epoch ``e``
is a pure function of ``(seed, e)`` (``DistributedSampler.set_epoch``), and the
checkpoint stores every RNG state of every rank. Resuming therefore continues
bit-for-bit on CPU.

On an accelerator the loop never waits for the device inside an epoch (see ``docs/devices.md``):
a batch moves to the device once ([`take`][]), each model's step
([`train_step`][]) queues its forward, backward and update, and the statistics are summed where
they are computed ([`MetricSums`][geomlin.train.metrics.MetricSums]). The host reads the device at these bounded points only:

* after the run's first training step: the deferred input checks
  ([`geomlin.validation.raise_deferred`][]) and whether every model's first loss is finite;
* once per epoch, at its end: all statistics of the epoch in one collective and one read
  ([`read_epoch_means`][geomlin.train.metrics.read_epoch_means]), then the deferred checks again; a non-finite training loss stops
  the run there ([`TrainingDiverged`][geomlin.train.errors.TrainingDiverged]), before the epoch's checkpoint;
* once per epoch for the checkpoint (the models, optimisers and RNG states are copied to the host).

On the CPU reading is free, so there the loss is checked after every step and the progress bar
shows the running loss.
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data.distributed import DistributedSampler

from geomlin import validation
from geomlin.train import distributed as D
from geomlin.train.checkpoint import load_checkpoint, rng_state, set_rng_state
from geomlin.train.config import PRECISIONS
from geomlin.train.errors import UserError
from geomlin.train.metrics import MetricSums, RunProgress, StepClock, check_losses, diverged, read_epoch_means
from geomlin.train.outputs import (
    check_fresh_output,
    check_output_folder,
    epoch_line,
    format_summary,
    prepare_output,
    run_record,
    run_summary,
    write_epoch,
    write_json,
)
from geomlin.train.tasks.base import Task, num_examples, take

#: Largest gradient norm before clipping (keeps the first epochs of small models stable).
GRAD_CLIP_NORM = 10.0



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


def _batches(indices: list[int], batch_size: int) -> list[Tensor]:
    return [torch.tensor(indices[i:i + batch_size], dtype=torch.long)
            for i in range(0, len(indices), batch_size)]


def _progress(iterable, enabled: bool, **kwargs):
    if not enabled:
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, leave=False, dynamic_ncols=True, file=sys.stderr, **kwargs)


def run_training(task: Task, cfg: dict[str, Any], resume_from: str | Path | None = None,
                 overwrite: bool = False) -> dict[str, Any]:
    """Train the models of ``task`` as configured by ``cfg``; return the summary dict.

    ``resume_from`` names a checkpoint written by an earlier run of the same task;
    training continues at the epoch after the one it stored. Without it, an output folder that
    already holds a run ([`RUN_FILES`][geomlin.train.outputs.RUN_FILES]) is refused unless ``overwrite`` is true.

    Everything is checked before any file is written: every option against its declaration
    ([`validate_config`][geomlin.train.config.validate_config]), the checkpoint (same task,
    models and data/model options, epochs left to run), that the data have training and
    evaluation examples, and last the output folder (so a wrong argument is reported as itself
    where an earlier run holds the folder). Problems raise [`UserError`][]; a loss that
    turns NaN raises [`TrainingDiverged`][geomlin.train.errors.TrainingDiverged]. Process-wide settings
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


def _train_epoch(task: Task, cfg: dict[str, Any], names: list[str], epoch: int, batches: list[Tensor], data,
                 models: dict[str, nn.Module], wrapped: dict[str, nn.Module], optimizers: dict,
                 dist: D.DistInfo, state: RunProgress, lr: float) -> tuple[dict[str, MetricSums], dict, float]:
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
            check_losses(losses, epoch, cfg["lr"])
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


def _epoch_row(cfg: dict[str, Any], names: list[str], evals, epoch: int, lr: float, state: RunProgress,
               sums: dict[str, MetricSums], clocks: dict, dist: D.DistInfo, t0: float) -> dict[str, Any]:
    """Read the epoch's statistics (one collective, one read), check the losses, and make its metrics row."""
    means = read_epoch_means(sums, dist.device)
    validation.raise_deferred()
    for n in names:
        value = means[f"{n}/train"].get("loss", 0.0)
        if not math.isfinite(value):
            raise diverged(n, value, epoch, cfg["lr"])
        state.train_time[n] += clocks[n].seconds()
    row: dict[str, Any] = {"epoch": epoch, "lr": lr, "steps": state.steps_done}
    for group in [f"{n}/train" for n in names] + [f"{n}/{e}" for e in evals for n in names]:
        row.update({f"{group}_{k}": v for k, v in means[group].items()})
    # wall time of the epoch once its statistics are read (the device has finished; under
    # torchrun the collective made every rank wait for the slowest)
    row["epoch_time_s"] = time.perf_counter() - t0
    return row


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
        prepare_output(out, overwrite, resuming=ckpt is not None)
    D.barrier()
    wrapped = {n: DistributedDataParallel(m, device_ids=[dist.device.index] if dist.device.type == "cuda"
                                          else None)
               if dist.distributed else m for n, m in models.items()}
    run_info = run_record(task, cfg, names, dist, data, num_train, models)
    if dist.is_main:
        write_json(out / "config.json", {"config": cfg, "run": run_info})
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
    state = RunProgress(names, ckpt, budget_s)
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
            write_epoch(task, cfg, out, epoch, history, models, optimizers, states, state, run_info)
            print(epoch_line(row, names, task), flush=True)
        if state.out_of_budget or (stop_after and epoch >= stop_after):
            break
    D.barrier()
    summary = run_summary(task, cfg, names, out, epoch, history, state, run_info)
    if dist.is_main:
        write_json(out / "summary.json", summary)
        print(format_summary(summary, task))
    return summary


def _set_lr(optimizers: dict, lr: float) -> None:
    for opt in optimizers.values():
        for group in opt.param_groups:
            group["lr"] = lr


