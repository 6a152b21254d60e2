"""[`load`][]: a ``geomlin train`` checkpoint or a ``geomlin export`` package in, a ready ``nn.Module`` out.

The one loader: ``geomlin.load``, ``geomlin audit`` and ``geomlin export`` all come through here.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import torch
from torch import nn

from geomlin.deploy.card import ModelCard
from geomlin.deploy.packaged import PackagedModel
from geomlin.train.errors import UserError

#: The checkpoint file inside a run folder.
CHECKPOINT_NAME = "checkpoint.pt"


def resolve_path(path: str | Path) -> Path:
    """``path`` itself, or the checkpoint inside a ``geomlin train`` run folder; a one-line error naming it else."""
    path = Path(path)
    if path.is_dir():
        inner = path / CHECKPOINT_NAME
        if not inner.is_file():
            raise UserError(f"{path} is a folder without a {CHECKPOINT_NAME}; pass a checkpoint or a .pt2 package")
        return inner
    if not path.is_file():
        raise UserError(f"checkpoint or package not found: {path}")
    return path


def is_package(path: str | Path) -> bool:
    """True for an AOTInductor package (a zip archive holding a ``data/aotinductor`` folder) or a ``.pt2`` file.

    A ``.pt2`` file that is no package is then refused by the package loader, naming the file.
    """
    if Path(path).suffix == ".pt2":
        return True
    try:
        with zipfile.ZipFile(path) as archive:
            return any("/data/aotinductor/" in f"/{n}" for n in archive.namelist())
    except (zipfile.BadZipFile, OSError):
        return False


def checkpoint_model(ckpt: dict, name: str | None, path: str | Path) -> nn.Module:
    """Model ``name`` (None: the only one) of a loaded checkpoint, rebuilt by its task with its weights and card."""
    from geomlin.train.tasks import get_task

    names = list(ckpt["models"])
    if name is None:
        if len(names) != 1:
            raise UserError(f"checkpoint {path} holds the models {', '.join(names)}; choose one with model=")
        name = names[0]
    if name not in ckpt["models"]:
        raise UserError(f"checkpoint {path} has no model '{name}'; it holds {', '.join(names)}")
    task = get_task(ckpt["task"])
    info = dict(ckpt.get("run", {}).get("data", {}))
    model = task.build_model(name, dict(ckpt["config"]), info)
    try:
        model.load_state_dict(ckpt["models"][name])
    except RuntimeError as exc:
        raise UserError(f"corrupt checkpoint {path}: model '{name}' does not load "
                        f"({str(exc).splitlines()[0]})") from None
    model.card = ModelCard.from_run(task.name, name, ckpt["config"], info, source=str(path))
    return model


def load_package(path: str | Path) -> PackagedModel:
    """The [`PackagedModel`][geomlin.deploy.packaged.PackagedModel] of a package file, with its declared types.

    A package of ``geomlin export`` records its task, model, config and data facts: the task
    rebuilds the model (random weights) only to read its declared feature types. A package
    written without them keeps ``type_in`` / ``type_out`` None.
    """
    try:
        packaged = PackagedModel.open(path)
    except (FileNotFoundError, ValueError) as exc:
        raise UserError(str(exc)) from None
    card = packaged.card
    if card.task is not None and card.name is not None and card.data:
        from geomlin.train.tasks import get_task

        shell = get_task(card.task).build_model(card.name, dict(card.config), dict(card.data))
        packaged.type_in = getattr(shell, "type_in", None)
        packaged.type_out = getattr(shell, "type_out", None)
    return packaged.eval()


def load(path: str | Path, model: str | None = None, device: str | torch.device | None = None,
         dtype: torch.dtype | None = None) -> nn.Module:
    """A trained model from a ``geomlin train`` checkpoint (or its run folder) or a ``geomlin export`` package.

    Parameters
    ----------
    path : str or Path
        ``checkpoint.pt``, the run folder holding it, or a ``.pt2`` package.
    model : str, optional
        The checkpoint's model to load; needed when it holds several (``geomlin train`` trains
        two by default). A package holds one.
    device, dtype : optional
        Where and in which floating dtype the model runs (default: as trained, on the CPU).
        A package runs on the device and in the dtype it was exported for: another one is refused.

    Returns
    -------
    nn.Module
        In eval mode, with ``card`` ([`ModelCard`][geomlin.deploy.card.ModelCard]: task, name, config,
        training data facts, units, species map) and its declared types ``type_in`` /
        ``type_out``. A checkpoint gives the eager model; a package a
        [`PackagedModel`][geomlin.deploy.packaged.PackagedModel] that checks its inputs.

    Raises
    ------
    UserError
        One line naming the file: missing, not a checkpoint or package, a checkpoint that needs
        Python objects (it is read with ``torch.load(weights_only=True)``, which never runs code
        from the file), a model name it does not hold, a device or dtype a package cannot run in.

    Notes
    -----
    A checkpoint holds only tensors and plain data. A package holds compiled native code (its
    kernels as a shared library, which loading runs): load only packages you trust, as you would
    run only programs you trust.
    """
    from geomlin.train.checkpoint import load_checkpoint

    path = resolve_path(path)
    if is_package(path):
        packaged = load_package(path)
        name = packaged.card.name
        if model is not None and model != name:
            raise UserError(f"package {path} holds one model ('{name}'); drop model= or pass model='{name}'")
        for asked, has, what in ((dtype, packaged.dtype, "dtype"),
                                 (None if device is None else torch.device(device), packaged.device, "device")):
            if asked is not None and asked != has:
                raise UserError(f"package {path} was exported for {what} {has}, not {asked}; export it again "
                                f"for {asked}")
        return packaged
    net = checkpoint_model(load_checkpoint(path), model, path)
    if device is not None or dtype is not None:
        net = net.to(device=device, dtype=dtype)
    return net.eval()
