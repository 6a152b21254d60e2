"""A process group that, like NCCL, serves only tensors on an accelerator (the simulated ``sim`` device).

NCCL refuses CPU tensors ("No backend type associated with device type cpu"); gloo accepts them, so a
training loop that reduces CPU tensors passes every CPU test and stops on the first GPU cluster. This
backend, registered as :data:`BACKEND` for the ``sim`` device, refuses CPU tensors the same way and
runs the collectives of ``sim`` tensors through an inner gloo group on their CPU values.

Register it in every process (``register()``), then ``torch.distributed.init_process_group(BACKEND)``.
"""

from __future__ import annotations

from datetime import timedelta

import torch
import torch.distributed as dist

from tests.device import simulated as sim

#: Name of the backend.
BACKEND = "simccl"


def _raw(tensors: list[torch.Tensor], what: str) -> list[torch.Tensor]:
    out = []
    for t in tensors:
        if not isinstance(t, sim.SimTensor):
            raise RuntimeError(  # noqa: TRY004 (the error NCCL raises)
                f"No backend type associated with device type {t.device.type} ({BACKEND} serves "
                f"only '{sim.DEVICE_TYPE}' tensors, as NCCL serves only CUDA tensors; {what})")
        out.append(t.raw)
    return out


class DeviceOnlyProcessGroup(dist.ProcessGroup):
    """Collectives on ``sim`` tensors, refused for CPU tensors."""

    def __init__(self, store, rank: int, size: int, timeout: timedelta):
        super().__init__(rank, size)
        self._inner = dist.ProcessGroupGloo(dist.PrefixStore("simccl-inner", store), rank, size, timeout)

    def getBackendName(self) -> str:
        return BACKEND

    @property
    def _device_types(self) -> list[torch.device]:
        # object collectives (all_gather_object, broadcast_object_list) pick their device from this, as
        # they pick CUDA for NCCL
        return [torch.device(sim.DEVICE_TYPE)]

    def allreduce(self, tensors, opts=None):
        raws = _raw(tensors, "allreduce")
        return self._inner.allreduce(raws, opts) if opts is not None else self._inner.allreduce(raws)

    def broadcast(self, tensors, opts=None):
        raws = _raw(tensors, "broadcast")
        return self._inner.broadcast(raws, opts) if opts is not None else self._inner.broadcast(raws)

    def allgather(self, output_lists, input_list, opts=None):
        outs = [_raw(lst, "allgather") for lst in output_lists]
        ins = _raw(input_list, "allgather")
        return self._inner.allgather(outs, ins, opts) if opts is not None else self._inner.allgather(outs, ins)

    def _allgather_base(self, output, input, opts=None):
        out, inp = _raw([output], "all_gather_into_tensor")[0], _raw([input], "all_gather_into_tensor")[0]
        return self._inner._allgather_base(out, inp) if opts is None else self._inner._allgather_base(out, inp, opts)

    def barrier(self, opts=None):
        return self._inner.barrier(opts) if opts is not None else self._inner.barrier()


def _create(store, rank, size, timeout):
    return DeviceOnlyProcessGroup(store, rank, size, timeout)


_registered = False


def register() -> None:
    """Make :data:`BACKEND` available to ``init_process_group`` for the ``sim`` device (idempotent)."""
    global _registered
    if not _registered:
        dist.Backend.register_backend(BACKEND, _create, devices=[sim.DEVICE_TYPE])
        _registered = True
