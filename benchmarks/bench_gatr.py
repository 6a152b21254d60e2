"""Benchmark: geomlin's GATr against the reference GATr (Qualcomm's geometric-algebra-transformer).

Both models are built with the same sizes and geomlin's is loaded from the reference's weights
(:func:`geomlin.gatr.reference.gatr_from_reference`), so they compute the same function (the
table prints the largest output difference) with the same number of parameters. Cases:

1. paper-style: 8 sets x 256 items, 16 multivector + 32 scalar hidden channels, 4 blocks,
   8 heads; forward (no grad) and forward + backward;
2. one set of 16,384 items, 1 block, 8 multivector + 16 scalar channels, 4 heads, no grad;
3. 8 sets x 2,048 items given to geomlin as a flat PyG-style batch vector, to the reference as
   its padded batch (equal sizes, so no mask), same sizes as case 2.

Time is the median of interleaved runs after a warm-up; peak memory is the high-water mark of
the resident set above the start of the call (one call each, after returning freed heap memory
to the system so that earlier calls do not hide it). ``--large N`` adds a one-set forward of N
items for geomlin alone (one timed call, e.g. ``--large 100000``).

A second table compares ways to run attention over a flat batch of variable-size sets (the
attention call alone, 4 query heads sharing one key/value head, width 72 as in cases 2-3):
geomlin's ``bucketed`` (the default) and ``chunked`` layouts, and PyTorch's nested jagged
tensors (one SDPA call on an NJT batch), on equal and on uneven set sizes.

The reference is imported from ``$GEOMLIN_REFERENCE_GATR`` (a checkout of the repository) or
from an installed ``gatr`` package; it needs ``einops``, not ``xformers`` (a stand-in module
is registered when xformers is missing: the padded batches used here never call it). When it
cannot be imported the table says so and shows geomlin alone.

    python benchmarks/bench_gatr.py [--quick] [--threads N] [--large 100000]
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import time
import types

import torch
import torch.nn.functional as F
from harness import Table, header, measure, mib, ms, parser, peak_memory, ratio, setup

from geomlin.batching import batch_layout
from geomlin.gatr import GATr
from geomlin.gatr.attention import attend
from geomlin.gatr.reference import gatr_from_reference

#: Environment variable naming a checkout of the reference repository.
REFERENCE_PATH_VARIABLE = "GEOMLIN_REFERENCE_GATR"


def import_reference():
    """The reference ``gatr`` package, or ``(None, reason)``."""
    path = os.environ.get(REFERENCE_PATH_VARIABLE)
    if path and path not in sys.path:
        sys.path.insert(0, path)
    try:
        importlib.import_module("xformers.ops")
    except ImportError:  # the reference imports xformers at module level; padded batches never call it
        xf, ops, fmha = (types.ModuleType(n) for n in ("xformers", "xformers.ops", "xformers.ops.fmha"))

        class AttentionBias:
            """Stand-in for xformers' attention bias type."""

        def memory_efficient_attention(*args, **kwargs):
            raise RuntimeError("xformers is not installed (stand-in module)")

        ops.AttentionBias, ops.memory_efficient_attention, ops.fmha = AttentionBias, memory_efficient_attention, fmha
        fmha.BlockDiagonalMask = type("BlockDiagonalMask", (AttentionBias,), {})
        xf.ops = ops
        sys.modules.update({"xformers": xf, "xformers.ops": ops, "xformers.ops.fmha": fmha})
    try:
        return importlib.import_module("gatr"), None
    except ImportError as err:
        return None, (f"reference GATr not importable ({err}); set {REFERENCE_PATH_VARIABLE} to a checkout of "
                      "github.com/Qualcomm-AI-research/geometric-algebra-transformer")


def reference_source(ref_pkg) -> str:
    """Where the reference came from, without this machine's paths: a checkout's commit, or "installed"."""
    folder = os.path.dirname(os.path.dirname(ref_pkg.__file__))
    try:
        commit = subprocess.run(["git", "-C", folder, "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, check=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "installed package"
    return f"a checkout at commit {commit}"


def build(ref_pkg, mv: int, s: int, blocks: int, heads: int):
    """A reference model and geomlin's copy of it (or geomlin alone with its own initialisation)."""
    if ref_pkg is None:
        return None, GATr(1, 1, mv, 1, 1, s, num_blocks=blocks, num_heads=heads).eval()
    ref = ref_pkg.GATr(1, 1, mv, 1, 1, s, attention={"num_heads": heads}, mlp={}, num_blocks=blocks).eval()
    return ref, gatr_from_reference(ref).eval()


def peak(fn) -> int:
    """:func:`harness.peak_memory` (which hands freed heap memory back to the system first)."""
    return peak_memory(fn)


def params(model) -> str:
    return f"{sum(p.numel() for p in model.parameters()):,}"


def forward(model, mv, s, **kwargs):
    def run():
        with torch.no_grad():
            model(mv, s, **kwargs)
    return run


def train_step(model, mv, s):
    def run():
        out_mv, out_s = model(mv, s)
        (out_mv.square().mean() + out_s.square().mean()).backward()
    return run


def max_diff(ref, ours, mv, s, ours_kwargs=None) -> float:
    with torch.no_grad():
        a = ref(mv, s)
        b = ours(mv.reshape(-1, *mv.shape[-2:]) if ours_kwargs else mv,
                 s.reshape(-1, s.shape[-1]) if ours_kwargs else s, **(ours_kwargs or {}))
    return max((x.reshape(y.shape) - y).abs().max().item() for x, y in zip(a, b))


def main(argv=None) -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--large", type=int, default=None, help="also run one set of this many items (geomlin only)")
    args = p.parse_args(argv)
    setup(args)
    repeats = args.repeats or (3 if args.quick else 5)
    ref_pkg, missing = import_reference()
    print(header("GATr: geomlin vs the reference implementation", args, repeats))
    if ref_pkg is not None:
        print(f"Reference: gatr {getattr(ref_pkg, '__version__', '?')} ({reference_source(ref_pkg)}); geomlin's "
              "model is loaded from its weights (same function, same parameter count).\n")
    else:
        print(f"**{missing}** — geomlin alone below.\n")

    table = Table(["case", "params (ref / geomlin)", "reference ms", "geomlin ms", "speed-up",
                   "reference peak", "geomlin peak", "max |diff|"])

    # 1. paper-style
    sets, items = (2, 256) if args.quick else (8, 256)
    ref, ours = build(ref_pkg, 16, 32, 4, 8)
    mv, s = torch.randn(sets, items, 1, 16), torch.randn(sets, items, 1)
    diff = f"{max_diff(ref, ours, mv, s):.1e}" if ref is not None else "–"
    for name, make in (("fwd", forward), ("fwd+bwd", train_step)):
        fns = {"ours": make(ours, mv, s)}
        if ref is not None:
            fns["ref"] = make(ref, mv, s)
        t = measure(fns, repeats)
        peaks = {k: peak(f) for k, f in fns.items()}
        table.add(f"paper-style {sets} x {items} items, 4 blocks, {name}",
                  f"{params(ref) if ref is not None else '–'} / {params(ours)}",
                  ms(t["ref"]) if ref is not None else "not installed", ms(t["ours"]),
                  ratio(t["ref"], t["ours"]) if ref is not None else "–",
                  mib(peaks["ref"]) if ref is not None else "–", mib(peaks["ours"]), diff)

    # 2. one large set, 3. a flat batch of equal sets
    big = 4096 if args.quick else 16384
    sets2, items2 = (4, 512) if args.quick else (8, 2048)
    ref, ours = build(ref_pkg, 8, 16, 1, 4)
    reps = max(1, repeats - 2)
    for label, mv, s, kwargs in (
            (f"one set of {big:,} items, 1 block, fwd", torch.randn(1, big, 1, 16), torch.randn(1, big, 1), None),
            (f"{sets2} x {items2:,} items, 1 block, fwd (geomlin: flat batch vector; reference: padded)",
             torch.randn(sets2, items2, 1, 16), torch.randn(sets2, items2, 1),
             {"batch": torch.arange(sets2).repeat_interleave(items2)})):
        if kwargs:
            fns = {"ours": forward(ours, mv.reshape(-1, 1, 16), s.reshape(-1, 1), **kwargs)}
        else:
            fns = {"ours": forward(ours, mv, s)}
        if ref is not None:
            fns["ref"] = forward(ref, mv, s)
        t = measure(fns, reps)
        peaks = {k: peak(f) for k, f in fns.items()}
        diff = f"{max_diff(ref, ours, mv, s, kwargs):.1e}" if ref is not None else "–"
        table.add(label, f"{params(ref) if ref is not None else '–'} / {params(ours)}",
                  ms(t["ref"]) if ref is not None else "not installed", ms(t["ours"]),
                  ratio(t["ref"], t["ours"]) if ref is not None else "–",
                  mib(peaks["ref"]) if ref is not None else "–", mib(peaks["ours"]), diff)

    if args.large:
        mv, s = torch.randn(1, args.large, 1, 16), torch.randn(1, args.large, 1)
        run = forward(ours, mv, s)
        seconds = []

        def timed():
            t0 = time.perf_counter()
            run()
            seconds.append(time.perf_counter() - t0)
        used = peak(timed)
        table.add(f"one set of {args.large:,} items, 1 block, fwd (geomlin only, one call)", f"– / {params(ours)}",
                  "–", ms(seconds[0]), "–", "–", mib(used), "–")
    table.print()
    print("Speed-up = reference time / geomlin time; peak = resident memory above the start of one call. "
          "Both run one intra-op thread by default, float32, in this process.\n")
    flat_methods(args, repeats)


def _nested_attention(q, k, v, sizes, scale):
    """One SDPA call on nested jagged tensors (PyTorch's variable-length batch)."""
    qs, ks, vs = (t[0].split(sizes) for t in (q, k, v))
    heads = q.shape[2]

    def nest(parts, h):  # (sets, j, heads, D) -> (sets, heads, j, D)
        return torch.nested.nested_tensor([p.expand(-1, h, -1) for p in parts], layout=torch.jagged).transpose(1, 2)
    return F.scaled_dot_product_attention(nest(qs, heads), nest(ks, heads), nest(vs, heads), scale=scale)


def flat_methods(args, repeats: int) -> None:
    """Attention alone over a flat batch: geomlin's layouts and nested jagged tensors."""
    gen = torch.Generator().manual_seed(0)
    equal = [512] * 4 if args.quick else [2048] * 8
    uneven = torch.randint(16, 256 if args.quick else 1024, (24 if args.quick else 32,), generator=gen).tolist()
    table = Table(["sets", "items", "bucketed ms", "chunked ms", "nested jagged ms",
                   "bucketed peak", "chunked peak", "nested jagged peak"])
    for name, sizes in (("equal", equal), ("uneven", uneven)):
        n = sum(sizes)
        batch = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes))
        q, k, v = torch.randn(1, n, 4, 72), torch.randn(1, n, 1, 72), torch.randn(1, n, 1, 72)
        fns = {}
        for method in ("bucketed", "chunked"):
            layout = batch_layout(batch=batch, method=method)

            def run(layout=layout, q=q, k=k, v=v):
                with torch.no_grad():
                    attend(q, k, v, layout, 0.1)
            fns[method] = run

        def njt(q=q, k=k, v=v, sizes=sizes):
            with torch.no_grad():
                _nested_attention(q, k, v, sizes, 0.1)
        try:
            njt()
            fns["njt"] = njt
        except (RuntimeError, NotImplementedError) as err:  # an unsupported combination on this build
            print(f"nested jagged SDPA unavailable: {type(err).__name__}: {str(err)[:120]}")
        t = measure(fns, max(1, repeats - 2))
        peaks = {key: peak(f) for key, f in fns.items()}
        table.add(f"{len(sizes)} {name} ({min(sizes)}-{max(sizes)} items)", f"{n:,}", ms(t["bucketed"]),
                  ms(t["chunked"]), ms(t["njt"]) if "njt" in t else "–", mib(peaks["bucketed"]),
                  mib(peaks["chunked"]), mib(peaks["njt"]) if "njt" in peaks else "–")
    print("**Attention over a flat batch** (the SDPA part alone, 4 query heads, 1 key/value head, width 72):\n")
    table.print()


if __name__ == "__main__":
    main()
