"""``--budget-minutes``: training stops when its wall-time budget is spent, wherever the epoch is,
then evaluates and reports; the cosine schedule runs over the budget; one process only."""

import json

import pytest

from geomlin.train import UserError, get_task, run_training
from geomlin.train.config import resolve_config
from geomlin.train.loop import cosine_lr, cosine_lr_at


def _config(task, tmp_path, **cli):
    cli = {"quick": True, "out": str(tmp_path / task.name), "progress": False, **cli}
    return resolve_config(task.all_options(), cli_values=cli, quick_preset=task.quick_preset)


def test_a_spent_budget_stops_the_run_mid_epoch(tmp_path):
    task = get_task("nbody")
    # a budget of 30 ms: the first steps spend it, far before the 50 epochs of 16 batches each
    cfg = _config(task, tmp_path, model="mlp", epochs=50, batch_size=4, budget_minutes=0.0005)
    summary = run_training(task, cfg)
    steps_per_epoch = -(-cfg["num_train"] // cfg["batch_size"])
    assert summary["budget"]["exhausted"] is True
    assert summary["budget"]["used_s"] >= 0.03
    assert 1 <= summary["steps"] < 50 * steps_per_epoch and summary["epochs_done"] < 50
    saved = json.loads((tmp_path / "nbody" / "summary.json").read_text())
    assert saved["budget"] == summary["budget"] and "test_mse" in saved["models"]["mlp"]


def test_without_a_budget_the_run_counts_its_steps(tmp_path):
    task = get_task("nbody")
    cfg = _config(task, tmp_path, model="mlp", epochs=2, batch_size=64)
    summary = run_training(task, cfg)
    assert "budget" not in summary
    assert summary["steps"] == 2 * -(-cfg["num_train"] // 64)


def test_the_schedule_over_a_budget_is_the_epoch_schedule():
    # oracle: the epoch schedule at the same progress
    for epoch, epochs in [(1, 10), (4, 10), (10, 10)]:
        assert cosine_lr_at(1.0, (epoch - 1) / epochs) == pytest.approx(cosine_lr(1.0, epoch, epochs))
    assert cosine_lr_at(2.0, 1.0) == pytest.approx(0.1) and cosine_lr_at(2.0, 7.0) == pytest.approx(0.1)


def test_bad_budgets_are_refused(tmp_path):
    task = get_task("nbody")
    with pytest.raises(UserError, match="--budget-minutes must be >= 0"):
        _config(task, tmp_path, budget_minutes=-1)
    with pytest.raises(UserError, match="--budget-minutes must be finite"):
        _config(task, tmp_path, budget_minutes="nan")
