"""``geomlin export`` and ``geomlin audit model.pt2``: a trained model as an AOTInductor package.

Oracle: the checkpoint's eager model (the package must reproduce it) and the shared checker
(the package's equivariance error at float32 round-off). The round trip compiles with
AOTInductor (~40 s), so it is slow; the refusals are quick.
"""

import pytest
import torch

from geomlin import deploy
from geomlin.__main__ import main
from tests.cli.test_cli import audit_errors

TINY = ["--num-train", "8", "--num-test", "4", "--burn-in-steps", "10", "--horizon-steps", "20"]


def _train(tmp_path, model="egnn"):
    out = tmp_path / "nb"
    assert main(["train", "nbody", "--quick", "--model", model, *TINY, "--out", str(out), "--no-progress",
                 "--threads", "1"]) == 0
    return out / "checkpoint.pt"


@pytest.mark.slow
def test_export_then_audit_the_package(tmp_path, capsys):
    ckpt = _train(tmp_path)
    pkg = tmp_path / "model.pt2"
    assert main(["export", str(ckpt), "--out", str(pkg)]) == 0
    assert "wrote" in capsys.readouterr().out and pkg.is_file()
    # the package reproduces the checkpoint's eager model at another batch size
    import geomlin

    model = geomlin.load(ckpt, dtype=torch.float32)
    g = torch.Generator().manual_seed(3)
    pos, vel, charges = (torch.randn(3, 5, 3, generator=g), torch.randn(3, 5, 3, generator=g),
                         torch.randn(3, 5, 1, generator=g).sign())
    torch.testing.assert_close(deploy.load(pkg)(pos, vel, charges), model(pos, vel, charges), rtol=1e-5, atol=1e-5)
    assert main(["audit", str(pkg), "--samples", "2"]) == 0
    report = capsys.readouterr().out
    assert "geomlin_version" in report and "dynamic_dims" in report and "float32" in report
    assert audit_errors(report)["egnn"] < 1e-4, report
    # an existing --out is refused without --overwrite
    assert main(["export", str(ckpt), "--out", str(pkg)]) == 2
    assert "--overwrite" in capsys.readouterr().err


def test_export_refuses_bad_arguments(tmp_path, capsys):
    assert main(["export", str(tmp_path / "missing.pt"), "--out", str(tmp_path / "m.pt2")]) == 2
    assert "checkpoint or package not found" in capsys.readouterr().err
    assert main(["export", str(tmp_path / "missing.pt"), "--out", str(tmp_path / "m.zip")]) == 2
    assert ".pt2" in capsys.readouterr().err
    (tmp_path / "m.pt2").write_bytes(b"")
    assert main(["export", str(tmp_path / "missing.pt"), "--out", str(tmp_path / "m.pt2")]) == 2
    assert "--overwrite" in capsys.readouterr().err
    (tmp_path / "junk.pt2").write_bytes(b"not a package")
    assert main(["audit", str(tmp_path / "junk.pt2")]) == 2
    assert "cannot load package" in capsys.readouterr().err
