"""``geomlin export``: a model of a ``geomlin train`` checkpoint as an AOTInductor package (``.pt2``).

[`geomlin.load`][geomlin.deploy.loading.load] rebuilds the model from the checkpoint's config with its
weights (the checkpoint is read with ``weights_only=True``); [`geomlin.deploy.package`][geomlin.deploy.export.package]
exports it in float32 (or ``--dtype float64``) with dynamic
batch and items sizes (potentials with their forces; a potential trained on periodic frames as its
periodic program, dynamic atoms and edges, [`geomlin.models.energy.PeriodicStep`][]) and compiles it, with the task, the model's
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


def periodic_inputs(model: nn.Module, dtype: torch.dtype = torch.float32) -> tuple[tuple, dict]:
    """Example inputs of a potential's periodic program: 8 random atoms in a cube one cutoff wide, with the
    edges of its neighbour list (``edge_index``, ``shift``, ``cell``; [`geomlin.models.edges.neighbor_settings`][])."""
    from geomlin.models.edges import neighbor_settings
    from geomlin.neighbors import neighbor_list

    cutoff, loop = neighbor_settings(model)
    g = torch.Generator().manual_seed(0)
    pos = torch.rand(8, 3, generator=g, dtype=torch.float64) * cutoff
    species = torch.randint(int(model.num_species), (8,), generator=g)
    cell = cutoff * torch.eye(3, dtype=torch.float64)[None]
    edge_index, shift = neighbor_list(pos, cutoff, cell=cell, loop=loop)
    return (pos.to(dtype), species), {"edge_index": edge_index, "shift": shift, "cell": cell.to(dtype)}


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
    if card.data.get("periodic"):      # trained in periodic cells: the program that takes edges and a cell
        args, kwargs = periodic_inputs(net, getattr(torch, dtype))
    else:
        args, kwargs = example_inputs(task, card.name, net, dict(card.data), dtype=getattr(torch, dtype))
    return deploy.package(net, out, args, kwargs)
