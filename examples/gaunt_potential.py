"""A Gaunt interatomic potential trained on the bundled GFN2-xTB ethanol trajectory.

Energy E(pos) from two Gaunt convolutions and a many-body Gaunt block; forces
are -dE/dpos by autograd.  Prints the test force MAE of the model against the
zero-force baseline and a non-equivariant MLP on raw coordinates trained the
same way, then checks that forces rotate with the molecule (O(3), float64).

Usage: ``python examples/gaunt_potential.py [--quick] [--data datasets/md/xtb_md_ethanol.npz] [--steps 150]``
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch
from torch import nn
from tqdm import trange

from geomlin.gaunt import GauntConvolution, ManyBodyGaunt
from geomlin.groups import O

DEFAULT_DATA = os.path.join(os.path.dirname(__file__), "..", "datasets", "md", "xtb_md_ethanol.npz")


def load(path: str) -> dict[str, torch.Tensor]:
    """``z (N,)``, ``pos (M, N, 3)`` Angstrom, ``energy (M,)`` kcal/mol, ``force (M, N, 3)`` kcal/mol/Angstrom."""
    try:
        from geomlin.datasets.md17 import read_npz_trajectory

        arrays = read_npz_trajectory(path)
    except ImportError:  # the datasets package is optional for this example
        if not os.path.isfile(path):
            raise FileNotFoundError(f"trajectory file not found: {path}") from None
        with np.load(path) as f:
            arrays = {"z": f["nuclear_charges"], "pos": f["coords"], "energy": f["energies"], "force": f["forces"]}
    return {k: torch.as_tensor(np.asarray(arrays[k])) for k in ("z", "pos", "energy", "force")}


class ChannelMix(nn.Module):
    """Equivariant channel mixing of ``(N, C, (L+1)**2)`` (one matrix shared by every ``(l, m)``)."""

    def __init__(self, channels: int):
        super().__init__()
        self.linear = nn.Linear(channels, channels, bias=False)

    def forward(self, x):
        return self.linear(x.transpose(-1, -2)).transpose(-1, -2)


class GauntPotential(nn.Module):
    """species embedding -> GauntConv (0 -> 2) -> many-body Gaunt (2 -> 2) -> GauntConv (2 -> 0) -> atom MLP."""

    def __init__(self, species: list[int], channels: int = 16, lmax: int = 2, cutoff: float = 5.0):
        super().__init__()
        self.index = {z: i for i, z in enumerate(species)}
        self.embed = nn.Embedding(len(species), channels)
        self.conv1 = GauntConvolution(0, lmax, lmax, channels, cutoff=cutoff, avg_degree=2.0)
        self.mix1 = ChannelMix(channels)
        self.many = ManyBodyGaunt(lmax, lmax, channels, correlation=2)
        self.conv2 = GauntConvolution(lmax, lmax, 0, channels, cutoff=cutoff, avg_degree=2.0)
        self.readout = nn.Sequential(nn.Linear(2 * channels, 64), nn.SiLU(), nn.Linear(64, 1))

    def forward(self, z: torch.Tensor, pos: torch.Tensor, edge_index: torch.Tensor, batch: torch.Tensor, n_graphs):
        s = self.embed(torch.tensor([self.index[int(a)] for a in z], device=pos.device))  # (N, C)
        x = s[:, :, None].to(pos.dtype)  # (N, C, 1): lmax 0
        h = self.mix1(self.conv1(x, pos, edge_index))
        h = h + self.many(h)
        out = self.conv2(h, pos, edge_index)[..., 0]  # (N, C) invariants
        atom = self.readout(torch.cat([s.to(pos.dtype), out], dim=-1))[:, 0]
        return torch.zeros(n_graphs, dtype=pos.dtype, device=pos.device).index_add(0, batch, atom)


class CoordinateMLP(nn.Module):
    """Non-equivariant baseline: an MLP on the flattened coordinates."""

    def __init__(self, n_atoms: int):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(3 * n_atoms, 128), nn.SiLU(), nn.Linear(128, 128), nn.SiLU(),
                                 nn.Linear(128, 1))

    def forward(self, z, pos, edge_index, batch, n_graphs):
        return self.net(pos.reshape(n_graphs, -1))[:, 0]


def batch_graph(pos: torch.Tensor, z: torch.Tensor):
    """Frames ``(G, N, 3)`` -> flat positions, atomic numbers, fully connected ``edge_index`` and ``batch``."""
    G, N, _ = pos.shape
    src, dst = torch.meshgrid(torch.arange(N), torch.arange(N), indexing="ij")
    keep = src != dst
    base = torch.stack([src[keep], dst[keep]])
    offsets = (torch.arange(G) * N).repeat_interleave(base.shape[1])
    edge_index = base.repeat(1, G) + offsets
    return pos.reshape(G * N, 3), z.repeat(G), edge_index, torch.arange(G).repeat_interleave(N)


def energy_and_forces(model, z, pos, create_graph: bool):
    pos = pos.detach().requires_grad_(True)
    flat, zz, edge_index, batch = batch_graph(pos, z)
    energy = model(zz, flat, edge_index, batch, pos.shape[0])
    (grad,) = torch.autograd.grad(energy.sum(), pos, create_graph=create_graph)
    return energy, -grad

#: --quick sizes: small, yet enough for the Gaunt potential to beat the zero-force baseline by ~3x.
QUICK = {"steps": 200, "num_train": 64, "num_test": 32}


def train(model, data, train_idx, steps: int, e_mean: float, scale: float, batch_size: int = 8, desc: str = ""):
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    gen = torch.Generator().manual_seed(0)
    for _ in trange(steps, desc=desc, leave=False):
        idx = train_idx[torch.randint(len(train_idx), (batch_size,), generator=gen)]
        energy, force = energy_and_forces(model, data["z"], data["pos"][idx], create_graph=True)
        loss = (((energy * scale + e_mean) - data["energy"][idx]) / scale).pow(2).mean() \
            + 10.0 * ((force * scale - data["force"][idx]) / scale).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()


def force_mae(model, data, idx, scale: float) -> float:
    errs = []
    for chunk in idx.split(50):
        _, force = energy_and_forces(model, data["z"], data["pos"][chunk], create_graph=False)
        errs.append((force.detach() * scale - data["force"][chunk]).abs().mean().item() * len(chunk))
    return sum(errs) / len(idx)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=DEFAULT_DATA)
    parser.add_argument("--quick", action="store_true", help="about 10 s of training that still shows the point (the test suite runs this)")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--num-train", type=int, default=None)
    parser.add_argument("--num-test", type=int, default=None)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    if args.threads < 1:
        parser.error(f"--threads must be >= 1, got {args.threads}")
    args.steps = args.steps if args.steps is not None else (QUICK["steps"] if args.quick else 150)
    args.num_train = args.num_train if args.num_train is not None else (QUICK["num_train"] if args.quick else 200)
    args.num_test = args.num_test if args.num_test is not None else (QUICK["num_test"] if args.quick else 100)
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    raw = load(args.data)
    data = {"z": raw["z"], "pos": raw["pos"].float(), "energy": raw["energy"].float(), "force": raw["force"].float()}
    perm = torch.randperm(data["pos"].shape[0], generator=torch.Generator().manual_seed(1))
    train_idx, test_idx = perm[: args.num_train], perm[args.num_train: args.num_train + args.num_test]
    e_mean = data["energy"][train_idx].mean().item()
    scale = data["force"][train_idx].std().item()
    print(f"ethanol, {data['pos'].shape[0]} frames: {len(train_idx)} train / {len(test_idx)} test; "
          f"forces in kcal/mol/Angstrom")
    zero = data["force"][test_idx].abs().mean().item()
    results = {"zero-force baseline": zero}
    models = {"Gaunt potential": GauntPotential(sorted(set(raw["z"].tolist()))),
              "non-equivariant MLP": CoordinateMLP(data["pos"].shape[1])}
    for name, model in models.items():
        t0 = time.perf_counter()
        train(model, data, train_idx, args.steps, e_mean, scale, desc=name)
        results[name] = force_mae(model, data, test_idx, scale)
        print(f"  trained {name} in {time.perf_counter() - t0:.0f} s")
    print("| model | test force MAE (kcal/mol/A) |\n|---|---|")
    for name, mae in results.items():
        print(f"| {name} | {mae:.2f} |")

    model = models["Gaunt potential"].double()
    pos = raw["pos"][test_idx[:4]].double()
    R = O(3).sample(1, generator=torch.Generator().manual_seed(2), dtype=torch.float64)[0]
    if R.det() > 0:  # make it a reflection: the harder case
        R = -R
    _, f = energy_and_forces(model, raw["z"], pos, create_graph=False)
    _, f_rot = energy_and_forces(model, raw["z"], pos @ R.T, create_graph=False)
    err = ((f_rot - f @ R.T).norm() / f.norm()).item()
    print(f"forces rotate with the molecule (random O(3) element, det {R.det().item():+.0f}): "
          f"relative error {err:.1e}")
    if err > 1e-9:
        raise SystemExit("equivariance check failed")
    results["equivariance error"] = err
    return results


if __name__ == "__main__":
    main()
