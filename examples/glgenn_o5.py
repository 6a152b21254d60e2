"""GLGENN vs CGENN on the O(5) regression of the GLGENN paper (Filimoshina and Shirokov 2025, Sec. 6.1).

Input: two vectors ``r1, r2`` in R^5; target ``sin|r1| - |r2|^3 / 2 + r1.r2 / (|r1| |r2|)``, an
O(5) invariant (the task of EMLP and CGENN). Both models embed the vectors in G(5,0,0), apply an
equivariant linear layer (2 -> 8 channels) and a geometric-product layer, and feed the 8 scalar
parts to an MLP (8 -> 380 -> 380 -> 1), the paper's architecture. CGENN shares weights per grade
(6 grades, 56 product paths), GLGENN per quaternion type (4 types, 32 paths). Reported: the
parameters of the Clifford part and in total, the test MSE at 300 and 3,000 training samples,
and the O(5) equivariance error of the trained models (from :mod:`geomlin.testing`, with the
outermorphism sampler of O(5)). The target has a heavy tail (``|r2|^3``): the MSE over a large
test set is dominated by a few extreme samples, so the table also gives the median squared error
and the MSE over the first 100 test samples (the test-set size of the paper's protocol).

    python examples/glgenn_o5.py [--quick] [--steps 3000] [--sizes 300 3000]
"""

from __future__ import annotations

import argparse
import datetime
import os
import shlex
import sys
import time

import torch
from torch import nn

from geomlin.algebra import CliffordAlgebra
from geomlin.clifford import GeometricProductLayer, MVLinear
from geomlin.groups import PseudoOrthogonalGroup
from geomlin.reps import Scalars, Vectors
from geomlin.testing import equivariance_error

O5 = CliffordAlgebra((1.0,) * 5)


def o5_data(n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` samples: vectors ``(n, 2, 5)`` (standard normal) and targets ``(n,)``."""
    x = torch.randn(n, 2, 5, generator=generator, dtype=torch.float64)
    n1, n2 = x[:, 0].norm(dim=-1), x[:, 1].norm(dim=-1)
    y = torch.sin(n1) - 0.5 * n2 ** 3 + (x[:, 0] * x[:, 1]).sum(-1) / (n1 * n2)
    return x, y


class O5Regressor(nn.Module):
    """MVLinear(2 -> 8) -> GeometricProductLayer(8) -> scalar parts -> MLP, as in the GLGENN paper."""

    def __init__(self, subspaces: str, channels: int = 8, hidden: int = 380):
        super().__init__()
        self.clifford = nn.Sequential(MVLinear(O5, 2, channels, subspaces=subspaces),
                                      GeometricProductLayer(O5, channels, channels, subspaces=subspaces))
        self.mlp = nn.Sequential(nn.Linear(channels, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                 nn.Linear(hidden, 1))

    def forward(self, vectors: torch.Tensor) -> torch.Tensor:
        """``vectors (..., 2, 5) -> (...)``."""
        return self.mlp(self.clifford(O5.embed_vector(vectors))[..., 0])[..., 0]


def train(model: nn.Module, x, y, steps: int, batch: int, lr: float, generator: torch.Generator) -> float:
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    start = time.perf_counter()
    for _ in range(steps):
        idx = torch.randint(len(x), (min(batch, len(x)),), generator=generator)
        loss = (model(x[idx]) - y[idx]).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    return time.perf_counter() - start


def header() -> str:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    command = "python " + " ".join(shlex.quote(a) for a in [os.path.relpath(sys.argv[0])] + sys.argv[1:])
    return (f"$ {command}\n# {datetime.datetime.now():%Y-%m-%d %H:%M}, torch {torch.__version__}, "
            f"{torch.get_num_threads()} thread(s), load average {load[0]:.1f}")


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[300, 3000], help="training-set sizes")
    parser.add_argument("--test", type=int, default=2000, help="test samples")
    parser.add_argument("--steps", type=int, default=3000, help="optimiser steps per run")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="300 steps, 500 test samples (under a minute)")
    args = parser.parse_args(argv)
    if args.quick:
        args.steps, args.test = 300, 500
    if min(args.sizes) < 1 or args.steps < 1 or args.test < 1 or args.batch < 1:
        parser.error("--sizes, --steps, --test and --batch must be positive")
    print(header())
    gen = torch.Generator().manual_seed(args.seed)
    x_test, y_test = o5_data(args.test, gen)
    results: dict = {}
    for size in args.sizes:
        x, y = o5_data(size, gen)
        # equivariant standardisation: one scale per input vector slot, targets by mean and std
        scale = x.square().mean((0, 2)).sqrt()[:, None]
        y_mean, y_std = y.mean(), y.std()
        xs, ys = (x / scale).float(), ((y - y_mean) / y_std).float()
        for name, subspaces in (("CGENN", "grade"), ("GLGENN", "quaternion")):
            torch.manual_seed(args.seed)
            model = O5Regressor(subspaces)
            seconds = train(model, xs, ys, args.steps, args.batch, args.lr, gen)
            model = model.double().eval()
            with torch.no_grad():
                pred = model(x_test / scale) * y_std + y_mean
                sq = (pred - y_test).square()
            err = equivariance_error(lambda v, m=model: m(v)[..., None], PseudoOrthogonalGroup(O5), Vectors(5),
                                     Scalars(1), inputs=x_test[:64] / scale, num_samples=5)
            results[(name, size)] = {
                "clifford params": sum(p.numel() for p in model.clifford.parameters()),
                "params": sum(p.numel() for p in model.parameters()),
                "test MSE": sq.mean().item(), "median": sq.median().item(), "MSE 100": sq[:100].mean().item(),
                "seconds": seconds, "equivariance error": err}
    print(f"\nO(5) regression, {args.steps} steps of batch {args.batch}, {args.test} test samples "
          f"(target variance {y_test.var().item():.2f})\n")
    print(f"| model | train samples | Clifford params | total params | test MSE ({args.test}) | median sq. error "
          "| MSE, first 100 | O(5) equivariance error | train s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for (name, size), r in results.items():
        print(f"| {name} | {size} | {r['clifford params']} | {r['params']} | {r['test MSE']:.4f} | {r['median']:.5f} | "
              f"{r['MSE 100']:.4f} | {r['equivariance error']:.1e} | {r['seconds']:.0f} |")
    return results


if __name__ == "__main__":
    torch.set_num_threads(1)  # small tensors: threads cost more than they give
    main()
