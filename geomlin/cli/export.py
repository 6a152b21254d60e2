"""``geomlin export``: a model of a ``geomlin train`` checkpoint as an AOTInductor package (``.pt2``).

The task rebuilds the model from the checkpoint's config and loads its weights (the checkpoint is
read with ``weights_only=True``); [`geomlin.deploy.package`][] exports it in float32 with dynamic
batch and items sizes (potentials with their forces) and compiles it, with the task, the model's
name, the run's config and data facts stored in the package's metadata, so that
``geomlin audit model.pt2`` can check it later. The package is written atomically and an
existing file is refused unless ``overwrite``.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from geomlin.train.errors import UserError


def example_inputs(task, name: str, model: nn.Module, info: dict) -> tuple[tuple, dict]:
    """Float32 example inputs ``(args, kwargs)`` of a task's model: its own ``example_inputs``, else the
    task's audit inputs (the baselines), cut to what a program takes ([`geomlin.deploy.fit_inputs`][])."""
    from geomlin import deploy
    from geomlin.reps import example_inputs as declared_inputs

    g = torch.Generator().manual_seed(0)
    if hasattr(model, "example_inputs"):
        args, kwargs = declared_inputs(model, generator=g, dtype=torch.float32)
    else:
        spec = task.audit_spec(name, model, info)
        if spec is None:
            raise UserError(f"model '{name}' of task {task.name} has no example inputs to export it with")
        args, kwargs = spec.inputs, dict(spec.kwargs)

    def as32(x):
        return x.float() if isinstance(x, torch.Tensor) and x.is_floating_point() else x

    return deploy.fit_inputs(model, tuple(as32(a) for a in args), {k: as32(v) for k, v in kwargs.items()})


def export_checkpoint(checkpoint: str | Path, out: str | Path, model: str | None = None,
                      overwrite: bool = False) -> dict:
    """Package model ``model`` (default: the checkpoint's only model) of ``checkpoint`` into ``out``.

    Returns the stored metadata with the export and compile times (seconds).
    """
    from geomlin import deploy
    from geomlin.cli.audit import checkpoint_model
    from geomlin.train.checkpoint import load_checkpoint
    from geomlin.train.tasks import get_task

    out = Path(out)
    if out.suffix != ".pt2":
        raise UserError(f"--out must be a .pt2 file (an AOTInductor package), got {out}")
    if out.exists() and not overwrite:
        raise UserError(f"{out} exists; pass --overwrite to replace it")
    if not out.parent.is_dir():
        raise UserError(f"folder of --out not found: {out.parent}")
    ckpt = load_checkpoint(checkpoint)
    names = list(ckpt["models"])
    if model is None:
        if len(names) != 1:
            raise UserError(f"checkpoint {checkpoint} holds {', '.join(names)}; choose one with --model")
        model = names[0]
    if model not in ckpt["models"]:
        raise UserError(f"checkpoint {checkpoint} has no model '{model}'; it holds {', '.join(names)}")
    task = get_task(ckpt["task"])
    info = dict(ckpt.get("run", {}).get("data", {}))
    net = checkpoint_model(ckpt, model, checkpoint).float().eval()
    args, kwargs = example_inputs(task, model, net, info)
    extra = {"task": task.name, "model": model, "config": dict(ckpt["config"]), "info": info}
    return deploy.package(net, out, args, kwargs, metadata=extra)
