"""Run configuration: typed options, presets, YAML/JSON files, command-line overrides.

A task declares its options as a list of [`Option`][]. The resolved config
is a plain ``dict`` built in this order (later wins):

1. the option defaults (common + task);
2. the task's ``--quick`` preset, when ``quick`` is set on the command line or in the file;
3. the config file (``--config FILE``, ``.json``, ``.yaml`` or ``.yml``);
4. the options given explicitly on the command line.

Keys that no option declares are rejected with the list of valid keys. Every value is checked
against its option (type, choices, bounds) through [`geomlin.validation`][] before any work
starts, so ``--num-train 0`` or ``--lr nan`` end as one-line [`UserError`][] messages.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from geomlin.train.errors import UserError
from geomlin.validation import check_float, check_int

#: ``--precision`` choices -> the autocast dtype of the forward passes (``None``: plain float32).
PRECISIONS = {"fp32": None, "bf16": torch.bfloat16}


#: Largest accepted ``seed`` (numpy and torch seeds are 32-bit; larger values would be silently folded).
SEED_MAX = 2**32 - 1

@dataclass(frozen=True)
class Option:
    """One configuration key.

    ``name`` uses underscores (``batch_size``); the command-line flag is
    ``--batch-size``. ``type`` is ``int``, ``float``, ``str`` or ``bool``;
    ``choices`` restricts the values, ``minimum`` / ``maximum`` bound numbers (``strict=True``
    excludes the minimum: ``lr > 0``); all are checked for the file and the command line alike.
    """

    name: str
    type: type
    default: Any
    help: str
    choices: tuple | None = None
    minimum: float | None = None
    maximum: float | None = None
    strict: bool = False

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


#: Options shared by every ``geomlin train`` task.
COMMON_OPTIONS: tuple[Option, ...] = (
    Option("model", str, None, "comma-separated model names to train (default: the task's list)"),
    Option("epochs", int, 10, "number of training epochs", minimum=1),
    Option("budget_minutes", float, 0.0, "stop training after this many minutes of training steps, wherever "
           "the epoch is, then evaluate (0 = no budget; with a budget the cosine schedule runs over the "
           "budget, and --epochs is an upper bound; one process only)", minimum=0.0),
    Option("batch_size", int, 32, "batch size per process", minimum=1),
    Option("lr", float, 1e-3, "learning rate (AdamW)", minimum=0.0, strict=True),
    Option("weight_decay", float, 0.0, "weight decay (AdamW)", minimum=0.0),
    Option("schedule", str, "cosine", "learning-rate schedule", ("cosine", "constant")),
    Option("device", str, "auto", "auto (cuda when available, else cpu), cpu, cuda, cuda:N, or another accelerator "
           "PyTorch has available (xpu, mps, ...); under torchrun cuda means cuda:LOCAL_RANK", None),
    Option("precision", str, "fp32", "fp32, or bf16: forward passes and losses under bfloat16 autocast "
           "(parameters, gradients and optimiser stay float32)", tuple(PRECISIONS)),
    Option("seed", int, 0, "random seed (model init, data order, augmentation)", minimum=0, maximum=SEED_MAX),
    Option("out", str, "runs/{task}", "output directory ({task} is replaced by the task name)"),
    Option("quick", bool, False, "a smoke run of well under a minute (small data, one or two epochs)"),
    Option("threads", int, 1, "torch CPU threads per process (0 = PyTorch's default, all cores; 1 is robust on "
           "busy or small machines)", minimum=0),
    Option("progress", bool, True, "show tqdm progress bars"),
    Option("stop_after", int, 0, "stop after this epoch as if interrupted (0 = never; for resume tests)", minimum=0),
)

#: Options a resumed run may change (everything else must equal the checkpoint's value, since it
#: shapes the data or the models).
RESUMABLE = frozenset({"epochs", "budget_minutes", "lr", "weight_decay", "batch_size", "schedule", "device", "precision", "out",
                       "threads", "progress", "stop_after", "quick"})


def _convert(option: Option, value: Any, where: str) -> Any:
    """``value`` as the option's type, checked against its choices and bounds; UserError otherwise."""
    if value is None:
        return None
    name = f"{where}: {option.flag}" if where == "command line" else f"{where}: {option.name}"
    try:
        if option.type is bool:
            if isinstance(value, bool):
                converted = value
            elif isinstance(value, str) and value.lower() in ("1", "true", "yes", "on"):
                converted = True
            elif isinstance(value, str) and value.lower() in ("0", "false", "no", "off"):
                converted = False
            else:
                raise ValueError
        elif option.type is int:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            converted = int(value)
        elif option.type is float:
            if isinstance(value, bool):
                raise ValueError
            converted = float(value)
        else:
            if not isinstance(value, (str, int, float)) or isinstance(value, bool):
                raise ValueError
            converted = str(value)
    except (TypeError, ValueError, OverflowError):
        kind = {"int": "an int", "float": "a number", "bool": "a bool (true/false)", "str": "a string"}
        raise UserError(f"{name} must be {kind[option.type.__name__]}, got {value!r}") from None
    if option.choices is not None and converted not in option.choices:
        raise UserError(f"{name} must be one of {', '.join(map(str, option.choices))}, got {converted!r}")
    try:
        if option.type is int:
            check_int(converted, name, minimum=option.minimum + (1 if option.strict else 0)
                      if option.minimum is not None else None, maximum=option.maximum)
        elif option.type is float:
            check_float(converted, name, minimum=option.minimum, maximum=option.maximum,
                        strict_minimum=option.strict)
        elif option.type is str and not converted.strip():
            raise ValueError(f"{name} must not be empty")
    except ValueError as exc:
        raise UserError(str(exc)) from None
    return converted


def validate_config(options: Iterable[Option], cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Check every value of a resolved config against its option; returns the converted values.

    Used by [`run_training`][] so that a config built in Python (not through
    the command line) is held to the same rules. Raises [`UserError`][].
    """
    table = {o.name: o for o in options}
    unknown = sorted(k for k in cfg if k not in table)
    if unknown:
        raise UserError(f"unknown config keys {unknown}; known keys: {', '.join(sorted(table))}")
    return {k: _convert(table[k], v, "config") for k, v in cfg.items()}


def check_resume_compatible(options: Iterable[Option], saved: Mapping[str, Any], cfg: Mapping[str, Any],
                            checkpoint: str) -> None:
    """Refuse a resumed run whose data- or model-shaping options differ from the checkpoint's.

    Only the options in [`RESUMABLE`][] (epochs, learning rate, device, output, ...) may change.
    """
    table = {o.name: o for o in options}
    # the model list is compared as a set by the training loop (None = the task's default list)
    changed = [k for k in table if k not in RESUMABLE and k != "model" and k in saved and saved[k] != cfg.get(k)]
    if changed:
        k = changed[0]
        raise UserError(f"{table[k].flag} is {cfg.get(k)!r} but checkpoint {checkpoint} was trained with "
                        f"{saved[k]!r}; a resumed run keeps the checkpoint's data and model options (it may "
                        f"change only {', '.join('--' + r.replace('_', '-') for r in sorted(RESUMABLE))})")


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read a flat mapping from a ``.json`` / ``.yaml`` / ``.yml`` file.

    Dashes in keys are accepted (``batch-size`` = ``batch_size``). Raises
    [`UserError`][] for a missing, unreadable or non-mapping file.
    """
    path = Path(path)
    if not path.is_file():
        raise UserError(f"config file not found: {path}")
    text = path.read_text()
    suffix = path.suffix.lower()
    if suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UserError(f"cannot parse config file {path}: {exc}") from None
    elif suffix in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise UserError("YAML config files need PyYAML: pip install pyyaml "
                            "(or geomlin[docs]); JSON works without it") from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            first = str(exc).strip().replace("\n", " ")
            raise UserError(f"cannot parse config file {path}: {first}") from None
    else:
        raise UserError(f"config file must end in .json, .yaml or .yml, got {path.name}")
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise UserError(f"config file {path} must hold a mapping of option: value, got {type(data).__name__}")
    values: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    for k, v in data.items():
        key = str(k).replace("-", "_")
        if key in values:
            raise UserError(f"config file {path} sets option '{key}' twice, as '{spelled[key]}' and '{k}'; keep one")
        values[key], spelled[key] = v, str(k)
    return values


def resolve_config(options: Iterable[Option], *, file_values: Mapping[str, Any] | None = None,
                   cli_values: Mapping[str, Any] | None = None,
                   quick_preset: Mapping[str, Any] | Callable[[dict], Mapping[str, Any]] | None = None,
                   base: Mapping[str, Any] | None = None, where_file: str = "config file") -> dict[str, Any]:
    """The resolved config ``dict`` (see the module docstring for the precedence).

    ``base`` replaces the defaults (used by ``--resume``: the checkpoint's config);
    ``quick_preset`` is applied when the resolved ``quick`` is true; a callable preset sees the
    config as the file and command line leave it (so it can depend on e.g. ``dataset``), and
    values given explicitly in the file or on the command line still win over it.
    """
    table = {o.name: o for o in options}
    file_values = dict(file_values or {})
    cli_values = {k: v for k, v in (cli_values or {}).items() if v is not None}
    for key in file_values:
        if key not in table:
            known = ", ".join(sorted(table))
            raise UserError(f"unknown config key '{key}' in {where_file}; known keys: {known}")
    for key in cli_values:
        if key not in table:
            raise UserError(f"unknown option '{key}'")
    cfg = {name: o.default for name, o in table.items()}
    if base is not None:
        cfg.update({k: v for k, v in base.items() if k in table})
    file_cfg = {k: _convert(table[k], v, where_file) for k, v in file_values.items()}
    cli_cfg = {k: _convert(table[k], v, "command line") for k, v in cli_values.items()}
    quick = cli_cfg.get("quick", file_cfg.get("quick", cfg.get("quick", False)))
    if quick and quick_preset is not None and base is None:
        preset = quick_preset({**cfg, **file_cfg, **cli_cfg}) if callable(quick_preset) else quick_preset
        cfg.update(preset)
    cfg.update(file_cfg)
    cfg.update(cli_cfg)
    return cfg
