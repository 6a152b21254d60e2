"""GPU check: the CUDA paths a CPU machine cannot exercise, in one run of under 8 minutes on one GPU.

    python benchmarks/gpu_check.py [--device cuda] [--quick] [--dry-run]
    geomlin bench --device cuda [--quick] [--dry-run]        # the same

Steps (:data:`PLAN`), each with a time budget; a step that runs past its budget skips its remaining
cases, and the budgets add up to less than eight minutes:

1. ``tests``: the CUDA-relevant tests (:data:`CUDA_TESTS`: every task model's training step on the
   GPU, synchronisation-checked, and the Triton kernels) in a fresh pytest process;
2. ``gatr``: GATr forward + backward on a padded batch (``mask``) and on the same sets as a flat
   batch (``batch`` vector), under each SDPA backend (``torch.nn.attention.sdpa_kernel``), with the
   largest difference from the math backend;
3. ``gaunt``: the Gaunt routes (``grid``, ``fft``, ``dense``, ``triton``) against e3nn's
   ``TensorProduct`` on the Gaunt paths, on the same GPU;
4. ``bf16``: forward + backward under bfloat16 autocast against float32 (GATr, PointNet, the EGNN
   potential): time and relative error;
5. ``compile``: ``torch.compile`` of GATr: the first call (compilation) and the steady state
   against eager;
6. ``train``: ``geomlin train pointcloud --device cuda --epochs 2`` in a fresh process.

Prints one markdown table (check, case, status, time, detail). Status ``unsupported`` means the
kernel does not take these inputs (e.g. flash attention with a padding mask), which is an answer,
not a failure. Exit status: 0 when no step failed, 1 otherwise, 2 when there is no CUDA device.

``--dry-run`` lists the plan and touches no GPU; ``--smoke`` runs every step at tiny sizes on any
``--device`` (the test suite runs it on the CPU, to keep this script working between GPU days).
"""

from __future__ import annotations

import argparse
import math
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))
import harness

#: Test files whose subject is the GPU (they skip without CUDA).
CUDA_TESTS = ("tests/train/test_on_cuda.py", "tests/gaunt/test_kernels.py", "tests/gaunt/test_method_tables.py")
#: The whole check must fit in this many seconds on one GPU (the sum of the step budgets).
TOTAL_BUDGET_S = 480
#: Seconds the CUDA context and imports take before the first step (part of the total).
STARTUP_S = 20
#: e3nn's TensorProduct is built only up to this total degree ``L1 + L2 + Lo`` (its construction
#: grows steeply with the degree).
E3NN_MAX_DEGREE = 32
#: GATr blocks of the compiled model (compilation time grows with the blocks).
COMPILE_BLOCKS = 2


@dataclass
class Row:
    """One line of the table."""

    check: str
    case: str
    status: str
    time: str = "–"
    detail: str = ""


@dataclass
class Context:
    """What every step sees: the device, the sizes, and its own deadline."""

    device: torch.device
    quick: bool
    smoke: bool
    deadline: float = math.inf
    rows: list[Row] = field(default_factory=list)

    def left(self) -> float:
        return self.deadline - time.perf_counter()

    def add(self, check: str, case: str, status: str, time_s: float | None = None, detail: str = "",
            unit: str = "ms") -> None:
        shown = "–" if time_s is None else (f"{time_s * 1e3:.2f} ms" if unit == "ms" else f"{time_s:.1f} s")
        self.rows.append(Row(check, case, status, shown, detail))

    def over_budget(self, check: str, case: str) -> bool:
        if self.left() > 0:
            return False
        self.add(check, case, "skipped: budget")
        return True

    @property
    def repeats(self) -> int:
        return 1 if self.smoke else (3 if self.quick else 5)


@dataclass(frozen=True)
class Step:
    """One check: its name, what it does, its time budget and the function that runs it."""

    name: str
    budget_s: int
    what: str
    run: Callable[[Context], None]


def _short(exc: BaseException | str, limit: int = 100) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return re.sub(r"\s+", " ", text).replace("|", "/")[:limit]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _fwd_bwd(fn: Callable[[], object]) -> Callable[[], None]:
    """``fn`` followed by the backward pass of the sum of squares of its floating outputs."""
    def run():
        out = fn()
        outs = [o for o in (out if isinstance(out, (tuple, list)) else (out,))
                if isinstance(o, torch.Tensor) and o.is_floating_point()]
        sum((o.float() ** 2).mean() for o in outs).backward()
    return run


def _first(out) -> torch.Tensor:
    return out[0] if isinstance(out, (tuple, list)) else out


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


# ----------------------------------------------------------------------------- 1. tests
def step_tests(ctx: Context) -> None:
    """The CUDA-relevant tests in a fresh pytest process (their own skips apply off a GPU)."""
    files = [f for f in CUDA_TESTS if (ROOT / f).is_file()]
    if ctx.smoke:  # the test suite calls this script: collecting is enough to prove the wiring
        files = files[:1]
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *files]
    if ctx.smoke:
        command.append("--collect-only")
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=max(ctx.left(), 1),
                              check=False)
    except subprocess.TimeoutExpired:
        ctx.add("tests", " ".join(files), "failed: timed out", time.perf_counter() - t0, unit="s")
        return
    tail = [line for line in proc.stdout.strip().splitlines() if line.strip()]
    summary = tail[-1] if tail else proc.stderr.strip()[-140:]
    ctx.add("tests", " ".join(Path(f).name for f in files), "ok" if proc.returncode == 0 else
            f"failed (exit {proc.returncode})", time.perf_counter() - t0, summary.strip("= "), unit="s")


# ----------------------------------------------------------------------------- 2. gatr
def _sdpa_backends() -> list:
    from torch.nn.attention import SDPBackend

    names = ("MATH", "EFFICIENT_ATTENTION", "FLASH_ATTENTION", "CUDNN_ATTENTION")
    return [getattr(SDPBackend, n) for n in names if hasattr(SDPBackend, n)]


def _gatr_inputs(ctx: Context):
    """Sets of different sizes, padded ``(B, N, 1, 16)`` with ``mask`` and flat ``(items, 1, 16)`` with a planned ``batch``."""
    sets, longest = (2, 8) if ctx.smoke else ((8, 256) if ctx.quick else (16, 1024))
    g = torch.Generator().manual_seed(0)
    sizes = torch.randint(longest // 2, longest + 1, (sets,), generator=g)
    sizes[0] = longest
    mask = torch.arange(longest)[None, :] < sizes[:, None]
    mv = torch.randn(sets, longest, 1, 16, generator=g) * mask[..., None, None]
    s = torch.randn(sets, longest, 1, generator=g) * mask[..., None]
    from geomlin.batching import batch_layout

    layout = batch_layout(batch=torch.repeat_interleave(torch.arange(sets), sizes))  # planned on the CPU, moved
    d = ctx.device
    flat = (mv[mask].to(d), s[mask].to(d), layout.to(d))
    return (mv.to(d), s.to(d), mask.to(d)), flat, f"{sets} sets of {longest // 2}-{longest} items"


def _gatr(device: torch.device, smoke: bool, num_blocks: int = 4):
    from geomlin.gatr import GATr

    mv, s, blocks, heads = (4, 8, 1, 2) if smoke else (16, 32, num_blocks, 8)
    torch.manual_seed(0)
    return GATr(in_mv_channels=1, out_mv_channels=1, hidden_mv_channels=mv, in_s_channels=1, out_s_channels=1,
                hidden_s_channels=s, num_blocks=blocks, num_heads=heads).to(device)


def step_gatr(ctx: Context) -> None:
    from torch.nn.attention import sdpa_kernel

    model = _gatr(ctx.device, ctx.smoke)
    (mv, s, mask), (fmv, fs, batch), what = _gatr_inputs(ctx)
    layouts = {"padded": lambda: model(mv, scalars=s, mask=mask),
               "flat": lambda: model(fmv, scalars=fs, batch=batch)}
    reference: dict[str, tuple[str, torch.Tensor]] = {}
    for backend in _sdpa_backends():
        for layout, call in layouts.items():
            case = f"{layout} ({what}), {backend.name}"
            if ctx.over_budget("gatr", case):
                continue
            try:
                with sdpa_kernel(backend):
                    out = _first(call())
                    seconds = harness.measure({"x": _fwd_bwd(call)}, ctx.repeats)["x"]
            except RuntimeError as exc:
                text = str(exc).lower()
                unsupported = any(w in text for w in ("no viable backend", "no available kernel", "not supported"))
                ctx.add("gatr", case, "unsupported" if unsupported else f"failed: {_short(exc)}",
                        detail=_short(exc) if unsupported else "")
                continue
            valid = out if layout == "flat" else out[mask]
            first, expected = reference.setdefault(layout, (backend.name, valid))
            detail = f"fwd+bwd; max diff vs {first} {(valid - expected).abs().max().item():.1e}"
            ctx.add("gatr", case, "ok", seconds, detail)


# ----------------------------------------------------------------------------- 3. gaunt
def step_gaunt(ctx: Context) -> None:
    from bench_gaunt import e3nn_gaunt_tp

    from geomlin.gaunt import gaunt_tensor_product, sphere_to_irreps
    from geomlin.gaunt.kernels import triton_supports

    sizes = [(2, 2, 2)] if ctx.smoke else ([(4, 4, 8), (8, 8, 8)] if ctx.quick else
                                           [(4, 4, 8), (8, 8, 16), (12, 12, 12)])
    rows, channels = (4, 2) if ctx.smoke else ((256, 16) if ctx.quick else (1024, 32))
    for L1, L2, Lo in sizes:
        x1 = torch.randn(rows, channels, (L1 + 1) ** 2, device=ctx.device, requires_grad=True)
        x2 = torch.randn(rows, channels, (L2 + 1) ** 2, device=ctx.device, requires_grad=True)
        ref = gaunt_tensor_product(x1.double(), x2.double(), Lo, method="direct" if L1 + L2 + Lo <= 36 else "grid")
        calls = {}
        for method in ("grid", "fft", "dense", "triton"):
            if method == "triton" and (ctx.device.type != "cuda" or not triton_supports(L1, L2, Lo, torch.float32)):
                ctx.add("gaunt", f"L = {L1},{L2}->{Lo}, {rows} x {channels}, triton", "unsupported",
                        detail="needs CUDA and triton" if ctx.device.type != "cuda" else "degree or dtype")
                continue
            calls[method] = (lambda m=method, x1=x1, x2=x2, Lo=Lo: gaunt_tensor_product(x1, x2, Lo, method=m))
        peer = f"L = {L1},{L2}->{Lo}, {rows} x {channels}, e3nn TensorProduct"
        if L1 + L2 + Lo > E3NN_MAX_DEGREE:
            ctx.add("gaunt", peer, "skipped", detail=f"degree sum above {E3NN_MAX_DEGREE} (slow to build)")
        elif not ctx.over_budget("gaunt", peer):
            try:
                tp = e3nn_gaunt_tp(L1, L2, Lo, channels).to(ctx.device)
                e1 = sphere_to_irreps(x1.detach()).requires_grad_()
                e2 = sphere_to_irreps(x2.detach()).requires_grad_()
                calls["e3nn TensorProduct"] = lambda tp=tp, e1=e1, e2=e2: tp(e1, e2)
            except ImportError as exc:
                ctx.add("gaunt", peer, "unsupported", detail=_short(exc))
        for name, call in calls.items():
            case = f"L = {L1},{L2}->{Lo}, {rows} x {channels}, {name}"
            if ctx.over_budget("gaunt", case):
                continue
            try:
                seconds = harness.measure({"x": _fwd_bwd(call)}, ctx.repeats)["x"]
                peak = harness.peak_memory(_fwd_bwd(call), device=ctx.device.type)
            except (RuntimeError, ValueError) as exc:
                ctx.add("gaunt", case, f"failed: {_short(exc)}")
                continue
            detail = f"fwd+bwd; peak {peak / 2**20:.1f} MiB"
            if name != "e3nn TensorProduct":
                detail += f"; rel. err vs direct {_relative(call(), ref):.1e}"
            ctx.add("gaunt", case, "ok", seconds, detail)


# ----------------------------------------------------------------------------- 4. bf16
def _models(ctx: Context) -> dict:
    """Models of the three families with inputs on the device: ``{name: (module, call)}``."""
    from geomlin.models import EGNNPotential, PointNet

    d = ctx.device
    items = 16 if ctx.smoke else 256
    (mv, s, mask), _, _ = _gatr_inputs(ctx)
    gatr = _gatr(d, ctx.smoke)
    pointnet = PointNet(10).to(d)
    pos = torch.randn(8 if ctx.smoke else 64, items, 3, device=d)
    egnn = EGNNPotential(num_species=5).to(d)
    mol = torch.randn(4 if ctx.smoke else 32, 9, 3, device=d)
    species = torch.randint(5, mol.shape[:2], device=d)
    return {"GATr (padded)": lambda: gatr(mv, scalars=s, mask=mask), f"PointNet {items} points": lambda: pointnet(pos),
            "EGNNPotential 9 atoms": lambda: egnn(mol, species)}


def step_bf16(ctx: Context) -> None:
    for name, call in _models(ctx).items():
        if ctx.over_budget("bf16", name):
            continue
        try:
            reference = _first(call())
            t32 = harness.measure({"x": _fwd_bwd(call)}, ctx.repeats)["x"]
            with torch.autocast(ctx.device.type, dtype=torch.bfloat16):
                low = _first(call())
                t16 = harness.measure({"x": _fwd_bwd(call)}, ctx.repeats)["x"]
        except (RuntimeError, TypeError, NotImplementedError) as exc:
            ctx.add("bf16", name, f"failed: {_short(exc)}")
            continue
        finite = bool(torch.isfinite(low).all())
        ctx.add("bf16", name, "ok" if finite else "failed: non-finite", t16,
                f"fwd+bwd; float32 {t32 * 1e3:.2f} ms; rel. err {_relative(low.float(), reference):.1e}")


# ----------------------------------------------------------------------------- 5. compile
def step_compile(ctx: Context) -> None:
    model = _gatr(ctx.device, ctx.smoke, COMPILE_BLOCKS)
    (mv, s, mask), _, what = _gatr_inputs(ctx)
    # on the GPU: inductor; the smoke run only traces (dynamo with the eager backend)
    compiled = torch.compile(model, backend="eager" if ctx.smoke else "inductor")
    case = f"GATr padded ({what}), {len(model.blocks)} block(s)"
    try:
        eager_out = _first(model(mv, scalars=s, mask=mask))
        t0 = time.perf_counter()
        out = _first(compiled(mv, scalars=s, mask=mask))
        _sync(ctx.device)
        first = time.perf_counter() - t0
        timed = harness.measure({"eager": lambda: model(mv, scalars=s, mask=mask),
                                 "compiled": lambda: compiled(mv, scalars=s, mask=mask)}, ctx.repeats)
    except Exception as exc:  # noqa: BLE001 (a compiler error of any kind is the finding)
        ctx.add("compile", case, f"failed: {_short(exc)}")
        return
    ctx.add("compile", case, "ok", timed["compiled"],
            f"fwd; eager {timed['eager'] * 1e3:.2f} ms; first call {first:.1f} s; "
            f"max |diff| {(out - eager_out)[mask].abs().max().item():.1e}")


# ----------------------------------------------------------------------------- 6. train
def step_train(ctx: Context) -> None:
    sizes = ["--quick", "--model", "pointnet"] if ctx.smoke else (["--quick"] if ctx.quick else [])
    with tempfile.TemporaryDirectory() as out:
        command = [sys.executable, "-m", "geomlin", "train", "pointcloud", *sizes, "--epochs", "1" if ctx.smoke else "2",
                   "--device", str(ctx.device), "--out", out, "--no-progress"]
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=max(ctx.left(), 1),
                                  check=False)
        except subprocess.TimeoutExpired:
            ctx.add("train", "geomlin train pointcloud", "failed: timed out", time.perf_counter() - t0, unit="s")
            return
        wall = time.perf_counter() - t0
        case = " ".join(["geomlin", *command[3:-3]])
        if proc.returncode != 0:
            ctx.add("train", case, f"failed (exit {proc.returncode})", wall, _short(proc.stderr[-400:] or "?"),
                    unit="s")
            return
        import json

        summary = json.loads((Path(out) / "summary.json").read_text())
        epochs = [float(m) for m in re.findall(r"\| (\d+\.\d)s$", proc.stdout, flags=re.MULTILINE)]
        accs = ", ".join(f"{n} {100 * m.get('rotated_acc', float('nan')):.0f}%" for n, m in summary["models"].items())
        ctx.add("train", case, "ok", wall, f"epochs {', '.join(f'{e:.1f} s' for e in epochs)}; rotated acc {accs}",
                unit="s")


PLAN = (
    Step("tests", 100, "pytest " + " ".join(CUDA_TESTS), step_tests),
    Step("gatr", 70, "GATr fwd+bwd, padded and flat batches, under each SDPA backend (sdpa_kernel)", step_gatr),
    Step("gaunt", 70, "Gaunt routes grid / fft / dense / triton against e3nn's TensorProduct on the same GPU",
         step_gaunt),
    Step("bf16", 40, "fwd+bwd under bfloat16 autocast vs float32: GATr, PointNet, EGNNPotential", step_bf16),
    Step("compile", 70, f"torch.compile(GATr, {COMPILE_BLOCKS} blocks): first call and steady state vs eager",
         step_compile),
    Step("train", 100, "geomlin train pointcloud --device cuda --epochs 2 (fresh process)", step_train),
)


def plan_text(quick: bool) -> str:
    """The plan as a markdown table (``--dry-run``)."""
    table = harness.Table(["step", "budget s", "what"])
    for step in PLAN:
        table.add(step.name, str(step.budget_s), step.what)
    total = STARTUP_S + sum(s.budget_s for s in PLAN)
    return (f"GPU check plan ({'--quick' if quick else 'full sizes'}): {len(PLAN)} steps, at most {total} s "
            f"including {STARTUP_S} s start-up (limit {TOTAL_BUDGET_S} s)\n\n" + table.markdown())


def _device(text: str, smoke: bool) -> torch.device:
    device = torch.device(text)
    if smoke:
        return device
    if device.type != "cuda":
        raise SystemExit(f"gpu_check: --device must be cuda or cuda:N (--smoke runs on any device), got {text!r}")
    if not torch.cuda.is_available():
        build = f"built with CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
        print(f"gpu_check: no CUDA device: torch {torch.__version__} ({build}) sees none, so there is nothing to "
              "check here; run it on a machine with a GPU, or pass --dry-run to list the steps", file=sys.stderr)
        raise SystemExit(2)
    return device


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda", help="the GPU (cuda or cuda:N)")
    p.add_argument("--quick", action="store_true", help="smaller sizes")
    p.add_argument("--dry-run", action="store_true", help="list the steps and their budgets; run nothing")
    p.add_argument("--smoke", action="store_true", help="tiny sizes on any device (for the test suite)")
    p.add_argument("--only", nargs="+", default=None, choices=[s.name for s in PLAN], help="run only these steps")
    args = p.parse_args(argv)
    if args.dry_run:
        print(plan_text(args.quick))
        return 0
    device = _device(args.device, args.smoke)
    if device.type == "cuda":
        torch.cuda.set_device(device)  # this script owns its process
    torch.manual_seed(0)
    threads = argparse.Namespace(threads=torch.get_num_threads())
    ctx = Context(device=device, quick=args.quick, smoke=args.smoke)
    print(harness.header(f"GPU check on {torch.cuda.get_device_name(device) if device.type == 'cuda' else device}",
                         threads, repeats=ctx.repeats))
    for step in PLAN:
        if args.only and step.name not in args.only:
            continue
        ctx.deadline = time.perf_counter() + step.budget_s
        print(f"gpu_check: {step.name} ...", file=sys.stderr, flush=True)
        try:
            step.run(ctx)
        except Exception as exc:  # noqa: BLE001 (one broken step must not hide the others' results)
            ctx.add(step.name, "(step)", f"failed: {type(exc).__name__}: {_short(exc)}")
    table = harness.Table(["check", "case", "status", "time", "detail"])
    for row in ctx.rows:
        table.add(row.check, row.case, row.status, row.time, row.detail)
    table.print()
    failed = [r for r in ctx.rows if r.status.startswith("failed")]
    print(f"\n{len(ctx.rows)} results, {len(failed)} failed.")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
