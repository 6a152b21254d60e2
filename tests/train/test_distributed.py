"""2-process torchrun jobs: on the CPU (gloo) and on an accelerator whose process group refuses CPU tensors
(the simulated ``sim`` device with the NCCL-like ``simccl``); files from rank 0, metrics reduced over ranks."""

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from geomlin.train import distributed as D
from geomlin.train.checkpoint import load_checkpoint
from geomlin.train.errors import UserError
from geomlin.train.tasks import get_task
from geomlin.train.tasks.base import take

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = ROOT / "tests" / "train" / "sim_launcher.py"
MODELS = ("pointnet", "frame_avg")


def _torchrun(program: list[str], out: Path, device: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", *program,
           "train", "pointcloud", "--quick", "--model", ",".join(MODELS), "--device", device, "--out", str(out),
           "--no-progress"]
    return subprocess.run(cmd, check=False, capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)


def _check_run(r: subprocess.CompletedProcess, out: Path) -> dict:
    """The job succeeded, rank 0 alone wrote and printed, and the reported test accuracy (reduced over
    both ranks' shards) equals a single-process CPU evaluation of the saved weights on the whole test set."""
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert r.stdout.count("Summary: geomlin train pointcloud") == 1  # only rank 0 prints
    for name in ("config.json", "metrics.csv", "curves.png", "checkpoint.pt"):
        assert (out / name).is_file()
    run = json.loads((out / "config.json").read_text())["run"]
    assert run["world_size"] == 2
    with open(out / "metrics.csv") as fh:
        last = list(csv.DictReader(fh))[-1]
    ckpt = load_checkpoint(out / "checkpoint.pt")
    assert len(ckpt["rng"]) == 2  # every rank's RNG states, gathered through the process group
    task = get_task("pointcloud")
    cfg = ckpt["config"]
    data = task.build_data(cfg)
    for name in MODELS:
        model = task.build_model(name, cfg, data.info)
        model.load_state_dict(ckpt["models"][name])
        model.eval()
        test = data.evals["test"]
        with torch.no_grad():
            stats = task.eval_step(name, model, take(test, torch.arange(len(test["y"]))), cfg)
        correct, count = stats["acc"]
        assert float(last[f"{name}/test_acc"]) == float(f"{float(correct / count):.8g}"), name
    return run


def test_torchrun_two_processes(tmp_path):
    out = tmp_path / "ddp"
    run = _check_run(_torchrun(["-m", "geomlin"], out, "cpu"), out)
    assert run["backend"] == "gloo" and run["device"] == "cpu"


def test_torchrun_two_processes_on_a_device_only_process_group(tmp_path):
    """``--device sim`` under torchrun: the backend comes from torch.distributed's registry (simccl, which
    like NCCL refuses CPU tensors), so the epoch's metric reduction, the RNG-state gathering, DDP's
    broadcasts and gradient reductions all run on the device."""
    out = tmp_path / "ddp_sim"
    run = _check_run(_torchrun([str(LAUNCHER)], out, "sim"), out)
    assert run["backend"] == "simccl" and run["device"] == "sim:0"


@pytest.mark.parametrize("requested, phrase", [
    ("tpu", "--device must be cpu, cuda, cuda:N, auto"),
    ("", "--device must be"),
    ("meta", "is not an accelerator PyTorch can train on"),
    ("cuda:x", "--device must be"),
])
def test_nonsense_devices_are_refused(requested, phrase):
    with pytest.raises(UserError, match=phrase):
        D.resolve_device(requested)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message shown where CUDA is missing")
def test_cuda_without_cuda_is_a_clear_error():
    with pytest.raises(UserError, match="PyTorch sees no cuda device"):
        D.resolve_device("cuda")
    assert D.resolve_device("auto") == torch.device("cpu")


def test_accelerators_by_name_take_the_local_rank():
    """Any accelerator PyTorch has available is accepted by name; without an index a process takes device
    LOCAL_RANK of it, and a node with fewer devices than processes shares them (CUDA refuses instead)."""
    from tests.device import process_group
    from tests.device import simulated as sim

    process_group.register()
    assert D.resolve_device("sim") == sim.DEVICE
    assert D.resolve_device("sim", local_rank=3) == sim.DEVICE  # one simulated device, shared
    assert D.resolve_device("sim:0") == sim.DEVICE
    with pytest.raises(UserError, match="only 1 sim device"):
        D.resolve_device("sim:1")
    assert D.backend_for(sim.DEVICE) == process_group.BACKEND
    assert D.backend_for(torch.device("cpu")) == "gloo"


def test_all_reduce_sum_moves_to_the_group_device():
    """Single process: the sum is the tensor itself, on the requested device."""
    from tests.device import simulated as sim

    t = D.all_reduce_sum(torch.tensor([1.0, 2.0]), sim.DEVICE)
    assert t.device == sim.DEVICE and sim.to_cpu(t).tolist() == [1.0, 2.0]
