"""Shared pytest setup: deterministic seeds and one intra-op thread.

Tests are dominated by small tensor operations, for which extra intra-op
threads only add synchronisation; with one thread the suite is also immune to
oversubscription when other processes share the cores.
"""

import pytest
import torch

torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield

