"""Nonsense on the command line: every option is checked before any work, a user error is one line on
stderr with exit status 2, and a run that could not train writes no checkpoint (and trains on nothing
never). Each case asserts the exit status, the single line and a phrase of it; a few valid controls."""


import numpy as np
import pytest

from geomlin.__main__ import main

QUICK = ["--quick", "--no-progress"]


def occupy(out):
    """Make ``out`` look like the folder of an earlier run; returns its files' modification times."""
    from geomlin.train.outputs import RUN_FILES

    out.mkdir(parents=True, exist_ok=True)
    for name in RUN_FILES:
        (out / name).write_text("an earlier run")
    return {p.name: p.stat().st_mtime_ns for p in out.iterdir()}


def _fails(capsys, args, phrase, out=None):
    """``geomlin ARGS`` exits 2 with one line naming ``phrase`` and leaves no checkpoint in ``out``."""
    capsys.readouterr()
    assert main(args) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip() and "warning" not in ln]
    assert len(err) == 1 and err[0].startswith("geomlin: error: ") and phrase in err[0], err
    if out is not None:
        assert not (out / "checkpoint.pt").exists()
    return err[0]


@pytest.mark.parametrize("args, phrase", [
    (["molecules", "--num-train", "0"], "--num-train must be >= 1, got 0"),
    (["molecules", "--num-train", "-3"], "--num-train must be >= 1, got -3"),
    (["molecules", "--num-test", "0"], "--num-test must be >= 1"),
    (["molecules", "--force-weight", "-5"], "--force-weight must be >= 0.0, got -5.0"),
    (["molecules", "--force-weight", "nan"], "--force-weight must be finite"),
    (["molecules", "--num-train", "990", "--num-test", "20"], "exceeds the 1000 examples"),
    (["molecules", "--dataset", "qm9", "--num-train", "30"], "exceeds the 21 examples"),
    (["molecules", "--root", "datasets/qm9"], "--root applies to --dataset qm9"),
    (["molecules", "--dataset", "qm9", "--data", "x.npz"], "--data applies to --dataset md"),
    (["molecules", "--target", "gap"], "--target applies to --dataset qm9"),
    (["molecules", "--dataset", "qm9", "--root", "/nonexistent/qm9"], "is not a folder"),
    (["molecules", "--data", "/nonexistent/traj.npz"], "data file not found"),
    (["pointcloud", "--dataset", "modelnet10", "--root", "/nonexistent"], "--root /nonexistent does not exist"),
    (["pointcloud", "--dataset", "modelnet10"], "needs --root PATH"),
    (["pointcloud", "--root", "datasets"], "--root applies to --dataset modelnet10 or modelnet40"),
    (["pointcloud", "--model", "resnet"], "unknown model 'resnet'"),
    (["pointcloud", "--width", "0"], "--width must be >= 1, got 0"),
    (["pointcloud", "--num-points", "4"], "--num-points must be >= 8, got 4"),
    (["pointcloud", "--gatr-points", "0"], "--gatr-points must be >= 1"),
    (["pointcloud", "--train-per-class", "0"], "--train-per-class must be >= 1"),
    (["pointcloud", "--prior-weight", "-1"], "--prior-weight must be >= 0.0"),
    (["pointcloud", "--lr", "0"], "--lr must be > 0.0, got 0.0"),
    (["pointcloud", "--lr", "inf"], "--lr must be finite"),
    (["pointcloud", "--epochs", "0"], "--epochs must be >= 1"),
    (["pointcloud", "--batch-size", "-1"], "--batch-size must be >= 1"),
    (["pointcloud", "--seed", "-1"], "--seed must be >= 0"),
    (["pointcloud", "--threads", "-2"], "--threads must be >= 0"),
    (["pointcloud", "--weight-decay", "-0.1"], "--weight-decay must be >= 0.0"),
    (["pointcloud", "--frame-group", "XY"], "frame-group must be one of E3, SE3, O3, SO3"),
    (["pointcloud", "--device", "tpu"], "--device must be cpu, cuda, cuda:N, auto"),
    (["nbody", "--num-particles", "1"], "--num-particles must be >= 2, got 1"),
    (["nbody", "--horizon-steps", "0"], "--horizon-steps must be >= 1"),
    (["nbody", "--burn-in-steps", "-1"], "--burn-in-steps must be >= 0"),
    (["nbody", "--num-train", "2.5"], "--num-train must be an int, got '2.5'"),
    (["nbody", "--stop-after", "-1"], "--stop-after must be >= 0"),
])
@pytest.mark.parametrize("folder", ["fresh", "occupied"])
def test_bad_train_options(tmp_path, capsys, args, phrase, folder):
    """Each wrong option is reported as itself, also where an earlier run holds the --out folder (the
    folder is checked after every argument) and leaves that run untouched."""
    out = tmp_path / "run"
    if folder == "occupied":
        stamps = occupy(out)
        _fails(capsys, ["train", *args, *QUICK, "--out", str(out)], phrase)
        assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == stamps
    else:
        _fails(capsys, ["train", *args, *QUICK, "--out", str(out)], phrase, out)
        assert not out.exists()                     # refused before anything was written


def test_out_is_a_file(tmp_path, capsys):
    f = tmp_path / "notes.txt"
    f.write_text("mine")
    _fails(capsys, ["train", "nbody", *QUICK, "--out", str(f)], "is a file; pass a folder")
    _fails(capsys, ["train", "nbody", *QUICK, "--out", str(f / "run")], "lies inside")
    _fails(capsys, ["train", "nbody", *QUICK, "--out", ""], "--out must not be empty")
    assert f.read_text() == "mine"


@pytest.mark.parametrize("text, phrase", [
    ('{"num_train": 0}', "num_train must be >= 1, got 0"),
    ('{"force_weight": "heavy"}', "force_weight must be a number, got 'heavy'"),
    ('{"n_train": 10}', "unknown config key 'n_train'"),
    ('{"epochs": true}', "epochs must be an int, got True"),
])
def test_bad_config_files(tmp_path, capsys, text, phrase):
    cfg = tmp_path / "c.json"
    cfg.write_text(text)
    _fails(capsys, ["train", "molecules", *QUICK, "--config", str(cfg), "--out", str(tmp_path / "r")], phrase)


def _trained(tmp_path, *extra):
    out = tmp_path / "first"
    assert main(["train", "pointcloud", *QUICK, "--model", "pointnet", "--out", str(out), *extra]) == 0
    return out


def test_resume_refuses_changed_sizes_and_finished_runs(tmp_path, capsys):
    out = _trained(tmp_path, "--epochs", "2", "--stop-after", "1")
    stamp = (out / "checkpoint.pt").stat().st_mtime_ns
    _fails(capsys, ["train", "pointcloud", "--resume", str(out / "checkpoint.pt"), "--width", "64"],
           "--width is 64 but checkpoint")
    _fails(capsys, ["train", "pointcloud", "--resume", str(out / "checkpoint.pt"), "--num-points", "32"],
           "--num-points is 32 but checkpoint")
    _fails(capsys, ["train", "nbody", "--resume", str(out / "checkpoint.pt")], "belongs to task 'pointcloud'")
    _fails(capsys, ["train", "pointcloud", "--resume", str(tmp_path)], "holds no checkpoint (expected")  # a run folder resumes
    assert (out / "checkpoint.pt").stat().st_mtime_ns == stamp            # untouched by the refusals
    assert main(["train", "pointcloud", "--resume", str(out / "checkpoint.pt"), "--no-progress"]) == 0
    _fails(capsys, ["train", "pointcloud", "--resume", str(out / "checkpoint.pt"), "--no-progress"],
           "has already trained 2 of 2 epochs")


def test_training_that_diverges_is_a_one_line_error_and_writes_no_checkpoint(tmp_path, capsys):
    out = tmp_path / "div"
    line = _fails(capsys, ["train", "nbody", *QUICK, "--model", "mlp", "--lr", "1e30", "--batch-size", "8",
                           "--num-train", "32", "--out", str(out)], "training loss became", out)
    assert "lower --lr" in line


@pytest.mark.parametrize("content, phrase", [
    ("3\n-1.0\nC 0 0 0 1 1 1\nO 1 0 1 1 1\nH 0 1 0 1 1 1\n", "atom line has 6 columns"),
    ("1\n-1.0\n0 0 0 0 0 0 0\n", "atomic number must be in 1..118"),
])
def test_corrupt_data_file_is_one_line(tmp_path, capsys, content, phrase):
    data = tmp_path / "traj.xyz"
    data.write_text(content)
    _fails(capsys, ["train", "molecules", *QUICK, "--data", str(data), "--out", str(tmp_path / "r")],
           f"cannot read {data}")
    capsys.readouterr()
    main(["train", "molecules", *QUICK, "--data", str(data), "--out", str(tmp_path / "r")])
    assert phrase in capsys.readouterr().err


def test_periodic_frames_train_in_their_cells(tmp_path, capsys):
    """Extended XYZ frames with a Lattice train (issue 35): the checkpoint's potential sees the cell, so
    moving an atom by a lattice vector keeps its energy and forces (oracle: the same frame unmoved), and
    the cell matters (the same atoms as a free cluster get another energy)."""
    import torch

    from geomlin import load

    g = torch.Generator().manual_seed(0)
    frames = []
    for k in range(6):
        pos = torch.rand(6, 3, generator=g, dtype=torch.float64) * 4.0
        forces = torch.randn(6, 3, generator=g, dtype=torch.float64)
        atoms = "".join(f"{s} {x:.6f} {y:.6f} {z:.6f} {a:.6f} {b:.6f} {c:.6f}\n"
                        for s, (x, y, z), (a, b, c) in zip("OHHOHH", pos.tolist(), forces.tolist()))
        frames.append(f'6\nLattice="4 0 0 0 4 0 0 0 4" pbc="T T T" energy={-10.0 - k:.1f} '
                      f"Properties=species:S:1:pos:R:3:forces:R:3\n{atoms}")
    data = tmp_path / "box.xyz"
    data.write_text("".join(frames))
    out = tmp_path / "r"
    assert main(["train", "molecules", *QUICK, "--data", str(data), "--model", "gaunt", "--num-train", "4",
                 "--num-test", "2", "--out", str(out)]) == 0
    model = load(out, dtype=torch.float64)
    assert model.net.avg_num_neighbors > 20        # measured on the training frames with their images, not 8
    pos = torch.rand(6, 3, generator=g, dtype=torch.float64) * 4.0
    z = torch.tensor([8, 1, 1, 8, 1, 1])
    cell = 4.0 * torch.eye(3, dtype=torch.float64)[None]
    batch = torch.zeros(6, dtype=torch.long)
    energy, forces = model(pos, z, batch=batch, cell=cell)
    moved = pos + torch.tensor([[4.0, 0.0, -8.0]] + [[0.0, 0.0, 0.0]] * 5, dtype=torch.float64)
    e2, f2 = model(moved, z, batch=batch, cell=cell)
    torch.testing.assert_close(e2, energy, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(f2, forces, rtol=1e-10, atol=1e-10)
    free, _ = model(pos, z, batch=batch)
    assert (free - energy).abs().item() > 1e-6


def test_npz_with_atomic_number_zero(tmp_path, capsys):
    p = tmp_path / "z0.npz"
    np.savez(p, z=np.array([0, 1]), R=np.zeros((4, 2, 3)), E=np.zeros(4), F=np.zeros((4, 2, 3)))
    _fails(capsys, ["train", "molecules", *QUICK, "--data", str(p)], "atomic numbers must be in 1..118")


def test_qm9_trains_every_model_on_molecules_of_different_sizes(tmp_path, capsys):
    args = ["train", "molecules", *QUICK, "--dataset", "qm9", "--model", "gaunt", "--out", str(tmp_path / "q")]
    assert main(args) == 0


@pytest.mark.parametrize("args, phrase", [
    (["audit", "x.pt", "--samples", "0"], "--samples must be >= 1, got 0"),
    (["audit", "x.pt", "--samples", "many"], "--samples must be an int, got 'many'"),
    (["audit", "x.pt", "--seed", "-4"], "--seed must be >= 0"),
    (["bench", "--timeout", "nan"], "--timeout must be finite"),
    (["bench", "--timeout", "-1"], "--timeout must be > 0"),
    (["bench", "--only", "no_such_bench"], "no benchmark named no_such_bench"),
    (["train"], "geomlin train needs a task"),
])
def test_bad_audit_and_bench_options(capsys, args, phrase):
    _fails(capsys, args, phrase)
