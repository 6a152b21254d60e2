"""``geomlin bench --device cuda`` (benchmarks/gpu_check.py): its plan covers what a GPU day must check
within eight minutes, it refuses clearly without CUDA, and every step's code runs (tiny sizes, CPU)."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from geomlin.__main__ import main

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_check.py"
#: What the GPU check must cover (issue 20).
REQUIRED_STEPS = ("tests", "gatr", "gaunt", "bf16", "compile", "train")


def _module():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_plan_covers_every_check_within_eight_minutes(capfd):
    gpu_check = _module()
    assert tuple(s.name for s in gpu_check.PLAN) == REQUIRED_STEPS
    assert gpu_check.STARTUP_S + sum(s.budget_s for s in gpu_check.PLAN) <= gpu_check.TOTAL_BUDGET_S <= 8 * 60
    for path in gpu_check.CUDA_TESTS:
        assert (ROOT / path).is_file(), path
    assert main(["bench", "--device", "cuda", "--dry-run", "--dir", str(SCRIPT.parent)]) == 0
    out = capfd.readouterr().out  # printed by the script's own process
    for name in REQUIRED_STEPS:
        assert f"| {name} |" in out
    assert "SDPA backend" in out and "e3nn" in out and "triton" in out and "--device cuda --epochs 2" in out


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal where CUDA is missing")
def test_without_cuda_the_check_refuses_in_one_line(capsys):
    assert main(["bench", "--device", "cuda", "--dir", str(SCRIPT.parent)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "needs a CUDA GPU" in err[0] and "--dry-run" in err[0], err
    proc = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 2 and "no CUDA device" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("args, phrase", [
    (["bench", "--device", "cpu"], "--device must be cuda or cuda:N"),
    (["bench", "--dry-run"], "use it with --device cuda"),
    (["bench", "--device", "cuda", "--record"], "drop --record"),
])
def test_bad_gpu_check_options_are_one_line(capsys, args, phrase):
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and phrase in err[0], err


@pytest.mark.slow
def test_every_step_runs_at_tiny_sizes_on_the_cpu():
    """``--smoke --device cpu``: each step's code runs (CUDA-only kernels report ``unsupported``)."""
    proc = subprocess.run([sys.executable, str(SCRIPT), "--smoke", "--device", "cpu"], cwd=ROOT, capture_output=True,
                          text=True, check=False, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = [line.split("|")[1:-1] for line in proc.stdout.splitlines() if line.startswith("| ")][1:]
    checks = {cells[0].strip() for cells in rows}
    assert checks == set(REQUIRED_STEPS), checks
    assert not [r for r in rows if r[2].strip().startswith("failed")]
    assert any(r[0].strip() == "gatr" and r[2].strip() == "ok" for r in rows)
