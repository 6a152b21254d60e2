"""The table behind ``method="auto"``: which Gaunt method is fastest, per device and size.

The CPU entries were measured with ``python -m geomlin.gaunt.autotune`` (float32,
batch 1024 x 32 channels, ``torch.set_num_threads(1)``, lmax1 = lmax2 = lmax_out);
rerun it on another machine and paste its output here.  CUDA uses the fused
Triton kernel when Triton is installed and the sizes fit it, else ``"grid"``.
"""

from __future__ import annotations

import torch

#: Fastest method on CPU, keyed by ``max(lmax1, lmax2, lmax_out)`` (upper bounds, ascending).
#: Measured 2026-11-29 on the 2-core CI machine (medians, forward and forward + backward): dense wins
#: up to L = 6 (its three GEMMs beat the per-m batched GEMMs on small matrices; at L = 6 forward
#: is a tie and forward + backward favours dense), grid from L = 7 on.
CPU_TABLE: tuple[tuple[int, str], ...] = (
    (6, "dense"),
    (1_000_000, "grid"),
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


def measure(lmaxes=range(17), batch: int = 1024 * 32, reps: int = 5,
            methods=("dense", "grid", "fft", "direct")) -> list[tuple[int, str, dict]]:
    """Time every method (float32, one thread, process time) and return ``(L, fastest, {method: ms})``."""
    import time

    from geomlin.gaunt.product import gaunt_tensor_product

    torch.set_num_threads(1)
    rows = []
    for L in lmaxes:
        a, b = torch.randn(batch, (L + 1) ** 2), torch.randn(batch, (L + 1) ** 2)
        usable = [m for m in methods if not (m == "direct" and L > 3) and not (m == "fft" and L > 8)]
        times: dict = {m: [] for m in usable}
        for m in usable:
            gaunt_tensor_product(a, b, L, method=m)
        for _ in range(reps):
            for m in usable:
                t = time.process_time()
                gaunt_tensor_product(a, b, L, method=m)
                times[m].append(time.process_time() - t)
        med = {m: sorted(v)[len(v) // 2] * 1e3 for m, v in times.items()}
        rows.append((L, min(med, key=med.get), med))
    return rows


if __name__ == "__main__":
    for L, best, med in measure():
        print(L, best, {k: round(v, 1) for k, v in med.items()}, flush=True)
