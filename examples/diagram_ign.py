"""Diagram layers in action: a 2-IGN on adjacency matrices and an O(n) layer on matrices.

Part 1 - S_n (Maron et al.'s 2-IGN, built from geomlin's partition-diagram layers):
random Erdős-Rényi graphs on ``n`` nodes, target "the graph has an isolated vertex".
The network is ``A (batch, 1, n, n) -> DiagramLinear("S", n, 2, 2) -> ReLU -> ... ->
DiagramLinear("S", n, 2, 0) -> MLP -> logit``; it is invariant to relabelling the
nodes by construction (checked below on permuted test graphs). Baselines: the
majority class and a logistic regression on the edge count.

Part 2 - O(n): one ``DiagramLinear("O", 3, 2, 2)`` (3 parameters: identity,
transpose, trace times identity) fits the equivariant map
``M -> 2 M^T - M + tr(M) I`` exactly, and cannot fit a non-equivariant one.

Usage: ``python examples/diagram_ign.py [--quick]``
"""

from __future__ import annotations

import argparse
from itertools import pairwise

import torch
from torch import nn
from tqdm import tqdm

from geomlin.groups import O
from geomlin.linear.diagrams.layer import DiagramLinear
from geomlin.testing import equivariance_error


def random_graphs(count: int, n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Erdős-Rényi graphs with edge probability drawn per graph; ``(count, 1, n, n)`` and labels ``(count,)``."""
    p = 0.08 + 0.25 * torch.rand(count, 1, 1, generator=generator)
    upper = (torch.rand(count, n, n, generator=generator) < p).triu(1)
    A = (upper | upper.transpose(1, 2)).float()
    isolated = (A.sum(-1) == 0).any(-1).float()
    return A[:, None], isolated


class IGN2(nn.Module):
    """Invariant 2-IGN: (batch, 1, n, n) adjacency -> (batch,) logits."""

    def __init__(self, n: int, hidden: int = 16, depth: int = 2):
        super().__init__()
        chans = [1] + [hidden] * depth
        self.equivariant = nn.ModuleList(DiagramLinear("S", n, 2, 2, a, b) for a, b in pairwise(chans))
        self.readout = DiagramLinear("S", n, 2, 0, hidden, hidden)
        self.head = nn.Sequential(nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, A: torch.Tensor) -> torch.Tensor:
        h = A
        for layer in self.equivariant:
            h = torch.relu(layer(h))
        return self.head(self.readout(h)).squeeze(-1)


def accuracy(logits: torch.Tensor, y: torch.Tensor) -> float:
    return ((logits > 0).float() == y).float().mean().item()


def graph_part(quick: bool) -> dict:
    n = 12
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    train_x, train_y = random_graphs(256 if quick else 4096, n, gen)
    test_x, test_y = random_graphs(256 if quick else 2048, n, gen)
    epochs = 4 if quick else 60
    model = IGN2(n)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    loss_fn = nn.BCEWithLogitsLoss()
    print(f"[S_n] 2-IGN on {len(train_x)} ER graphs with n = {n}; target: has an isolated vertex "
          f"(positive rate {train_y.mean():.2f})")
    for _ in tqdm(range(epochs), desc="2-IGN epochs"):
        perm = torch.randperm(len(train_x), generator=gen)
        for i in range(0, len(train_x), 64):
            idx = perm[i:i + 64]
            opt.zero_grad()
            loss = loss_fn(model(train_x[idx]), train_y[idx])
            loss.backward()
            opt.step()
    with torch.no_grad():
        logits = model(test_x)
        relabel = torch.randperm(n, generator=gen)
        logits_perm = model(test_x[:, :, relabel][:, :, :, relabel])
    # baseline: logistic regression on the edge count
    edges = train_x.sum((1, 2, 3))[:, None]
    mu, sd = edges.mean(), edges.std()
    base = nn.Linear(1, 1)
    bopt = torch.optim.Adam(base.parameters(), lr=0.05)
    for _ in range(300):
        bopt.zero_grad()
        loss_fn(base((edges - mu) / sd).squeeze(-1), train_y).backward()
        bopt.step()
    with torch.no_grad():
        base_acc = accuracy(base((test_x.sum((1, 2, 3))[:, None] - mu) / sd).squeeze(-1), test_y)
    majority = max(test_y.mean().item(), 1 - test_y.mean().item())
    print(f"  test accuracy: 2-IGN {accuracy(logits, test_y):.3f} | edge-count logistic {base_acc:.3f} | "
          f"majority class {majority:.3f}")
    change = (logits - logits_perm).abs().max().item()
    print(f"  relabelled nodes: max |logit change| = {change:.2e} (invariance)")
    return {"accuracy": accuracy(logits, test_y), "baseline accuracy": base_acc, "majority": majority,
            "relabelling change": change}


def orthogonal_part(quick: bool) -> dict:
    n = 3
    torch.manual_seed(0)
    M = torch.randn(1024, 1, n, n)
    eye = torch.eye(n)
    equivariant_target = 2 * M.transpose(-1, -2) - M + M.diagonal(dim1=-2, dim2=-1).sum(-1)[..., None, None] * eye
    skewed_target = M.clone()
    skewed_target[..., 0, :] = 0  # depends on the basis: not O(3)-equivariant
    steps = 200 if quick else 1000
    results = {}
    print(f"[O(n)] one DiagramLinear('O', {n}, 2, 2) with "
          f"{DiagramLinear('O', n, 2, 2, 1, 1).num_basis} parameters fitting maps of {n}x{n} matrices")
    for name, target in [("2 M^T - M + tr(M) I", equivariant_target), ("M with row 0 zeroed", skewed_target)]:
        layer = DiagramLinear("O", n, 2, 2, 1, 1, bias=False)
        opt = torch.optim.Adam(layer.parameters(), lr=0.05)
        for _ in tqdm(range(steps), desc=f"fit {name}", leave=False):
            opt.zero_grad()
            loss = (layer(M) - target).pow(2).mean()
            loss.backward()
            opt.step()
        rel = (loss / target.pow(2).mean()).item()
        results[name] = rel
        print(f"  target {name:<22} relative MSE after {steps} steps: {rel:.2e}")
    layer64 = layer.double()

    def act(g, x):
        return g @ x @ g.T

    err = equivariance_error(layer64, O(n), act, act, inputs=(M[:8].double(),))
    print(f"  equivariance error of the layer under O({n}) (reflections included): {float(err):.1e}")
    results["equivariance error"] = float(err)
    return results


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run of a few seconds")
    args = parser.parse_args(argv)
    return {"graphs": graph_part(args.quick), "orthogonal": orthogonal_part(args.quick)}


if __name__ == "__main__":
    torch.set_num_threads(1)  # this script owns its process
    main()
