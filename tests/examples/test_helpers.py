"""The shared example runner: it runs a script's --quick mode in a fresh interpreter and reports failures."""

import pytest

from tests.examples import helpers


def test_run_example_passes_quick_and_reports_failures(tmp_path, monkeypatch):
    (tmp_path / "ok.py").write_text("import os, sys\nprint('args', sys.argv[1:], os.environ['OMP_NUM_THREADS'])\n")
    (tmp_path / "broken.py").write_text("raise SystemExit('boom')\n")
    monkeypatch.setattr(helpers, "EXAMPLES", tmp_path)
    out = helpers.run_example("ok", "--seed", "1")
    assert out.stdout.strip() == "args ['--quick', '--seed', '1'] 1"
    with pytest.raises(pytest.fail.Exception, match="exited with 1:\nboom"):
        helpers.run_example("broken")
    with pytest.raises(pytest.fail.Exception, match="not found"):
        helpers.run_example("missing")
