"""The tables behind ``method="auto"``: which Gaunt method is fastest, per device, size and channel pattern.

``CPU_TABLE`` (two inputs with one function per channel each) and ``CPU_SHARED_TABLE`` (one input
shared by every channel, ``(N, 1, D2)`` against ``(N, C, D1)``: the spherical harmonics of an edge in a
convolution) were measured with ``python -m geomlin.gaunt.autotune`` ([`geomlin.gaunt.autotune`][]:
float32, one thread, ``lmax_in1 = lmax_in2 = lmax_out = L``, forward and forward + backward, thread CPU time
so that other processes on a shared machine disturb it less); rerun it on another machine and paste
its output here.

``CUDA_TABLE`` is empty: no GPU was available when this was written, so nothing is measured and
``"auto"`` on CUDA runs the ``"grid"`` route (cuBLAS GEMMs) rather than claim that the Triton
kernel wins.  Fill the table from ``python -m geomlin.gaunt.autotune --device cuda`` on a GPU
(same format); then ``"auto"`` picks ``"triton"`` where it is listed.
"""

from __future__ import annotations

import torch

#: Fastest method on CPU, keyed by ``max(lmax_in1, lmax_in2, lmax_out)`` (upper bounds, ascending).
CPU_TABLE: tuple[tuple[int, str], ...] = (
    (5, "dense"),
    (1_000_000, "grid"),
)

#: Fastest method on CPU when one input is shared by every channel (same format). Measured (32
#: channels): ``"direct"`` wins forward up to L = 9 and forward + backward up to L = 10; the bound
#: stays at 8, where its per-row operator ``(Do, D1)`` is still within ~2.5x the channels' own data.
CPU_SHARED_TABLE: tuple[tuple[int, str], ...] = (
    (8, "direct"),
    (1_000_000, "grid"),
)

#: Largest grid degree ``nu L + lmax_out`` at which Gaunt powers ([`geomlin.gaunt.powers.power_sum`][])
#: run as plain GEMMs on the full sphere grid on the CPU, rather than through the half-grid transforms.
#: Measured (4,096 functions, forward + backward, one thread): the GEMMs win 1.2-15x from degree 6
#: (L = 2, nu = 2) to 24 (L = 8, nu = 2; L = 6, nu = 3).
CPU_POWER_DENSE_MAX_DEGREE = 24

#: Fastest method on CUDA, same format; empty until measured on a GPU (see the module docstring).
CUDA_TABLE: tuple[tuple[int, str], ...] = ()

#: What ``"auto"`` uses on a device without a measured table.
DEFAULT_METHOD = "grid"
#: What ``"auto"`` uses inside ``torch.compile`` / ``torch.export`` graphs: the plain sphere-grid GEMMs,
#: functional operators that the compiler fuses (the grid route's reused workspaces write through
#: ``out=`` views, which dynamo does not trace). A shared input within ``CPU_SHARED_TABLE``'s
#: ``"direct"`` sizes keeps ``"direct"`` there (plain GEMMs too).
TRACED_METHOD = "dense"


def _lookup(table, lmax: int) -> str:
    for bound, method in table:
        if lmax <= bound:
            return method
    return table[-1][1] if table else DEFAULT_METHOD


def choose_method(lmax_in1: int, lmax_in2: int, lmax_out: int, device_type: str, dtype: torch.dtype,
                  shared: bool = False) -> str:
    """Method name ``"auto"`` resolves to for these sizes on ``device_type`` (``"cpu"``, ``"cuda"``).

    ``shared``: one input is shared by every channel (see the module docstring).
    """
    lmax = max(lmax_in1, lmax_in2, lmax_out)
    direct_shared = shared and _lookup(CPU_SHARED_TABLE, lmax) == "direct"
    if torch.compiler.is_compiling():
        return "direct" if direct_shared else TRACED_METHOD
    if device_type == "cuda":
        method = _lookup(CUDA_TABLE, lmax)
        if method == "triton":
            from geomlin.gaunt.kernels import triton_supports

            if not triton_supports(lmax_in1, lmax_in2, lmax_out, dtype):
                return DEFAULT_METHOD
        return method
    if device_type == "cpu":
        return _lookup(CPU_SHARED_TABLE if shared else CPU_TABLE, lmax)
    return DEFAULT_METHOD


def choose_power_method(lmax: int, nu: int, lmax_out: int, device_type: str) -> str:
    """``"dense"`` (GEMMs on the full sphere grid) or ``"grid"`` (half-grid transforms) for a Gaunt power
    ``f^nu`` of degree ``lmax`` projected to ``lmax_out``: dense inside compiled graphs and on the CPU up
    to [`CPU_POWER_DENSE_MAX_DEGREE`][], the grid route elsewhere (unmeasured devices included)."""
    if torch.compiler.is_compiling():
        return "dense"
    if device_type == "cpu" and nu * lmax + lmax_out <= CPU_POWER_DENSE_MAX_DEGREE:
        return "dense"
    return "grid"
