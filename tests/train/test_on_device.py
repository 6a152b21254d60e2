"""Training on an accelerator: every model of every ``geomlin train`` task takes a step on the simulated
device (``tests/device/simulated.py``: CUDA's device rules on every operator) without a device mix and
without a host sync; the whole loop reads the device only at its documented, bounded points.

One training step, in float32 and under bfloat16 autocast (``--precision bf16``), is what the loop
runs per batch and model: the batch taken to the device
(:func:`~geomlin.train.tasks.base.take`) and augmented, :func:`geomlin.train.loop.train_step`
(forward, loss, backward, clipping, optimiser step) and the metric accumulation
(:class:`~geomlin.train.metrics.MetricSums`). It runs once outside the watch first, so per-(device,
dtype) tables are filled and the optimiser's state exists (a cache filled once is allowed; a constant
uploaded on every step is not).

The only allowed events in a step are ``DATA_BOUNDARY``: the batch's fields copied to the device once
per batch (``take``). Anything else (a host sync or a constant uploaded per call, in a model or in
the loop) fails the test.
"""

from __future__ import annotations

import functools
import re

import pytest
import torch

from geomlin import validation
from geomlin.train import loop, metrics
from geomlin.train.config import resolve_config
from geomlin.train.tasks import TASKS, get_task
from geomlin.train.tasks.base import num_examples, take
from tests.device import simulated as sim

#: Small data so that every model's step runs in seconds on the simulated device.
SMALL = {
    ("pointcloud", "synthetic"): {"train_per_class": 1, "test_per_class": 1, "num_points": 16, "gatr_points": 8},
    ("molecules", "md"): {"num_train": 8, "num_test": 4},
    ("molecules", "qm9"): {"dataset": "qm9", "num_train": 8, "num_test": 4},
    ("nbody", "nbody"): {"num_train": 8, "num_test": 4, "burn_in_steps": 10, "horizon_steps": 20},
}
#: Examples per step.
BATCH = 4

#: Uploads that are the data boundary: a batch's fields copied to the device, once per batch.
DATA_BOUNDARY = {("geomlin/train/tasks/base.py", fn) for fn in ("take", "<dictcomp>", "batch")}

_WHERE = re.compile(r"^(?P<file>\S+):(?P<line>\d+) in (?P<function>\S+)$")


def _site(where: str) -> tuple[str, str]:
    """``(file, function)`` of a recorded ``"file:line in function"``."""
    m = _WHERE.match(where)
    return (m["file"], m["function"]) if m else (where, "")


def _case_id(task_name: str, dataset: str | None, model: str) -> str:
    return "-".join(p for p in (task_name, dataset, model) if p)


def _cases() -> list:
    """``(task, dataset, model, precision)`` for every model of every task and dataset, in fp32 and bf16."""
    cases = []
    for task_name in TASKS:
        task = get_task(task_name)
        datasets = ["md", "qm9"] if task_name == "molecules" else [None]
        for dataset in datasets:
            cfg = {"dataset": dataset} if dataset else {}
            names = list(task.models) if dataset != "qm9" else task.model_names(cfg)
            for model in names:
                case = _case_id(task_name, dataset, model)
                cases.append(pytest.param(task_name, dataset, model, "fp32", id=case))
                cases.append(pytest.param(task_name, dataset, model, "bf16", id=f"{case}-bf16"))
    return cases


def _config(task, dataset: str | None, **extra) -> dict:
    key = (task.name, dataset or ("synthetic" if task.name == "pointcloud" else task.name))
    cli = {"quick": True, "batch_size": BATCH, "out": "unused", "progress": False, **SMALL[key], **extra}
    cfg = resolve_config(task.all_options(), cli_values=cli, quick_preset=task.quick_preset)
    task.validate(cfg)
    return cfg


@functools.cache
def _data(task_name: str, dataset: str | None):
    task = get_task(task_name)
    return task.build_data(_config(task, dataset))


def _step(task, name, model, optimizer, data, cfg, index):
    batch = task.augment(take(data.train, index, sim.DEVICE), cfg)
    loss, stats = loop.train_step(task, name, model, optimizer, batch, cfg, device=sim.DEVICE,
                                  precision=cfg["precision"])
    sums = metrics.MetricSums()
    sums.add(stats)
    return loss, sums


@pytest.mark.parametrize("task_name, dataset, name, precision", _cases())
def test_one_training_step_on_the_simulated_device(task_name, dataset, name, precision):
    task = get_task(task_name)
    cfg = _config(task, dataset, precision=precision)
    data = _data(task_name, dataset)
    torch.manual_seed(loop.model_seed(0, name))
    model = task.build_model(name, cfg, data.info).to(sim.DEVICE)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg["lr"])
    index = torch.arange(min(BATCH, num_examples(data.train)))
    with validation.deferred_checks():  # as in the training loop; its end reads the checks (they pass)
        _step(task, name, model, optimizer, data, cfg, index)  # fills caches and the optimiser's state
    with validation.deferred_checks(), sim.watch() as log:  # a CPU operand anywhere raises sim.DeviceMixError
        loss, sums = _step(task, name, model, optimizer, data, cfg, index)

    assert loss.device == sim.DEVICE and torch.isfinite(sim.to_cpu(loss.detach()))
    for key, (total, count) in sums.totals.items():
        assert isinstance(total, torch.Tensor) and total.device == sim.DEVICE, key  # left on the device

    unexplained = [e for e in log.events if not (e.kind == "upload" and _site(e.where) in DATA_BOUNDARY)]
    assert not unexplained, "host syncs or uploads in a training step:\n" + "\n".join(map(str, unexplained))


#: The loop's documented reads of the device (docs/devices.md), by site and kind.
LOOP_READS = {
    (("geomlin/train/metrics.py", "check_losses"), "sync"): "the first step's losses (once per run)",
    (("geomlin/train/metrics.py", "read_epoch_means"), "sync"): "the epoch's statistics (once per epoch)",
    (("geomlin/train/metrics.py", "read_epoch_means"), "upload"): "the epoch's host counts (once per epoch)",
    (("geomlin/validation.py", "_raise_flags"), "sync"): "deferred input checks (first step, each epoch)",
    (("geomlin/train/loop.py", "_build_models"), "upload"): "the models moved to the device (once per run)",
}


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_loop_reads_the_device_only_at_its_documented_points(tmp_path, precision):
    """Two epochs of the whole loop (training, both evaluation sets, the progress bar, checkpoints) on the
    simulated device: besides the data boundary, the only events are the documented bounded reads, the
    statistics read exactly once per epoch."""
    from geomlin.train import run_training

    task = get_task("pointcloud")
    cfg = _config(task, None, model="pointnet,pointnet_aug", epochs=2, out=str(tmp_path / "run"), progress=True,
                  device=sim.DEVICE_TYPE, precision=precision)
    with sim.watch() as log:
        summary = run_training(task, cfg)
    assert summary["epochs_done"] == 2 and (tmp_path / "run" / "checkpoint.pt").is_file()
    counts: dict = {}
    for event in log.events:
        site = _site(event.where)
        if event.kind == "upload" and site in DATA_BOUNDARY:
            continue
        assert (site, event.kind) in LOOP_READS, f"undocumented read of the device: {event}"
        counts[(site, event.kind)] = counts.get((site, event.kind), 0) + 1
    assert counts[(("geomlin/train/metrics.py", "read_epoch_means"), "sync")] == 2
    assert counts[(("geomlin/train/metrics.py", "check_losses"), "sync")] == 1
    rows = (tmp_path / "run" / "metrics.csv").read_text().splitlines()
    assert len(rows) == 3 and "pointnet_aug/rotated_acc" in rows[0]
