"""An O(3)-equivariant MLP learns the inertia tensor of 5 point masses.

Input: masses ``m_i`` (5 scalars) and positions ``r_i`` (5 vectors), as the rep
``5 * T(0) + 5 * T(1)``. Output: the symmetric inertia tensor
``I = sum_i m_i (|r_i|^2 Id - r_i r_i^T)`` as ``T(2)`` (the task of EMLP,
Finzi et al. 2021, Sec. 7), written as an EMLP user would: group-free reps bound by
``group=O(3)`` and ``hidden_channels`` = EMLP's ``ch`` (the size of each hidden rep). The
equivariant MLP is compared with a plain MLP of about the same parameter count, on an upright
and a randomly rotated (and reflected) test set, and its equivariance error is measured with
:mod:`geomlin.testing`. ``benchmarks/bench_basis.py`` runs the same task against EMLP itself.

Run: ``python examples/emlp_inertia.py [--quick]`` (about a minute on 2 cores).
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn
from tqdm import tqdm

from geomlin.groups import O
from geomlin.linear import EquivariantMLP
from geomlin.reps import T
from geomlin.testing import equivariance_error

NUM_MASSES = 5


def inertia_data(n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` random systems: inputs ``(n, 20)`` = 5 masses then 5 positions, targets ``(n, 9)``."""
    m = torch.rand(n, NUM_MASSES, generator=generator) + 0.1
    r = torch.randn(n, NUM_MASSES, 3, generator=generator)
    eye = torch.eye(3)
    sq = (r ** 2).sum(-1)
    inertia = torch.einsum("ni,ni,jk->njk", m, sq, eye) - torch.einsum("ni,nij,nik->njk", m, r, r)
    x = torch.cat([m, r.reshape(n, -1)], dim=1)
    return x, inertia.reshape(n, 9)


def rotate_inputs(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Apply O(3) elements ``g (n, 3, 3)`` to the positions inside ``x (n, 20)``."""
    m, r = x[:, :NUM_MASSES], x[:, NUM_MASSES:].reshape(-1, NUM_MASSES, 3)
    return torch.cat([m, torch.einsum("nij,nkj->nki", g, r).reshape(len(x), -1)], dim=1)


def rotate_targets(y: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """``g I g^T`` for targets ``y (n, 9)``."""
    return (g @ y.reshape(-1, 3, 3) @ g.transpose(-1, -2)).reshape(-1, 9)


def plain_mlp(params_target: int) -> nn.Module:
    """A 3-layer SiLU MLP ``20 -> h -> h -> 9`` with about ``params_target`` parameters."""
    h = 8
    while True:
        model = nn.Sequential(nn.Linear(20, h), nn.SiLU(), nn.Linear(h, h), nn.SiLU(), nn.Linear(h, 9))
        if sum(p.numel() for p in model.parameters()) >= params_target:
            return model
        h += 1


def train(model: nn.Module, x, y, epochs: int, batch: int, lr: float, name: str) -> None:
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, epochs)
    for _ in tqdm(range(epochs), desc=f"train {name}", leave=False):
        perm = torch.randperm(len(x))
        for i in range(0, len(x), batch):
            idx = perm[i:i + batch]
            loss = (model(x[idx]) - y[idx]).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        sched.step()


@torch.no_grad()
def relative_error(model, x, y) -> float:
    """Mean of ``||pred - y|| / ||y||`` over samples."""
    return ((model(x) - y).norm(dim=-1) / y.norm(dim=-1)).mean().item()


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--train-size", type=int, default=1000)
    parser.add_argument("--hidden-channels", type=int, default=96,
                        help="size of each hidden rep (EMLP's ch), spread over tensor ranks")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="a few-second smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        args.epochs, args.train_size, args.hidden_channels = 3, 200, 24
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    x_train, y_train = inertia_data(args.train_size, gen)
    x_test, y_test = inertia_data(1000, gen)
    g = O(3).sample(len(x_test), generator=gen, dtype=torch.float32)
    x_rot, y_rot = rotate_inputs(x_test, g), rotate_targets(y_test, g)

    G = O(3)
    t0 = time.perf_counter()
    emlp = EquivariantMLP(NUM_MASSES * T(0) + NUM_MASSES * T(1), T(2), hidden_channels=args.hidden_channels,
                          num_blocks=2, group=G)
    rep_in, rep_out = emlp.rep_in, emlp.rep_out
    counts = emlp.parameter_counts()
    n_params = counts["total"]
    mlp = plain_mlp(n_params)
    print(f"EMLP  {rep_in!r} -> {rep_out!r}, hidden {emlp.hidden!r}: {n_params} parameters "
          f"({counts['linear']} linear, {counts['bilinear']} bilinear; built in {time.perf_counter() - t0:.1f} s)")
    print(f"MLP   20 -> 9: {sum(p.numel() for p in mlp.parameters())} parameters")

    results = {}
    for name, model, lr in (("EMLP", emlp, 3e-3), ("MLP", mlp, 3e-3)):
        t0 = time.perf_counter()
        train(model, x_train, y_train, args.epochs, 64, lr, name)
        results[name] = {
            "seconds": time.perf_counter() - t0,
            "train": relative_error(model, x_train, y_train),
            "test": relative_error(model, x_test, y_test),
            "rotated test": relative_error(model, x_rot, y_rot),
        }
    emlp64 = emlp.double()
    results["EMLP"]["equivariance error"] = equivariance_error(emlp64, num_samples=10)  # declared types
    print(f"\n{'model':6} {'train':>8} {'test':>8} {'rotated':>8} {'seconds':>8}   (relative error)")
    for name, r in results.items():
        print(f"{name:6} {r['train']:8.4f} {r['test']:8.4f} {r['rotated test']:8.4f} {r['seconds']:8.1f}")
    print(f"\nEMLP equivariance error on 10 random O(3) elements (float64): "
          f"{results['EMLP']['equivariance error']:.2e}")
    return results


if __name__ == "__main__":
    main()
