"""Equivariant bases and EMLP's tasks: geomlin against EMLP, the package a user would otherwise pick.

Peer: EMLP (Finzi et al. 2021; ``emlp`` on PyPI, JAX), in this process. escnn, the other
candidate, could not be installed here (its dependency ``py3nj`` needs a Fortran compiler), so it
is not compared.

1. **Basis solving.** ``Hom(T(p_in, q_in), T(p_out, q_out))`` for several groups, small and
   large (up to 15,625 unknowns). EMLP: ``(rep_in >> rep_out).equivariant_basis()``
   (SVD, or its Krylov solver for large problems); geomlin: ``equivariant_basis`` with the default
   ``method="auto"`` (diagrams for tensor reps of classical groups), with its general solver
   (``"dense"`` / ``"sampled"``, geomlin's own baseline) and read back from a ``cache_dir``. Both
   libraries' in-memory caches are cleared before every timed solve; one warm-up call each
   absorbs JAX compilation. Peak memory is the resident-set growth of one solve.
2. **EMLP's tasks.** O(5) synthetic regression (``2 T(1) -> T(0)``), the inertia tensor
   (``5 T(0) + 5 T(1) -> T(2)`` under O(3)) and the e-mu scattering amplitude under the Lorentz
   group (``4 T(1) -> T(0)``), data from ``emlp.datasets`` (same seed for both). Models built
   as each library's user would: ``emlp.nn.objax.EMLP(rep_in, rep_out, G, ch, num_blocks=3)``
   and ``geomlin.linear.EquivariantMLP(rep_in, rep_out, hidden_channels=ch, num_blocks=3,
   group=G)`` (the same hidden reps). Adam, learning rate 3e-3, batch 500, mean squared error;
   EMLP's training step is one ``objax.Jit``-compiled function. Reported: construction time, the
   median time of a training step, and the relative test MSE (MSE / variance of the targets) of
   both after the same number of steps.

3. **EMLP's high-rank test cases** (``--high-rank``: only this table). EMLP's own test matrix
   (``tests/equivariance_tests.py::test_high_rank_representations``) solves the invariants of
   ``T(p, q)`` for ``p + q <= 10``, skipping a case when ``num_constraints * d^(3 (p + q)) > 1e11``
   and ``q > 0`` for orthogonal groups. For the groups where that matrix is slowest (Z(4):
   ``T(0..6)``; the Rubik's cube group: ``T(0..2)``; GL(3) and SL(3): every ``T(p, q)`` with
   ``p + q <= 7``), every case is solved once by each library, interleaved case by case (EMLP:
   ``T(p, q)(G).equivariant_basis()``; geomlin: ``equivariant_basis(Scalar, T(p, q)(G))``), after
   one warm-up solve of ``T(1)`` (and ``T(1, 1)``) each; both caches are cleared before every
   solve. EMLP's times include the JAX compilation of each new problem shape, as in its test
   matrix. Peak memory is the largest resident-set growth of one solve.

Run: ``python benchmarks/bench_basis.py [--quick] [--threads N] [--high-rank]``.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time

from harness import Table, header, mib, parser, peak_memory, peer_version, ratio, setup


def _configure_jax(threads: int) -> None:
    """Single-threaded XLA when the benchmark runs on one thread (set before JAX is imported)."""
    if threads == 1:
        os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")
    os.environ.setdefault("JAX_PLATFORMS", "cpu")


# (group, p_in, q_in, p_out, q_out, large): Hom(T(p_in, q_in), T(p_out, q_out))
PROBLEMS = [
    ("SO(3)", 3, 0, 3, 0, False),
    ("O(1,3)", 1, 1, 1, 1, False),
    ("S(4)", 2, 0, 2, 0, False),
    ("O(1,3)", 2, 1, 2, 1, True),
    ("O(5)", 3, 0, 3, 0, True),
]
QUICK_PROBLEMS = [p for p in PROBLEMS if not p[-1]]

TASKS = ("O(5) synthetic", "inertia", "Lorentz scattering")

#: EMLP's high-rank cases: group -> (d, EMLP's number of constraints, orthogonal), from EMLP 1.0.3's
#: definitions (GL(3): 9 Lie algebra generators; geomlin's GL(3) adds a reflection, which changes no
#: invariant of a tensor rep, so the case list is EMLP's).
HIGH_RANK_GROUPS = {"Z(4)": (4, 1, True), "RubiksCube": (48, 6, True), "GL(3)": (3, 9, False), "SL(3)": (3, 8, False)}
#: EMLP's rule: ranks up to this, cases with ``num_constraints * d^(3 (p + q))`` above the budget skipped.
HIGH_RANK_MAX = 10
HIGH_RANK_BUDGET = 1e11
#: ``--quick``: the same groups up to this total rank.
HIGH_RANK_QUICK_MAX = 3


def _patch_emlp_progress_bar() -> None:
    """EMLP 1.0.3's Krylov solver feeds numpy float32 progress to tqdm, which current tqdm rejects
    (``TypeError`` in ``timedelta``); its progress bar is switched off, the solver is unchanged."""
    import functools

    import emlp.reps.representation as emlp_representation
    from tqdm.auto import tqdm

    emlp_representation.tqdm = functools.partial(tqdm, disable=True)


def _geomlin_group(name: str):
    from geomlin.groups import as_group

    return as_group(name)


def _emlp_group(name: str):
    import emlp.groups as eg

    return {"SO(3)": lambda: eg.SO(3), "O(1,3)": eg.Lorentz, "S(4)": lambda: eg.S(4),
            "O(5)": lambda: eg.O(5), "O(3)": lambda: eg.O(3), "Z(4)": lambda: eg.Z(4),
            "RubiksCube": eg.RubiksCube, "GL(3)": lambda: eg.GL(3), "SL(3)": lambda: eg.SL(3)}[name]()


def _fmt_seconds(s: float | None) -> str:
    if s is None:
        return "–"
    return f"{s:.2f} s" if s >= 1 else f"{s * 1e3:.1f} ms"


def _solvers(name, ranks, rin, rout, auto: str, general: str, cache_dir: str, have_emlp: bool) -> dict:
    """The timed solves of one problem: geomlin (auto, general solver, from cache_dir) and EMLP."""
    from geomlin.linear import equivariant_basis
    from geomlin.tables import clear_caches

    def geomlin_solve(method="auto"):
        clear_caches()
        return equivariant_basis(rin, rout, method=method)

    def geomlin_cached():
        clear_caches()
        return equivariant_basis(rin, rout, cache_dir=cache_dir)

    solvers = {"geomlin": geomlin_solve, "cache": geomlin_cached}
    if auto != general:
        solvers["general"] = lambda: geomlin_solve(general)
    if have_emlp:
        from emlp.reps import T as EmlpT
        from emlp.reps.representation import Rep as EmlpRep

        eG = _emlp_group(name)
        pi, qi, po, qo = ranks
        erin, erout = EmlpT(pi, qi)(eG), EmlpT(po, qo)(eG)

        def emlp_solve():
            EmlpRep.solcache.clear()
            Q = (erin >> erout).equivariant_basis()
            Q.block_until_ready()
            return Q

        solvers["emlp"] = emlp_solve
    return solvers


def basis_table(args, repeats: int, have_emlp: bool) -> None:
    from geomlin.linear.solver import basis_method
    from geomlin.reps import T

    problems = QUICK_PROBLEMS if args.quick else PROBLEMS
    table = Table(["group", "maps", "unknowns", "dim", "EMLP", "geomlin (method)", "EMLP / geomlin",
                   "geomlin general solver", "geomlin from cache_dir", "peak memory EMLP / geomlin"])
    cache_dir = tempfile.mkdtemp(prefix="geomlin-bench-basis-")
    for name, pi, qi, po, qo, large in problems:
        G = _geomlin_group(name)
        rin, rout = T(pi, qi)(G), T(po, qo)(G)
        N = rin.size * rout.size
        auto = basis_method(rin, rout)
        general = "sampled" if G.is_compact and N > 1024 else "dense"
        runs = 1 if large else repeats

        solvers = _solvers(name, (pi, qi, po, qo), rin, rout, auto, general, cache_dir, have_emlp)
        dims = {"cache": solvers["cache"]().shape[0]}  # fills cache_dir
        if not large:  # warm-up (JAX compiles); a large problem is solved once, compilation included
            for key, fn in solvers.items():
                out = fn()
                dims[key] = out.shape[-1] if key == "emlp" else out.shape[0]
        times: dict[str, list[float]] = {k: [] for k in solvers}
        memory: dict[str, list[int]] = {k: [] for k in solvers}
        for _ in range(runs):  # interleaved
            for key, fn in solvers.items():
                box = {}

                def timed(fn=fn, box=box):
                    t0 = time.perf_counter()
                    box["out"] = fn()
                    box["t"] = time.perf_counter() - t0

                memory[key].append(peak_memory(timed))
                times[key].append(box["t"])
                dims[key] = box["out"].shape[-1] if key == "emlp" else box["out"].shape[0]
        med = {k: statistics.median(v) for k, v in times.items()}
        mem = {k: max(v) for k, v in memory.items()}
        if "emlp" in dims and dims["emlp"] != dims["geomlin"]:
            raise SystemExit(f"{name}: EMLP finds {dims['emlp']} maps, geomlin {dims['geomlin']}")
        emlp_t = med.get("emlp")
        table.add(name, f"T({pi},{qi}) -> T({po},{qo})", f"{N:,}", dims["geomlin"],
                  _fmt_seconds(emlp_t) if have_emlp else "not installed",
                  f"{_fmt_seconds(med['geomlin'])} ({auto})",
                  ratio(emlp_t, med["geomlin"]) if emlp_t else "–",
                  f"{_fmt_seconds(med.get('general', med['geomlin']))} ({general})",
                  _fmt_seconds(med["cache"]),
                  f"{mib(mem['emlp']) if 'emlp' in mem else '–'} / {mib(mem['geomlin'])}")
        print(f"  solved {name} {N} unknowns", file=sys.stderr, flush=True)
    print(f"**Basis solving** (median of {repeats} interleaved solves after a warm-up; problems over 1,024 "
          "unknowns: one solve, no warm-up)\n")
    table.print()


def _emlp_rubiks_cube(emlp_group):
    """EMLP's six RubiksCube generators as a geomlin Group (the same permutation matrices).

    They do not generate the Rubik's cube group: two adjacent turns compose to a permutation of
    order 45, where the cube's ``R U`` has order 105 (geomlin's [`RubiksCube`][] has), and T(2)
    has 6 invariants instead of 9; the benchmark solves EMLP's group in both libraries.
    """
    import numpy as np
    import torch

    from geomlin.groups import Group

    gens = np.stack([np.asarray(h @ np.eye(emlp_group.d)) for h in emlp_group.discrete_generators])
    return Group(discrete_generators=torch.from_numpy(gens), name="RubiksCube")


def high_rank_cases(name: str, max_rank: int = HIGH_RANK_MAX) -> list[tuple[int, int]]:
    """The ``(p, q)`` of EMLP's ``test_high_rank_representations`` for ``name``, in its loop order."""
    d, constraints, orthogonal = HIGH_RANK_GROUPS[name]
    return [(p, q) for p in range(max_rank + 1) for q in range(max_rank - p + 1)
            if constraints * d ** (3 * (p + q)) <= HIGH_RANK_BUDGET and not (orthogonal and q > 0)]


def _timed_solve(fn) -> tuple[float, int, int]:
    """``(seconds, dimension, peak bytes)`` of one call of ``fn`` returning a basis and its dimension."""
    box = {}

    def run():
        t0 = time.perf_counter()
        box["dim"] = fn()
        box["t"] = time.perf_counter() - t0

    memory = peak_memory(run)
    return box["t"], box["dim"], memory


def high_rank_table(args, have_emlp: bool) -> None:
    from geomlin.linear import equivariant_basis
    from geomlin.linear.solver import basis_method
    from geomlin.reps import Scalar, T
    from geomlin.tables import clear_caches

    if have_emlp:
        from emlp.reps import T as EmlpT
        from emlp.reps.representation import Rep as EmlpRep
    max_rank = HIGH_RANK_QUICK_MAX if args.quick else HIGH_RANK_MAX
    table = Table(["group", "cases (EMLP's rule)", "unknowns (largest)", "total dim", "EMLP, all cases",
                   "geomlin, all cases", "EMLP / geomlin", "slowest EMLP case: EMLP / geomlin (method)",
                   "peak memory EMLP / geomlin"])
    for name in HIGH_RANK_GROUPS:
        eG = _emlp_group(name) if have_emlp else None
        G = _emlp_rubiks_cube(eG) if have_emlp and name == "RubiksCube" else _geomlin_group(name)
        cases = high_rank_cases(name, max_rank)

        def geomlin_solve(p, q, G=G):
            clear_caches()
            return equivariant_basis(Scalar, T(p, q)(G)).shape[0]

        def emlp_solve(p, q, eG=eG):
            EmlpRep.solcache.clear()
            Q = EmlpT(p, q)(eG).equivariant_basis()
            Q.block_until_ready()
            return Q.shape[-1]

        for p, q in [(1, 0)] + ([] if HIGH_RANK_GROUPS[name][2] else [(1, 1)]):  # warm-up
            geomlin_solve(p, q)
            if have_emlp:
                emlp_solve(p, q)
        rows = []
        for p, q in cases:
            t_g, dim_g, mem_g = _timed_solve(lambda p=p, q=q: geomlin_solve(p, q))
            t_e, dim_e, mem_e = _timed_solve(lambda p=p, q=q: emlp_solve(p, q)) if have_emlp else (None, None, 0)
            if have_emlp and dim_e != dim_g:
                raise SystemExit(f"{name} T({p},{q}): EMLP finds {dim_e} invariants, geomlin {dim_g}")
            rows.append((p, q, t_g, t_e, dim_g, mem_g, mem_e))
            print(f"  {name} T({p},{q}): geomlin {t_g:.3f} s" + (f", EMLP {t_e:.3f} s" if have_emlp else ""),
                  file=sys.stderr, flush=True)
        d = HIGH_RANK_GROUPS[name][0]
        largest = max(d ** (p + q) for p, q, *_ in rows)
        total_g = sum(r[2] for r in rows)
        total_e = sum(r[3] for r in rows) if have_emlp else None
        if have_emlp:
            p, q, t_g, t_e, *_ = max(rows, key=lambda r: r[3])
            slowest = (f"T({p},{q}): {_fmt_seconds(t_e)} / {_fmt_seconds(t_g)} "
                       f"({basis_method(Scalar, T(p, q)(G))})")
        else:
            slowest = "–"
        top = max(p + q for p, q in cases)
        table.add(name, f"{len(cases)}: " + (f"T(p), p <= {top}" if HIGH_RANK_GROUPS[name][2] else f"T(p, q), p + q <= {top}"),
                  f"{largest:,}", sum(r[4] for r in rows),
                  _fmt_seconds(total_e) if have_emlp else "not installed", _fmt_seconds(total_g),
                  ratio(total_e, total_g) if have_emlp else "–", slowest,
                  f"{mib(max(r[6] for r in rows)) if have_emlp else '–'} / {mib(max(r[5] for r in rows))}")
    print("**EMLP's high-rank test cases** (each T(p, q) solved once per library, interleaved, after a warm-up; "
          "EMLP's times include JAX compiling each new shape)\n")
    table.print()
    if have_emlp:
        print("RubiksCube: both libraries solve EMLP's six generators (the same permutation matrices). They do "
              "not generate the Rubik's cube group (two adjacent turns compose to order 45, not 105); "
              "`geomlin.groups.RubiksCube()` does, and its T(2) has 9 invariants, not 6.\n")


def _task_data(task: str, n_train: int, n_test: int):
    """Train / test arrays from ``emlp.datasets`` (seeded) and the reps as group-free T's."""
    import numpy as np
    from emlp import datasets

    np.random.seed(0)
    cls = {"O(5) synthetic": datasets.O5Synthetic, "inertia": datasets.Inertia,
           "Lorentz scattering": datasets.ParticleInteraction}[task]
    ds = cls(n_train + n_test)
    X, Y = ds.X.astype(np.float32), ds.Y.astype(np.float32)
    if task == "Lorentz scattering":  # EMLP's own input scaling keeps the quartic targets tame
        X = X / ds.stats[1].astype(np.float32)
        Y = (Y - ds.stats[2]) / ds.stats[3]
    return (X[:n_train], Y[:n_train]), (X[n_train:], Y[n_train:])


def _reps(task: str):
    from geomlin.reps import T

    return {"O(5) synthetic": (2 * T(1), T(0), "O(5)"), "inertia": (5 * T(0) + 5 * T(1), T(2), "O(3)"),
            "Lorentz scattering": (4 * T(1), T(0), "O(1,3)")}[task]


def _emlp_reps(task: str):
    from emlp.reps import T

    return {"O(5) synthetic": (2 * T(1), T(0)), "inertia": (5 * T(0) + 5 * T(1), T(2)),
            "Lorentz scattering": (4 * T(1), T(0))}[task]


def train_geomlin(task, data, ch, steps, batch, lr, timed_steps):
    import torch

    from geomlin.linear import EquivariantMLP

    (Xtr, Ytr), (Xte, Yte) = data
    rin, rout, group = _reps(task)
    torch.manual_seed(0)
    t0 = time.perf_counter()
    model = EquivariantMLP(rin, rout, hidden_channels=ch, num_blocks=3, group=group)
    build = time.perf_counter() - t0
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    Xtr, Ytr, Xte, Yte = (torch.from_numpy(a) for a in (Xtr, Ytr, Xte, Yte))
    gen = torch.Generator().manual_seed(0)
    step_times = []
    for step in range(steps):
        idx = torch.randint(len(Xtr), (batch,), generator=gen)
        t0 = time.perf_counter()
        loss = (model(Xtr[idx]) - Ytr[idx]).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step >= steps - timed_steps:
            step_times.append(time.perf_counter() - t0)
    with torch.no_grad():
        mse = (model(Xte) - Yte).pow(2).mean().item()
    return build, statistics.median(step_times), mse / float(Yte.var()), sum(p.numel() for p in model.parameters())


def train_emlp(task, data, ch, steps, batch, lr, timed_steps):
    import jax
    import numpy as np
    import objax
    from emlp.nn.objax import EMLP

    (Xtr, Ytr), (Xte, Yte) = data
    rin, rout = _emlp_reps(task)
    G = _emlp_group(_reps(task)[2])
    objax.random.DEFAULT_GENERATOR.seed(0)
    t0 = time.perf_counter()
    model = EMLP(rin, rout, G, ch=ch, num_blocks=3)
    build = time.perf_counter() - t0
    opt = objax.optimizer.Adam(model.vars())

    @objax.Function.with_vars(model.vars())
    def loss_fn(x, y):
        return ((model(x) - y) ** 2).mean()

    grad_values = objax.GradValues(loss_fn, model.vars())

    @objax.Function.with_vars(model.vars() + opt.vars())
    def train_op(x, y, lr):
        g, v = grad_values(x, y)
        opt(lr=lr, grads=g)
        return v

    train_op = objax.Jit(train_op)
    predict = objax.Jit(lambda x: model(x, training=False), model.vars())
    rng = np.random.default_rng(0)
    step_times = []
    for step in range(steps):
        idx = rng.integers(0, len(Xtr), batch)
        t0 = time.perf_counter()
        jax.block_until_ready(train_op(Xtr[idx], Ytr[idx], lr))
        if step >= steps - timed_steps:
            step_times.append(time.perf_counter() - t0)
    mse = float(((np.asarray(predict(Xte)) - Yte) ** 2).mean())
    n_params = sum(int(np.prod(v.value.shape)) for v in model.vars().values())
    return build, statistics.median(step_times), mse / float(Yte.var()), n_params


def task_table(args, have_emlp: bool) -> None:
    quick = args.quick
    ch = 48 if quick else args.channels
    steps = 6 if quick else args.steps
    timed = min(steps - 1, 5 if quick else 20)
    n_train, n_test, batch, lr = (200, 200, 100, 3e-3) if quick else (1000, 1000, 500, 3e-3)
    table = Table(["task", "hidden rep (both)", "params EMLP / geomlin", "build EMLP / geomlin",
                   "step EMLP", "step geomlin", "speed-up", f"rel. test MSE after {steps} steps EMLP / geomlin"])
    from geomlin.linear import uniform_rep

    for task in TASKS:
        if not have_emlp:
            table.add(task, "–", "–", "–", "EMLP not installed", "–", "–", "–")
            continue
        data = _task_data(task, n_train, n_test)
        g_build, g_step, g_err, g_params = train_geomlin(task, data, ch, steps, batch, lr, timed)
        e_build, e_step, e_err, e_params = train_emlp(task, data, ch, steps, batch, lr, timed)
        hidden = uniform_rep(ch, _reps(task)[2])
        table.add(task, f"{hidden!r}".replace("**", "^").replace("*", "·"), f"{e_params:,} / {g_params:,}",
                  f"{_fmt_seconds(e_build)} / {_fmt_seconds(g_build)}", _fmt_seconds(e_step),
                  _fmt_seconds(g_step), ratio(e_step, g_step), f"{e_err:.3f} / {g_err:.3f}")
        print(f"  trained {task}", file=sys.stderr, flush=True)
    print(f"**EMLP's tasks** (ch = hidden_channels = {ch}, 3 blocks, batch {batch}, {n_train} training and "
          f"{n_test} test samples, Adam {lr}; step time: median of the last {timed} of {steps} steps)\n")
    table.print()


def main(argv=None) -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--channels", type=int, default=96,
                   help="EMLP's ch = geomlin's hidden_channels (EMLP's default 384 takes EMLP many seconds per "
                        "step on one CPU core: its bilinear layer builds a (batch, 414, 414) weight)")
    p.add_argument("--steps", type=int, default=100, help="training steps per task and library")
    p.add_argument("--skip-tasks", action="store_true", help="only the basis-solving table")
    p.add_argument("--skip-basis", action="store_true", help="only the table of EMLP's tasks")
    p.add_argument("--high-rank", action="store_true",
                   help="only the table of EMLP's high-rank test cases (Z(4), RubiksCube, GL(3), SL(3))")
    args = p.parse_args(argv)
    _configure_jax(args.threads)
    setup(args)
    repeats = args.repeats or (1 if args.quick else 3)
    version = peer_version("emlp")
    title = "EMLP's high-rank test cases" if args.high_rank else "Equivariant bases and EMLP's tasks"
    print(header(f"{title}: geomlin vs EMLP", args, None if args.high_rank else repeats))
    print(f"Peer: EMLP {version or 'not installed'}"
          + (f" (JAX {peer_version('jax')})" if version else "")
          + "; escnn not compared (not installable here: py3nj needs a Fortran compiler).\n")
    if version is not None:
        _patch_emlp_progress_bar()
    if args.high_rank:
        high_rank_table(args, version is not None)
        return
    if not args.skip_basis:
        basis_table(args, repeats, version is not None)
    if not args.skip_tasks:
        task_table(args, version is not None)


if __name__ == "__main__":
    main()
