"""What a training task provides to the loop: data, models, loss, metrics, symmetry.

Data are held either as *stacked fields*: a ``dict`` of tensors that share a leading
example axis (``pos (M, N, 3)``, ``label (M,)``, ...), for examples of one size, where a batch
is just ``field[index]``; or as a [`GraphSet`][] of PyTorch Geometric graphs of different
sizes (molecules), where a batch is a ``torch_geometric.data.Batch`` (PyG's collation: nodes
concatenated, a ``batch`` vector naming each node's graph). Either way any sampler (in
particular ``DistributedSampler``) works on the example indices.

Statistics are ``{name: (sum, count)}`` pairs, summed over batches and ranks before dividing, so
that the reported mean is exact for any number of processes. A sum computed from the model's output
stays a 0-d tensor on the training device and a count known on the host (a batch size) stays a
Python number ([`stat`][]): the loop adds them up without reading the device and reads all of an
epoch's statistics at once (see [`geomlin.train.loop`][]).

Data stay on the CPU until a batch is taken: [`take`][] moves each batch to the training device
once (the data boundary), where data-dependent sizes (the largest graph of a batch) are settled on
the host, so no step has to ask the device for a shape.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from geomlin.train.config import Option
from geomlin.train.errors import UserError

Fields = dict[str, Tensor]
Stats = dict[str, tuple[Tensor | float, Tensor | float]]
#: Dtype of the statistics' sums (exact counts and stable sums over an epoch).
STAT_DTYPE = torch.float64


class GraphSet:
    """Graphs of different sizes (``torch_geometric.data.Data``) whose batches are PyG ``Batch`` objects.

    ``graphs[i]`` is example ``i``; ``batch`` collates the examples ``index (b,)`` with
    ``Batch.from_data_list`` (node tensors concatenated, ``batch (N_total,)`` graph indices) on the
    CPU and records the batch's largest graph as the Python int ``max_num_nodes`` (a shape the
    padded models need, known here without asking the device), then moves it.
    """

    def __init__(self, graphs):
        self.graphs = list(graphs)

    def __len__(self) -> int:
        return len(self.graphs)

    def batch(self, index: Tensor, device: torch.device | None = None):
        from torch_geometric.data import Batch

        out = Batch.from_data_list([self.graphs[i] for i in index.tolist()])
        out.max_num_nodes = int(out.ptr.diff().max()) if out.num_graphs else 0
        return out.to(device) if device is not None else out


def num_examples(fields: Mapping[str, Tensor] | GraphSet) -> int:
    """The number of examples: ``len`` of a [`GraphSet`][], else the common leading size of stacked
    ``fields`` (ValueError if they disagree)."""
    if isinstance(fields, GraphSet):
        return len(fields)
    sizes = {k: int(v.shape[0]) for k, v in fields.items()}
    if len(set(sizes.values())) != 1:
        raise ValueError(f"stacked fields must share their leading size, got {sizes}")
    return next(iter(sizes.values()))


def take(fields: Mapping[str, Tensor] | GraphSet, index: Tensor, device: torch.device | None = None):
    """Examples ``index (b,)`` (a CPU index) moved to ``device``: rows of every stacked field, or a PyG ``Batch``.

    The rows are gathered on the CPU and each field is copied to the device once per batch.
    """
    if isinstance(fields, GraphSet):
        return fields.batch(index, device)
    return {k: v[index].to(device) if device is not None else v[index] for k, v in fields.items()}


def stat(total: Tensor | float, count: Tensor | float) -> tuple[Tensor | float, Tensor | float]:
    """A ``(sum, count)`` statistic, left where it was computed.

    A tensor (one element) becomes a detached [`STAT_DTYPE`][] 0-d tensor on its own device (no
    copy to the host, so no wait for the device); a Python number (a batch size) stays a float.
    """
    def value(x):
        if isinstance(x, Tensor):
            if x.numel() != 1:
                raise ValueError(f"a statistic must be one number, got a tensor of shape {tuple(x.shape)}")
            return x.detach().reshape(()).to(STAT_DTYPE)
        return float(x)

    return value(total), value(count)


@dataclass
class AuditSpec:
    """How to check a model's declared symmetry with [`geomlin.testing`][].

    ``fn(*inputs, **kwargs)`` is checked against ``group`` with the feature types
    ``type_in`` / ``type_out`` (see
    [`geomlin.testing.equivariance_check`][]). ``inputs`` are float64
    example inputs; ``description`` names the symmetry in words.
    """

    fn: Callable
    group: Any
    type_in: Any
    type_out: Any
    inputs: tuple
    description: str
    kwargs: dict = field(default_factory=dict)


@dataclass
class TaskData:
    """The data of one run: training examples, named evaluation sets, facts for the models.

    ``train`` and each evaluation set are stacked fields or a [`GraphSet`][].
    """

    train: Fields | GraphSet
    evals: dict[str, Fields | GraphSet]
    info: dict[str, Any]


class Task:
    """Base class of ``geomlin train <task>``; subclasses fill in the hooks below."""

    #: Sub-command name (``pointcloud``).
    name: str = ""
    #: One-line description for ``--help``.
    description: str = ""
    #: Task-specific options (added to [`COMMON_OPTIONS`][geomlin.train.config.COMMON_OPTIONS]).
    options: tuple[Option, ...] = ()
    #: Model names trained when ``--model`` is not given.
    default_models: tuple[str, ...] = ()
    #: Every model name the task can build, with a one-line description.
    models: ClassVar[dict[str, str]] = {}
    #: Defaults of common options that differ for this task (``{"lr": 3e-3, "epochs": 12}``).
    default_overrides: ClassVar[dict[str, Any]] = {}
    #: The metric (``evalset_metric``) the final summary compares.
    primary_metric: str = ""
    #: Whether a larger primary metric is better.
    higher_is_better: bool = True

    def quick_preset(self, cfg: dict) -> dict:
        """Option values that make ``--quick`` a run of well under a minute."""
        return {"epochs": 1}

    def validate(self, cfg: dict) -> None:
        """Raise [`UserError`][] for inconsistent options (called before any work)."""

    def build_data(self, cfg: dict) -> TaskData:
        """Training and evaluation fields (stacked tensors, leading axis = examples), deterministic in ``cfg``."""
        raise NotImplementedError

    def build_model(self, name: str, cfg: dict, info: dict) -> nn.Module:
        """A fresh model ``name``; ``info`` is ``TaskData.info`` (e.g. ``num_classes``)."""
        raise NotImplementedError

    def augment(self, batch: Fields, cfg: dict) -> Fields:
        """Per-batch training augmentation of a batch already on the training device.

        Random draws must be made on the batch's device (``torch.randn(..., device=pos.device)``,
        the device's global RNG, which checkpoints restore), never on the CPU and uploaded.
        """
        return batch

    def train_step(self, name: str, model: nn.Module, batch: Fields, cfg: dict) -> tuple[Tensor, Stats]:
        """The loss (0-d, with grad) and statistics of one training batch for model ``name``."""
        raise NotImplementedError

    def eval_step(self, name: str, model: nn.Module, batch: Fields, cfg: dict) -> Stats:
        """Statistics of one evaluation batch of model ``name`` (called under ``torch.no_grad`` unless overridden)."""
        raise NotImplementedError

    #: Whether [`eval_step`][] needs autograd (force models differentiate the energy).
    eval_needs_grad: bool = False

    def audit_spec(self, name: str, model: nn.Module, info: dict) -> AuditSpec | None:
        """The symmetry the task claims for a model that declares no feature types (its baselines).

        ``geomlin audit`` checks models that declare ``type_in`` / ``type_out`` from those
        declarations; this is the fallback, against which a non-equivariant baseline is expected
        to fail.
        """
        return None

    def summary_lines(self, last: dict, model_names: list[str]) -> list[str]:
        """Extra lines of the final summary (e.g. the equivariant-vs-baseline comparison)."""
        return []

    # ------------------------------------------------------------------ helpers
    def all_options(self) -> tuple[Option, ...]:
        """Common options (with this task's default overrides) followed by the task's own options."""
        from dataclasses import replace

        from geomlin.train.config import COMMON_OPTIONS

        common = tuple(replace(o, default=self.default_overrides[o.name]) if o.name in self.default_overrides
                       else o for o in COMMON_OPTIONS)
        return common + self.options

    def model_names(self, cfg: dict) -> list[str]:
        """The models selected by ``cfg['model']`` (comma-separated), validated."""
        spec = cfg.get("model")
        names = list(self.default_models) if not spec else [s.strip() for s in spec.split(",") if s.strip()]
        if not names:
            raise UserError(f"--model must name at least one model of: {', '.join(self.models)}")
        for n in names:
            if n not in self.models:
                raise UserError(f"unknown model '{n}' for task {self.name}; choose from "
                                f"{', '.join(self.models)}")
        if len(set(names)) != len(names):
            raise UserError(f"--model lists a model twice: {spec}")
        return names


def require_module(module: str, what: str):
    """``module`` imported, or a one-line [`UserError`][geomlin.train.errors.UserError] saying what needs it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise UserError(f"{what} needs {module}, which cannot be imported ({exc})") from None


#: Environment variable naming an explicit root of the bundled samples: a folder that holds geomlin's
#: ``datasets/`` (a clone of the repository), for installs that do not.
DATA_ROOT_ENV = "GEOMLIN_DATA"


def bundled_path(relative: Path | str) -> Path | None:
    """``datasets/<relative>`` of the bundled samples, or None where no root holds it.

    Searched under the explicit root ``$GEOMLIN_DATA`` first, then the working directory, then the
    source tree this ``geomlin`` package was imported from (a clone, for an editable install). An
    installed wheel carries no samples: pass the data (``--data``, ``--root``) or set
    ``GEOMLIN_DATA``.
    """
    import geomlin

    roots = [Path(os.environ[DATA_ROOT_ENV])] if os.environ.get(DATA_ROOT_ENV) else []
    roots += [Path.cwd(), Path(geomlin.__file__).resolve().parent.parent]
    for root in roots:
        if (root / "datasets" / relative).exists():
            return root / "datasets" / relative
    return None


def require_bundled(relative: Path | str, option: str) -> Path:
    """[`bundled_path`][] of ``relative``, or a [`UserError`][geomlin.train.errors.UserError] naming
    ``option`` (the command-line option that gives the data instead) and ``$GEOMLIN_DATA``."""
    path = bundled_path(relative)
    if path is None:
        raise UserError(f"the bundled sample datasets/{relative} was not found: pass {option}, or set "
                        f"{DATA_ROOT_ENV} to a folder holding geomlin's datasets/ (a clone)")
    return path
