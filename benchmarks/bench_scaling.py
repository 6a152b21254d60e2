"""Benchmark: potentials at the sizes users simulate, 1,000 to 100,000 atoms, beside MACE: time, peak memory, growth.

Two kinds of system, built once per size and shared by every model (``make_system``):

* **liquid**: random atoms (H, C, N, O) uniformly in a cube at liquid density (0.1 atoms per cubic
  Angstrom), free space: about 52 neighbours per atom within the 5 Angstrom cutoff;
* **water**: a periodic box of liquid water (``geomlin.datasets.xtb.water_box``: rigid molecules on a
  grid, randomly turned, 0.1 atoms per cubic Angstrom). Every model sees the cell.

Two calls per model, float32, the threads of ``--threads``: **energy and forces** of one configuration
(inference, the neighbour search included, as a simulation calls it) and a **training step** (energy
and force loss, forces by double backward, one Adam step). Every (model, system, size, call) runs in
a process of its own (``--worker``), so that one model's memory never hides another's: it builds the
system and model, makes a warm-up call (up to 16,000 atoms), then times ``repeats`` calls and reads
the peak resident memory of each above what the process held before the call
(``harness.peak_memory``); the table
shows the median time and the largest such peak, and the growth slopes of both on a log-log fit from
1,000 to 16,000 atoms. The parent watches every worker's resident memory and stops it at the memory
budget (``--memory-budget``, default 20 GB of this machine's 24 GB) or the time limit
(``--case-timeout``, default an hour); a size whose extrapolated peak or time exceeds them is skipped
with a note, and so are the larger sizes of a model that failed, so the run always finishes (in
several hours at full size: record it with ``geomlin bench --record --timeout`` long enough).

The models: geomlin's potentials with the default sizes of ``geomlin train molecules`` on the flat
atoms of one system (:func:`geomlin_case`: no ``edge_index`` given, so each finds its edges in every
call with the cell-list search of ``geomlin.neighbors`` within its cutoff, in the water box's cell;
``geomlin.models.edges``), and MACE in the configuration of ``bench_molecules.py`` (``MACE_CONFIG``, ``build_mace``) with its own
neighbour search (``mace.data.neighborhood.get_neighborhood``, matscipy), run in its own virtualenv
(``--mace-python`` or ``GEOMLIN_MACE_PYTHON``; without it MACE is reported as not installed).

    python benchmarks/bench_scaling.py [--quick] [--mace-python PATH] [--sizes 1000,2000] [--models gaunt,mace]
                                       [--systems liquid,water] [--calls infer,train] [--memory-budget GB]
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import harness
import numpy as np
import torch

#: Atoms per cubic Angstrom of both systems (liquid water holds 0.1).
DENSITY = 0.1
#: Interaction cutoff of every model (Angstrom): MACE's ``r_max`` and geomlin's default.
CUTOFF = 5.0
#: Atomic numbers of the random liquid.
LIQUID_SPECIES = (1, 6, 7, 8)
#: Species the geomlin models embed (``geomlin train molecules``'s default ``num_species``).
NUM_SPECIES = 10
#: Atom counts of the full run and of ``--quick``.
SIZES = (1000, 2000, 4000, 8000, 16000, 32000, 64000, 100000)
QUICK_SIZES = (100, 200)
#: The atom counts between which the growth slope is fitted.
SLOPE_RANGE = (1000, 16000)
#: The atom counts over which the ratios to MACE are summarised (the issue's goal range).
RATIO_RANGE = (1000, 10000)
SYSTEMS = ("liquid", "water")
CALLS = ("infer", "train")
GEOMLIN_MODELS = ("gaunt", "ponita", "egnn")
MODELS = (*GEOMLIN_MODELS, "mace")
TITLES = {"gaunt": "Gaunt", "ponita": "PONITA", "egnn": "EGNN", "mace": "MACE"}
#: Full run and ``--quick``: memory budget per worker (GB), time limit per worker (s), warm-up calls, timed calls.
FULL = {"budget_gb": 20.0, "timeout": 3600.0, "warmup": 1, "repeats": 1}
#: Above this many atoms no warm-up call is made (one-time setup is small beside a call there, and the
#: largest calls take many minutes).
WARMUP_UP_TO = 16000
QUICK = {"budget_gb": 3.0, "timeout": 300.0, "warmup": 1, "repeats": 1}
#: (system, call) pairs that ``--quick`` leaves out (the training step runs on the liquid alone; ``--calls``
#: given explicitly runs every pair).
QUICK_LEAVES_OUT = (("water", "train"),)
#: Seconds between two reads of a worker's resident memory by the parent.
WATCH_INTERVAL = 0.1
SEED = 0


# ------------------------------------------------------------------------------------------ systems
def make_system(kind: str, atoms: int, seed: int = SEED) -> dict:
    """``z (N,)`` int64, ``pos (N, 3)`` float64 Angstrom, ``cell (3, 3)`` and ``pbc (3,)`` (zeros / False
    for the free liquid) of about ``atoms`` atoms (the water box holds ``3 round(atoms / 3)``)."""
    if kind == "liquid":
        rng = np.random.default_rng(seed)
        side = (atoms / DENSITY) ** (1 / 3)
        return {"z": rng.choice(LIQUID_SPECIES, atoms).astype(np.int64), "pos": rng.uniform(0, side, (atoms, 3)),
                "cell": np.zeros((3, 3)), "pbc": np.zeros(3, dtype=bool)}
    from geomlin.datasets.xtb import water_box

    z, pos, cell = water_box(max(1, round(atoms / 3)), density=DENSITY / 3, seed=seed)
    return {"z": z, "pos": pos, "cell": cell, "pbc": np.ones(3, dtype=bool)}


# ------------------------------------------------------------------------------------ geomlin side
def geomlin_model(name: str) -> torch.nn.Module:
    """The model of ``geomlin train molecules --model NAME`` (default sizes, cutoff :data:`CUTOFF`)."""
    from geomlin.models import EGNNPotential, GauntPotential, MoleculeEnergyModel, PonitaPotential

    net = {"gaunt": GauntPotential, "egnn": EGNNPotential, "ponita": PonitaPotential}[name]
    return MoleculeEnergyModel(net(num_species=NUM_SPECIES, cutoff=CUTOFF))


def geomlin_case(name: str, system: dict, call: str):
    """The callable that a worker times for a geomlin model: the flat atoms of one system (with its cell
    and pbc where periodic); the model finds its edges in every call (``geomlin.models.edges``: the
    cell-list search beyond its dense block), so the search is timed with it."""
    pos = torch.from_numpy(system["pos"]).float()
    z = torch.from_numpy(system["z"])
    cells = {}
    if system["pbc"].any():
        cells = {"cell": torch.from_numpy(system["cell"]).float()[None], "pbc": torch.from_numpy(system["pbc"])[None]}
    batch = torch.zeros(len(z), dtype=torch.long)
    model = geomlin_model(name)
    return _step(model, lambda: model(pos, z, batch=batch, **cells), call)


def _step(model: torch.nn.Module, energy_and_forces, call: str):
    """``call == "infer"``: energy and forces; ``"train"``: one Adam step on ``MSE(E) + MSE(F)`` (zero
    labels; forces by double backward)."""
    if call == "infer":
        model.eval()
        return energy_and_forces
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)

    def step():
        energy, forces = energy_and_forces()
        loss = energy.pow(2).mean() + forces.pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


# ------------------------------------------------------------------------------------ MACE side
def mace_case(system: dict, call: str):
    """MACE (``bench_molecules.build_mace``) on the system, with its own neighbour search in every call."""
    from bench_molecules import build_mace
    from mace.data.neighborhood import get_neighborhood

    periodic = bool(system["pbc"].any())
    z_list = sorted(set(system["z"].tolist()))
    attrs = torch.nn.functional.one_hot(torch.tensor([z_list.index(v) for v in system["z"].tolist()]),
                                        len(z_list)).float()
    positions = torch.from_numpy(system["pos"]).float()

    def graph():
        edge_index, shifts, unit_shifts, cell = get_neighborhood(
            system["pos"], CUTOFF, pbc=tuple(system["pbc"].tolist()) if periodic else None,
            cell=system["cell"] if periodic else None)
        return {"positions": positions, "node_attrs": attrs, "edge_index": torch.from_numpy(edge_index).long(),
                "shifts": torch.from_numpy(shifts).float(), "unit_shifts": torch.from_numpy(unit_shifts).float(),
                "cell": torch.from_numpy(np.asarray(cell)).float().reshape(1, 3, 3),
                "batch": torch.zeros(len(positions), dtype=torch.long),
                "ptr": torch.tensor([0, len(positions)]), "head": torch.zeros(1, dtype=torch.long)}

    degree = graph()["edge_index"].shape[1] / len(positions)
    model = build_mace(z_list, np.zeros(len(z_list)), degree, 1.0, 0.0)

    def energy_and_forces():
        out = model(graph(), training=model.training, compute_force=True)
        return out["energy"], out["forces"]

    return _step(model, energy_and_forces, call)


# ------------------------------------------------------------------------------------ one worker
def worker(spec_path: str, out_path: str) -> None:
    """Run one case (``spec_path``: JSON with the model, the call, the system file, threads, warm-up and
    repeats) and write its median time, largest call peak and the process's peak resident memory."""
    spec = json.loads(Path(spec_path).read_text())
    torch.set_num_threads(spec["threads"])
    torch.manual_seed(SEED)
    system = dict(np.load(spec["system"]))
    result: dict = {}
    try:
        fn = (mace_case(system, spec["call"]) if spec["model"] == "mace"
              else geomlin_case(spec["model"], system, spec["call"]))
        if spec["model"] == "mace":
            import mace

            result["version"] = getattr(mace, "__version__", "installed")
        for _ in range(spec["warmup"]):
            fn()
        times, peaks = [], []
        for _ in range(spec["repeats"]):
            peaks.append(harness.peak_memory(lambda: times.append(_timed(fn))))
        result.update(seconds=statistics.median(times), peak=max(peaks))
    except (ValueError, RuntimeError, MemoryError) as exc:       # a refusal or an allocation failure: a note
        result["note"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
    result["process_peak"] = _process_peak()
    Path(out_path).write_text(json.dumps(result))


def _timed(fn) -> float:
    """Seconds of one call of ``fn``."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _process_peak() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return 0
    return 0


def warmups(settings: dict, atoms: int) -> int:
    """Warm-up calls of a case of ``atoms`` atoms (none above :data:`WARMUP_UP_TO`)."""
    return settings["warmup"] if atoms <= WARMUP_UP_TO else 0


def run_case(python: str, system_path: Path, atoms: int, model: str, call: str, settings: dict,
             workdir: Path) -> dict:
    """One worker process, watched: stopped at the memory budget or the time limit (a note, not a crash)."""
    spec = {"model": model, "call": call, "system": str(system_path), "threads": settings["threads"],
            "warmup": warmups(settings, atoms), "repeats": settings["repeats"]}
    spec_path, out_path = workdir / f"{model}_{call}.json", workdir / f"{model}_{call}.out.json"
    spec_path.write_text(json.dumps(spec))
    out_path.unlink(missing_ok=True)
    env = dict(os.environ)
    if model == "mace":                      # MACE's virtualenv pins its own e3nn: keep geomlin's tree out
        env.pop("PYTHONPATH", None)
    budget = settings["budget_gb"] * 1e9
    start, watched = time.perf_counter(), 0
    proc = subprocess.Popen([python, __file__, "--worker", str(spec_path), str(out_path)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    stop = None
    while proc.poll() is None:
        watched = max(watched, _rss(proc.pid))
        if watched > budget:
            stop = f"stopped above the memory budget of {settings['budget_gb']:g} GB"
        elif time.perf_counter() - start > settings["timeout"]:
            stop = f"stopped after the time limit of {settings['timeout']:g} s"
        if stop:
            proc.kill()
            proc.wait()
            return {"note": stop, "process_peak": watched}
        time.sleep(WATCH_INTERVAL)
    stderr = proc.stderr.read()
    if proc.returncode != 0 or not out_path.exists():
        last = (stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        return {"note": f"failed ({last[:160]})", "process_peak": watched}
    return json.loads(out_path.read_text())


# ------------------------------------------------------------------------------------ the run
def predicted(history: list, atoms: int, key: str) -> float | None:
    """``key`` (``seconds`` or the call's ``peak``) at ``atoms`` from the last two measured sizes, growing at
    least linearly (a power law through them), or None with fewer than two."""
    done = [(n, r[key]) for n, r in history if key in r and r[key] > 0]
    if len(done) < 2:
        return None
    (n0, v0), (n1, v1) = done[-2:]
    slope = max(1.0, math.log(v1 / v0) / math.log(n1 / n0)) if n1 != n0 and v0 > 0 else 1.0
    return v1 * (atoms / n1) ** slope


def span_of(sizes: list, wanted: tuple) -> tuple[int, int]:
    """The atom counts of ``wanted`` (a range) that the run has, or all of them when fewer than two fall in it."""
    inside = [n for n in sizes if wanted[0] <= n <= wanted[1]]
    return (min(inside), max(inside)) if len(inside) >= 2 else (min(sizes), max(sizes))


def slope(history: list, key: str, span: tuple[int, int]) -> float | None:
    """Least-squares slope of ``log key`` on ``log atoms`` over the sizes in ``span`` (None with fewer than two)."""
    pts = [(n, r[key]) for n, r in history if key in r and r[key] > 0 and span[0] <= n <= span[1]]
    if len(pts) < 2:
        return None
    x, y = np.log([p[0] for p in pts]), np.log([p[1] for p in pts])
    return float(np.polyfit(x, y, 1)[0])


def run(args, settings: dict, sizes: list, cases: list, models: list) -> tuple[dict, dict]:
    """Every case in order of size (all models at one size before the next), with skips and notes.
    Returns ``results[(system, call, model)] = [(atoms, result), ...]`` and the atom counts per system."""
    results = {(s, c, m): [] for s, c in cases for m in models}
    systems = list(dict.fromkeys(s for s, _ in cases))
    atoms_of: dict = {}
    python = {m: (args.mace_python if m == "mace" else sys.executable) for m in models}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        for system in systems:
            for size in sizes:
                data = make_system(system, size)
                atoms = len(data["z"])
                atoms_of.setdefault(system, []).append(atoms)
                path = workdir / f"{system}_{atoms}.npz"
                np.savez(path, **data)
                for call in [c for s, c in cases if s == system]:
                    for model in models:
                        history = results[(system, call, model)]
                        note = _skip(history, atoms, settings, python[model])
                        r = {"note": note} if note else run_case(python[model], path, atoms, model, call, settings,
                                                                 workdir)
                        history.append((atoms, r))
                        print(f"{system} {atoms} {call} {model}: {r}", file=sys.stderr, flush=True)
                path.unlink()
    return results, atoms_of


def _skip(history: list, atoms: int, settings: dict, python: str | None) -> str | None:
    """Why a case is not run, or None."""
    if not python:
        return "not installed (pass --mace-python or set GEOMLIN_MACE_PYTHON)"
    if history and "seconds" not in history[-1][1]:
        return f"skipped: {history[-1][0]:,} atoms did not run"
    memory = predicted(history, atoms, "peak")
    if memory is not None:                   # the process's baseline (imports, model, data) plus the call's peak
        last = next(r for _, r in reversed(history) if "peak" in r)
        memory += last["process_peak"] - last["peak"]
    if memory is not None and memory > settings["budget_gb"] * 1e9:
        return f"skipped: about {memory / 1e9:.1f} GB predicted (budget {settings['budget_gb']:g} GB)"
    seconds = predicted(history, atoms, "seconds")
    if seconds is not None and seconds * (warmups(settings, atoms) + settings["repeats"]) > settings["timeout"]:
        return f"skipped: about {seconds:.0f} s per call predicted (limit {settings['timeout']:g} s)"
    return None


def _cell(r: dict, mace: dict | None) -> str:
    if "seconds" not in r:
        return "–"
    text = f"{r['seconds']:.3g} s, {harness.mib(r['peak'])}"
    if mace is not None and "seconds" in mace and mace["peak"] > 0:
        text += f" ({r['seconds'] / mace['seconds']:.2f}x, {r['peak'] / mace['peak']:.2f}x)"
    return text


def report(results: dict, atoms_of: dict, cases: list, models: list) -> None:
    """One table per system and call (time in seconds, call peak in MiB; ratios to MACE in brackets),
    the notes of the cases that did not run, and the summary: growth slopes, largest size, ratio ranges."""
    call_titles = {"infer": "energy and forces", "train": "a training step (forces by double backward)"}
    system_titles = {"liquid": f"random atoms at {DENSITY} per cubic Angstrom, free",
                     "water": "periodic water box"}
    versions = {r["version"] for h in results.values() for _, r in h if "version" in r}
    titles = {**TITLES, "mace": f"MACE {versions.pop()}" if versions else "MACE"}
    sizes = sorted({n for counts in atoms_of.values() for n in counts})
    slopes, ratios_span = span_of(sizes, SLOPE_RANGE), span_of(sizes, RATIO_RANGE)
    summary = harness.Table(["system", "call", "model", f"time slope {slopes[0]:,}–{slopes[1]:,}", "memory slope",
                             "largest size run", f"time / MACE {ratios_span[0]:,}–{ratios_span[1]:,}",
                             "memory / MACE"])
    for system, call in cases:
        print(f"**{system_titles[system]}: {call_titles[call]}** (time, peak memory of the call; in brackets "
              "time and memory relative to MACE)\n")
        table = harness.Table(["atoms", *(titles[m] for m in models)])
        notes = []
        for k, atoms in enumerate(atoms_of[system]):
            row = {m: results[(system, call, m)][k][1] for m in models}
            mace = row.get("mace")
            table.add(f"{atoms:,}", *(_cell(row[m], mace if m != "mace" else None) for m in models))
            notes += [f"{titles[m]} at {atoms:,} atoms: {row[m]['note']}" for m in models if "note" in row[m]]
        table.print()
        if notes:
            print("\n".join(f"- {n}" for n in _first_notes(notes)) + "\n")
        for m in models:
            history = results[(system, call, m)]
            ran = [n for n, r in history if "seconds" in r]
            ratios = [(r["seconds"] / mr["seconds"], r["peak"] / mr["peak"])
                      for (n, r), (_, mr) in zip(history, results.get((system, call, "mace"), []))
                      if m != "mace" and "seconds" in r and "seconds" in mr and mr["peak"] > 0
                      and ratios_span[0] <= n <= ratios_span[1]]
            summary.add(system, call, titles[m], _num(slope(history, "seconds", slopes)),
                        _num(slope(history, "peak", slopes)),
                        f"{max(ran):,}" if ran else "–", _span([t for t, _ in ratios]), _span([p for _, p in ratios]))
    print("**Summary** (slopes of log time and log peak memory on log atoms, least squares; ratios to MACE over "
          "the sizes both ran, smallest to largest)\n")
    summary.print()


def _first_notes(notes: list) -> list:
    """The notes, with repeats of one model's skips after the first folded into one line each."""
    out, seen = [], set()
    for n in notes:
        model, _, text = n.partition(" at ")
        reason = text.split(": ", 1)[-1]
        key = (model, reason.split(" ")[0])
        if reason.startswith("skipped") and key in seen:
            continue
        seen.add(key)
        out.append(n)
    return out


def _num(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}"


def _span(values: list) -> str:
    if not values:
        return "–"
    return f"{min(values):.2f}x" if len(values) == 1 else f"{min(values):.2f}x – {max(values):.2f}x"


def _names(text: str, allowed: tuple, what: str) -> list:
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names or any(n not in allowed for n in names):
        raise SystemExit(f"--{what} must name some of {', '.join(allowed)}, got {text!r}")
    return names


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3])
        return
    p = harness.parser(__doc__.split("\n")[0])
    p.add_argument("--mace-python", default=os.environ.get("GEOMLIN_MACE_PYTHON"),
                   help="Python of a virtualenv with mace-torch (default: $GEOMLIN_MACE_PYTHON)")
    p.add_argument("--sizes", default=None, help="comma-separated atom counts (default: 1,000 to 100,000)")
    p.add_argument("--models", default=",".join(MODELS), help=f"comma-separated subset of {', '.join(MODELS)}")
    p.add_argument("--systems", default=",".join(SYSTEMS), help=f"comma-separated subset of {', '.join(SYSTEMS)}")
    p.add_argument("--calls", default=",".join(CALLS), help=f"comma-separated subset of {', '.join(CALLS)}")
    p.add_argument("--memory-budget", type=float, default=None,
                   help=f"GB a worker may hold (default {FULL['budget_gb']:g}, {QUICK['budget_gb']:g} with --quick)")
    p.add_argument("--case-timeout", type=float, default=None,
                   help=f"seconds a worker may run (default {FULL['timeout']:g}, {QUICK['timeout']:g} with --quick)")
    args = p.parse_args()
    harness.setup(args, seed=SEED)
    settings = {**(QUICK if args.quick else FULL), "threads": args.threads}
    if args.repeats is not None:
        settings["repeats"] = max(1, args.repeats)
    if args.memory_budget is not None:
        settings["budget_gb"] = args.memory_budget
    if args.case_timeout is not None:
        settings["timeout"] = args.case_timeout
    try:
        sizes = sorted(int(s) for s in args.sizes.split(",")) if args.sizes else list(QUICK_SIZES if args.quick
                                                                                     else SIZES)
    except ValueError:
        raise SystemExit(f"--sizes must be comma-separated atom counts, got {args.sizes!r}") from None
    if not sizes or min(sizes) < 3:
        raise SystemExit(f"--sizes must be atom counts of at least 3, got {args.sizes!r}")
    models = _names(args.models, MODELS, "models")
    systems = _names(args.systems, SYSTEMS, "systems")
    calls = _names(args.calls, CALLS, "calls")
    print(harness.header("Potentials at scale: time, peak memory and growth from 1,000 to 100,000 atoms",
                         args, None if settings["repeats"] == 1 else settings["repeats"]))
    print(f"Cutoff {CUTOFF} Angstrom, float32, one process per case ({settings['warmup']} warm-up call up to "
          f"{WARMUP_UP_TO:,} atoms, none above, and {settings['repeats']} timed call(s) each); memory budget {settings['budget_gb']:g} GB and "
          f"{settings['timeout']:g} s per case. geomlin: the potentials on flat atoms, their edges from the cell-list "
          f"search of `geomlin.neighbors` (in the cell where periodic); MACE {bench_molecules_config()} with "
          "matscipy's neighbour list, in its own virtualenv. Neighbour searches are timed with the models.\n")
    cases = [(s, c) for s in systems for c in calls]
    if args.quick and args.calls == ",".join(CALLS):
        cases = [case for case in cases if case not in QUICK_LEAVES_OUT]
    results, atoms_of = run(args, settings, sizes, cases, models)
    report(results, atoms_of, cases, models)


def bench_molecules_config() -> dict:
    """MACE's configuration, shared with ``bench_molecules.py``."""
    from bench_molecules import MACE_CONFIG

    return MACE_CONFIG


if __name__ == "__main__":
    main()
