"""Benchmark: geomlin Gaunt tensor products against e3nn, and geomlin's own routes against each other.

Batch 1024 x 32 channels (``--quick``: 64 x 32, small degrees), float32, interleaved medians after
a warm-up, all in this process (ratios in a table come from this run only). Columns:

* ``auto`` / ``grid`` / ``fft``: :func:`geomlin.gaunt.gaunt_tensor_product` with that method
  (``fft`` is the paper's 2D-Fourier route, ``grid`` the fast O(L^3) route);
* ``dense GEMM`` -- **geomlin's own baseline**, not a peer: the plain exact sphere-grid GEMM
  ``((x1 @ Y1) * (x2 @ Y2)) @ W`` (O(L^4)) on the smallest exact grid;
* ``e3nn Gaunt TP`` -- **the peer**: ``e3nn.o3.TensorProduct`` in mode ``"uuu"`` on every Gaunt
  path (``l1 + l2 + l3`` even), ``path_weight = c**2`` and normalizations ``"none"`` (e3nn applies
  ``sqrt(path_weight) = c``), i.e. the same map (checked at start-up). Its construction and runs
  grow steeply with the degree: it is skipped above ``--e3nn-max-degree`` and, at the large sizes,
  timed once after a warm-up call on 8 rows (``e3nn runs`` column).

``--profile`` prints instead where the time of the ``fft`` and ``grid`` routes goes, stage by stage;
``--e3nn-swap`` runs ``examples/e3nn_swap.py`` (an e3nn potential trained with e3nn's and with
geomlin's tensor product) and prints its table; ``--drop-in`` times
:class:`geomlin.gaunt.GauntTensorProduct` against e3nn's module of the same arguments, in the layouts
of NequIP / MACE-like models, at a tiny and a large number of rows (see :func:`drop_in`);
``benchmarks/bench_gaunt_models.py`` swaps it into e3nn's own models.

Usage: ``python benchmarks/bench_gaunt.py [--quick] [--threads 1] [--sizes 8,8,16 12,12,12] [--profile]
[--drop-in]``.
"""

from __future__ import annotations

import importlib.util
import math
import sys
import time
from functools import partial
from pathlib import Path

import torch
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness

from geomlin.gaunt import gaunt_tensor_product, irreps_to_sphere, sphere_irreps, sphere_to_irreps
from geomlin.gaunt.method_tables import choose_method
from geomlin.gaunt.product import dense_tables

CHANNELS = 32
#: e3nn runs at or above this total degree are timed once (after a warm-up) instead of ``--repeats`` times.
E3NN_SINGLE_RUN_DEGREE = 24


def threej_000(l1: int, l2: int, l3: int) -> float:
    """``|(l1 l2 l3; 0 0 0)|`` in closed form (``l1 + l2 + l3`` even)."""
    J = l1 + l2 + l3
    g = J // 2
    f = math.factorial
    return math.sqrt(f(J - 2 * l1) * f(J - 2 * l2) * f(J - 2 * l3) / f(J + 1)) * f(g) / (
        f(g - l1) * f(g - l2) * f(g - l3))


def e3nn_gaunt_tp(lmax_in1: int, lmax_in2: int, lmax_out: int, channels: int):
    """e3nn's ``TensorProduct`` restricted to Gaunt paths: the same map as ``gaunt_tensor_product``."""
    from e3nn import o3

    ir1, ir2, ir3 = sphere_irreps(lmax_in1, channels), sphere_irreps(lmax_in2, channels), sphere_irreps(lmax_out, channels)
    instructions = []
    for i1, (_, a) in enumerate(ir1):
        for i2, (_, b) in enumerate(ir2):
            for i3, (_, c) in enumerate(ir3):
                if (a.l + b.l + c.l) % 2 or not abs(a.l - b.l) <= c.l <= a.l + b.l:
                    continue
                w = math.sqrt((2 * a.l + 1) * (2 * b.l + 1) * (2 * c.l + 1) / (4 * math.pi)) * threej_000(a.l, b.l, c.l)
                instructions.append((i1, i2, i3, "uuu", False, w * w))
    return o3.TensorProduct(ir1, ir2, ir3, instructions, irrep_normalization="none", path_normalization="none")


def check_e3nn_equivalence() -> float:
    """Max |e3nn - geomlin| on random inputs (e3nn keeps float32 3j tables: ~1e-7)."""
    L, C = 2, 3
    tp = e3nn_gaunt_tp(L, L, L, C).double()
    x1 = torch.randn(4, C, (L + 1) ** 2, dtype=torch.float64)
    x2 = torch.randn(4, C, (L + 1) ** 2, dtype=torch.float64)
    ref = irreps_to_sphere(tp(sphere_to_irreps(x1), sphere_to_irreps(x2)), sphere_irreps(L, C))
    err = (ref - gaunt_tensor_product(x1, x2, L, method="direct")).abs().max().item()
    if err > 1e-5:
        raise SystemExit(f"e3nn Gaunt TP does not match geomlin: {err}")
    return err


def _call(fn, backward: bool):
    out = fn()
    if backward:
        out.backward(torch.ones_like(out))
    return out


def _once(fn) -> tuple[float, int]:
    """Seconds and peak memory of one call."""
    box = {}

    def run():
        t0 = time.perf_counter()
        fn()
        box["t"] = time.perf_counter() - t0

    peak = harness.peak_memory(run)
    return box["t"], peak


_E3NN_CACHE: dict = {}


def run_size(size, batch: int, repeats: int, backward: bool, e3nn_max: int, fft_max: int) -> dict:
    L1, L2, Lo = size
    x1 = torch.randn(batch, CHANNELS, (L1 + 1) ** 2, requires_grad=backward)
    x2 = torch.randn(batch, CHANNELS, (L2 + 1) ** 2, requires_grad=backward)
    flat1 = x1.detach().reshape(-1, x1.shape[-1]).requires_grad_(backward)
    flat2 = x2.detach().reshape(-1, x2.shape[-1]).requires_grad_(backward)
    Y1, Y2, W = dense_tables(L1, L2, Lo, dtype=torch.float32)
    fns = {m: partial(gaunt_tensor_product, x1, x2, Lo, method=m) for m in ("auto", "grid")}
    if max(size) <= fft_max:
        fns["fft"] = partial(gaunt_tensor_product, x1, x2, Lo, method="fft")
    fns["dense GEMM"] = lambda: ((flat1 @ Y1) * (flat2 @ Y2)) @ W
    calls = {k: partial(_call, f, backward) for k, f in fns.items()}
    result = {"auto picks": choose_method(L1, L2, Lo, "cpu", torch.float32), "ms": {}, "mem": {}}
    for k, v in harness.measure(calls, repeats).items():
        result["ms"][k] = v * 1e3
    for k in ("grid", "dense GEMM"):
        result["mem"][k] = harness.peak_memory(calls[k])
    if L1 + L2 + Lo <= e3nn_max:
        if size not in _E3NN_CACHE:
            t0 = time.perf_counter()
            _E3NN_CACHE[size] = (e3nn_gaunt_tp(L1, L2, Lo, CHANNELS), time.perf_counter() - t0)
        tp, result["e3nn build s"] = _E3NN_CACHE[size]
        e1 = sphere_to_irreps(x1.detach()).requires_grad_(backward)
        e2 = sphere_to_irreps(x2.detach()).requires_grad_(backward)
        call = partial(_call, partial(tp, e1, e2), backward)
        if L1 + L2 + Lo >= E3NN_SINGLE_RUN_DEGREE:
            small1 = e1.detach()[:8].requires_grad_(backward)
            small2 = e2.detach()[:8].requires_grad_(backward)
            _call(partial(tp, small1, small2), backward)  # warm-up on 8 rows (any lazy set-up), then one full run
            seconds, peak = _once(call)
            result["e3nn runs"] = 1
        else:
            seconds = harness.measure({"e3nn": call}, repeats)["e3nn"]
            peak = harness.peak_memory(call)
            result["e3nn runs"] = repeats
        result["ms"]["e3nn Gaunt TP"] = seconds * 1e3
        result["mem"]["e3nn Gaunt TP"] = peak
    return result


COLUMNS = ("auto", "grid", "fft", "dense GEMM", "e3nn Gaunt TP")


def print_table(rows, title: str) -> None:
    print(f"**{title}** (ms; ratios = time of the other / time of auto, this run)\n")
    table = harness.Table(["lmax_in1, lmax_in2, lmax_out", "auto picks"] + [f"{c}" for c in COLUMNS]
                          + ["auto vs e3nn", "auto vs dense GEMM", "grid vs dense GEMM", "e3nn runs",
                             "peak mem grid / dense / e3nn"])
    for size, r in rows:
        ms = r["ms"]
        cells = [harness.ms(ms[c] / 1e3) if c in ms else "skipped" for c in COLUMNS]
        e3 = harness.ratio(ms["e3nn Gaunt TP"], ms["auto"]) if "e3nn Gaunt TP" in ms else "skipped (e3nn cap)"
        mem = " / ".join(harness.mib(r["mem"][k]) if k in r["mem"] else "–" for k in ("grid", "dense GEMM", "e3nn Gaunt TP"))
        table.add(", ".join(map(str, size)), r["auto picks"], *cells, e3,
                  harness.ratio(ms["dense GEMM"], ms["auto"]), harness.ratio(ms["dense GEMM"], ms["grid"]),
                  r.get("e3nn runs", "–"), mem)
    table.print()


# ----------------------------------------------------------------------------- profile
def profile(batch: int, repeats: int) -> None:
    """Per-stage times of the fft and grid routes, and their ratio as the degree grows."""
    from geomlin.gaunt import fourier as F
    from geomlin.gaunt import grid as G
    from geomlin.gaunt import grid_tables as GT

    L = 8
    x1 = torch.randn(batch, (L + 1) ** 2)
    x2 = torch.randn(batch, (L + 1) ** 2)
    n_u, n_v = F.fft_sizes(L, L, L)
    a1, i1, a2, i2, proj, rows = F._tables(L, L, L, "cpu", torch.float32, None)
    spec1, spec2 = F.spectrum(x1, a1, i1, L, n_u, n_v), F.spectrum(x2, a2, i2, L, n_u, n_v)
    v1 = torch.fft.irfft2(spec1, s=(n_u, n_v), norm="forward")
    v2 = torch.fft.irfft2(spec2, s=(n_u, n_v), norm="forward")
    prod = v1 * v2
    spec = torch.fft.rfft2(prod, norm="forward")[:, :, : L + 1]
    u_index = torch.arange(-2 * L, 2 * L + 1) % n_u

    def back():
        s = torch.view_as_real(spec.index_select(1, u_index))
        cols = s.permute(2, 3, 1, 0).reshape(L + 1, -1, s.shape[0])
        return torch.bmm(proj, cols).view(-1, batch).index_select(0, rows).T.contiguous()

    fft_stages = {
        "SH -> 2D Fourier (per-m tables, both inputs)": lambda: (F.spectrum(x1, a1, i1, L, n_u, n_v),
                                                                F.spectrum(x2, a2, i2, L, n_u, n_v)),
        f"irfft2 to a {n_u} x {n_v} grid (both inputs)": lambda: (torch.fft.irfft2(spec1, s=(n_u, n_v), norm="forward"),
                                                                 torch.fft.irfft2(spec2, s=(n_u, n_v), norm="forward")),
        "pointwise product": lambda: v1 * v2,
        "rfft2 back": lambda: torch.fft.rfft2(prod, norm="forward"),
        "2D Fourier -> SH (per-m tables)": back,
        "whole fft route": lambda: F.gaunt_fourier(x1, x2, L, L, L),
    }
    nt, nphi = GT.exact_grid_size(3 * L)
    s1 = GT.synthesis_on(L, nt, nphi, "cpu", torch.float32)
    pr = GT.projection_on(L, nt, nphi, "cpu", torch.float32)
    ws = G._Workspace(x1)
    g = G.legendre_chunk(x1, s1, ws, "a").clone()
    X = G.quarter_chunk(x1, s1, ws, "b").clone()
    cos_even, cos_odd, sin_even, sin_odd = s1.quarter

    def longitude():
        out = torch.empty(4, cos_even.shape[0], g.shape[-1])
        torch.mm(cos_even, g[0::2, 0], out=out[0])
        torch.mm(cos_odd, g[1::2, 0], out=out[1])
        torch.mm(sin_even, g[0::2, 1], out=out[2])
        torch.mm(sin_odd, g[1::2, 1], out=out[3])

    def product():
        return G.class_product(X, X, torch.empty_like(X))

    grid_stages = {
        f"Legendre GEMMs to {nt} latitudes (both inputs)": lambda: (G.legendre_chunk(x1, s1, G._Workspace(x1), "a"),
                                                                    G.legendre_chunk(x2, s1, G._Workspace(x1), "a")),
        f"longitude DFT GEMMs, quarter circle of {nphi} (both inputs)": lambda: (longitude(), longitude()),
        "pointwise product (16 fused multiply-adds)": product,
        "projection (longitude + Legendre)": lambda: G.project_quarter_chunk(X, pr, batch, G._Workspace(x1)),
        "whole grid route": lambda: G.gaunt_on_grid(x1, x2, L, L, L),
    }
    times = harness.measure({**{("fft", k): v for k, v in fft_stages.items()},
                             **{("grid", k): v for k, v in grid_stages.items()}}, repeats)
    print(f"**Where the time goes** (lmax_in1 = lmax_in2 = lmax_out = {L}, {batch} rows, float32, ms)\n")
    table = harness.Table(["route", "stage", "ms", "share of the route"])
    for route, stages in (("fft", fft_stages), ("grid", grid_stages)):
        whole = times[(route, list(stages)[-1])]
        for name in stages:
            table.add(route, name, harness.ms(times[(route, name)]), f"{100 * times[(route, name)] / whole:.0f}%")
    table.print()
    print("**fft route vs grid route as the degree grows** (lmax_in1 = lmax_in2 = lmax_out = L; rows scaled so each "
          "size does similar work)\n")
    table = harness.Table(["L", "rows", "grid ms", "fft ms", "fft / grid"])
    for L in (4, 8, 16, 32, 48):
        n = max(32, batch * 64 // (L * L))
        a, b = torch.randn(n, (L + 1) ** 2), torch.randn(n, (L + 1) ** 2)
        t = harness.measure({"grid": lambda a=a, b=b, L=L: G.gaunt_on_grid(a, b, L, L, L),
                             "fft": lambda a=a, b=b, L=L: F.gaunt_fourier(a, b, L, L, L)}, repeats)
        table.add(L, n, harness.ms(t["grid"]), harness.ms(t["fft"]), f"{t['fft'] / t['grid']:.1f}x")
    table.print()


# ----------------------------------------------------------------------------- the e3nn drop-in
#: Rows of the drop-in section (and of its --quick version).
#: Rows of the drop-in section: a tiny call (per-call overhead) and a large one (edges of a batch).
DROP_IN_ROWS = (16, 8192)
DROP_IN_QUICK_ROWS = (16, 256)
#: ``(case, channels, lmax)`` of the drop-in section: at the widths of NequIP (32) and MACE (128) models;
#: features (x) features at 32 and lmax 2 (e3nn's fully connected product of two such features takes about
#: a minute per call at lmax 3, tens of GiB at 128 channels).
DROP_IN_CASES = [("x (x) SH", 32, 2), ("x (x) SH", 32, 3), ("x (x) SH", 128, 2), ("x (x) SH", 128, 3),
                 ("convolution", 32, 2), ("convolution", 32, 3), ("convolution", 128, 2), ("convolution", 128, 3),
                 ("x (x) 0e", 32, 2), ("x (x) 0e", 128, 3), ("features (x) features", 32, 2)]
DROP_IN_QUICK_CASES = [("x (x) SH", 8, 2), ("convolution", 8, 2), ("x (x) 0e", 8, 2), ("features (x) features", 8, 2)]


def convolution_instructions(irreps_node, irreps_sh, lmax_out: int):
    """The tensor product of a NequIP / MACE interaction block: mode ``"uvu"`` on every path of
    ``irreps_node (x) irreps_sh`` up to ``lmax_out`` (both parities), one output block per path, weights per edge."""
    from e3nn import o3

    mid, instructions = [], []
    for i1, (mul, a) in enumerate(irreps_node):
        for i2, (_, b) in enumerate(irreps_sh):
            for c in a * b:
                if c.l <= lmax_out:
                    instructions.append((i1, i2, len(mid), "uvu", True))
                    mid.append((mul, c))
    return (irreps_node, irreps_sh, o3.Irreps(mid), instructions), {"shared_weights": False, "internal_weights": False}


def drop_in_arguments(case: str, channels: int, lmax: int):
    """``(args, kwargs)`` of one row of the drop-in section, the same for e3nn and geomlin."""
    from e3nn import o3

    node = sphere_irreps(lmax, channels)
    sh = o3.Irreps.spherical_harmonics(lmax)
    if case == "convolution":
        return convolution_instructions(node, sh, lmax)
    other = {"x (x) SH": sh, "x (x) 0e": o3.Irreps("0e"), "features (x) features": node}[case]
    return (node, other, node), {}


def drop_in(rows_list, cases, repeats: int) -> None:
    """Time GauntTensorProduct against e3nn's module of the same arguments, forward and forward + backward.

    * ``x (x) SH``: node features ``C x (0e + 1o + ... + Le)`` times their spherical harmonics
      ``1x0e + 1x1o + ...``, back to the node irreps: ``FullyConnectedTensorProduct``, shared weights;
    * ``convolution``: the ``"uvu"`` ``TensorProduct`` of NequIP / MACE interaction blocks (every path up to
      ``lmax``, the odd ones included, one output block per path) with per-edge weights
      (``weight (rows, weight_numel)``, as a radial MLP gives them);
    * ``x (x) 0e``: ``FullyConnectedTensorProduct`` with a scalar node attribute (e3nn's self-connections);
    * ``features (x) features``: two node features, ``FullyConnectedTensorProduct``.

    Both sides compute the same function with the same weights (``same output``: the largest difference
    relative to the largest output, e3nn's Clebsch-Gordan tables being float32). Each case at a tiny and a
    large number of rows: the tiny one measures the per-call overhead. Peak memory: of one forward, or
    forward + backward, above what was in use before (inputs excluded).
    """
    from e3nn import o3

    from geomlin.gaunt import GauntTensorProduct

    columns = ["case", "channels", "lmax", "rows", "e3nn ms", "geomlin ms", "geomlin speed", "peak mem e3nn",
               "peak mem geomlin", "geomlin memory", "same output"]
    tables = {False: harness.Table(columns), True: harness.Table(columns)}
    for case, channels, lmax in tqdm(cases, desc="drop-in", file=sys.stderr, leave=False):
        args, kwargs = drop_in_arguments(case, channels, lmax)
        torch.manual_seed(0)
        e3 = (o3.TensorProduct if len(args) == 4 else o3.FullyConnectedTensorProduct)(*args, **kwargs)
        gl = GauntTensorProduct(*args, **kwargs)
        if e3.internal_weights:
            gl.load_state_dict(e3.state_dict(), strict=False)
        for rows in rows_list:
            x1, x2 = e3.irreps_in1.randn(rows, -1), e3.irreps_in2.randn(rows, -1)
            w = None if e3.internal_weights else torch.randn(rows, e3.weight_numel)
            ref = e3(x1, x2, w)
            same = (gl(x1, x2, w) - ref).abs().max().item() / max(ref.abs().max().item(), 1e-30)
            for backward in (False, True):
                leaves = [t if t is None else t.clone().requires_grad_(backward) for t in (x1, x2, w)]
                calls = {"e3nn": partial(_call, partial(e3, *leaves), backward),
                         "geomlin": partial(_call, partial(gl, *leaves), backward)}
                seconds = harness.measure(calls, repeats)
                mem = {k: harness.peak_memory(f) for k, f in calls.items()}
                tables[backward].add(case, channels, lmax, f"{rows:,}", harness.ms(seconds["e3nn"]),
                                     harness.ms(seconds["geomlin"]), harness.ratio(seconds["e3nn"], seconds["geomlin"]),
                                     harness.mib(mem["e3nn"]), harness.mib(mem["geomlin"]),
                                     f"{mem['geomlin'] / max(mem['e3nn'], 1):.2f}x", f"{same:.0e}")
    for backward in (False, True):
        print(f"**{'forward + backward' if backward else 'forward'}** (ms, medians; geomlin speed = e3nn time / "
              "geomlin time; geomlin memory = its peak / e3nn's)\n")
        tables[backward].print()


def main(argv=None) -> None:
    p = harness.parser(__doc__.splitlines()[0])
    p.add_argument("--sizes", nargs="+", default=None, help="lmax_in1,lmax_in2,lmax_out triples (default 8,8,16 12,12,12 "
                   "16,16,16 and small ones)")
    p.add_argument("--e3nn-max-degree", type=int, default=36,
                   help="largest lmax_in1 + lmax_in2 + lmax_out for the e3nn Gaunt TP (its construction grows steeply)")
    p.add_argument("--fft-max", type=int, default=12, help="largest degree for the (slow on CPU) fft route")
    p.add_argument("--forward-only", action="store_true")
    p.add_argument("--profile", action="store_true", help="per-stage times of the fft and grid routes instead")
    p.add_argument("--e3nn-swap", action="store_true", help="train examples/e3nn_swap.py and print its table instead")
    p.add_argument("--drop-in", action="store_true", help="the e3nn drop-in against the e3nn modules it replaces")
    args = p.parse_args(argv)
    harness.setup(args)
    if args.drop_in:
        rows = DROP_IN_QUICK_ROWS if args.quick else DROP_IN_ROWS
        repeats = args.repeats or (3 if args.quick else 5)
        print(harness.header("GauntTensorProduct against e3nn's tensor products, same arguments", args, repeats))
        print(f"Peer: e3nn {harness.peer_version('e3nn')}, in this process: the module of the same arguments "
              f"and weights. {' and '.join(f'{r:,}' for r in rows)} rows (edges or nodes), float32 "
              "(`python benchmarks/bench_gaunt.py --help` and `drop_in` say exactly what runs).\n")
        drop_in(rows, DROP_IN_QUICK_CASES if args.quick else DROP_IN_CASES, repeats)
        return
    if args.quick:
        sizes, batch, repeats, e3nn_max = [(2, 2, 2), (4, 4, 4), (4, 4, 8)], 64, args.repeats or 3, 16
    else:
        sizes = ([tuple(int(v) for v in s.split(",")) for s in args.sizes] if args.sizes else
                 [(2, 2, 2), (4, 4, 4), (8, 8, 16), (12, 12, 12), (16, 16, 16)])
        batch, repeats, e3nn_max = 1024, args.repeats or 5, args.e3nn_max_degree
    if args.e3nn_swap:
        print(harness.header("An e3nn potential with its tensor product swapped for geomlin's Gaunt product", args, None))
        example = Path(__file__).resolve().parents[1] / "examples" / "e3nn_swap.py"
        spec = importlib.util.spec_from_file_location("e3nn_swap", example)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module.main((["--quick"] if args.quick else []) + ["--threads", str(args.threads)])
        return
    title = "Gaunt tensor products, geomlin vs e3nn" if not args.profile else "Gaunt routes, per-stage profile"
    print(harness.header(title, args, repeats))
    if args.profile:
        profile(4096 if not args.quick else 256, repeats)
        return
    err = check_e3nn_equivalence()
    version = harness.peer_version("e3nn")
    print(f"Peer: e3nn {version} `o3.TensorProduct` on the Gaunt paths (same outputs as geomlin: max |difference| "
          f"{err:.1e} at L = 2 in float64); `dense GEMM` is geomlin's own O(L^4) baseline. Batch {batch} x "
          f"{CHANNELS} channels, float32; e3nn skipped above lmax_in1 + lmax_in2 + lmax_out = {e3nn_max}.\n")
    for backward in (False,) if args.forward_only else (False, True):
        rows = []
        for size in tqdm(sizes, desc="forward + backward" if backward else "forward", file=sys.stderr, leave=False):
            rows.append((size, run_size(size, batch, repeats, backward, e3nn_max, args.fft_max)))
        print_table(rows, "forward + backward" if backward else "forward")
        builds = [f"{', '.join(map(str, s))}: {r['e3nn build s']:.0f} s" for s, r in rows if "e3nn build s" in r]
        if builds and not backward:
            print("e3nn TensorProduct construction time: " + "; ".join(builds) + "\n")


if __name__ == "__main__":
    main()
