"""Checkpoints: round trip, RNG state restore, corrupt files rejected with UserError."""

import random

import numpy as np
import pytest
import torch

from geomlin.train.checkpoint import load_checkpoint, rng_state, save_checkpoint, set_rng_state
from geomlin.train.errors import UserError


def _payload():
    lin = torch.nn.Linear(3, 2)
    opt = torch.optim.Adam(lin.parameters())
    return {"task": "t", "config": {"a": 1}, "epoch": 3, "models": {"m": lin.state_dict()},
            "optimizers": {"m": opt.state_dict()}, "rng": [rng_state()], "history": [{"epoch": 1}]}


def test_round_trip(tmp_path):
    p = _payload()
    save_checkpoint(tmp_path / "c.pt", p)
    back = load_checkpoint(tmp_path / "c.pt")
    assert back["epoch"] == 3 and back["history"] == [{"epoch": 1}]
    torch.testing.assert_close(back["models"]["m"]["weight"], p["models"]["m"]["weight"])
    assert not (tmp_path / "c.pt.tmp").exists()


def test_rng_state_restores_all_generators():
    state = rng_state()
    a = (torch.rand(3), np.random.rand(3), random.random())
    set_rng_state(state)
    b = (torch.rand(3), np.random.rand(3), random.random())
    torch.testing.assert_close(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert a[2] == b[2]


def test_corrupt_and_foreign_files(tmp_path):
    save_checkpoint(tmp_path / "good.pt", _payload())
    raw = (tmp_path / "good.pt").read_bytes()
    (tmp_path / "trunc.pt").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(UserError, match="corrupt or unreadable checkpoint"):
        load_checkpoint(tmp_path / "trunc.pt")
    (tmp_path / "text.pt").write_text("not a checkpoint")
    with pytest.raises(UserError, match="corrupt or unreadable checkpoint"):
        load_checkpoint(tmp_path / "text.pt")
    torch.save({"weights": torch.zeros(2)}, tmp_path / "foreign.pt")
    with pytest.raises(UserError, match="not a geomlin checkpoint"):
        load_checkpoint(tmp_path / "foreign.pt")
    with pytest.raises(UserError, match="checkpoint not found"):
        load_checkpoint(tmp_path / "missing.pt")


def test_incomplete_payload_is_a_bug():
    with pytest.raises(ValueError, match="missing"):
        save_checkpoint("unused.pt", {"task": "t"})
