"""Make a non-equivariant PointNet rotation-invariant: frame averaging vs learned canonicalization.

Three classifiers are trained on UPRIGHT ``SyntheticShapes`` (10 shape classes) and tested on
an upright and on a randomly rotated (SO(3)) test set:

* the bare PointNet (not invariant: accuracy collapses on rotated shapes);
* ``FrameAveraging(PointNet, "SE3")`` (Puny et al. 2022): PCA frames, trained with one random
  frame per cloud (``stochastic=True``), evaluated on all 4 frames -- exactly invariant;
* ``Canonicalization(PointCloudCanonicalizer("SE3"), PointNet)`` (Kaba et al. 2023) trained
  with the canonicalization prior (Mondal et al. 2023) -- exactly invariant, one backbone call.

Several classes (sphere, cube, octahedron, tetrahedron) have isotropic covariance, so their
PCA frames are decided by sampling noise; frame averaging stays exactly invariant but sees
those shapes in arbitrary poses (see docs/frames.md, "Limits").

    python examples/frames_pointnet.py [--quick] [--epochs 15] [--per-class 40] [--points 128]
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn
from tqdm import tqdm

from geomlin.datasets import SyntheticShapes
from geomlin.frames import Canonicalization, FrameAveraging, PointCloudCanonicalizer
from geomlin.models import PointNet


def stacked(ds) -> tuple[torch.Tensor, torch.Tensor]:
    """``pos (S, N, 3)`` and labels ``(S,)`` of a SyntheticShapes dataset."""
    return torch.stack([d.pos for d in ds]), torch.cat([d.y for d in ds])


def train(name: str, model: nn.Module, pos, y, epochs: int, batch_size: int, prior_weight: float = 0.0):
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    bar = tqdm(range(epochs), desc=f"train {name}", leave=False)
    for _ in bar:
        perm = torch.randperm(pos.shape[0])
        for i in range(0, pos.shape[0], batch_size):
            idx = perm[i:i + batch_size]
            if isinstance(model, Canonicalization):
                logits, g = model(pos[idx], return_elements=True)
                prior = model.prior_loss(g)
                loss = loss_fn(logits, y[idx]) + prior_weight * prior
            else:
                loss = loss_fn(model(pos[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        bar.set_postfix(loss=f"{loss.item():.3f}")


@torch.no_grad()
def accuracy(model: nn.Module, pos, y, batch_size: int = 64) -> float:
    model.eval()
    correct = 0
    for i in range(0, pos.shape[0], batch_size):
        correct += (model(pos[i:i + batch_size]).argmax(-1) == y[i:i + batch_size]).sum().item()
    return correct / pos.shape[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run (a minute or two on 2 cores; too short to learn much)")
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--per-class", type=int, default=40)
    parser.add_argument("--points", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--prior-weight", type=float, default=0.1)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.quick:
        args.epochs, args.per_class, args.points = 8, 20, 64
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    train_pos, train_y = stacked(SyntheticShapes(args.per_class, args.points, seed=args.seed))
    n_test = max(args.per_class // 3, 5)
    test_pos, test_y = stacked(SyntheticShapes(n_test, args.points, seed=args.seed + 1))
    rot_pos, rot_y = stacked(SyntheticShapes(n_test, args.points, seed=args.seed + 1, rotation="SO3"))
    num_classes = int(train_y.max()) + 1

    def pointnet():
        return PointNet(num_classes, point_widths=(64, 128, 128), head_widths=(64,))

    models = {
        "PointNet (bare)": pointnet(),
        "FrameAveraging (SE3, PCA)": FrameAveraging(pointnet(), "SE3", "invariant", stochastic=True,
                                                    on_degenerate="sample"),
        "Canonicalization (SE3, prior)": Canonicalization(PointCloudCanonicalizer("SE3"), pointnet(),
                                                          "invariant"),
    }
    rows = []
    for name, model in models.items():
        t0 = time.perf_counter()
        train(name, model, train_pos, train_y, args.epochs, args.batch_size, args.prior_weight)
        seconds = time.perf_counter() - t0
        extra = ""
        if isinstance(model, Canonicalization):
            with torch.no_grad():
                g = model.canonicalizer(train_pos[:256])
            extra = f"identity fraction on upright train: {model.identity_metric(g).item():.2f}"
        rows.append((name, accuracy(model, test_pos, test_y), accuracy(model, rot_pos, rot_y), seconds, extra))

    print(f"\nSyntheticShapes: train {len(train_y)} upright clouds x {args.points} points, "
          f"test {len(test_y)} upright / {len(rot_y)} SO(3)-rotated, {args.epochs} epochs")
    print(f"{'model':<32}{'upright acc':>12}{'rotated acc':>13}{'train s':>9}")
    for name, acc_up, acc_rot, seconds, extra in rows:
        print(f"{name:<32}{acc_up:>12.3f}{acc_rot:>13.3f}{seconds:>9.1f}  {extra}")


if __name__ == "__main__":
    main()
