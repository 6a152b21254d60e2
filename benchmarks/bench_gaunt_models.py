"""Benchmark: e3nn's own models with e3nn's tensor products and with geomlin's ``GauntTensorProduct`` swapped in.

Three models, each built twice from the same code, the second time with one line changed
(``TensorProduct = FullyConnectedTensorProduct = GauntTensorProduct``), the same weights loaded into
both (their energies agree to float32 round-off, the ``same energy`` column), timed in this process:

* ``Convolution``: ``e3nn.nn.models.v2106.points_convolution.Convolution`` (a ``"uvu"`` product of node
  features and edge harmonics with per-edge weights from its radial MLP, and four fully connected
  products with the node attribute ``0e``) on a random graph of 16 neighbours per node;
* ``SimpleNetwork``: ``e3nn.nn.models.v2106.gate_points_networks.SimpleNetwork`` (two gated layers of
  such convolutions, its own radius graph, about 16 neighbours per node);
* ``NequIP interaction``: a NequIP-style interaction block written here (``o3.Linear``, the ``"uvu"``
  convolution product with a radial MLP on a Bessel basis, ``o3.Linear``, a fully connected
  self-connection with a one-hot species attribute ``4x0e``, a gate).

Node irreps ``C x l`` of both parities up to ``lmax`` (as e3nn's SimpleNetwork and NequIP use them),
float32. A step is one training step with forces: the energy (the sum of the output scalars), the
forces by ``torch.autograd.grad(..., create_graph=True)`` and the backward of ``energy^2 + |forces|^2``,
so the products are differentiated twice. Medians of interleaved steps after a warm-up step; peak
memory of one step above what was in use before it.

Usage: ``python benchmarks/bench_gaunt_models.py [--quick] [--threads 1] [--models convolution simple nequip]
[--channels 32 64] [--lmax 2 3] [--edges 4096 16384 65536] [--repeats 3] [--max-memory-gib 16]``. The full
grid takes hours with e3nn's steps at lmax 3 and 65,536 edges (e3nn's training step needs about 1.5 GiB
per 4,096 edges at 32 channels and lmax 3, measured): cases beyond ``--max-memory-gib`` are skipped with
their estimate, and e3nn steps above 30 s are timed once.
"""

from __future__ import annotations

import math
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import torch
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness

#: Neighbours per node of the graphs (edges / nodes).
NEIGHBORS = 16
#: Radial basis size of the models' radial MLPs.
NUM_BASIS = 8
MODELS = ("convolution", "simple", "nequip")
NAMES = {"convolution": "Convolution (v2106)", "simple": "SimpleNetwork (v2106)", "nequip": "NequIP interaction"}


def node_irreps(channels: int, lmax: int):
    from e3nn import o3

    return o3.Irreps([(channels, (l, p)) for l in range(lmax + 1) for p in (1, -1)])


@contextmanager
def product_classes(gaunt: bool):
    """e3nn's model code with e3nn's or geomlin's tensor products (the one line of a swap)."""
    from e3nn.nn.models.v2106 import points_convolution

    from geomlin.gaunt import GauntTensorProduct

    saved = points_convolution.TensorProduct, points_convolution.FullyConnectedTensorProduct
    if gaunt:
        points_convolution.TensorProduct = points_convolution.FullyConnectedTensorProduct = GauntTensorProduct
    try:
        yield points_convolution.TensorProduct, points_convolution.FullyConnectedTensorProduct
    finally:
        points_convolution.TensorProduct, points_convolution.FullyConnectedTensorProduct = saved


class NequIPInteraction(torch.nn.Module):
    """A NequIP interaction block (Batzner et al. 2022, fig. 1) on e3nn's modules; energy of its output scalars."""

    def __init__(self, irreps, lmax: int, TensorProduct, FullyConnectedTensorProduct, num_species: int = 4):
        super().__init__()
        from e3nn import nn as enn
        from e3nn import o3

        self.irreps_sh = o3.Irreps.spherical_harmonics(lmax)
        mid, instructions = [], []
        for i1, (mul, a) in enumerate(irreps):
            for i2, (_, b) in enumerate(self.irreps_sh):
                for c in a * b:
                    if c in irreps:
                        instructions.append((i1, i2, len(mid), "uvu", True))
                        mid.append((mul, c))
        self.linear_1 = o3.Linear(irreps, irreps)
        self.tp = TensorProduct(irreps, self.irreps_sh, o3.Irreps(mid), instructions, shared_weights=False,
                                internal_weights=False)
        self.radial = enn.FullyConnectedNet([NUM_BASIS, 64, 64, self.tp.weight_numel], torch.nn.functional.silu)
        scalars = o3.Irreps([(m, ir) for m, ir in irreps if ir.l == 0])
        gated = o3.Irreps([(m, ir) for m, ir in irreps if ir.l > 0])
        self.gate = enn.Gate(scalars, [torch.nn.functional.silu, torch.tanh], f"{gated.num_irreps}x0e",
                             [torch.sigmoid], gated)
        self.linear_2 = o3.Linear(self.tp.irreps_out, self.gate.irreps_in)
        self.self_connection = FullyConnectedTensorProduct(irreps, f"{num_species}x0e", self.gate.irreps_in)

    def forward(self, x, species, pos, src, dst):
        from e3nn import o3

        vec = pos[dst] - pos[src]
        r = vec.norm(dim=-1, keepdim=True)
        n = torch.arange(1, NUM_BASIS + 1, dtype=pos.dtype)
        basis = torch.sin(n * math.pi * r / 5.0) / r
        sh = o3.spherical_harmonics(self.irreps_sh, vec, True, normalization="component")
        messages = self.tp(self.linear_1(x)[src], sh, self.radial(basis))
        summed = torch.zeros(x.shape[0], messages.shape[1], dtype=x.dtype).index_add_(0, dst, messages)
        out = self.gate(self.linear_2(summed / NEIGHBORS ** 0.5) + self.self_connection(x, species))
        return out[:, : self.gate.irreps_out[0].mul].sum()


def build(model: str, channels: int, lmax: int, gaunt: bool):
    """``(module, energy(pos) closure factory)`` of one model; the same seed for both products."""
    from e3nn import o3
    from e3nn.nn.models.v2106 import gate_points_networks, points_convolution

    irreps = node_irreps(channels, lmax)
    torch.manual_seed(0)
    with product_classes(gaunt) as (TensorProduct, FullyConnectedTensorProduct):
        if model == "convolution":
            conv = points_convolution.Convolution(irreps, "0e", o3.Irreps.spherical_harmonics(lmax), irreps,
                                                  fc_neurons=[NUM_BASIS, 64], num_neighbors=float(NEIGHBORS))
            with torch.no_grad():  # e3nn starts the convolution's output gate at zero: as if trained, make it count
                conv.alpha.weight.copy_(torch.randn(conv.alpha.weight.shape, generator=torch.Generator().manual_seed(3)))
            return conv
        if model == "simple":
            return gate_points_networks.SimpleNetwork(f"{channels}x0e", "1x0e", max_radius=2.0,
                                                      num_neighbors=float(NEIGHBORS), num_nodes=float(NEIGHBORS),
                                                      mul=channels, layers=2, lmax=lmax)
        return NequIPInteraction(irreps, lmax, TensorProduct, FullyConnectedTensorProduct)


def graph(model: str, edges: int, generator):
    """Node positions and (for the models given a graph) random edges, ``edges / NEIGHBORS`` nodes."""
    nodes = max(edges // NEIGHBORS, 2)
    if model == "simple":  # its own radius graph (r = 2): a box of the density that gives ~16 neighbours
        side = (nodes * 4 / 3 * math.pi * 2.0 ** 3 / NEIGHBORS) ** (1 / 3)
        return torch.rand(nodes, 3, generator=generator) * side, None, None
    src = torch.randint(nodes, (edges,), generator=generator)
    dst = (src + torch.randint(1, nodes, (edges,), generator=generator)) % nodes
    return torch.randn(nodes, 3, generator=generator) * 3.0, src, dst


def energy_function(model: str, module, channels: int, lmax: int, pos, src, dst, generator):
    """``energy(pos)`` of the module on fixed node inputs."""
    from e3nn import o3
    from e3nn.math import soft_one_hot_linspace

    nodes = pos.shape[0]
    if model == "simple":
        x = torch.randn(nodes, module.irreps_in.dim, generator=generator)
        return lambda p: module({"pos": p, "x": x}).sum()
    if model == "nequip":
        x = torch.randn(nodes, module.linear_1.irreps_in.dim, generator=generator)
        species = torch.nn.functional.one_hot(torch.randint(4, (nodes,), generator=generator), 4).float()
        return lambda p: module(x, species, p, src, dst)
    x = torch.randn(nodes, module.irreps_node_input.dim, generator=generator)
    attr = torch.ones(nodes, 1)
    sh_irreps = o3.Irreps.spherical_harmonics(lmax)

    def energy(p):
        vec = p[dst] - p[src]
        sh = o3.spherical_harmonics(sh_irreps, vec, True, normalization="component")
        radial = soft_one_hot_linspace(vec.norm(dim=-1), 0.0, 10.0, NUM_BASIS, basis="smooth_finite", cutoff=True)
        return module(x, attr, src, dst, sh, radial * NUM_BASIS ** 0.5)[:, :channels].sum()

    return energy


def training_step(energy, pos0) -> None:
    pos = pos0.clone().requires_grad_(True)
    e = energy(pos)
    (grad,) = torch.autograd.grad(e, pos, create_graph=True)
    (e.pow(2) + grad.pow(2).sum()).backward()


#: A step of e3nn's model slower than this (seconds, in the warm-up) is timed once more, not ``--repeats`` times.
SINGLE_RUN_SECONDS = 30.0


def run(models, channels_list, lmaxes, edges_list, repeats: int, max_memory: float) -> None:
    """One row per case; a case whose e3nn step would need more than ``max_memory`` bytes (its peak at the
    previous number of edges, scaled linearly) is listed as skipped with that estimate."""
    table = harness.Table(["model", "channels", "lmax", "edges", "e3nn step", "geomlin step", "geomlin speed",
                           "runs", "peak mem e3nn", "peak mem geomlin", "geomlin memory", "same energy"])
    cases = [(m, c, l, e) for m in models for c in channels_list for l in lmaxes for e in sorted(edges_list)]
    measured: dict = {}  # (model, channels, lmax) -> (edges, e3nn peak bytes) of the largest case so far
    for model, channels, lmax, edges in tqdm(cases, desc="models", file=sys.stderr, leave=False):
        last = measured.get((model, channels, lmax))
        if last is not None and last[1] * edges / last[0] > max_memory:
            estimate = last[1] * edges / last[0]
            table.add(NAMES[model], channels, lmax, f"{edges:,}", "skipped", "–", "–", "–",
                      f"~{harness.mib(estimate)} (est.)", "–", "–", "–")
            continue
        modules = {"e3nn": build(model, channels, lmax, False), "geomlin": build(model, channels, lmax, True)}
        loaded = modules["geomlin"].load_state_dict(modules["e3nn"].state_dict(), strict=False)
        assert not loaded.missing_keys, loaded.missing_keys  # e3nn's extra keys are its codegen tables
        pos, src, dst = graph(model, edges, torch.Generator().manual_seed(1))
        energies = {k: energy_function(model, m, channels, lmax, pos, src, dst, torch.Generator().manual_seed(2))
                    for k, m in modules.items()}
        e = {k: f(pos).item() for k, f in energies.items()}
        same = abs(e["geomlin"] - e["e3nn"]) / max(abs(e["e3nn"]), 1e-30)
        steps = {k: (lambda f=f, p=pos: training_step(f, p)) for k, f in energies.items()}
        t0 = time.perf_counter()
        steps["e3nn"]()  # warm-up (measure's own warm-up follows; this one decides the number of runs)
        runs = 1 if time.perf_counter() - t0 > SINGLE_RUN_SECONDS else repeats
        seconds = harness.measure(steps, runs)
        memory = {k: harness.peak_memory(f) for k, f in steps.items()}
        measured[(model, channels, lmax)] = (edges, memory["e3nn"])
        if src is None:  # SimpleNetwork's own radius graph
            edges = _radius_edges(pos)
        table.add(NAMES[model], channels, lmax, f"{edges:,}", harness.ms(seconds["e3nn"]), harness.ms(seconds["geomlin"]),
                  harness.ratio(seconds["e3nn"], seconds["geomlin"]), runs, harness.mib(memory["e3nn"]),
                  harness.mib(memory["geomlin"]), f"{memory['geomlin'] / max(memory['e3nn'], 1):.2f}x", f"{same:.0e}")
    print("**Training steps with forces** (ms, or s above 10 s; medians of `runs` interleaved steps; geomlin speed = "
          "e3nn step / geomlin step; geomlin memory = its peak / e3nn's; same energy = relative difference of the two "
          f"models' energies; a case whose e3nn step would need more than {max_memory / 2**30:.0f} GiB is skipped "
          "with the estimate)\n")
    table.print()


def _radius_edges(pos) -> int:
    r = torch.cdist(pos, pos)
    return int(((r < 2.0) & (r > 0)).sum())


def main(argv=None) -> None:
    p = harness.parser(__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    p.add_argument("--channels", nargs="+", type=int, default=None, help="default 32 64 (--quick: 8)")
    p.add_argument("--lmax", nargs="+", type=int, default=None, help="default 2 3 (--quick: 2)")
    p.add_argument("--edges", nargs="+", type=int, default=None, help="default 4096 16384 65536 (--quick: 512)")
    p.add_argument("--max-memory-gib", type=float, default=16.0,
                   help="skip a case whose e3nn step would need more (estimated from the previous number of edges)")
    args = p.parse_args(argv)
    harness.setup(args)
    channels = args.channels or ([8] if args.quick else [32, 64])
    lmaxes = args.lmax or ([2] if args.quick else [2, 3])
    edges = args.edges or ([512] if args.quick else [4096, 16384, 65536])
    repeats = args.repeats or (2 if args.quick else 3)
    print(harness.header("e3nn's models with geomlin's GauntTensorProduct swapped in", args, repeats))
    print(f"Peer: e3nn {harness.peer_version('e3nn')}, in this process; the same model code, weights and inputs on "
          "both sides (`python benchmarks/bench_gaunt_models.py --help` says exactly what runs). Node irreps "
          "`C x 0e + C x 0o + ... + C x Le + C x Lo`, float32, 16 neighbours per node.\n")
    run(args.models, channels, lmaxes, edges, repeats, args.max_memory_gib * 2**30)


if __name__ == "__main__":
    main()
