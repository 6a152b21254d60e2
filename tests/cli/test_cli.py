"""The geomlin command: quick runs write their files, resume is exact, user errors are one line."""

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from geomlin.__main__ import main

FILES = ("config.json", "metrics.csv", "curves.png", "checkpoint.pt")


def _rows(path: Path) -> list[dict]:
    with open(path / "metrics.csv") as fh:
        return list(csv.DictReader(fh))


def _check_outputs(out: Path, epochs: int) -> list[dict]:
    for name in FILES:
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    assert (out / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = _rows(out)
    assert [int(r["epoch"]) for r in rows] == list(range(1, epochs + 1))
    assert json.loads((out / "config.json").read_text())["config"]["epochs"] == epochs
    return rows


def toy_trajectory(path: Path, frames: int = 120, seed: int = 0) -> None:
    """An MD17-style .npz of a 4-atom molecule with a harmonic bond energy and its exact forces."""
    rng = np.random.default_rng(seed)
    base = np.array([[0, 0, 0], [1.1, 0, 0], [-0.4, 1.0, 0], [-0.4, -0.5, 0.9]])
    R = base + 0.08 * rng.standard_normal((frames, 4, 3))
    pos = torch.tensor(R, requires_grad=True)
    d = (pos[:, :, None] - pos[:, None]).norm(dim=-1) + torch.eye(4)
    E = 0.5 * ((d - 1.2) ** 2 * (1 - torch.eye(4))).sum((1, 2))
    F = -torch.autograd.grad(E.sum(), pos)[0]
    np.savez(path, R=R, z=np.array([6, 1, 1, 8]), E=E.detach().numpy(), F=F.numpy())


def audit_errors(report: str) -> dict[str, float]:
    """``{model: max relative error}`` from the text of ``geomlin audit``."""
    out = {}
    for line in report.splitlines():
        if "max relative error" in line:
            name, rest = line.split(maxsplit=1)
            out[name] = float(rest.split("max relative error")[1].split()[0])
    return out


def test_pointcloud_quick_and_audit(tmp_path, capsys):
    """Every model the task offers trains and is audited: the invariant ones at float64 round-off,
    the PointNet baselines (no symmetry by construction) reported as not equivariant."""
    out = tmp_path / "pc"
    models = "pointnet,pointnet_aug,frame_avg,canonical,gatr"
    assert main(["train", "pointcloud", "--quick", "--model", models, "--gatr-points", "16", "--out", str(out),
                 "--no-progress", "--threads", "1"]) == 0
    rows = _check_outputs(out, 1)
    for model in models.split(","):
        assert 0.0 <= float(rows[0][f"{model}/rotated_acc"]) <= 1.0
    text = capsys.readouterr().out
    assert "Rotated-test accuracy" in text and "pointnet baseline" in text
    assert main(["audit", str(out / "checkpoint.pt"), "--samples", "3"]) == 1   # the baselines fail, by design
    report = capsys.readouterr().out
    errors = audit_errors(report)
    assert set(errors) == set(models.split(","))
    for model, err in errors.items():
        if model.startswith("pointnet"):
            assert err > 1e-3 and "NOT equivariant" in report
        else:
            assert err < 1e-9, (model, err)


def test_nbody_quick(tmp_path, capsys):
    out = tmp_path / "nb"
    assert main(["train", "nbody", "--quick", "--model", "egnn,mlp,gatr", "--out", str(out), "--no-progress"]) == 0
    rows = _check_outputs(out, 1)
    assert float(rows[0]["egnn/test_mse"]) > 0
    capsys.readouterr()
    assert main(["audit", str(out / "checkpoint.pt"), "--samples", "2"]) == 1   # the MLP baseline fails
    errors = audit_errors(capsys.readouterr().out)
    assert errors["egnn"] < 1e-9 and errors["gatr"] < 1e-9 and errors["mlp"] > 1e-3, errors
    assert main(["audit", str(out / "checkpoint.pt"), "--samples", "2", "--model", "egnn,gatr"]) == 0


def test_molecules_quick_on_a_given_trajectory_and_audit(tmp_path, capsys):
    """The default models (GauntPotential and EGNN) train on a given trajectory; the audit finds both
    exactly E(3) invariant (energy) / equivariant (forces) from their declared types."""
    toy_trajectory(tmp_path / "toy.npz")
    out = tmp_path / "mol"
    assert main(["train", "molecules", "--quick", "--data", str(tmp_path / "toy.npz"),
                 "--out", str(out), "--no-progress"]) == 0
    rows = _check_outputs(out, 1)
    for model in ("gaunt", "egnn"):
        assert float(rows[0][f"{model}/test_force_mae"]) > 0
    capsys.readouterr()
    assert main(["audit", str(out / "checkpoint.pt"), "--samples", "3"]) == 0
    errors = audit_errors(capsys.readouterr().out)
    assert set(errors) == {"gaunt", "egnn"} and max(errors.values()) < 1e-9, errors


def test_molecules_qm9_quick_trains_on_the_bundled_sample(tmp_path, capsys):
    out = tmp_path / "qm9"
    assert main(["train", "molecules", "--dataset", "qm9", "--target", "gap", "--quick", "--out", str(out),
                 "--no-progress"]) == 0
    rows = _check_outputs(out, 1)
    assert float(rows[0]["egnn/test_mae"]) > 0
    run = json.loads((out / "config.json").read_text())["run"]
    assert run["data"]["target"] == "gap" and run["data"]["unit"] == "eV" and run["num_train"] == 16
    assert "Test mean absolute error of the QM9 target" in capsys.readouterr().out
    assert main(["audit", str(out / "checkpoint.pt"), "--samples", "2"]) == 0
    errors = audit_errors(capsys.readouterr().out)
    assert set(errors) == {"egnn", "gaunt"} and max(errors.values()) < 1e-9


def test_resume_after_epoch_one_matches_uninterrupted_run(tmp_path):
    common = ["train", "pointcloud", "--quick", "--epochs", "2", "--model", "pointnet,frame_avg",
              "--no-progress", "--seed", "3"]
    assert main([*common, "--out", str(tmp_path / "full")]) == 0
    assert main([*common, "--out", str(tmp_path / "cut"), "--stop-after", "1"]) == 0
    assert len(_rows(tmp_path / "cut")) == 1
    assert main(["train", "pointcloud", "--out", str(tmp_path / "cut"), "--resume", "--no-progress"]) == 0
    full, resumed = _rows(tmp_path / "full"), _rows(tmp_path / "cut")
    assert len(resumed) == 2
    for a, b in zip(full, resumed):
        for key in a:
            if key != "epoch_time_s":
                assert a[key] == b[key], key
    ca = torch.load(tmp_path / "full" / "checkpoint.pt", weights_only=False)
    cb = torch.load(tmp_path / "cut" / "checkpoint.pt", weights_only=False)
    for name, state in ca["models"].items():
        for k, v in state.items():
            assert torch.equal(v, cb["models"][name][k]), (name, k)


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "geomlin", *args], capture_output=True, text=True, check=False,
                          cwd=cwd, timeout=300)


@pytest.mark.parametrize("args, msg", [
    (["train", "shapes"], "invalid choice: 'shapes'"),
    (["train", "pointcloud", "--model", "resnet"], "unknown model 'resnet'"),
    (["train", "pointcloud", "--dataset", "modelnet11"], "dataset must be one of"),
    (["train", "molecules", "--data", "/nonexistent/traj.npz"], "data file not found"),
    (["train", "molecules", "--dataset", "qm9", "--target", "U7"], "unknown QM9 target 'U7'"),
    (["train", "pointcloud", "--dataset", "modelnet10", "--root", "/nonexistent"], "does not exist"),
    (["train", "pointcloud", "--epochs", "many"], "epochs must be an int"),
    (["audit", "/nonexistent/checkpoint.pt"], "checkpoint or package not found"),
])
def test_user_errors_are_one_line(args, msg, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and msg in lines[0] and lines[0].startswith("geomlin: error: "), err


def test_bad_config_key_and_corrupt_checkpoint(tmp_path, capsys):
    (tmp_path / "c.json").write_text('{"epochs": 1, "learning_rate": 0.1}')
    assert main(["train", "pointcloud", "--config", str(tmp_path / "c.json")]) == 2
    err = capsys.readouterr().err
    assert "unknown config key 'learning_rate'" in err and len(err.strip().splitlines()) == 1
    (tmp_path / "checkpoint.pt").write_bytes(b"PK\x03\x04garbage")
    assert main(["train", "pointcloud", "--resume", str(tmp_path / "checkpoint.pt")]) == 2
    err = capsys.readouterr().err
    assert "corrupt or unreadable checkpoint" in err and len(err.strip().splitlines()) == 1
    # and once as a real process: exit status 2, one line, no traceback
    r = _cli("audit", str(tmp_path / "checkpoint.pt"))
    assert r.returncode == 2 and "corrupt or unreadable checkpoint" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_version_and_help(capsys):
    r = _cli("--version")
    assert r.returncode == 0 and r.stdout.startswith("geomlin ")
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "pointcloud", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "--resume" in out and "--config" in out and "frame_avg" in out


def test_bench_runs_scripts(tmp_path, capsys):
    from geomlin.cli.bench import run_benchmarks

    (tmp_path / "bench_toy.py").write_text(
        "import sys\nprint('op | geomlin | peer | ratio')\nprint('x | 1.0 | 2.0 | 2.0', '--quick' in sys.argv)\n")
    (tmp_path / "bench_broken.py").write_text("raise SystemExit(3)\n")
    assert run_benchmarks(tmp_path, quick=True, only=["toy"]) == 0
    assert run_benchmarks(tmp_path, quick=False) == 1
    out = capsys.readouterr().out
    assert "bench_toy" in out and "failed (exit 3)" in out


def test_audit_module_references(tmp_path, capsys):
    (tmp_path / "user_models.py").write_text(
        "import torch\n"
        "from geomlin.groups import SO\n"
        "from geomlin.reps import V, Vectors\n"
        "from geomlin.linear import EquivariantLinear\n"
        "def build():\n"
        "    return EquivariantLinear(V(SO(3)) ** 2, V(SO(3)))\n"
        "class Broken(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.lin = torch.nn.Linear(3, 3)\n"
        "    def forward(self, x):\n"
        "        return self.lin(x)\n"
        "    def equivariance_spec(self):\n"
        "        from geomlin.train import AuditSpec\n"
        "        x = torch.randn(4, 3, dtype=torch.float64)\n"
        "        return AuditSpec(self, SO(3), Vectors(3), Vectors(3), (x,), 'a plain linear layer')\n")
    assert main(["audit", f"{tmp_path / 'user_models.py'}:build", "--samples", "3"]) == 0
    assert "float64 precision" in capsys.readouterr().out
    assert main(["audit", f"{tmp_path / 'user_models.py'}:Broken", "--samples", "3"]) == 1
    assert "NOT equivariant" in capsys.readouterr().out
    assert main(["audit", "torch.nn:Identity"]) == 2
    assert "declares no symmetry group" in capsys.readouterr().err
    assert main(["audit", "no_such_module_xyz:thing"]) == 2
    assert "cannot import module" in capsys.readouterr().err


def test_qm9_as_printed_fits_the_bundled_sample(tmp_path, capsys):
    """`geomlin train molecules --dataset qm9 --target gap` (the README's command, no --quick) splits the
    21-molecule sample a fifth for testing; counts given that do not fit are still refused."""
    out = tmp_path / "gap"
    assert main(["train", "molecules", "--dataset", "qm9", "--target", "gap", "--epochs", "1", "--out", str(out),
                 "--no-progress"]) == 0
    run = json.loads((out / "config.json").read_text())["run"]
    assert run["num_train"] == 17 and run["num_eval"] == {"test": 4}
    capsys.readouterr()
    assert main(["train", "molecules", "--dataset", "qm9", "--num-train", "20", "--num-test", "5", "--out",
                 str(tmp_path / "x"), "--no-progress"]) == 2
    assert "--num-train 20 + --num-test 5 exceeds the 21 examples" in capsys.readouterr().err


def energy_only_trajectory(path: Path, frames: int = 40) -> None:
    """An MD17-style .npz without forces: positions, atomic numbers and a harmonic energy."""
    rng = np.random.default_rng(1)
    R = np.array([[0, 0, 0], [1.1, 0, 0], [-0.4, 1.0, 0]]) + 0.08 * rng.standard_normal((frames, 3, 3))
    E = ((np.linalg.norm(R[:, 1] - R[:, 0], axis=-1) - 1.1) ** 2 + (np.linalg.norm(R[:, 2] - R[:, 0], axis=-1) - 1.1) ** 2)
    np.savez(path, R=R, z=np.array([8, 1, 1]), E=E)


def test_force_weight_zero_trains_on_energy_only_data(tmp_path, capsys):
    """--force-weight 0 ("0 = energy only") accepts data without forces and reports energies; the default
    weight refuses such data in one line that names the way out."""
    energy_only_trajectory(tmp_path / "e.npz")
    args = ["train", "molecules", "--data", str(tmp_path / "e.npz"), "--num-train", "30", "--num-test", "10",
            "--epochs", "1", "--no-progress"]
    assert main([*args, "--out", str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err.strip()
    assert "has energies but no forces; pass --force-weight 0" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "w").exists()
    assert main([*args, "--force-weight", "0", "--out", str(tmp_path / "e")]) == 0
    rows = _rows(tmp_path / "e")
    assert float(rows[0]["gaunt/test_energy_mae"]) > 0 and "gaunt/test_force_mae" not in rows[0]
    assert "energy" in capsys.readouterr().out
    assert main(["audit", str(tmp_path / "e" / "checkpoint.pt"), "--samples", "2"]) == 0
    assert max(audit_errors(capsys.readouterr().out).values()) < 1e-9


def test_no_progress_silences_the_data_generation(monkeypatch):
    """--no-progress reaches the n-body simulation, whose bars show by default for large runs
    (``progress=None``); ``nbody(progress=...)`` passes the choice to the integrator."""
    import geomlin.datasets
    from geomlin.datasets import synthetic
    from geomlin.train.config import resolve_config
    from geomlin.train.tasks import get_task

    asked, integrated = [], []
    real_nbody, real_simulate = synthetic.nbody, synthetic.simulate_charged_particles
    monkeypatch.setattr(geomlin.datasets, "nbody", lambda *a, **kw: asked.append(kw["progress"]) or real_nbody(*a, **kw),
                        raising=False)
    monkeypatch.setattr(synthetic, "simulate_charged_particles",
                        lambda *a: integrated.append(a[-1]) or real_simulate(*a))
    task = get_task("nbody")
    for progress, passed in ((False, False), (True, None)):
        asked.clear()
        cfg = resolve_config(task.all_options(), cli_values={"num_train": 4, "num_test": 2, "burn_in_steps": 2,
                                                             "horizon_steps": 2, "progress": progress})
        task.build_data(cfg)
        assert asked == [passed, passed]
    integrated.clear()
    synthetic.nbody(2, burn_in_steps=2, horizon_steps=2, progress=True)
    synthetic.nbody(2, burn_in_steps=2, horizon_steps=2, progress=False)
    synthetic.nbody(2, burn_in_steps=2, horizon_steps=2)  # small: no bar by default
    assert integrated == [True, True, False, False, False, False]
    with pytest.raises(TypeError, match="progress must be a bool"):
        synthetic.nbody(2, progress="yes")
