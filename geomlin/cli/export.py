"""``geomlin export``: a model of a ``geomlin train`` checkpoint as an AOTInductor package (``.pt2``).

[`geomlin.load`][geomlin.deploy.loading.load] rebuilds the model from the checkpoint's config with its
weights (the checkpoint is read with ``weights_only=True``); [`geomlin.deploy.package`][geomlin.deploy.export.package]
exports it in float32 (or ``--dtype float64``) with dynamic
batch and items sizes (potentials with their forces) and compiles it, with the task, the model's
name, the run's config, data facts, units and species map stored in the package's metadata, so that
``geomlin audit model.pt2`` can check it later. The package is written atomically and an
existing file is refused unless ``overwrite``.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from geomlin.train.errors import UserError


def example_inputs(task, name: str, model: nn.Module, info: dict,
                   dtype: torch.dtype = torch.float32) -> tuple[tuple, dict]:
    """Example inputs ``(args, kwargs)`` in ``dtype`` of a task's model: its own ``example_inputs``, else the
    task's audit inputs (the baselines), cut to what a program takes ([`geomlin.deploy.fit_inputs`][geomlin.deploy.export.fit_inputs])."""
    from geomlin import deploy
    from geomlin.reps import example_inputs as declared_inputs

    g = torch.Generator().manual_seed(0)
    if hasattr(model, "example_inputs"):
        args, kwargs = declared_inputs(model, generator=g, dtype=dtype)
    else:
        spec = task.audit_spec(name, model, info)
        if spec is None:
            raise UserError(f"model '{name}' of task {task.name} has no example inputs to export it with")
        args, kwargs = spec.inputs, dict(spec.kwargs)

    def cast(x):
        return x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x

    return deploy.fit_inputs(model, tuple(cast(a) for a in args), {k: cast(v) for k, v in kwargs.items()})


def export_checkpoint(checkpoint: str | Path, out: str | Path, model: str | None = None,
                      overwrite: bool = False, dtype: str = "float32") -> dict:
    """Package model ``model`` (default: the checkpoint's only model) of ``checkpoint`` (or its run folder) into ``out``.

    Returns the stored metadata with the export and compile times (seconds).
    """
    from geomlin import deploy
    from geomlin.train.tasks import get_task

    out = Path(out)
    if out.suffix != ".pt2":
        raise UserError(f"--out must be a .pt2 file (an AOTInductor package), got {out}")
    if out.exists() and not overwrite:
        raise UserError(f"{out} exists; pass --overwrite to replace it")
    if not out.parent.is_dir():
        raise UserError(f"folder of --out not found: {out.parent}")
    path = deploy.resolve_path(checkpoint)
    if deploy.is_package(path):
        raise UserError(f"{path} is a package already; export takes a checkpoint")
    net = deploy.load(path, model=model, dtype=getattr(torch, dtype))
    card = net.card
    task = get_task(card.task)
    args, kwargs = example_inputs(task, card.name, net, dict(card.data), dtype=getattr(torch, dtype))
    return deploy.package(net, out, args, kwargs)
