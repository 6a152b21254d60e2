"""Checkpoints: models, optimisers, epoch, metric history and every RNG state.

A checkpoint is a ``torch.save`` dict with [`CHECKPOINT_FORMAT`][] and
[`CHECKPOINT_VERSION`][]; [`load_checkpoint`][] rejects anything else with a
[`UserError`][] (one line, no traceback on the command line).
Files are written atomically ([`geomlin.io_atomic.atomic_write`][]), so an
interrupted run never leaves a half-written checkpoint behind.

A checkpoint holds only tensors and plain data (dicts, lists, tuples, strings, numbers, None):
the numpy RNG state is stored as a tensor. It is read with ``torch.load(weights_only=True)``,
which never runs code from the file; a file that needs anything else (an arbitrary Python
object, the classic pickle attack) is refused with a [`UserError`][] saying so. Model code is
never part of a checkpoint.

``run["data"]`` records what the models were trained on (the task's data facts); for potentials
that includes their units (``energy_unit``, ``length_unit``: kcal/mol and Angstrom for the MD17-style
trajectories) and the atomic numbers of the training data, which ``geomlin.load`` puts on the
model's card (``geomlin.deploy.card.ModelCard``) and ``geomlin export`` into the package.
"""

from __future__ import annotations

import pickle
import random
import re
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from geomlin.io_atomic import FileWriteError, atomic_write
from geomlin.train.errors import UserError

#: Marker stored in every checkpoint.
CHECKPOINT_FORMAT = "geomlin-checkpoint"
#: Layout version; bump when the keys change.
CHECKPOINT_VERSION = 1
#: Keys every checkpoint must hold.
REQUIRED_KEYS = ("format", "version", "task", "config", "epoch", "models", "optimizers", "rng", "history")


def rng_state() -> dict[str, Any]:
    """The torch (CPU and CUDA), numpy and Python RNG states of this process, as tensors and plain data."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state = {"torch": torch.get_rng_state(),
             "numpy": (str(kind), torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(cached)),
             "python": random.getstate()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what [`rng_state`][] returned."""
    torch.set_rng_state(state["torch"])
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, np.asarray(keys, dtype=np.int64).astype(np.uint32), pos, has_gauss, cached))
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(path: str | Path, payload: dict[str, Any]) -> None:
    """Write ``payload`` (which must hold [`REQUIRED_KEYS`][] except format/version) atomically."""
    data = {"format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION, **payload}
    missing = [k for k in REQUIRED_KEYS if k not in data]
    if missing:
        raise ValueError(f"checkpoint payload is missing {missing}")
    try:
        atomic_write(path, lambda fh: torch.save(data, fh))
    except FileWriteError as exc:
        raise UserError(str(exc)) from None


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Read and validate a geomlin checkpoint.

    Raises [`UserError`][] when the file is missing, not a torch file, truncated
    or not a geomlin checkpoint.
    """
    path = Path(path)
    if path.is_dir():
        raise UserError(f"checkpoint {path} is a folder; pass the checkpoint.pt file inside it")
    if not path.is_file():
        raise UserError(f"checkpoint not found: {path}")
    try:
        data = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as exc:
        found = re.search(r"Unsupported global: GLOBAL (\S+)", str(exc))
        if found:
            raise UserError(f"refusing checkpoint {path}: it needs the Python object {found.group(1)}, not only "
                            "tensors and plain data, and loading it could run code from the file") from None
        raise UserError(f"corrupt or unreadable checkpoint {path}: not a torch file (UnpicklingError)") from None
    except (RuntimeError, EOFError, zipfile.BadZipFile, ValueError, OSError,
            AttributeError, ImportError, IndexError, KeyError, TypeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"corrupt or unreadable checkpoint {path}: {first[:200]}") from None
    if not isinstance(data, dict) or data.get("format") != CHECKPOINT_FORMAT:
        raise UserError(f"{path} is not a geomlin checkpoint (no '{CHECKPOINT_FORMAT}' marker)")
    if data.get("version") != CHECKPOINT_VERSION:
        raise UserError(f"{path}: checkpoint version {data.get('version')!r} is not supported "
                        f"(this geomlin reads version {CHECKPOINT_VERSION})")
    missing = [k for k in REQUIRED_KEYS if k not in data]
    if missing:
        raise UserError(f"corrupt checkpoint {path}: missing {', '.join(missing)}")
    if not isinstance(data["config"], dict) or not isinstance(data["models"], dict) or not data["models"]:
        raise UserError(f"corrupt checkpoint {path}: no models or no config")
    return data
