"""The table behind ``method="auto"``: which Gaunt method is fastest, per device and size.

The CPU entries were measured with ``python -m geomlin.gaunt.autotune`` (float32,
batch 1024 x 32 channels, ``torch.set_num_threads(1)``, lmax1 = lmax2 = lmax_out);
rerun it on another machine and paste its output here.  CUDA uses the fused
Triton kernel when Triton is installed and the sizes fit it, else ``"grid"``.
"""

from __future__ import annotations

import torch

#: Fastest method on CPU, keyed by ``max(lmax1, lmax2, lmax_out)`` (upper bounds, ascending).
CPU_TABLE: tuple[tuple[int, str], ...] = (
    (2, "dense"),
    (1000, "grid"),
)


def _lookup(table, lmax: int) -> str:
    for bound, method in table:
        if lmax <= bound:
            return method
    return table[-1][1]


def choose_method(lmax1: int, lmax2: int, lmax_out: int, device_type: str, dtype: torch.dtype) -> str:
    """Method name ``"auto"`` resolves to for these sizes on ``device_type`` (``"cpu"``, ``"cuda"``)."""
    lmax = max(lmax1, lmax2, lmax_out)
    if device_type == "cuda":
        from geomlin.gaunt.kernels import triton_available, triton_supports

        if triton_available() and triton_supports(lmax1, lmax2, lmax_out, dtype):
            return "triton"
        return "grid"
    return _lookup(CPU_TABLE, lmax)
