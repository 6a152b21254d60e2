"""Eager, ``torch.compile`` and AOTInductor packages of geomlin's models, on this CPU (issue 21).

Every model runs the way a user deploys it, three ways, in this process:

* **eager**: ``model(*inputs)`` in eval mode without autograd; a potential's step is
  [`EnergyAndForces`][geomlin.models.EnergyAndForces] with ``backend=None`` (energy, then forces by
  autograd);
* **compiled**: ``torch.compile(model, fullgraph=True, dynamic=False)``; a potential's step is
  ``EnergyAndForces(model)`` (energy compiled by inductor, forces through the backward graph
  AOTAutograd compiled with it);
* **AOTInductor**: the ``.pt2`` package of [`geomlin.deploy.package`][] (static shapes), loaded
  with [`geomlin.deploy.load`][geomlin.deploy.loading.load]; a potential's package computes energy and forces itself.

Rows: the main job's four models (``geomlin train pointcloud``, a batch of 32 clouds of 128
points, its defaults), the n-body models (a batch of 64 systems of 5 bodies), one MD step of
each molecule model on one frame of the bundled xTB ethanol trajectory (9 atoms), and GATr in the
paper-style configuration (8 sets of 256 items, 16 multivector and 32 scalar channels, 4 blocks).
``compile s`` is the first compiled call (dynamo + inductor), ``AOTI build s`` the export plus the
AOTInductor build of the package; the step columns are medians of interleaved runs after a
warm-up. Every compiled and packaged output is checked against eager first (float32, rtol 1e-4).

Usage: ``python benchmarks/bench_compile.py [--quick] [--threads 1] [--only NAME ...]``.
``--quick`` runs two small models (what ``geomlin bench --quick`` runs).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from harness import Table, header, measure, ms, parser, ratio, setup
from torch.utils._pytree import tree_leaves

from geomlin import deploy
from geomlin.datasets.md17 import read_npz_trajectory
from geomlin.gatr import GATr
from geomlin.models.md import EnergyAndForces
from geomlin.train import get_task
from geomlin.train.config import resolve_config

ETHANOL = Path(__file__).resolve().parents[1] / "datasets" / "md" / "xtb_md_ethanol.npz"
#: Outputs of the compiled and packaged models must match eager to this (float32).
RTOL, ATOL = 1e-4, 1e-4
#: Data sizes when building a task only for its model (the model does not depend on them).
TINY_DATA = {
    "pointcloud": {"train_per_class": 1, "test_per_class": 1},
    "molecules": {"num_train": 8, "num_test": 4},
    "nbody": {"num_train": 8, "num_test": 4, "burn_in_steps": 10, "horizon_steps": 20},
}


@dataclass
class Case:
    """One row: a model, its inputs, and whether it is a potential (energy and forces per step)."""

    label: str
    model: torch.nn.Module
    args: tuple
    kwargs: dict
    potential: bool = False


def _tile(x, batch: int, items: int | None, g: torch.Generator):
    """The example input ``x`` repeated to ``batch`` (dim 0) and ``items`` (dim 1), floats jittered."""
    if not isinstance(x, torch.Tensor) or x.ndim == 0:
        return x
    reps = [-(-batch // x.shape[0])] + [1] * (x.ndim - 1)
    if items is not None and x.ndim >= 2:
        reps[1] = -(-items // x.shape[1])
    x = x.repeat(*reps)[:batch]
    if items is not None and x.ndim >= 2:
        x = x[:, :items]
    if x.is_floating_point():
        x = x + 0.05 * torch.randn(x.shape, generator=g, dtype=x.dtype)
    return x.contiguous()


def task_case(task_name: str, name: str, batch: int, items: int | None) -> Case:
    """A model of ``geomlin train TASK`` at its default settings, on inputs of ``batch`` x ``items``."""
    task = get_task(task_name)
    cli = {"out": "unused", "progress": False, **TINY_DATA[task_name]}
    if task_name == "pointcloud":
        cli["num_points"] = items
    cfg = resolve_config(task.all_options(), cli_values=cli, quick_preset=task.quick_preset)
    info = task.build_data(cfg).info
    torch.manual_seed(0)
    model = task.build_model(name, cfg, info).float().eval()
    g = torch.Generator().manual_seed(0)
    if hasattr(model, "example_inputs"):
        inputs = model.example_inputs(g, dtype=torch.float32)
        args, kwargs = inputs if isinstance(inputs[0], tuple) else (tuple(inputs), {})
    else:  # the non-equivariant baselines: the inputs their task audits them on
        args, kwargs = tuple(x.float() if x.is_floating_point() else x
                             for x in task.audit_spec(name, model, info).inputs), {}
    if deploy.items_range(model) is None:
        items = None
    args = tuple(_tile(a, batch, items, g) for a in args)
    kwargs = {k: _tile(v, batch, items, g) for k, v in kwargs.items()}
    size = f"{batch} x {items}" if items is not None else f"{batch}"
    return Case(f"{task_name} {name} ({size})", model, args, kwargs)


def md_case(name: str) -> Case:
    """One MD step (energy and forces) of a molecule model on the first bundled ethanol frame."""
    task = get_task("molecules")
    cfg = resolve_config(task.all_options(), cli_values={"out": "unused", "progress": False,
                                                         **TINY_DATA["molecules"]}, quick_preset=task.quick_preset)
    info = task.build_data(cfg).info
    torch.manual_seed(0)
    model = task.build_model(name, cfg, info).float().eval().requires_grad_(False)
    raw = read_npz_trajectory(ETHANOL)
    pos = torch.as_tensor(raw["pos"][:1], dtype=torch.float32).contiguous()  # (1, 9, 3)
    species = torch.as_tensor(raw["z"], dtype=torch.int64)[None].contiguous()  # atomic numbers index the species
    return Case(f"MD step: molecules {name} (1 x {pos.shape[1]} atoms, energy + forces)", model, (pos, species), {},
                potential=True)


def gatr_case() -> Case:
    """GATr in the paper-style configuration of benchmarks/bench_gatr.py."""
    torch.manual_seed(0)
    model = GATr(1, 1, 16, 1, 1, 32, num_blocks=4, num_heads=8).eval()
    g = torch.Generator().manual_seed(0)
    return Case("GATr paper-style (8 x 256 items, 4 blocks)", model,
                (torch.randn(8, 256, 1, 16, generator=g), torch.randn(8, 256, 1, generator=g)), {})


def _floats(out) -> list[torch.Tensor]:
    return [o.detach() for o in tree_leaves(out) if isinstance(o, torch.Tensor) and o.is_floating_point()]


def _check(label: str, what: str, got, want) -> None:
    got, want = _floats(got), _floats(want)
    if len(got) != len(want):
        raise SystemExit(f"{label}: {what} returned {len(got)} tensors, eager {len(want)}")
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=RTOL, atol=ATOL, msg=lambda m: f"{label}, {what} vs eager: {m}")


def _runners(case: Case, folder: Path) -> tuple[dict[str, Callable[[], object]], dict[str, float]]:
    """The eager, compiled and packaged calls of ``case`` (built and checked) and their build seconds."""
    model, args, kwargs = case.model, case.args, case.kwargs
    if case.potential:
        eager_step = EnergyAndForces(model, backend=None)
        compiled_step = EnergyAndForces(model)

        def eager():
            return eager_step(*args)

        def compiled():
            return compiled_step(*args)
    else:
        compiled_model = torch.compile(model, fullgraph=True, dynamic=False)

        def eager():
            with torch.no_grad():
                return model(*args, **kwargs)

        def compiled():
            with torch.no_grad():
                return compiled_model(*args, **kwargs)

    want = eager()
    torch._dynamo.reset()
    start = time.perf_counter()
    _check(case.label, "compiled", compiled(), want)
    seconds = {"compile": time.perf_counter() - start}
    path = folder / "model.pt2"
    meta = deploy.package(model, path, args, kwargs, dynamic=False)
    seconds["aoti"] = meta["export_seconds"] + meta["compile_seconds"]
    loaded = deploy.load(path)  # a PackagedModel: its inputs are checked at each call, as a user's are
    p_args, p_kwargs = deploy.program_inputs(model, args, kwargs)

    def packaged():
        with torch.no_grad():
            return loaded(*p_args, **p_kwargs)

    _check(case.label, "AOTInductor package", packaged(), want)
    return {"eager": eager, "compiled": compiled, "aoti": packaged}, seconds


def cases(quick: bool) -> list[Callable[[], Case]]:
    """The rows, built lazily (each builds its model and data when its turn comes)."""
    if quick:
        return [lambda: task_case("nbody", "egnn", 8, 5), lambda: md_case("egnn")]
    rows = [lambda n=n: task_case("pointcloud", n, 32, 128) for n in get_task("pointcloud").default_models]
    rows += [lambda n=n: task_case("nbody", n, 64, 5) for n in get_task("nbody").models]
    rows += [lambda n=n: md_case(n) for n in get_task("molecules").models]
    rows.append(gatr_case)
    return rows


def main(argv=None) -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--only", nargs="+", default=None, help="rows whose label contains one of these words")
    args = p.parse_args(argv)
    setup(args)
    repeats = args.repeats or (5 if args.quick else 9)
    print(header("geomlin models: eager vs torch.compile vs AOTInductor", args, repeats))
    print("Inference, float32, static shapes; speed-ups = eager step / step (above 1: faster than eager).\n")
    table = Table(["model", "eager step", "compiled step", "AOTI step", "compiled speed-up", "AOTI speed-up",
                   "compile s", "AOTI build s"])
    slower = []
    with tempfile.TemporaryDirectory() as tmp:
        for make in cases(args.quick):
            case = make()
            if args.only and not any(word in case.label for word in args.only):
                continue
            runners, seconds = _runners(case, Path(tmp))
            t = measure(runners, repeats)
            table.add(case.label, ms(t["eager"]), ms(t["compiled"]), ms(t["aoti"]), ratio(t["eager"], t["compiled"]),
                      ratio(t["eager"], t["aoti"]), f"{seconds['compile']:.1f}", f"{seconds['aoti']:.1f}")
            slower += [f"{case.label} ({way})" for way in ("compiled", "aoti") if t[way] > t["eager"]]
            torch._dynamo.reset()
    print(table.markdown())
    print()
    print("Slower than eager in this run: " + ("; ".join(slower) if slower else "none") + ".")


if __name__ == "__main__":
    main()
