"""Paths to the bundled real sample files (top-level ``datasets/``)."""

import shutil
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[2] / "datasets"
QM9_DIR = DATA / "qm9"
MD_DIR = DATA / "md"
MESH_DIR = DATA / "meshes"


@pytest.fixture
def qm9_root(tmp_path):
    """A writable QM9 root with the bundled MoleculeNet sample in ``raw/`` (caches go to ``processed/``)."""
    raw = tmp_path / "qm9" / "raw"
    shutil.copytree(QM9_DIR, raw, ignore=shutil.ignore_patterns("xyz", "qm9pack"))   # the other layouts' samples
    for f in raw.iterdir():
        f.chmod(0o644)
    return tmp_path / "qm9"
