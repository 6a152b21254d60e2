"""What the training loop measures: statistics summed on the device, step times, the run's counters.

[`MetricSums`][] keeps an epoch's statistics where they are computed and [`read_epoch_means`][] reads
them all at once (one collective, one copy to the host); `StepClock` times the steps without
waiting for the device; `check_losses` stops a run whose loss is not finite; [`RunProgress`][]
carries the counters of a run across epochs and resumes.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator, Mapping
from typing import Any

import torch
from torch import Tensor

from geomlin.train import distributed as D
from geomlin.train.errors import TrainingDiverged

#: Device types whose timing events measure a step's device time (elsewhere the host's wall time).
TIMING_EVENT_DEVICES = ("cuda", "xpu")


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


def diverged(name: str, value: float, epoch: int, lr: float) -> TrainingDiverged:
    """The error of a run whose training loss became ``value`` (not finite)."""
    return TrainingDiverged(f"model {name}: the training loss became {value} in epoch {epoch}; "
                            f"lower --lr (now {lr:g})")


def check_losses(losses: Mapping[str, Tensor], epoch: int, lr: float) -> None:
    """Raise [`TrainingDiverged`][geomlin.train.errors.TrainingDiverged] for a non-finite loss (reads every loss: one host sync)."""
    values = torch.stack([loss.detach().float().reshape(()) for loss in losses.values()]).cpu().tolist()
    for name, value in zip(losses, values):
        if not math.isfinite(value):
            raise diverged(name, value, epoch, lr)


class RunProgress:
    """The counters a run carries across epochs (and across a resume, through the checkpoint ``ckpt``)."""

    def __init__(self, names: list[str], ckpt: dict | None, budget_s: float) -> None:
        self.train_time = {n: float(ckpt.get("train_time", {}).get(n, 0.0)) if ckpt else 0.0 for n in names}
        #: training time spent against --budget-minutes (host clock around each step, resumed runs included)
        self.budget_used = float(ckpt.get("budget_used_s", 0.0)) if ckpt else 0.0
        self.budget_s = budget_s
        self.steps_done = int(ckpt.get("steps", 0)) if ckpt else 0
        self.out_of_budget = False
        self.first_step = True

    def exhausted(self) -> bool:
        """Whether the run spent its ``--budget-minutes``."""
        return bool(self.budget_s) and self.budget_used >= self.budget_s
