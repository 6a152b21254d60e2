"""Benchmark: geomlin's geometric-algebra attention against the reference package, and GLGENN vs CGENN layers.

Peer: ``geometric_algebra_attention.pytorch`` (Spellings), the package the layers port from. Both
layers get the *same* score / value / scale networks and weights (the reference's ``state_dict``
loads into geomlin's layer), the same inputs, float32; one training step (forward + backward)
and one forward pass, warm-up then interleaved runs, medians; peak memory of a training step.
Sizes go from small molecules to clouds where rank-3 attention is expensive (``N^3`` tuples).

Second table (geomlin only; no installed package implements CGENN or GLGENN layers): a
geometric-product layer of G(5,0,0) and G(8,0,0) with grade weights (CGENN) or quaternion-type
weights (GLGENN), parameters and a training step.

    python benchmarks/bench_clifford.py [--quick] [--threads N]
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import Table, header, measure, mib, ms, parser, peak_memory, peer_version, ratio, setup

from geomlin.algebra import CliffordAlgebra
from geomlin.clifford import GAAttention, GAVectorAttention, GeometricProductLayer
from geomlin.clifford.tuple_products import invariant_count

WIDTH = 32


def mlp(d_in: int, d_out: int) -> nn.Module:
    return nn.Sequential(nn.Linear(d_in, 64), nn.SiLU(), nn.Linear(64, d_out))


def pair(gaa, kind: str, rank: int, reduce: bool):
    """The reference layer and geomlin's, sharing networks and weights."""
    mode = "partial"
    nets = [mlp(WIDTH, 1), mlp(invariant_count(rank, mode), WIDTH)]
    options = {"rank": rank, "invariant_mode": mode, "reduce": reduce}
    if kind == "vector":
        nets.append(mlp(WIDTH, 1))
        ref, ours = gaa.Vector2VectorAttention(WIDTH, *nets, **options), GAVectorAttention(WIDTH, *nets, **options)
    else:
        ref, ours = gaa.VectorAttention(WIDTH, *nets, **options), GAAttention(WIDTH, *nets, **options)
    ours.load_state_dict(ref.state_dict())
    return ref, ours


def step(fn):
    def run():
        out = fn()
        out.square().sum().backward()
    return run


def forward(fn):
    def run():
        with torch.no_grad():
            fn()
    return run


def attention_table(args, repeats: int) -> None:
    version = peer_version("geometric_algebra_attention")
    cases = ([("invariant", 2, True, 8, 16), ("vector", 2, False, 8, 16), ("vector", 3, False, 4, 12)]
             if args.quick else
             [("invariant", 2, True, 64, 16), ("vector", 2, False, 64, 16), ("vector", 2, False, 8, 128),
              ("invariant", 3, True, 16, 16), ("vector", 3, False, 16, 16), ("vector", 3, False, 2, 48)])
    table = Table(["layer", "rank", "reduce", "batch x N", "tuples", "step ms geomlin", "step ms reference",
                   "speed-up", "forward ms geomlin", "forward ms reference", "speed-up",
                   "peak MiB geomlin", "peak MiB reference", "max |difference|"])
    if version is None:
        print("geometric-algebra-attention is not installed: no peer to compare with "
              "(pip install -e '.[dev]').\n")
        return
    import geometric_algebra_attention.pytorch as gaa

    for kind, rank, reduce, batch, n in cases:
        attention_case(table, gaa, kind, rank, reduce, batch, n, repeats)
    print(f"Geometric-algebra attention, float32, invariant_mode='partial', width {WIDTH}, networks "
          f"32 -> 64 -> out; reference: geometric-algebra-attention {version}\n")
    table.print()


def attention_case(table: Table, gaa, kind: str, rank: int, reduce: bool, batch: int, n: int, repeats: int) -> None:
    ref, ours = pair(gaa, kind, rank, reduce)
    r = torch.randn(batch, n, 3)
    v = torch.randn(batch, n, WIDTH)
    with torch.no_grad():
        diff = (ref((r, v)) - ours(r, v)).abs().max().item()
    fns = {"ours": lambda: ours(r, v), "ref": lambda: ref((r, v))}
    t = measure({k: step(f) for k, f in fns.items()}, repeats)
    f = measure({k: forward(f) for k, f in fns.items()}, repeats)
    mem = {k: peak_memory(step(f)) for k, f in fns.items()}
    table.add(f"{'GAVectorAttention' if kind == 'vector' else 'GAAttention'}", rank, reduce, f"{batch} x {n}",
              batch * n ** rank, ms(t["ours"]), ms(t["ref"]), ratio(t["ref"], t["ours"]), ms(f["ours"]),
              ms(f["ref"]), ratio(f["ref"], f["ours"]), mib(mem["ours"]), mib(mem["ref"]), f"{diff:.1e}")


def glgenn_case(table: Table, n: int, channels: int, batch: int, repeats: int) -> None:
    alg = CliffordAlgebra((1.0,) * n)
    x = torch.randn(batch, channels, alg.dim)
    layers = {s: GeometricProductLayer(alg, channels, channels, subspaces=s) for s in ("grade", "quaternion")}
    fns = {s: step(lambda layer=layer: layer(x)) for s, layer in layers.items()}
    t = measure(fns, repeats)
    for s, layer in layers.items():
        table.add(f"G({n},0,0), {channels} ch, batch {batch}", "CGENN (grade)" if s == "grade" else
                  "GLGENN (quaternion type)", sum(p.numel() for p in layer.parameters()),
                  layer.path_weights.shape[1], ms(t[s]), mib(peak_memory(fns[s])))


def glgenn_table(args, repeats: int) -> None:
    table = Table(["algebra", "weights", "parameters", "path weights / channel", "step ms", "peak MiB"])
    sizes = [(5, 16, 64)] if args.quick else [(5, 32, 256), (8, 8, 64)]
    for n, channels, batch in sizes:
        glgenn_case(table, n, channels, batch, repeats)
    print("\nGeometric-product layer, CGENN vs GLGENN weight sharing (geomlin only: no installed peer)\n")
    table.print()


def main(argv=None) -> None:
    args = parser(__doc__.splitlines()[0]).parse_args(argv)
    setup(args)
    repeats = args.repeats or (3 if args.quick else 7)
    print(header("geomlin.clifford: geometric-algebra attention and GLGENN layers", args, repeats))
    attention_table(args, repeats)
    glgenn_table(args, repeats)


if __name__ == "__main__":
    main()
