"""The documentation site builds with ``mkdocs build --strict`` (needs the ``docs`` extra)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("mkdocs") is None and not (Path(sys.executable).parent / "mkdocs").exists(),
                    reason="mkdocs is not installed (pip install -e '.[docs]')")
def test_mkdocs_build_strict(tmp_path):
    exe = shutil.which("mkdocs") or str(Path(sys.executable).parent / "mkdocs")
    result = subprocess.run([exe, "build", "--strict", "--site-dir", str(tmp_path / "site")], check=False, cwd=ROOT,
                            capture_output=True, text=True, env={"NO_MKDOCS_2_WARNING": "1",
                                                                 "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin"},
                            timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (tmp_path / "site" / "index.html").exists()
