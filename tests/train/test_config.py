"""Config resolution: precedence, unknown keys, types, YAML and JSON files."""

import json

import pytest

from geomlin.train.config import (
    COMMON_OPTIONS,
    Option,
    check_resume_compatible,
    load_config_file,
    resolve_config,
    validate_config,
)
from geomlin.train.errors import UserError
from tests.oracles import require

OPTS = (*COMMON_OPTIONS, Option("num_points", int, 128, "points"),
        Option("schedule", str, "cosine", "schedule", ("cosine", "constant")))


def test_precedence_defaults_quick_file_cli():
    cfg = resolve_config(OPTS, file_values={"epochs": 5, "lr": 0.1}, cli_values={"lr": "0.5", "quick": True},
                         quick_preset={"epochs": 1, "num_points": 16})
    assert cfg["epochs"] == 5          # the file beats the quick preset
    assert cfg["num_points"] == 16     # the quick preset beats the default
    assert cfg["lr"] == 0.5            # the command line beats the file
    assert cfg["batch_size"] == 32     # untouched default


def test_unknown_key_names_the_key():
    with pytest.raises(UserError, match="unknown config key 'epoch'.*known keys: .*epochs"):
        resolve_config(OPTS, file_values={"epoch": 3})


@pytest.mark.parametrize("key, value, msg", [
    ("epochs", "three", "epochs must be an int"),
    ("epochs", 2.5, "epochs must be an int"),
    ("schedule", "linear", "schedule must be one of cosine, constant"),
    ("quick", "maybe", "quick must be a bool"),
])
def test_bad_values(key, value, msg):
    with pytest.raises(UserError, match=msg):
        resolve_config(OPTS, file_values={key: value})


def test_json_and_yaml_files(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps({"batch-size": 8, "epochs": 2}))
    assert load_config_file(tmp_path / "a.json") == {"batch_size": 8, "epochs": 2}
    require("yaml")
    (tmp_path / "b.yaml").write_text("epochs: 3\nlr: 0.01\nquick: true\n")
    cfg = resolve_config(OPTS, file_values=load_config_file(tmp_path / "b.yaml"),
                         quick_preset={"num_points": 8})
    assert (cfg["epochs"], cfg["lr"], cfg["num_points"]) == (3, 0.01, 8)


@pytest.mark.parametrize("name, text, msg", [
    ("bad.json", "{epochs: 2", "cannot parse config file"),
    ("list.json", "[1, 2]", "must hold a mapping"),
    ("c.toml", "epochs = 2", "must end in .json, .yaml or .yml"),
])
def test_bad_files(tmp_path, name, text, msg):
    (tmp_path / name).write_text(text)
    with pytest.raises(UserError, match=msg):
        load_config_file(tmp_path / name)


def test_missing_file(tmp_path):
    with pytest.raises(UserError, match="config file not found"):
        load_config_file(tmp_path / "nope.yaml")


def test_base_replaces_defaults_and_skips_quick():
    cfg = resolve_config(OPTS, cli_values={"epochs": 4}, base={"num_points": 7, "quick": True, "epochs": 1},
                         quick_preset={"num_points": 99})
    assert cfg["num_points"] == 7 and cfg["epochs"] == 4


OPTS_COUNTED = (*COMMON_OPTIONS, Option("num_train", int, 10, "count", minimum=1),
                Option("width", int, 32, "width", minimum=1), Option("schedule", str, "cosine", "s"))


def test_bounds_are_checked_for_files_and_python_configs():
    with pytest.raises(UserError, match="num_train must be >= 1, got 0"):
        resolve_config(OPTS_COUNTED, file_values={"num_train": 0})
    cfg = resolve_config(OPTS_COUNTED)
    with pytest.raises(UserError, match="--width must be >= 1, got -2"):
        resolve_config(OPTS_COUNTED, cli_values={"width": "-2"})
    with pytest.raises(UserError, match="unknown config keys \\['widht'\\]"):
        validate_config(OPTS_COUNTED, {**cfg, "widht": 3})
    assert validate_config(OPTS_COUNTED, cfg) == cfg


def test_resume_may_change_only_the_resumable_options():
    saved = resolve_config(OPTS_COUNTED)
    check_resume_compatible(OPTS_COUNTED, saved, {**saved, "epochs": 50, "lr": 0.1, "out": "x"}, "c.pt")
    with pytest.raises(UserError, match="--width is 64 but checkpoint c.pt was trained with 32"):
        check_resume_compatible(OPTS_COUNTED, saved, {**saved, "width": 64}, "c.pt")
