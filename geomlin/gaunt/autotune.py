"""The tables behind ``method="auto"``: which Gaunt method is fastest, per device and size.

``CPU_TABLE`` was measured with ``python -m geomlin.gaunt.autotune`` (float32, batch 1024 x 32
channels, one thread, ``lmax1 = lmax2 = lmax_out = L``, forward and forward + backward, thread
CPU time so that other processes on a shared machine disturb it less); rerun it on another
machine and paste its output here.

``CUDA_TABLE`` is empty: no GPU was available when this was written, so nothing is measured and
``"auto"`` on CUDA runs the ``"grid"`` route (cuBLAS GEMMs) rather than claim that the Triton
kernel wins.  Fill the table from ``python -m geomlin.gaunt.autotune --device cuda`` on a GPU
(same format); then ``"auto"`` picks ``"triton"`` where it is listed.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

#: Fastest method on CPU, keyed by ``max(lmax1, lmax2, lmax_out)`` (upper bounds, ascending).
CPU_TABLE: tuple[tuple[int, str], ...] = (
    (5, "dense"),
    (1_000_000, "grid"),
)

#: Fastest method on CUDA, same format; empty until measured on a GPU (see the module docstring).
CUDA_TABLE: tuple[tuple[int, str], ...] = ()

#: What ``"auto"`` uses on a device without a measured table.
DEFAULT_METHOD = "grid"
#: What ``"auto"`` uses inside ``torch.compile`` / ``torch.export`` graphs: the plain sphere-grid GEMMs,
#: functional operators that the compiler fuses (the grid route's reused workspaces write through
#: ``out=`` views, which dynamo does not trace).
TRACED_METHOD = "dense"


def _lookup(table, lmax: int) -> str:
    for bound, method in table:
        if lmax <= bound:
            return method
    return table[-1][1] if table else DEFAULT_METHOD


def choose_method(lmax1: int, lmax2: int, lmax_out: int, device_type: str, dtype: torch.dtype) -> str:
    """Method name ``"auto"`` resolves to for these sizes on ``device_type`` (``"cpu"``, ``"cuda"``)."""
    if torch.compiler.is_compiling():
        return TRACED_METHOD
    lmax = max(lmax1, lmax2, lmax_out)
    if device_type == "cuda":
        method = _lookup(CUDA_TABLE, lmax)
        if method == "triton":
            from geomlin.gaunt.kernels import triton_supports

            if not triton_supports(lmax1, lmax2, lmax_out, dtype):
                return DEFAULT_METHOD
        return method
    if device_type == "cpu":
        return _lookup(CPU_TABLE, lmax)
    return DEFAULT_METHOD


def measure(lmaxes=range(13), batch: int = 1024 * 32, repeats: int = 5, device: str = "cpu",
            methods=("dense", "grid", "fft", "triton"), backward: bool = False) -> list[tuple[int, str, dict]]:
    """Time the methods (float32) and return ``(L, fastest, {method: ms})`` per degree.

    Library code never changes process-wide settings: set the threads before calling
    (``python -m geomlin.gaunt.autotune`` runs single-threaded).
    """
    from geomlin.gaunt.product import gaunt_tensor_product

    usable = [m for m in methods if m != "triton" or device == "cuda"]
    rows = []
    for L in lmaxes:
        x1 = torch.randn(batch, (L + 1) ** 2, device=device, requires_grad=backward)
        x2 = torch.randn(batch, (L + 1) ** 2, device=device, requires_grad=backward)

        def run(method, x1=x1, x2=x2, L=L):
            out = gaunt_tensor_product(x1, x2, L, method=method)
            if backward:
                out.backward(torch.ones_like(out))
            if device == "cuda":
                torch.cuda.synchronize()

        clock = time.thread_time if device == "cpu" else time.perf_counter
        times: dict = {m: [] for m in usable}
        for m in usable:
            run(m)
        for _ in range(repeats):
            for m in usable:
                t = clock()
                run(m)
                times[m].append(clock() - t)
        med = {m: statistics.median(v) * 1e3 for m, v in times.items()}
        rows.append((L, min(med, key=med.get), med))
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="measure which Gaunt method is fastest per degree")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--lmax", type=int, nargs="+", default=list(range(13)))
    parser.add_argument("--batch", type=int, default=1024 * 32)
    parser.add_argument("--backward", action="store_true", help="time forward + backward")
    args = parser.parse_args(argv)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a command-line entry point: timings on one thread, restored afterwards
    try:
        for L, best, med in measure(args.lmax, args.batch, device=args.device, backward=args.backward):
            print(L, best, {k: round(v, 1) for k, v in med.items()}, flush=True)
    finally:
        torch.set_num_threads(threads)


if __name__ == "__main__":
    main()
