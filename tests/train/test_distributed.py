"""A 2-process torchrun job on the CPU (gloo): files from rank 0, metrics reduced over ranks."""

import csv
import json
import os
import subprocess
import sys

import torch

from geomlin.train.checkpoint import load_checkpoint
from geomlin.train.tasks import get_task
from geomlin.train.tasks.base import take


def test_torchrun_two_processes(tmp_path):
    out = tmp_path / "ddp"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           "-m", "geomlin", "train", "pointcloud", "--quick", "--model", "pointnet,frame_avg",
           "--device", "cpu", "--out", str(out), "--no-progress"]
    r = subprocess.run(cmd, check=False, capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert r.stdout.count("Summary: geomlin train pointcloud") == 1  # only rank 0 prints
    for name in ("config.json", "metrics.csv", "curves.png", "checkpoint.pt"):
        assert (out / name).is_file()
    run = json.loads((out / "config.json").read_text())["run"]
    assert run["world_size"] == 2
    with open(out / "metrics.csv") as fh:
        last = list(csv.DictReader(fh))[-1]

    # The reported test accuracy (reduced over both ranks' shards) equals a single-process evaluation
    # of the saved weights on the whole test set.
    ckpt = load_checkpoint(out / "checkpoint.pt")
    task = get_task("pointcloud")
    cfg = ckpt["config"]
    data = task.build_data(cfg)
    for name in ("pointnet", "frame_avg"):
        model = task.build_model(name, cfg, data.info)
        model.load_state_dict(ckpt["models"][name])
        model.eval()
        test = data.evals["test"]
        with torch.no_grad():
            stats = task.eval_step(name, model, take(test, torch.arange(len(test["y"]))), cfg)
        correct, count = stats["acc"]
        assert float(last[f"{name}/test_acc"]) == float(f"{float(correct / count):.8g}"), name
