"""Training does something: after a short run the equivariant models beat their own untrained
initialisation (same seed, same test set) on the task's metric, and run_training leaves the
process's thread count alone."""

import pytest
import torch

from geomlin.train import get_task, run_training
from geomlin.train.config import resolve_config
from geomlin.train.loop import model_seed, seed_everything
from geomlin.train.tasks.base import num_examples, take


def _config(task, tmp_path, **cli):
    cli = {"quick": True, "out": str(tmp_path / task.name), "progress": False, **cli}
    return resolve_config(task.all_options(), cli_values=cli, quick_preset=task.quick_preset)


def untrained_metric(task, cfg, name: str, metric: str, eval_set: str = "test") -> float:
    """The metric of model ``name`` as initialised by run_training (before any step), on the same data."""
    seed_everything(cfg["seed"])
    data = task.build_data(cfg)
    torch.manual_seed(model_seed(cfg["seed"], name))
    model = task.build_model(name, cfg, data.info).eval()
    fields = data.evals[eval_set]
    total = count = 0.0
    with torch.set_grad_enabled(task.eval_needs_grad):
        for start in range(0, num_examples(fields), cfg["batch_size"]):
            index = torch.arange(start, min(start + cfg["batch_size"], num_examples(fields)))
            s, c = task.eval_step(name, model, take(fields, index), cfg)[metric]
            total, count = total + float(s), count + float(c)
    return total / count


def test_nbody_equivariant_models_learn(tmp_path):
    task = get_task("nbody")
    models = ["egnn", "gatr"]
    # 40 optimiser steps: GATr starts close to "nothing moves" (its output point is its input point
    # at initialisation), so it must also beat that baseline, not just its own initialisation
    cfg = _config(task, tmp_path, model=",".join(models), epochs=10, lr=3e-3)
    summary = run_training(task, cfg)
    rotated = task.build_data(cfg).evals["rotated"]
    standing_still = float(((rotated["pos"] - rotated["target_pos"]) ** 2).mean())
    for name in models:
        trained = summary["models"][name]["rotated_mse"]
        before = untrained_metric(get_task("nbody"), cfg, name, "mse", "rotated")
        assert trained < 0.5 * before and trained < 0.5 * standing_still, (name, trained, before, standing_still)


def test_molecules_gaunt_potential_learns_forces(tmp_path):
    """GauntPotential (the default molecules model) on the bundled ethanol trajectory: 40 steps cut the
    test force error well below the untrained model's."""
    task = get_task("molecules")
    cfg = _config(task, tmp_path, model="gaunt", epochs=10, batch_size=16, lr=1e-2)
    summary = run_training(task, cfg)
    trained = summary["models"]["gaunt"]["test_force_mae"]
    before = untrained_metric(get_task("molecules"), cfg, "gaunt", "force_mae")
    assert trained < 0.8 * before, (trained, before)


@pytest.mark.slow
def test_molecules_egnn_learns_forces(tmp_path):
    task = get_task("molecules")
    cfg = _config(task, tmp_path, model="egnn", epochs=20, num_train=200, num_test=50, quick=False)
    summary = run_training(task, cfg)
    trained = summary["models"]["egnn"]["test_force_mae"]
    before = untrained_metric(get_task("molecules"), cfg, "egnn", "force_mae")
    assert trained < 0.95 * before, (trained, before)


def test_qm9_variable_size_molecules_learn(tmp_path):
    """--dataset qm9 on the bundled sample: molecules of 3 to 9 heavy atoms batched PyG-style; the
    composition baseline plus a few steps beat the untrained network (MAE of U0 in eV)."""
    task = get_task("molecules")
    cfg = _config(task, tmp_path, dataset="qm9", epochs=3)
    summary = run_training(task, cfg)
    trained = summary["models"]["egnn"]["test_mae"]
    before = untrained_metric(get_task("molecules"), cfg, "egnn", "mae")
    assert trained < before, (trained, before)


def test_run_training_leaves_threads_alone(tmp_path):
    before = torch.get_num_threads()
    task = get_task("nbody")
    cfg = _config(task, tmp_path, model="mlp", threads=before + 1, num_train=8, num_test=4)
    run_training(task, cfg)
    assert torch.get_num_threads() == before
