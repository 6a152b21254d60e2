"""QM9 options of ``geomlin train molecules``: ``--source``, ``--split standard`` (110k / 10k / rest)
and the models that take molecules of different sizes (every one of them)."""

import pytest

from geomlin.train import UserError, get_task, run_training
from geomlin.train.config import resolve_config


def _config(tmp_path, **cli):
    task = get_task("molecules")
    cli = {"quick": True, "out": str(tmp_path / "run"), "progress": False, **cli}
    return task, resolve_config(task.all_options(), cli_values=cli, quick_preset=task.quick_preset)


@pytest.mark.parametrize("cli, phrase", [
    ({"split": "standard"}, "needs --dataset qm9 and --root"),
    ({"dataset": "qm9", "split": "standard"}, "needs --dataset qm9 and --root"),
    ({"dataset": "qm9", "split": "standard", "root": ".", "num_train": 100}, "drop --num-train"),
    ({"source": "xyz"}, "--source applies to --dataset qm9"),
])
def test_inconsistent_qm9_options_are_refused(tmp_path, cli, phrase):
    task, cfg = _config(tmp_path, **cli)
    with pytest.raises(UserError, match=phrase):
        task.validate(cfg)


def test_standard_split_of_the_bundled_sample_says_it_is_too_small(tmp_path):
    from geomlin.train.tasks.base import bundled_path
    from geomlin.train.tasks.molecules import BUNDLED_QM9

    task, cfg = _config(tmp_path, dataset="qm9", split="standard", root=str(bundled_path(BUNDLED_QM9)),
                        model="egnn")
    with pytest.raises(UserError, match="split of 110000 train"):
        run_training(task, cfg)


def test_the_gaunt_potential_trains_on_molecules_of_different_sizes(tmp_path):
    task, cfg = _config(tmp_path, dataset="qm9", model="gaunt,egnn", target="gap")
    summary = run_training(task, cfg)
    for name in ("gaunt", "egnn"):
        assert summary["models"][name]["test_mae"] > 0
