"""Shared helpers for the tests that run examples and documentation code.

* :func:`run_example` runs ``examples/NAME.py --quick [ARGS]`` in a fresh interpreter (examples
  set process-wide things such as ``torch.set_num_threads``, which must not leak into the test
  process), from the repository root, with this checkout's ``geomlin`` first on the path, one
  thread and a non-interactive matplotlib backend; it fails the test with the example's stderr.
* :func:`load_example` imports ``examples/NAME.py`` as a module (for examples whose ``main(argv)``
  returns results to check in-process; cheaper than a subprocess).
* :func:`python_blocks` / :func:`run_doc` execute the ```` ```python ```` blocks of a docs page in
  order in one namespace, as a reader would paste them.

Usage::

    from tests.examples.helpers import run_example
    def test_nbody_gatr_quick():
        out = run_example("nbody_gatr")
        assert "test MSE" in out.stdout
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
DOCS = ROOT / "docs"
#: Seconds an example's ``--quick`` run may take before the test fails (a smoke run, not a benchmark).
DEFAULT_TIMEOUT = 600
_PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def _example_path(name: str) -> Path:
    path = EXAMPLES / (name if name.endswith(".py") else f"{name}.py")
    if not path.is_file():
        pytest.fail(f"example {path} not found", pytrace=False)
    return path


def run_example(name: str, *args: str, quick: bool = True, timeout: float = DEFAULT_TIMEOUT,
                env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run ``examples/NAME.py [--quick] ARGS`` in a subprocess; returns the completed process (text).

    Fails the calling test (with the tail of stderr) when the example exits non-zero or times out.
    """
    path = _example_path(name)
    full_env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
                "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "MPLBACKEND": "Agg", **(env or {})}
    command = [sys.executable, str(path), *(["--quick"] if quick else []), *args]
    try:
        proc = subprocess.run(command, cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=timeout,
                              check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{' '.join(command[1:])} did not finish within {timeout:.0f} s", pytrace=False)
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-25:])
        pytest.fail(f"{' '.join(command[1:])} exited with {proc.returncode}:\n{tail}", pytrace=False)
    return proc


def load_example(name: str) -> ModuleType:
    """Import ``examples/NAME.py`` as a module (its ``if __name__ == "__main__"`` block does not run)."""
    path = _example_path(name)
    spec = importlib.util.spec_from_file_location(f"example_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def python_blocks(page: str | Path) -> list[str]:
    """The ```` ```python ```` blocks of a docs page (a name relative to ``docs/`` or a path), in order."""
    path = Path(page) if Path(page).is_absolute() else DOCS / page
    if not path.is_file():
        pytest.skip(f"{path} not present (docs/ is not installed with the package)")
    return _PYTHON_BLOCK.findall(path.read_text())


def run_doc(page: str | Path, namespace: dict | None = None) -> dict:
    """Execute every python block of a docs page in one namespace (in the repository root); returns it."""
    blocks = python_blocks(page)
    if not blocks:
        pytest.fail(f"{page} has no python blocks", pytrace=False)
    namespace = {} if namespace is None else namespace
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        for k, block in enumerate(blocks):
            exec(compile(block, f"{page} (python block {k + 1})", "exec"), namespace)  # noqa: S102 - our own docs
    finally:
        os.chdir(cwd)
    return namespace
