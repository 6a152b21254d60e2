"""Run configuration: typed options, presets, YAML/JSON files, command-line overrides.

A task declares its options as a list of :class:`Option`. The resolved config
is a plain ``dict`` built in this order (later wins):

1. the option defaults (common + task);
2. the task's ``--quick`` preset, when ``quick`` is set on the command line or in the file;
3. the config file (``--config FILE``, ``.json``, ``.yaml`` or ``.yml``);
4. the options given explicitly on the command line.

Keys that no option declares are rejected with the list of valid keys.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from geomlin.train.errors import UserError


@dataclass(frozen=True)
class Option:
    """One configuration key.

    ``name`` uses underscores (``batch_size``); the command-line flag is
    ``--batch-size``. ``type`` is ``int``, ``float``, ``str`` or ``bool``;
    ``choices`` restricts the values (checked for the file and the command line alike).
    """

    name: str
    type: type
    default: Any
    help: str
    choices: tuple | None = None

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


#: Options shared by every ``geomlin train`` task.
COMMON_OPTIONS: tuple[Option, ...] = (
    Option("model", str, None, "comma-separated model names to train (default: the task's list)"),
    Option("epochs", int, 10, "number of training epochs"),
    Option("batch_size", int, 32, "batch size per process"),
    Option("lr", float, 1e-3, "learning rate (Adam)"),
    Option("weight_decay", float, 0.0, "weight decay (AdamW)"),
    Option("device", str, "auto", "cpu, cuda, cuda:N or auto", None),
    Option("seed", int, 0, "random seed (model init, data order, augmentation)"),
    Option("out", str, "runs/{task}", "output directory ({task} is replaced by the task name)"),
    Option("quick", bool, False, "a smoke run of well under a minute (small data, one or two epochs)"),
    Option("threads", int, 1, "torch CPU threads per process (0 = PyTorch's default, all cores; 1 is robust on busy or small machines)"),
    Option("progress", bool, True, "show tqdm progress bars"),
)


def _convert(option: Option, value: Any, where: str) -> Any:
    if value is None:
        return None
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
            converted = str(value)
    except (TypeError, ValueError):
        raise UserError(f"{where}: {option.name} must be a {option.type.__name__}, got {value!r}") from None
    if option.choices is not None and converted not in option.choices:
        raise UserError(f"{where}: {option.name} must be one of {', '.join(map(str, option.choices))}, "
                        f"got {converted!r}")
    return converted


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read a flat mapping from a ``.json`` / ``.yaml`` / ``.yml`` file.

    Dashes in keys are accepted (``batch-size`` = ``batch_size``). Raises
    :class:`UserError` for a missing, unreadable or non-mapping file.
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
    return {str(k).replace("-", "_"): v for k, v in data.items()}


def resolve_config(options: Iterable[Option], *, file_values: Mapping[str, Any] | None = None,
                   cli_values: Mapping[str, Any] | None = None,
                   quick_preset: Mapping[str, Any] | Callable[[dict], Mapping[str, Any]] | None = None,
                   base: Mapping[str, Any] | None = None, where_file: str = "config file") -> dict[str, Any]:
    """The resolved config ``dict`` (see the module docstring for the precedence).

    ``base`` replaces the defaults (used by ``--resume``: the checkpoint's config);
    ``quick_preset`` is applied when the resolved ``quick`` is true.
    """
    table = {o.name: o for o in options}
    file_values = dict(file_values or {})
    cli_values = {k: v for k, v in (cli_values or {}).items() if v is not None}
    for key in file_values:
        if key not in table:
            known = ", ".join(sorted(table))
            raise UserError(f"unknown config key '{key}' in {where_file}; known keys: {known}")
    cfg = {name: o.default for name, o in table.items()}
    if base is not None:
        cfg.update({k: v for k, v in base.items() if k in table})
    file_cfg = {k: _convert(table[k], v, where_file) for k, v in file_values.items()}
    cli_cfg = {k: _convert(table[k], v, "command line") for k, v in cli_values.items()}
    quick = cli_cfg.get("quick", file_cfg.get("quick", cfg.get("quick", False)))
    if quick and quick_preset is not None and base is None:
        preset = quick_preset(dict(cfg)) if callable(quick_preset) else quick_preset
        cfg.update(preset)
    cfg.update(file_cfg)
    cfg.update(cli_cfg)
    return cfg
