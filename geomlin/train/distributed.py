"""Process-group setup for ``torchrun`` (single or multi node), the training device, and collectives.

``torchrun --nproc_per_node=N [--nnodes=M ...] -m geomlin train ...`` sets ``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK`` and the rendezvous variables; [`setup`][] reads them, picks this process's device
([`resolve_device`][]: ``--device cuda`` means ``cuda:LOCAL_RANK``), and initialises the default
process group with the backend PyTorch registers for that device
(``torch.distributed.get_default_backend_for_device``: gloo for the CPU, nccl for CUDA, xccl for
XPU, or whatever a plug-in registered for its device). Without those variables everything runs in
one process and the collectives below are no-ops.

Collectives run on the process group's device, as NCCL requires (it refuses CPU tensors): the
helpers here move a tensor to ``DistInfo.device`` before reducing it.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from geomlin.train.errors import UserError

#: What ``--device`` accepts, for error messages.
DEVICE_CHOICES = "cpu, cuda, cuda:N, auto, or another accelerator PyTorch has available (xpu, mps, ...; TYPE:N)"


@dataclass(frozen=True)
class DistInfo:
    """Where this process sits: ``rank`` of ``world_size``, ``local_rank`` on its node, its device.

    ``backend`` is the process group's backend (``None`` in a single process).
    """

    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    backend: str | None = None

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


def _device_module(device_type: str):
    """``torch.<device_type>`` when it is an accelerator module PyTorch knows (``None`` otherwise)."""
    try:
        module = torch.get_device_module(device_type)
    except (RuntimeError, AttributeError):
        return None
    return module if hasattr(module, "is_available") and hasattr(module, "device_count") else None


def resolve_device(requested: str, local_rank: int = 0) -> torch.device:
    """The training device of this process, from ``--device`` and the process's ``LOCAL_RANK``.

    * ``auto``: the CUDA device ``cuda:local_rank`` when CUDA is available, else ``cpu`` (other
      accelerators are chosen by name);
    * ``cpu``;
    * an accelerator type PyTorch knows and has available (``cuda``, ``xpu``, ``mps``, a plug-in's
      PrivateUse1 device): ``TYPE`` means ``TYPE:local_rank``, one device per process of the node.
      CUDA refuses more processes than devices (NCCL needs one GPU per process); another type with
      fewer devices than processes shares them (``TYPE:local_rank % count``);
    * ``TYPE:N``: device ``N`` of that type, as given.

    Nonsense, an unknown type, an unavailable accelerator or an index out of range raise a one-line
    [`UserError`][]. Changes no process-wide setting (see [`device_scope`][]).
    """
    if not isinstance(requested, str) or not requested.strip():
        raise UserError(f"--device must be {DEVICE_CHOICES}, got {requested!r}")
    text = requested.strip()
    if text == "auto":
        text = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(text)
    except (RuntimeError, ValueError):
        raise UserError(f"--device must be {DEVICE_CHOICES}, got {requested!r}") from None
    if device.type == "cpu":
        return torch.device("cpu")
    module = _device_module(device.type)
    if module is None:
        raise UserError(f"--device {requested}: '{device.type}' is not an accelerator PyTorch can train on "
                        f"(expected {DEVICE_CHOICES})")
    if not module.is_available():
        raise UserError(f"--device {requested} was requested but PyTorch sees no {device.type} device "
                        f"(torch {torch.__version__}; use --device cpu)")
    count = int(module.device_count())
    index = device.index
    if index is None:
        index = local_rank
        if index >= count:
            if device.type == "cuda":
                raise UserError(f"--device cuda: this process has LOCAL_RANK {local_rank} but the node has only "
                                f"{count} CUDA device(s); start at most {count} process(es) per node "
                                "(NCCL needs one GPU per process)")
            index = local_rank % count
    elif index >= count:
        raise UserError(f"--device {requested}: only {count} {device.type} device(s) (indices 0..{count - 1})")
    return torch.device(device.type, index)


def device_scope(device: torch.device):
    """A context in which ``device`` is the current device of its accelerator (restored on exit).

    Object collectives and NCCL's barrier use the *current* device, so under torchrun every process
    must make its own GPU current; a context keeps that from outliving the run.
    """
    if device.type == "cpu" or device.index is None:
        return contextlib.nullcontext()
    accelerator = torch.accelerator.current_accelerator()
    if accelerator is None or accelerator.type != device.type:
        return contextlib.nullcontext()
    return torch.accelerator.device_index(device.index)


def backend_for(device: torch.device) -> str:
    """The process-group backend PyTorch registers for ``device`` (gloo for cpu, nccl for cuda, ...)."""
    try:
        return str(dist.get_default_backend_for_device(device))
    except (RuntimeError, ValueError) as exc:
        raise UserError(f"torch.distributed has no backend for device type '{device.type}' "
                        f"({str(exc).strip().splitlines()[0]}); train on cpu or cuda under torchrun") from None


def setup(device: str = "auto") -> DistInfo:
    """Initialise the process group when launched by ``torchrun``; return this process's [`DistInfo`][].

    The backend is the one PyTorch registers for the device ([`backend_for`][]); a CUDA process
    group is bound to its GPU (``device_id``). Calling it again after initialisation reuses the
    existing group.
    """
    world_size = _env_int("WORLD_SIZE", 1)
    rank = _env_int("RANK", 0)
    local_rank = _env_int("LOCAL_RANK", 0)
    dev = resolve_device(device, local_rank)
    backend = None
    if world_size > 1 and not dist.is_initialized():
        backend = backend_for(dev)
        # NCCL forms its communicator on the bound GPU and its barrier uses it (PyTorch documents
        # device_id as having effects under NCCL only); elsewhere the barrier uses the current
        # device, which device_scope makes this process's
        with device_scope(dev):
            dist.init_process_group(backend=backend, device_id=dev if dev.type == "cuda" else None)
    if dist.is_initialized():
        rank, world_size = dist.get_rank(), dist.get_world_size()
        backend = str(dist.get_backend())
    return DistInfo(rank=rank, world_size=world_size, local_rank=local_rank, device=dev, backend=backend)


def teardown() -> None:
    """Destroy the default process group if one was created."""
    if dist.is_initialized():
        dist.destroy_process_group()


def _active() -> bool:
    return dist.is_initialized() and dist.get_world_size() > 1


def all_reduce_sum(t: torch.Tensor, device: torch.device | None = None) -> torch.Tensor:
    """Sum of ``t`` (any shape) over all ranks, on ``device`` (default: ``t``'s device).

    ``t`` itself (moved to ``device``) when not distributed. The reduction runs on the process
    group's device: pass ``DistInfo.device`` for a CPU tensor under NCCL.
    """
    if device is not None:
        t = t.to(device)
    if _active():
        t = t.clone()
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t


def all_gather_objects(obj) -> list:
    """``[obj_rank0, obj_rank1, ...]``; ``[obj]`` when not distributed (runs on the current device)."""
    if _active():
        out = [None] * dist.get_world_size()
        dist.all_gather_object(out, obj)
        return out
    return [obj]


def broadcast_object(obj, src: int = 0):
    """``obj`` of rank ``src`` on every rank."""
    if _active():
        box = [obj]
        dist.broadcast_object_list(box, src=src)
        return box[0]
    return obj


def barrier() -> None:
    """Wait for all ranks (no-op when not distributed)."""
    if _active():
        dist.barrier()
