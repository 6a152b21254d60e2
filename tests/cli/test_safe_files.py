"""Checkpoints never run code, runs never overwrite runs, every file write is atomic (issue 22)."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch

import geomlin
from geomlin.io_atomic import FileWriteError, atomic_write, atomic_write_text
from geomlin.train.checkpoint import CHECKPOINT_FORMAT, CHECKPOINT_VERSION, load_checkpoint, save_checkpoint
from geomlin.train.errors import UserError

ROOT = pathlib.Path(geomlin.__file__).resolve().parent.parent
TRAIN = ["train", "nbody", "--quick", "--model", "mlp", "--epochs", "1", "--no-progress"]


def _cli(*args, cwd=None):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "geomlin", *map(str, args)], capture_output=True, text=True,
                          check=False, env=env, cwd=cwd, timeout=120)


class _Touch:
    """Unpickling this creates ``marker``: a stand-in for ``os.system``."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (pathlib.Path.touch, (pathlib.Path(self.marker),))


def _malicious(tmp_path) -> tuple[pathlib.Path, pathlib.Path]:
    marker = tmp_path / "PWNED"
    ckpt = tmp_path / "run" / "checkpoint.pt"
    ckpt.parent.mkdir()
    torch.save({"format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION, "task": "nbody",
                "config": {"x": _Touch(marker)}, "epoch": 0, "models": {"mlp": {"w": torch.zeros(2)}},
                "optimizers": {}, "rng": [], "history": []}, ckpt)
    return ckpt, marker


def test_malicious_checkpoint_runs_no_code_under_audit_or_resume(tmp_path):
    ckpt, marker = _malicious(tmp_path)
    for args in (["audit", ckpt], [*TRAIN, "--out", ckpt.parent, "--resume"], [*TRAIN, "--resume", ckpt]):
        proc = _cli(*args)
        assert not marker.exists(), args
        assert proc.returncode == 2, (args, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "refusing checkpoint" in lines[0] and str(ckpt) in lines[0], proc.stderr
        assert "Traceback" not in proc.stderr


def test_real_checkpoint_loads_weights_only(tmp_path):
    """What geomlin writes (RNG states included) passes the weights-only loader."""
    from geomlin.train.checkpoint import rng_state

    save_checkpoint(tmp_path / "c.pt", {"task": "t", "config": {"a": 1}, "epoch": 1, "models": {"m": {}},
                                        "optimizers": {}, "rng": [rng_state()], "history": [{"epoch": 1}]})
    assert load_checkpoint(tmp_path / "c.pt")["epoch"] == 1
    torch.load(tmp_path / "c.pt", weights_only=True)  # independent of geomlin's loader


def test_second_run_into_a_finished_folder_is_refused_and_the_first_survives(tmp_path):
    out = tmp_path / "run"
    assert _cli(*TRAIN, "--out", out).returncode == 0
    before = {n: (out / n).read_bytes() for n in ("checkpoint.pt", "metrics.csv", "summary.json")}
    proc = _cli(*TRAIN, "--seed", "1", "--out", out)
    assert proc.returncode == 2
    assert "already holds a run" in proc.stderr and "--resume" in proc.stderr and "--overwrite" in proc.stderr
    assert {n: (out / n).read_bytes() for n in before} == before
    assert _cli(*TRAIN, "--seed", "1", "--out", out, "--overwrite").returncode == 0
    assert (out / "checkpoint.pt").read_bytes() != before["checkpoint.pt"]


def test_resume_and_overwrite_conflict_and_empty_run_folder(tmp_path):
    proc = _cli(*TRAIN, "--out", tmp_path, "--resume", "--overwrite")
    assert proc.returncode == 2 and "pass one" in proc.stderr
    proc = _cli(*TRAIN, "--resume", tmp_path)
    assert proc.returncode == 2
    assert f"run folder {tmp_path} holds no checkpoint" in proc.stderr and "checkpoint.pt" in proc.stderr


@pytest.mark.parametrize("argv", [["train", "nbody", "--epoch", "3"], ["audit", "x.pt", "--sample", "3"]])
def test_abbreviated_options_are_refused(argv):
    proc = _cli(*argv)
    assert proc.returncode == 2 and "unrecognized arguments" in proc.stderr


def test_atomic_write_removes_its_temporary_on_failure(tmp_path):
    target = tmp_path / "f.txt"
    atomic_write_text(target, "old")

    def boom(fh):
        fh.write("half")
        raise RuntimeError("boom")
    with pytest.raises(RuntimeError):
        atomic_write(target, boom, text=True)
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["f.txt"]
    with pytest.raises(FileWriteError, match=f"cannot write {tmp_path / 'no' / 'f.txt'}"):
        atomic_write_text(tmp_path / "no" / "f.txt", "x")
    assert os.listdir(tmp_path) == ["f.txt"]


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="needs POSIX permissions, not root")
def test_permission_error_is_one_line_naming_the_file(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        with pytest.raises(UserError, match=f"cannot write {folder / 'c.pt'}.*ermission"):
            save_checkpoint(folder / "c.pt", {"task": "t", "config": {}, "epoch": 1, "models": {"m": {}},
                                             "optimizers": {}, "rng": [], "history": []})
    finally:
        folder.chmod(0o700)


_WRITER = textwrap.dedent("""
    import sys, pathlib
    from geomlin.train import outputs
    from geomlin.train.checkpoint import save_checkpoint
    kind, folder = sys.argv[1], pathlib.Path(sys.argv[2])
    print("ready", flush=True)
    i = 0
    while True:
        i += 1
        history = [{"epoch": e, "loss": 1.0 / e} for e in range(1, 3 + i % 50)]
        if kind == "checkpoint":
            save_checkpoint(folder / "checkpoint.pt", {"task": "t", "config": {"n": len(history)}, "epoch": i,
                            "models": {"m": {"w": __import__("torch").full((20000,), float(i))}},
                            "optimizers": {}, "rng": [], "history": history})
        elif kind == "metrics":
            outputs.write_csv(history, folder / "metrics.csv")
        else:
            outputs.write_json(folder / "summary.json", {"epochs": len(history), "rows": history})
""")


def _complete(kind: str, path: pathlib.Path) -> bool:
    import csv
    import json

    if kind == "checkpoint":
        data = load_checkpoint(path)
        return bool(torch.all(data["models"]["m"]["w"] == float(data["epoch"])))
    if kind == "metrics":
        rows = list(csv.DictReader(path.open()))
        return len(rows) >= 2 and [int(r["epoch"]) for r in rows] == list(range(1, len(rows) + 1))
    data = json.loads(path.read_text())
    return data["epochs"] == len(data["rows"]) >= 2


@pytest.mark.parametrize("kind,name", [("checkpoint", "checkpoint.pt"), ("metrics", "metrics.csv"),
                                       ("summary", "summary.json")])
def test_sigkill_during_writes_leaves_a_complete_file(tmp_path, kind, name):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for attempt, delay in enumerate((0.3, 0.45, 0.6)):
        proc = subprocess.Popen([sys.executable, "-c", _WRITER, kind, str(tmp_path)], env=env,
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 30
        while not (tmp_path / name).exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        assert _complete(kind, tmp_path / name), (kind, attempt)


def test_no_flags_help_reads_the_right_way_round():
    proc = _cli("train", "pointcloud", "--help")
    text = " ".join(proc.stdout.split())
    assert "--no-progress do not show tqdm progress bars (on by default)" in text
    assert "--no-meshes do not add the bundled meshes" in text


AUDIT_FILES = [
    ("syntax error", "def build(:\n    pass\n", "syntax error at line 1"),
    ("module raises", "raise RuntimeError('no GPU here')\n", "running it raised RuntimeError: no GPU here"),
    ("factory raises", "def build():\n    raise ValueError('bad width')\n",
     "calling it to build the model raised ValueError: bad width"),
]


@pytest.mark.parametrize("case,source,msg", AUDIT_FILES, ids=[a[0] for a in AUDIT_FILES])
def test_audit_of_a_broken_model_file_is_one_line(tmp_path, case, source, msg):
    (tmp_path / "model.py").write_text(source)
    proc = _cli("audit", f"{tmp_path / 'model.py'}:build")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and msg in lines[0], proc.stderr
    assert "model.py" in lines[0]


def test_config_seed_out_of_range_and_key_spelled_twice(tmp_path):
    (tmp_path / "seed.json").write_text('{"seed": 100000000000000000000}')
    proc = _cli(*TRAIN, "--out", tmp_path / "a", "--config", tmp_path / "seed.json")
    assert proc.returncode == 2 and "seed" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    proc = _cli(*TRAIN, "--out", tmp_path / "b", "--seed", str(10**20))
    assert proc.returncode == 2 and "seed" in proc.stderr and "Traceback" not in proc.stderr
    (tmp_path / "twice.json").write_text('{"batch-size": 8, "batch_size": 16}')
    proc = _cli(*TRAIN, "--out", tmp_path / "c", "--config", tmp_path / "twice.json")
    assert proc.returncode == 2 and "'batch-size'" in proc.stderr and "'batch_size'" in proc.stderr
    assert not (tmp_path / "c").exists()
