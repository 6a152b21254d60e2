"""The editable install is robust to a folder named ``geomlin`` (a clone) next to the user's script.

Oracle: the import system itself. A fresh editable wheel is built from this checkout's
``pyproject.toml``, installed into a throwaway site directory and imported from a folder that holds
a symlink ``geomlin`` to the clone root, as a user's script next to ``git clone .../geomlin`` does.
"""

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
#: Site-packages of the running interpreter (torch, e3nn, PyG), added without running its .pth
#: files so that no other editable install of geomlin takes part.
SITE = Path(torch.__file__).resolve().parents[1]


def _build_editable_wheel(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    for name in ("pyproject.toml", "README.md"):
        (project / name).write_bytes((REPO / name).read_bytes())
    (project / "geomlin").symlink_to(REPO / "geomlin", target_is_directory=True)
    out = tmp_path / "wheel"
    out.mkdir()
    subprocess.run([sys.executable, "-c", f"from setuptools import build_meta; build_meta.build_editable({str(out)!r})"],
                   cwd=project, check=True, capture_output=True, timeout=120)
    (wheel,) = out.glob("*.whl")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    return site


def test_a_clone_folder_named_geomlin_does_not_shadow_the_installed_package(tmp_path):
    site = _build_editable_wheel(tmp_path)
    assert not list(site.glob("__editable__*finder.py")), "the editable install uses the import-hook finder"
    work = tmp_path / "work"
    work.mkdir()
    (work / "geomlin").symlink_to(REPO, target_is_directory=True)  # the clone, named as git names it
    script = (f"import site, sys; sys.path.append({str(SITE)!r}); site.addsitedir({str(site)!r})\n"
              "import geomlin\n"
              "from geomlin.datasets import QM9\n"
              "print(geomlin.__version__, geomlin.__file__)\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSAFEPATH")}
    run = subprocess.run([sys.executable, "-S", "-c", script], cwd=work, env=env, capture_output=True,
                         text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    _version, path = run.stdout.split()
    assert Path(path).resolve() == REPO / "geomlin" / "__init__.py"
