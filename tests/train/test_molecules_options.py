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


@pytest.mark.parametrize("cli, counts", [
    ({}, (24, 6)),                                     # --quick on 30 frames: a fifth for the test, the rest
    ({"num_train": 10}, (10, 6)),
    ({"num_train": 20, "num_test": 10}, (20, 10)),
])
def test_quick_takes_what_small_data_hold_and_records_the_counts(tmp_path, cli, counts):
    """--quick's 64 / 32 examples are at most what the data hold (it once failed on the 30 bundled water
    frames, blaming --num-train 64 that nobody gave); counts given still have to fit, and the counts used
    are in the run's config."""
    from geomlin.train.tasks.base import bundled_path

    water = str(bundled_path("md/xtb_md_water27.xyz"))
    task, cfg = _config(tmp_path, data=water, **cli)
    data = task.build_data(cfg)
    assert (cfg["num_train"], cfg["num_test"]) == counts
    assert data.evals["test"]["pos"].shape[0] == counts[1]
    task, cfg = _config(tmp_path, data=water, num_train=28, num_test=6)
    with pytest.raises(UserError, match="--num-train 28 \\+ --num-test 6 exceeds the 30 examples"):
        task.build_data(cfg)


def test_split_counts_against_a_brute_force_rule():
    """split_counts: the defaults where the data hold them, else a fifth (at least one) for the test."""
    from geomlin.train.tasks.molecules import split_counts

    for m in range(2, 60):
        for defaults in ((800, 200), (64, 32)):
            test = min(defaults[1], max(1, m // 5), m - 1)
            assert split_counts(m, None, None, defaults) == (min(defaults[0], m - test), test)
