"""Benchmark: geomlin GATr primitives and model against dense-einsum (reference-style) versions.

Peers, built in the same process from the same code with ``method="dense"``:

* geometric product: ``einsum("...i,...j,ijk->...k")`` with the 16^3 Cayley table (what the
  reference GATr does) vs geomlin's complex-matrix product;
* equivariant linear map: ``einsum("oib,bkl,...il->...ok")`` with the 9 basis maps vs the
  blocked per-component matmul;
* a 4-block GATr forward + backward (batch 8, 256 items, 16 multivector + 32 scalar channels)
  with every primitive dense vs fast (attention is one SDPA call in both).

Warm-up, then interleaved repetitions; medians in milliseconds and the speed-up ratio.

    python benchmarks/bench_gatr.py [--quick] [--threads N]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from tqdm import tqdm

from geomlin.gatr import GATr
from geomlin.gatr import primitives as P


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def compare(name: str, fast, dense, repeats: int, rows: list) -> None:
    fast(), dense()  # warm-up (tables, allocator)
    t_fast, t_dense = [], []
    for _ in tqdm(range(repeats), desc=name, leave=False):
        t_fast.append(timed(fast))
        t_dense.append(timed(dense))
    mf, md = statistics.median(t_fast) * 1e3, statistics.median(t_dense) * 1e3
    rows.append((name, md, mf, md / mf))


def main(argv=None) -> list:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (< 60 s)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    dev = args.device
    reps = 5 if args.quick else 15
    rows: list = []

    # the acceptance configuration; --quick shrinks only the batch
    B, N, C, S = (2 if args.quick else 8), 256, 16, 32
    x = torch.randn(B, N, C, 16, device=dev)
    y = torch.randn(B, N, C, 16, device=dev)
    compare(f"geometric product ({B}x{N}x{C} mv)", lambda: P.geometric_product(x, y),
            lambda: P.geometric_product(x, y, "dense"), reps * 2, rows)
    w = torch.randn(C, C, P.NUM_LINEAR_BASIS, device=dev)
    compare(f"equi_linear {C}->{C} ch ({B}x{N})", lambda: P.equi_linear(x, w), lambda: P.equi_linear(x, w, "dense"),
            reps * 2, rows)

    kwargs = {"in_mv_channels": 1, "out_mv_channels": 1, "hidden_mv_channels": C, "in_s_channels": 1,
                  "out_s_channels": 1, "hidden_s_channels": S, "num_blocks": 4, "num_heads": 4}
    fast = GATr(**kwargs).to(dev)
    dense = GATr(**kwargs, method="dense").to(dev)
    dense.load_state_dict(fast.state_dict())
    mv = torch.randn(B, N, 1, 16, device=dev)
    sc = torch.randn(B, N, 1, device=dev)
    with torch.no_grad():
        err = (fast(mv, sc)[0] - dense(mv, sc)[0]).abs().max().item()

    def step(model):
        def run():
            out_mv, out_s = model(mv, sc)
            (out_mv.square().mean() + out_s.square().mean()).backward()
        return run

    compare(f"GATr 4 blocks fwd+bwd (batch {B})", step(fast), step(dense), 3 if args.quick else 7, rows)

    print(f"\nGATr benchmark (batch {B}, {N} items, {C} mv + {S} scalar channels; CPU threads={args.threads}, "
          f"device={dev}; fast vs dense max |diff| {err:.1e})")
    print(f"{'case':34s} {'dense einsum ms':>16s} {'geomlin ms':>12s} {'speed-up':>9s}")
    for name, md, mf, ratio in rows:
        print(f"{name:34s} {md:16.2f} {mf:12.2f} {ratio:8.2f}x")
    return rows


if __name__ == "__main__":
    main()
