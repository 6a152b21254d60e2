"""Geometric-algebra attention tells left- from right-handed helices; parity-invariant layers cannot.

Each sample is a chain of 8 noisy points along a helix, left- or right-handed, randomly rotated
and translated; the label is its handedness. The chain's 7 bond vectors ``p_{i+1} - p_i``
(translation invariant) go through a :class:`~geomlin.clifford.GAAttention` layer (reduce=True,
an invariant summary; each bond's value is an embedding of its place in the chain, merged per
tuple slot with ``merge_fun="concat"``) and an MLP classifier. Rank-3 products carry ``det[a b c]``, which changes sign under
reflections: the default layer is SO(3)-invariant and can learn chirality. With
``parity_invariant=True`` (``|det|``) or at rank 2 the layer is O(3)-invariant, so mirror
images look identical and accuracy stays at chance: chirality is a choice, made explicit.
The last table times a rank-3 layer with ``reduce=False`` on larger clouds, densely
(``N^3`` tuples) and restricted to ``k`` neighbours (``N k^2``).

    python examples/ga_attention_chirality.py [--quick] [--train 2000] [--steps 600]
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import shlex
import sys
import time

import torch
from torch import nn

from geomlin.clifford import GAAttention, GAVectorAttention, neighborhoods
from geomlin.clifford.tuple_products import invariant_count
from geomlin.groups import SO

POINTS = 8
WIDTH = 16


def helices(n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` helices ``(n, 8, 3)`` (rotated, translated, noisy) and their handedness ``(n,)`` in {0, 1}."""
    label = torch.randint(2, (n,), generator=generator)
    t = torch.linspace(0, 1.5 * math.pi, POINTS)[None] + torch.rand(n, 1, generator=generator) * 2 * math.pi
    hand = (2 * label - 1).float()[:, None]
    pts = torch.stack([torch.cos(t), hand * torch.sin(t), 0.3 * t], -1)
    pts = pts + 0.05 * torch.randn(pts.shape, generator=generator)
    R = SO(3).sample(n, generator=generator, dtype=torch.float32)
    pts = pts @ R.transpose(1, 2) + 3 * torch.randn(n, 1, 3, generator=generator)
    return pts, label


def mlp(d_in: int, d_out: int) -> nn.Module:
    return nn.Sequential(nn.Linear(d_in, 32), nn.SiLU(), nn.Linear(32, d_out))


class HelixClassifier(nn.Module):
    """Bond vectors, place-in-chain embeddings -> GAAttention -> MLP -> logit."""

    def __init__(self, rank: int, parity_invariant: bool):
        super().__init__()
        value = mlp(invariant_count(rank, "partial"), WIDTH)
        self.place = nn.Embedding(POINTS - 1, WIDTH)
        self.attention = GAAttention(WIDTH, mlp(WIDTH, 1), value, rank=rank, invariant_mode="partial",
                                     merge_fun="concat", parity_invariant=parity_invariant)
        self.head = nn.Sequential(nn.BatchNorm1d(WIDTH), mlp(WIDTH, 1))  # the summary varies little across clouds

    def forward(self, pos: torch.Tensor) -> torch.Tensor:
        r = pos[..., 1:, :] - pos[..., :-1, :]  # bond vectors (..., 7, 3)
        v = self.place.weight.to(r.dtype).expand(*r.shape[:-1], WIDTH)
        return self.head(self.attention(r, v))[..., 0]


def fit(model: nn.Module, x, y, steps: int, batch: int, generator: torch.Generator) -> float:
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    start = time.perf_counter()
    for _ in range(steps):
        idx = torch.randint(len(x), (batch,), generator=generator)
        loss = nn.functional.binary_cross_entropy_with_logits(model(x[idx]), y[idx].float())
        opt.zero_grad()
        loss.backward()
        opt.step()
    return time.perf_counter() - start


def header() -> str:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    command = "python " + " ".join(shlex.quote(a) for a in [os.path.relpath(sys.argv[0])] + sys.argv[1:])
    return (f"$ {command}\n# {datetime.datetime.now():%Y-%m-%d %H:%M}, torch {torch.__version__}, "
            f"{torch.get_num_threads()} thread(s), load average {load[0]:.1f}")


def timing(n: int, k: int | None, repeats: int = 3) -> float:
    """Median seconds of one rank-3, reduce=False vector-attention forward on ``n`` points."""
    layer = GAVectorAttention(8, mlp(8, 1), mlp(invariant_count(3, "single"), 8), mlp(8, 1), rank=3, reduce=False)
    pos = torch.randn(1, n, 3)
    v = torch.randn(1, n, 8)
    nb = neighborhoods(pos, k=k) if k else None
    times = []
    with torch.no_grad():
        for _ in range(repeats + 1):
            t0 = time.perf_counter()
            layer(pos, v, neighbors=nb)
            times.append(time.perf_counter() - t0)
    return sorted(times[1:])[len(times[1:]) // 2]


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=int, default=2000)
    parser.add_argument("--test", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="fewer samples and steps (under a minute)")
    parser.add_argument("--no-timing", action="store_true", help="skip the timing table")
    args = parser.parse_args(argv)
    if args.quick:
        args.train, args.test, args.steps = 500, 300, 150
    if min(args.train, args.test, args.steps, args.batch) < 1:
        parser.error("--train, --test, --steps and --batch must be positive")
    print(header())
    gen = torch.Generator().manual_seed(args.seed)
    x, y = helices(args.train, gen)
    x_test, y_test = helices(args.test, gen)
    models = {"rank 3 (SO(3), chiral)": (3, False), "rank 3, parity_invariant (O(3))": (3, True),
              "rank 2 (O(3))": (2, False)}
    results = {}
    for name, (rank, parity) in models.items():
        torch.manual_seed(args.seed)
        model = HelixClassifier(rank, parity)
        seconds = fit(model, x, y, args.steps, args.batch, gen)
        model.eval()
        with torch.no_grad():
            accuracy = ((model(x_test) > 0).long() == y_test).float().mean().item()
            mirrored = x_test * torch.tensor([1.0, 1.0, -1.0])
            flips = ((model(mirrored) > 0) != (model(x_test) > 0)).float().mean().item()
        results[name] = {"params": sum(p.numel() for p in model.parameters()), "accuracy": accuracy,
                         "mirror flips": flips, "seconds": seconds}
    print(f"\nHelix handedness, {args.train} train / {args.test} test clouds of {POINTS} points, "
          f"{args.steps} steps of batch {args.batch}\n")
    print("| layer | params | test accuracy | predictions flipped by a mirror | train s |")
    print("|---|---:|---:|---:|---:|")
    for name, r in results.items():
        print(f"| {name} | {r['params']} | {r['accuracy']:.3f} | {r['mirror flips']:.3f} | {r['seconds']:.0f} |")
    if args.no_timing:
        return results
    sizes = [(32, None), (32, 8), (128, 8)] if args.quick else [(32, None), (64, None), (64, 8), (256, 8), (1024, 8)]
    print("\nRank-3 vector attention, reduce=False, one cloud (median of 3 forward passes)\n")
    print("| points N | neighbours k | tuples | forward ms |")
    print("|---:|---:|---:|---:|")
    for n, k in sizes:
        ms = 1e3 * timing(n, k)
        tuples = n ** 3 if k is None else n * k * k
        results[("timing", n, k)] = ms
        print(f"| {n} | {'all' if k is None else k} | {tuples} | {ms:.1f} |")
    return results


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
