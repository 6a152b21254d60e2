"""Measure which Gaunt method is fastest per degree: the benchmark that fills [`geomlin.gaunt.method_tables`][].

``python -m geomlin.gaunt.autotune [--device cuda] [--backward] [--shared]`` prints one line per
degree ``L`` (``lmax_in1 = lmax_in2 = lmax_out = L``): the fastest method and every method's median time in
ms; paste the result into ``CPU_TABLE`` / ``CPU_SHARED_TABLE`` / ``CUDA_TABLE``. ``--shared`` times
the channel pattern of a convolution (``x2 (N, 1, D)`` shared by the channels of ``x1 (N, C, D)``).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from geomlin.gaunt.product import DIRECT_MAX_DEGREE, gaunt_tensor_product

#: Channels of the shared pattern (``--shared``).
SHARED_CHANNELS = 32


def measure(lmaxes=range(13), batch: int = 1024 * 32, repeats: int = 5, device: str = "cpu",
            methods=("dense", "grid", "fft", "triton", "direct"), backward: bool = False,
            shared: bool = False) -> list[tuple[int, str, dict]]:
    """Time the methods (float32) and return ``(L, fastest, {method: ms})`` per degree.

    ``batch`` rows of one function each, or with ``shared`` ``batch // SHARED_CHANNELS`` rows of
    [`SHARED_CHANNELS`][] functions times one shared function. ``"direct"`` is timed where its
    Gaunt tensor is built (total degree up to [`DIRECT_MAX_DEGREE`][geomlin.gaunt.product.DIRECT_MAX_DEGREE]).
    Library code never changes process-wide settings: set the threads before calling
    (``python -m geomlin.gaunt.autotune`` runs single-threaded).
    """
    rows = []
    for L in lmaxes:
        usable = [m for m in methods if (m != "triton" or device == "cuda") and (m != "direct" or 3 * L <= DIRECT_MAX_DEGREE)]
        D = (L + 1) ** 2
        if shared:
            n = max(batch // SHARED_CHANNELS, 1)
            x1 = torch.randn(n, SHARED_CHANNELS, D, device=device, requires_grad=backward)
            x2 = torch.randn(n, 1, D, device=device, requires_grad=backward)
        else:
            x1 = torch.randn(batch, D, device=device, requires_grad=backward)
            x2 = torch.randn(batch, D, device=device, requires_grad=backward)

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
    parser.add_argument("--shared", action="store_true",
                        help=f"x2 (N, 1, D) shared by the {SHARED_CHANNELS} channels of x1 (N, C, D)")
    args = parser.parse_args(argv)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a command-line entry point: timings on one thread, restored afterwards
    try:
        for L, best, med in measure(args.lmax, args.batch, device=args.device, backward=args.backward,
                                      shared=args.shared):
            print(L, best, {k: round(v, 1) for k, v in med.items()}, flush=True)
    finally:
        torch.set_num_threads(threads)


if __name__ == "__main__":
    main()
