"""Training on a real GPU (skipped without CUDA; ``benchmarks/gpu_check.py`` runs this file on GPU days).

The counterpart of ``tests/train/test_on_device.py`` on CUDA itself: every model of every task takes a
step in float32 and under bfloat16 autocast, with the CPU's loss in float32, and without a synchronising
CUDA call (``torch.cuda.set_sync_debug_mode("error")``) where its model is clean on the simulated
device; the whole loop runs two epochs on ``--device cuda``.
"""

from __future__ import annotations

import pytest
import torch

from geomlin.train import loop, metrics
from geomlin.train.tasks import get_task
from geomlin.train.tasks.base import num_examples, take
from tests.train.test_on_device import BATCH, _cases, _config, _data

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

#: Cases whose step draws random numbers on the device (CPU and CUDA draw different ones).
RANDOM_STEPS = {"pointcloud-pointnet_aug"}
#: Relative difference of the float32 loss between the CPU and CUDA (no TF32: PyTorch's default for matmuls).
LOSS_RTOL = 1e-4


def _cuda_cases() -> list:
    return [pytest.param(*param.values, id=param.id) for param in _cases()]


def _build(task, name, cfg, data, device):
    torch.manual_seed(loop.model_seed(0, name))
    model = task.build_model(name, cfg, data.info).to(device)
    return model, torch.optim.AdamW(model.parameters(), lr=cfg["lr"])


@pytest.mark.parametrize("task_name, dataset, name, precision", _cuda_cases())
def test_one_training_step_on_cuda(task_name, dataset, name, precision):
    cuda = torch.device("cuda", torch.cuda.current_device())
    task = get_task(task_name)
    cfg = _config(task, dataset, precision=precision)
    data = _data(task_name, dataset)
    index = torch.arange(min(BATCH, num_examples(data.train)))
    case = f"{task_name}-{dataset + '-' if dataset else ''}{name}"

    model, optimizer = _build(task, name, cfg, data, cuda)
    batch = task.augment(take(data.train, index, cuda), cfg)
    first, _ = loop.train_step(task, name, model, optimizer, batch, cfg, device=cuda, precision=precision)
    batch = task.augment(take(data.train, index, cuda), cfg)  # the data boundary copies (outside the check)
    torch.cuda.synchronize()
    previous = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("error")
    try:
        loss, stats = loop.train_step(task, name, model, optimizer, batch, cfg, device=cuda, precision=precision)
        sums = metrics.MetricSums()
        sums.add(stats)
    finally:
        torch.cuda.set_sync_debug_mode(previous)
    assert torch.isfinite(loss).item() and loss.device == cuda

    if precision == "fp32" and case not in RANDOM_STEPS:
        cpu_model, cpu_optimizer = _build(task, name, cfg, data, torch.device("cpu"))
        cpu_batch = task.augment(take(data.train, index), cfg)
        cpu_first, _ = loop.train_step(task, name, cpu_model, cpu_optimizer, cpu_batch, cfg, device=torch.device("cpu"))
        assert abs(first.item() - cpu_first.item()) <= LOSS_RTOL * max(1.0, abs(cpu_first.item())), (first, cpu_first)


def test_two_epochs_of_the_loop_on_cuda(tmp_path):
    from geomlin.train import run_training

    task = get_task("pointcloud")
    cfg = _config(task, None, model="pointnet,pointnet_aug,vn_pointnet", epochs=2, out=str(tmp_path / "run"),
                  device="cuda")
    summary = run_training(task, cfg)
    assert summary["epochs_done"] == 2
    for stats in summary["models"].values():
        assert 0.0 <= stats["rotated_acc"] <= 1.0 and stats["train_time_s"] > 0
