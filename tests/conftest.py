"""Shared pytest setup: deterministic seeds and one intra-op thread.

Tests are dominated by small tensor operations, for which extra intra-op
threads only add synchronisation; with one thread the suite is also immune to
oversubscription when other processes share the cores.
"""

import pytest
import torch

torch.set_num_threads(1)


@pytest.fixture(scope="session")
def _occupied_folder(tmp_path_factory):
    """A working folder where every ``geomlin train`` task's default ``--out`` already holds a run."""
    folder = tmp_path_factory.mktemp("cwd")
    for task in ("pointcloud", "molecules", "nbody"):
        run = folder / "runs" / task
        run.mkdir(parents=True)
        for name in ("checkpoint.pt", "metrics.csv", "summary.json"):
            (run / name).write_text("an earlier run")
    return folder


@pytest.fixture(autouse=True)
def _away_from_the_clone(_occupied_folder, monkeypatch):
    """Every test runs in a folder that is not the clone and whose ``runs/`` hold earlier runs (as
    after the README's first command), so no test can pass only because of what the current folder
    holds or lacks: a test names its files through tmp_path, ``--out``, or the source tree."""
    monkeypatch.chdir(_occupied_folder)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield

