"""Shared pytest setup: deterministic seeds, one intra-op thread, no deferred checks across tests.

Tests are dominated by small tensor operations, for which extra intra-op
threads only add synchronisation; with one thread the suite is also immune to
oversubscription when other processes share the cores.
"""

import contextlib

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


@pytest.fixture(autouse=True)
def _fresh_deferred_checks():
    """Deferred device checks (geomlin.validation) are per-thread state: a test that leaves some
    pending (by failing, or by never reading them) must not fail the next test that reads them (the
    training loop calls raise_deferred)."""
    from geomlin import validation

    with contextlib.suppress(ValueError):
        validation.raise_deferred()
    yield
