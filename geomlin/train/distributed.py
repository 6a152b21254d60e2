"""Process-group setup for ``torchrun`` (single or multi node) and rank-aware helpers.

``torchrun --nproc_per_node=N [--nnodes=M ...] -m geomlin train ...`` sets
``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` and the rendezvous variables; :func:`setup`
reads them, initialises the default process group (gloo on CPU, nccl on CUDA) and
picks the device. Without those variables everything runs in one process and the
collectives below are no-ops.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from geomlin.train.errors import UserError


@dataclass(frozen=True)
class DistInfo:
    """Where this process sits: ``rank`` of ``world_size``, ``local_rank`` on its node, its device."""

    rank: int
    world_size: int
    local_rank: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        """True on rank 0: the process that prints, plots and writes files."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise UserError(f"environment variable {name} must be an integer, got {value!r}") from None


def resolve_device(requested: str, local_rank: int = 0) -> torch.device:
    """``auto`` -> ``cuda:local_rank`` when CUDA is available, else ``cpu``; validates the rest."""
    if requested == "auto":
        requested = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(requested)
    except RuntimeError:
        raise UserError(f"--device must be cpu, cuda, cuda:N or auto, got {requested!r}") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise UserError("--device cuda was requested but PyTorch sees no CUDA device "
                            "(use --device cpu)")
        index = device.index if device.index is not None else local_rank
        if index >= torch.cuda.device_count():
            raise UserError(f"--device {requested}: only {torch.cuda.device_count()} CUDA device(s)")
        device = torch.device("cuda", index)
        torch.cuda.set_device(device)
    elif device.type != "cpu":
        raise UserError(f"--device must be cpu, cuda, cuda:N or auto, got {requested!r}")
    return device


def setup(device: str = "auto") -> DistInfo:
    """Initialise the process group when launched by ``torchrun``; return this process's :class:`DistInfo`.

    The backend is nccl when the device is CUDA and gloo otherwise. Calling it
    again after initialisation reuses the existing group.
    """
    world_size = _env_int("WORLD_SIZE", 1)
    rank = _env_int("RANK", 0)
    local_rank = _env_int("LOCAL_RANK", 0)
    dev = resolve_device(device, local_rank)
    if world_size > 1 and not dist.is_initialized():
        backend = "nccl" if dev.type == "cuda" else "gloo"
        dist.init_process_group(backend=backend)
    if dist.is_initialized():
        rank, world_size = dist.get_rank(), dist.get_world_size()
    return DistInfo(rank=rank, world_size=world_size, local_rank=local_rank, device=dev)


def teardown() -> None:
    """Destroy the default process group if one was created."""
    if dist.is_initialized():
        dist.destroy_process_group()


def all_reduce_sum(t: torch.Tensor) -> torch.Tensor:
    """Sum of ``t`` (any shape) over all ranks; ``t`` itself when not distributed."""
    if dist.is_initialized() and dist.get_world_size() > 1:
        t = t.clone()
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t


def all_gather_objects(obj) -> list:
    """``[obj_rank0, obj_rank1, ...]``; ``[obj]`` when not distributed."""
    if dist.is_initialized() and dist.get_world_size() > 1:
        out = [None] * dist.get_world_size()
        dist.all_gather_object(out, obj)
        return out
    return [obj]


def broadcast_object(obj, src: int = 0):
    """``obj`` of rank ``src`` on every rank."""
    if dist.is_initialized() and dist.get_world_size() > 1:
        box = [obj]
        dist.broadcast_object_list(box, src=src)
        return box[0]
    return obj


def barrier() -> None:
    """Wait for all ranks (no-op when not distributed)."""
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.barrier()
