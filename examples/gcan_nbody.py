"""N-body with GCAN, CGENN and GATr on G(3,0,1), at the same parameter budget.

Each of the 5 charged particles becomes multivectors: its position as a point, its velocity as an
ideal point (a direction), its charge as a scalar. GCAN (Ruhe et al. 2023) and CGENN treat the
15 multivectors of a system as channels: a :class:`~geomlin.clifford.GCAMLP` combines learned
rigid motions of them (a geometric template, not equivariant); the CGENN network (MVLinear,
CGENN blocks, MVLinear) is equivariant to O(3,0,1), similarities included. GATr treats
particles as items and attends between them (E(3)-equivariant). Each predicts every particle's
position after the horizon as a point (residual on the input point). All three are trained for
the same steps; the test error is measured on the test set and on the test set moved by random
E(3) elements (rotations, reflections, translations): the equivariant models do not move, GCAN
does.

    python examples/gcan_nbody.py [--quick] [--train 2000] [--epochs 30]
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

from geomlin.algebra import pga
from geomlin.clifford import GCAMLP, CGENNBlock, MVLinear
from geomlin.datasets import NBody
from geomlin.gatr import GATr
from geomlin.groups import E3, transform_positions, transform_vectors

PARTICLES = 5


def stacked(ds: NBody) -> tuple[torch.Tensor, ...]:
    """``pos, vel, charges, target`` stacked to ``(M, n, 3)`` / ``(M, n, 1)``."""
    items = [ds[i] for i in range(len(ds))]
    return tuple(torch.stack([getattr(d, k) for d in items]) for k in ("pos", "vel", "charges", "target_pos"))


def embed(pos, vel, charges) -> tuple[torch.Tensor, torch.Tensor]:
    """Per particle ``(M, n, 3, 16)``: point, velocity direction, charge; and the points ``(M, n, 16)``."""
    point = pga.embed_point(pos)
    direction = pga.embed_point(pos + vel) - point  # ideal point: e0ij part only
    return torch.stack([point, direction, pga.embed_scalar(charges)], -2), point


class GCANNBody(nn.Module):
    """GCA-MLP over the 15 multivectors of a system -> 5 displacement multivectors."""

    def __init__(self, hidden: int, num_blocks: int = 3):
        super().__init__()
        self.net = GCAMLP(pga.PGA, 3 * PARTICLES, PARTICLES, hidden, num_blocks=num_blocks, versor="exp")
        with torch.no_grad():  # start from the static prediction (the residual's zero)
            self.net.net[-1].weight.zero_()

    def forward(self, pos, vel, charges):
        mv, point = embed(pos, vel, charges)
        out = self.net(mv.flatten(-3, -2))  # (M, 5, 16)
        return pga.extract_point(point + out)


class CGENNNBody(nn.Module):
    """MVLinear(15 -> h), ``num_blocks`` CGENN blocks, MVLinear(h -> 5) on G(3,0,1)."""

    def __init__(self, hidden: int, num_blocks: int = 2, subspaces: str = "grade"):
        super().__init__()
        self.inp = MVLinear(pga.PGA, 3 * PARTICLES, hidden, subspaces=subspaces)
        self.blocks = nn.Sequential(*[CGENNBlock(pga.PGA, hidden, subspaces=subspaces) for _ in range(num_blocks)])
        self.out = MVLinear(pga.PGA, hidden, PARTICLES, subspaces=subspaces)
        with torch.no_grad():  # start from the static prediction (the residual's zero)
            self.out.weight.zero_()

    def forward(self, pos, vel, charges):
        mv, point = embed(pos, vel, charges)
        out = self.out(self.blocks(self.inp(mv.flatten(-3, -2))))
        return pga.extract_point(point + out)


class GATrNBody(nn.Module):
    """GATr over the particles: points + velocity directions + charges -> moved points."""

    def __init__(self, hidden_mv: int, hidden_s: int, num_blocks: int = 2):
        super().__init__()
        self.net = GATr(2, 1, hidden_mv, in_s_channels=1, out_s_channels=1, hidden_s_channels=hidden_s,
                        num_blocks=num_blocks, num_heads=2)

    def forward(self, pos, vel, charges):
        mv, point = embed(pos, vel, charges)
        out, _ = self.net(mv[..., :2, :], charges)
        return pga.extract_point(point + out[..., 0, :])


def count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def matched(build, budget: int, start: int = 2) -> nn.Module:
    """The smallest ``build(h)`` with at least ``budget`` parameters."""
    h = start
    while count(model := build(h)) < budget:
        h += 1
    return model


def train(model, data, epochs: int, batch: int, lr: float) -> float:
    pos, vel, q, target = data
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, epochs)
    start = time.perf_counter()
    for _ in range(epochs):
        perm = torch.randperm(len(pos))
        for i in range(0, len(pos), batch):
            idx = perm[i:i + batch]
            loss = (model(pos[idx], vel[idx], q[idx]) - target[idx]).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        sched.step()
    return time.perf_counter() - start


@torch.no_grad()
def evaluate(model, data, g=None) -> float:
    pos, vel, q, target = data
    if g is not None:  # one random E(3) element per test system
        pos, vel, target = transform_positions(g, pos), transform_vectors(g, vel), transform_positions(g, target)
    return (model(pos, vel, q) - target).square().mean().item()


def header() -> str:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    command = "python " + " ".join(shlex.quote(a) for a in [os.path.relpath(sys.argv[0])] + sys.argv[1:])
    return (f"$ {command}\n# {datetime.datetime.now():%Y-%m-%d %H:%M}, torch {torch.__version__}, "
            f"{torch.get_num_threads()} thread(s), load average {load[0]:.1f}")


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=int, default=2000)
    parser.add_argument("--test", type=int, default=500)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--quick", action="store_true", help="small data, few epochs (about a minute)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hidden-mv", type=int, default=8, help="GATr's multivector channels (sets the budget)")
    parser.add_argument("--hidden-s", type=int, default=16, help="GATr's scalar channels")
    args = parser.parse_args(argv)
    if args.quick:
        args.train, args.test, args.epochs = 200, 100, 4
    if min(args.train, args.test, args.epochs, args.batch, args.hidden_mv, args.hidden_s) < 1:
        parser.error("--train, --test, --epochs, --batch, --hidden-mv and --hidden-s must be positive")
    print(header())
    torch.manual_seed(args.seed)
    sim = {"burn_in_steps": 1000 if not args.quick else 200, "horizon_steps": 1000 if not args.quick else 300}
    train_data = stacked(NBody(args.train, num_particles=PARTICLES, seed=args.seed, **sim))
    test_data = stacked(NBody(args.test, num_particles=PARTICLES, seed=args.seed + 1, **sim))

    gatr = GATrNBody(hidden_mv=args.hidden_mv, hidden_s=args.hidden_s)
    budget = count(gatr)
    models = {"GATr": gatr,
              "CGENN": matched(lambda h: CGENNNBody(h), budget),
              "GLGENN": matched(lambda h: CGENNNBody(h, subspaces="quaternion"), budget),
              "GCAN": matched(lambda h: GCANNBody(h), budget)}
    g = E3().sample(args.test, dtype=torch.float32)
    static = (test_data[0] - test_data[3]).square().mean().item()
    results = {}
    for name, model in models.items():
        torch.manual_seed(args.seed)
        seconds = train(model, train_data, args.epochs, args.batch, args.lr)
        model.eval()
        results[name] = {"params": count(model), "seconds": seconds, "test_mse": evaluate(model, test_data),
                         "test_mse_E3": evaluate(model, test_data, g)}
    print(f"\nN-body ({PARTICLES} particles, {args.train} train / {args.test} test systems, {args.epochs} epochs; "
          f"static-prediction MSE {static:.4f})\n")
    print("| model | params | train s | test MSE | test MSE, E(3)-moved |")
    print("|---|---:|---:|---:|---:|")
    for name, r in results.items():
        print(f"| {name} | {r['params']} | {r['seconds']:.0f} | {r['test_mse']:.4f} | {r['test_mse_E3']:.4f} |")
    return results


if __name__ == "__main__":
    torch.set_num_threads(1)  # small tensors: threads cost more than they give
    main()
