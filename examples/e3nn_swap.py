"""Swap the tensor product of an e3nn interatomic potential for geomlin's Gaunt product, in one line.

A small NequIP-style e3nn potential (species embedding, convolutions whose messages are tensor
products of node features with edge spherical harmonics weighted by a radial MLP, gated
nonlinearities, atom-wise energy readout; forces = -dE/dpos) is trained twice on the bundled
GFN2-xTB ethanol trajectory, identical in every respect but one line::

    TensorProduct = o3.FullyConnectedTensorProduct      # e3nn
    TensorProduct = geomlin.gaunt.GauntTensorProduct    # geomlin: same constructor, same call

``GauntTensorProduct`` is e3nn's product (same weights, same outputs, its path couplings computed on
the sphere), so with one seed both models start from the same weights and train alike: the run compares
their speed. The script prints, for both, the time per epoch, the test force MAE, the number of
parameters, and checks that the forces of the Gaunt model rotate with the molecule (O(3), float64).

Usage: ``python examples/e3nn_swap.py [--quick] [--epochs 6] [--num-train 200] [--threads 1]``.
"""

from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np
import torch
from e3nn import o3
from e3nn.nn import Gate
from torch import nn

from geomlin.gaunt import GauntTensorProduct
from geomlin.groups import O

DEFAULT_DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "datasets", "md", "xtb_md_ethanol.npz")
#: Both models use these irreps.
HIDDEN = "16x0e + 8x1o + 4x2e"
QUICK_HIDDEN = "4x0e + 2x1o + 1x2e"
CUTOFF = 5.0


def load(path: str) -> dict[str, torch.Tensor]:
    """``z (N,)``, ``pos (M, N, 3)`` Angstrom, ``energy (M,)`` kcal/mol, ``force (M, N, 3)`` kcal/mol/Angstrom."""
    from geomlin.datasets.md17 import read_npz_trajectory

    arrays = read_npz_trajectory(path)
    return {k: torch.as_tensor(np.asarray(arrays[k])) for k in ("z", "pos", "energy", "force")}


def bessel(r: torch.Tensor, num: int = 8) -> torch.Tensor:
    """Bessel radial basis times a smooth cutoff envelope: ``(E,) -> (E, num)``."""
    n = torch.arange(1, num + 1, dtype=r.dtype)
    x = (r / CUTOFF).clamp(max=1.0)[:, None]
    envelope = 1 - 28 * x ** 6 + 48 * x ** 7 - 21 * x ** 8
    return math.sqrt(2 / CUTOFF) * torch.sin(n * math.pi * x) / r[:, None] * envelope


class Interaction(nn.Module):
    """One e3nn convolution: ``m_ij = TP(x_j, Y(r_ij), weight=MLP(|r_ij|))``, summed, then a gate."""

    def __init__(self, irreps_in, irreps_hidden, irreps_sh, TensorProduct):
        super().__init__()
        hidden = o3.Irreps(irreps_hidden)
        scalars = o3.Irreps([(mul, ir) for mul, ir in hidden if ir.l == 0])
        gated = o3.Irreps([(mul, ir) for mul, ir in hidden if ir.l > 0])
        gates = o3.Irreps(f"{gated.num_irreps}x0e")
        self.gate = Gate(scalars, [torch.nn.functional.silu], gates, [torch.sigmoid], gated)
        # ---- the one line that differs between the two models: e3nn's class or geomlin's ----
        self.tp = TensorProduct(irreps_in, irreps_sh, self.gate.irreps_in, shared_weights=False)
        self.radial = nn.Sequential(nn.Linear(8, 32), nn.SiLU(), nn.Linear(32, self.tp.weight_numel))
        self.self_connection = o3.Linear(irreps_in, self.gate.irreps_out)

    def forward(self, x, sh, radial_basis, src, dst, num_nodes, avg_degree):
        messages = self.tp(x[src], sh, self.radial(radial_basis))
        summed = torch.zeros(num_nodes, messages.shape[-1], dtype=x.dtype).index_add_(0, dst, messages)
        return self.gate(summed / avg_degree) + self.self_connection(x)


class Potential(nn.Module):
    """Energy of molecules ``pos (G, N, 3)`` with species ``z (N,)``, built on ``TensorProduct``."""

    def __init__(self, species: list[int], TensorProduct, hidden: str = HIDDEN, num_blocks: int = 2):
        super().__init__()
        self.register_buffer("species_index", torch.full((max(species) + 1,), -1, dtype=torch.long))
        self.species_index[torch.tensor(species)] = torch.arange(len(species))
        hidden = o3.Irreps(hidden)
        self.irreps_sh = o3.Irreps.spherical_harmonics(2)
        self.embed = nn.Embedding(len(species), hidden[0].mul)
        blocks, irreps = [], o3.Irreps(f"{hidden[0].mul}x0e")
        for _ in range(num_blocks):
            blocks.append(Interaction(irreps, hidden, self.irreps_sh, TensorProduct))
            irreps = blocks[-1].gate.irreps_out
        self.blocks = nn.ModuleList(blocks)
        self.readout = o3.Linear(irreps, "1x0e")

    def forward(self, z: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        G, N, _ = pos.shape
        flat = pos.reshape(G * N, 3)
        i, j = torch.meshgrid(torch.arange(N), torch.arange(N), indexing="ij")
        keep = i != j
        offsets = (torch.arange(G) * N)[:, None]
        src, dst = (j[keep][None] + offsets).reshape(-1), (i[keep][None] + offsets).reshape(-1)
        vec = flat[dst] - flat[src]
        r = vec.norm(dim=-1)
        sh = o3.spherical_harmonics(self.irreps_sh, vec, normalize=True, normalization="component")
        basis = bessel(r)
        x = self.embed(self.species_index[z].repeat(G)).to(pos.dtype)
        for block in self.blocks:
            x = block(x, sh, basis, src, dst, G * N, N - 1)
        return self.readout(x).view(G, N).sum(-1)


def energy_and_forces(model, z, pos, create_graph: bool):
    pos = pos.detach().requires_grad_(True)
    energy = model(z, pos)
    (grad,) = torch.autograd.grad(energy.sum(), pos, create_graph=create_graph)
    return energy, -grad


def train(model, data, train_idx, epochs: int, batch_size: int, e_mean: float, scale: float) -> float:
    """Train (energy + force loss); returns the mean wall time per epoch in seconds."""
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    gen = torch.Generator().manual_seed(0)
    t0 = time.perf_counter()
    for _ in range(epochs):
        order = train_idx[torch.randperm(len(train_idx), generator=gen)]
        for batch in order.split(batch_size):
            energy, force = energy_and_forces(model, data["z"], data["pos"][batch], create_graph=True)
            loss = (((energy * scale + e_mean) - data["energy"][batch]) / scale).pow(2).mean() \
                + 10.0 * ((force * scale - data["force"][batch]) / scale).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    return (time.perf_counter() - t0) / max(epochs, 1)


def force_mae(model, data, idx, scale: float) -> float:
    total = 0.0
    for chunk in idx.split(50):
        _, force = energy_and_forces(model, data["z"], data["pos"][chunk], create_graph=False)
        total += (force.detach() * scale - data["force"][chunk]).abs().mean().item() * len(chunk)
    return total / len(idx)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=DEFAULT_DATA)
    parser.add_argument("--quick", action="store_true", help="tiny model and data (the test suite runs this)")
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--num-train", type=int, default=None)
    parser.add_argument("--num-test", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    if args.threads < 1:
        parser.error(f"--threads must be >= 1, got {args.threads}")
    epochs = args.epochs if args.epochs is not None else (1 if args.quick else 6)
    n_train = args.num_train if args.num_train is not None else (8 if args.quick else 200)
    n_test = 8 if args.quick else args.num_test
    hidden = QUICK_HIDDEN if args.quick else HIDDEN
    torch.set_num_threads(args.threads)
    raw = load(args.data)
    data = {"z": raw["z"], "pos": raw["pos"].float(), "energy": raw["energy"].float(), "force": raw["force"].float()}
    perm = torch.randperm(data["pos"].shape[0], generator=torch.Generator().manual_seed(1))
    train_idx, test_idx = perm[:n_train], perm[n_train:n_train + n_test]
    e_mean = data["energy"][train_idx].mean().item()
    scale = data["force"][train_idx].std().item()
    species = sorted(set(raw["z"].tolist()))
    print(f"ethanol (GFN2-xTB), {n_train} training / {n_test} test frames, {epochs} epoch(s) of batches of "
          f"{args.batch_size}, hidden irreps {hidden}, {args.threads} thread(s); forces in kcal/mol/A")
    results = {}
    for name, TensorProduct in (("e3nn FullyConnectedTensorProduct", o3.FullyConnectedTensorProduct),
                                ("geomlin GauntTensorProduct", GauntTensorProduct)):
        torch.manual_seed(0)
        model = Potential(species, TensorProduct, hidden)
        seconds = train(model, data, train_idx, epochs, args.batch_size, e_mean, scale)
        results[name] = {"s/epoch": seconds, "force MAE": force_mae(model, data, test_idx, scale),
                         "parameters": sum(p.numel() for p in model.parameters()), "model": model}
    zero = data["force"][test_idx].abs().mean().item()
    print("\n| tensor product | time per epoch (s) | test force MAE (kcal/mol/A) | parameters |\n|---|---|---|---|")
    for name, r in results.items():
        print(f"| {name} | {r['s/epoch']:.2f} | {r['force MAE']:.2f} | {r['parameters']} |")
    print(f"| (zero-force baseline) | – | {zero:.2f} | – |")
    e3, ga = results["e3nn FullyConnectedTensorProduct"], results["geomlin GauntTensorProduct"]
    print(f"\nGaunt model: {e3['s/epoch'] / ga['s/epoch']:.2f}x the training speed of the e3nn model in this run.")
    model = ga["model"].double()
    pos = raw["pos"][test_idx[:3]].double()
    R = O(3).sample(1, generator=torch.Generator().manual_seed(2), dtype=torch.float64)[0]
    if R.det() > 0:  # make it a reflection: the harder case
        R = -R
    _, f = energy_and_forces(model, raw["z"], pos, create_graph=False)
    _, f_rot = energy_and_forces(model, raw["z"], pos @ R.T, create_graph=False)
    err = ((f_rot - f @ R.T).norm() / f.norm()).item()
    print(f"Gaunt model forces rotate with the molecule (random O(3) element, det {R.det().item():+.0f}): "
          f"relative error {err:.1e}")
    if err > 1e-9:
        raise SystemExit("equivariance check failed")
    for r in results.values():
        r.pop("model")
    results["equivariance error"] = err
    results["zero-force MAE"] = zero
    return results


if __name__ == "__main__":
    main()
