"""These tests use tiny tensors: run them single-threaded (thread start-up dominates otherwise)."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _single_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
