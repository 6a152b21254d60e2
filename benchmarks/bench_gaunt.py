"""Benchmark: geomlin Gaunt tensor products against e3nn and the dense sphere-grid GEMM.

Batch 1024 x 32 channels, float32, lmax1 = lmax2 = lmax_out = L.  Peers, timed
interleaved in one process after a warm-up, medians reported:

* ``e3nn Gaunt TP``: ``o3.TensorProduct`` with mode "uuu" on every Gaunt path
  (l1 + l2 + l3 even), ``path_weight = c**2`` and normalizations "none" (e3nn
  applies ``sqrt(path_weight) = c``), i.e. exactly the same map (checked below);
* ``dense GEMM``: ``((x1 @ Y1) * (x2 @ Y2)) @ (w Y3)`` on the smallest exact grid;
* ``e3nn Full TP``: ``o3.FullTensorProduct`` per channel, all CG paths (context only).

Usage: ``python benchmarks/bench_gaunt.py [--quick] [--threads 1 2] [--e3nn-max 8]``.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from functools import partial

import torch
from e3nn import o3
from tqdm import tqdm

from geomlin.gaunt import gaunt_tensor_product, irreps_to_sphere, sphere_irreps, sphere_to_irreps
from geomlin.gaunt.autotune import choose_method
from geomlin.gaunt.product import _dense_tables


def threej_000(l1, l2, l3):
    J = l1 + l2 + l3
    g = J // 2
    f = math.factorial
    return math.sqrt(f(J - 2 * l1) * f(J - 2 * l2) * f(J - 2 * l3) / f(J + 1)) * f(g) / (
        f(g - l1) * f(g - l2) * f(g - l3))


def e3nn_gaunt_tp(L: int, channels: int):
    irreps = sphere_irreps(L, channels)
    instructions = []
    for i1, (_, ir1) in enumerate(irreps):
        for i2, (_, ir2) in enumerate(irreps):
            for i3, (_, ir3) in enumerate(irreps):
                l1, l2, l3 = ir1.l, ir2.l, ir3.l
                if (l1 + l2 + l3) % 2 or not abs(l1 - l2) <= l3 <= l1 + l2:
                    continue
                c = math.sqrt((2 * l1 + 1) * (2 * l2 + 1) * (2 * l3 + 1) / (4 * math.pi)) * threej_000(l1, l2, l3)
                instructions.append((i1, i2, i3, "uuu", False, c * c))
    return o3.TensorProduct(irreps, irreps, irreps, instructions, irrep_normalization="none",
                            path_normalization="none")


def dense_gemm(L: int, dtype):
    Y1, Y2, W = (t.to(dtype) for t in _dense_tables(L, L, L))
    return lambda a, b: ((a @ Y1) * (b @ Y2)) @ W


def check_e3nn_equivalence():
    L, C = 2, 3
    tp = e3nn_gaunt_tp(L, C).double()
    x1 = torch.randn(4, C, (L + 1) ** 2, dtype=torch.float64)
    x2 = torch.randn(4, C, (L + 1) ** 2, dtype=torch.float64)
    ref = irreps_to_sphere(tp(sphere_to_irreps(x1), sphere_to_irreps(x2)), sphere_irreps(L, C))
    err = (ref - gaunt_tensor_product(x1, x2, L, method="direct")).abs().max().item()
    assert err < 1e-6, f"e3nn Gaunt TP does not match geomlin: {err}"  # e3nn keeps float32 3j tables


def timed(fn, backward: bool) -> float:
    t = time.perf_counter()
    out = fn()
    if backward:
        out.backward(torch.ones_like(out))
    return time.perf_counter() - t


def run(lmaxes, batch, channels, reps, threads, e3nn_max, full_max, fft_max, backward):
    torch.set_num_threads(threads)
    rows = []
    for L in tqdm(lmaxes, desc=f"{threads} thread(s), {'fwd+bwd' if backward else 'fwd'}", leave=False):
        D = (L + 1) ** 2
        x1 = torch.randn(batch, channels, D, requires_grad=backward)
        x2 = torch.randn(batch, channels, D, requires_grad=backward)
        flat1 = x1.detach().reshape(-1, D).requires_grad_(backward)
        flat2 = x2.detach().reshape(-1, D).requires_grad_(backward)
        auto = choose_method(L, L, L, "cpu", torch.float32)
        fns = {"auto": partial(gaunt_tensor_product, x1, x2, L, method="auto"),
               "grid": partial(gaunt_tensor_product, x1, x2, L, method="grid")}
        if L <= fft_max:
            fns["fft"] = partial(gaunt_tensor_product, x1, x2, L, method="fft")
        fns["dense GEMM"] = partial(dense_gemm(L, torch.float32), flat1, flat2)
        notes = {}
        if L <= e3nn_max:
            t0 = time.perf_counter()
            tp = e3nn_gaunt_tp(L, channels)
            notes["e3nn build s"] = time.perf_counter() - t0
            e1 = sphere_to_irreps(x1.detach()).requires_grad_(backward)
            e2 = sphere_to_irreps(x2.detach()).requires_grad_(backward)
            fns["e3nn Gaunt TP"] = partial(tp, e1, e2)
        if L <= full_max:
            full = o3.FullTensorProduct(sphere_irreps(L, 1), sphere_irreps(L, 1))
            fns["e3nn Full TP"] = partial(full, flat1, flat2)
        for fn in fns.values():  # warm-up
            timed(fn, backward)
        times = {k: [] for k in fns}
        for _ in range(reps):
            for k, fn in fns.items():
                times[k].append(timed(fn, backward))
        med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
        rows.append((L, auto, med, notes))
    return rows


COLUMNS = ("auto", "grid", "fft", "dense GEMM", "e3nn Gaunt TP", "e3nn Full TP")


def print_table(rows, title):
    print(f"\n{title}")
    head = "| L | auto picks | " + " | ".join(f"{c} ms" for c in COLUMNS)
    head += " | auto vs e3nn Gaunt | auto vs dense | auto vs best |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for L, auto, med, _ in rows:
        cells = [f"{med[c]:.1f}" if c in med else "skipped" for c in COLUMNS]
        best = min(med[c] for c in ("grid", "fft", "dense GEMM") if c in med)
        e3 = f"{med['e3nn Gaunt TP'] / med['auto']:.1f}x" if "e3nn Gaunt TP" in med else "skipped (e3nn cap)"
        print(f"| {L} | {auto} | " + " | ".join(cells)
              + f" | {e3} | {med['dense GEMM'] / med['auto']:.2f}x | {med['auto'] / best:.2f} of best |")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes, < 60 s")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--e3nn-max", type=int, default=8,
                        help="largest L for the e3nn Gaunt TP (its construction and runs are slow at high L)")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--lmax", type=int, nargs="+", default=None, help="degrees to run (default 1 2 4 6 8 12 16)")
    parser.add_argument("--forward-only", action="store_true")
    parser.add_argument("--fft-max", type=int, default=8, help="largest L for the (slow on CPU) fft method")
    args = parser.parse_args()
    torch.manual_seed(0)
    check_e3nn_equivalence()
    if args.quick:
        lmaxes, batch, reps, threads, e3nn_max, full_max, fft_max = [1, 4, 8], 128, 3, [1], 4, 2, 4
    else:
        lmaxes, batch, reps, threads = args.lmax or [1, 2, 4, 6, 8, 12, 16], 1024, args.reps, args.threads
        e3nn_max, full_max, fft_max = args.e3nn_max, 4, args.fft_max
    print(f"batch {batch} x 32 channels, float32, lmax1 = lmax2 = lmax_out = L; medians of {reps} interleaved runs; "
          f"e3nn Gaunt TP skipped above L = {e3nn_max} (construction and run time), "
          f"Full TP above {full_max} (context only), fft above {fft_max} (slowest method here)")
    for n in threads:
        for backward in (False,) if args.forward_only else (False, True):
            rows = run(lmaxes, batch, 32, reps, n, e3nn_max, full_max, fft_max, backward)
            print_table(rows, f"{'forward + backward' if backward else 'forward'}, {n} thread(s)")


if __name__ == "__main__":
    main()
