"""Shared pytest setup: deterministic seeds, one intra-op thread, no deferred checks across tests.

Tests are dominated by small tensor operations, for which extra intra-op
threads only add synchronisation; with one thread the suite is also immune to
oversubscription when other processes share the cores.
"""

import contextlib

import pytest
import torch

torch.set_num_threads(1)


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
