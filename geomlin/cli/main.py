"""The ``geomlin`` command: ``train``, ``bench``, ``audit`` and ``export`` sub-commands.

User mistakes raise [`UserError`][] (or an argparse
error) and end as one line on stderr with exit status 2; anything else is a bug
and keeps its traceback.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from geomlin.train.errors import USER_ERROR_EXIT, UserError


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage dump) that the caller turns into exit status 2.

    Abbreviated options are refused (``--epoch 3`` is an error, not ``--epochs 3``).
    """

    def __init__(self, *args, **kwargs):
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        raise UserError(message)


def _warn(message: str) -> None:
    """One line on stderr, as the command prints its errors (ignored settings, library warnings)."""
    print(f"geomlin: warning: {message}", file=sys.stderr)


def _add_task_options(parser: argparse.ArgumentParser, options) -> None:
    for opt in options:
        default = "" if opt.default is None else f" (default: {opt.default})"
        if opt.type is bool:
            # show the flag that changes the default; accept both spellings
            on_help = f"{opt.help}" if not opt.default else argparse.SUPPRESS
            # the help of an on-by-default option is a verb phrase ("show tqdm progress bars")
            off_help = f"do not {opt.help} (on by default)" if opt.default else argparse.SUPPRESS
            parser.add_argument(opt.flag, dest=opt.name, action="store_const", const=True, default=None,
                                help=on_help)
            parser.add_argument("--no-" + opt.flag[2:], dest=opt.name, action="store_const", const=False,
                                default=None, help=off_help)
        else:
            choices = f" {{{','.join(map(str, opt.choices))}}}" if opt.choices else ""
            bounds = [f"{'>' if opt.strict else '>='} {opt.minimum:g}"] if opt.minimum is not None else []
            bounds += [f"<= {opt.maximum:g}"] if opt.maximum is not None else []
            bounds = f" ({', '.join(bounds)})" if bounds else ""
            parser.add_argument(opt.flag, dest=opt.name, default=None, metavar=opt.type.__name__.upper(),
                                help=f"{opt.help}{bounds}{choices}{default}")


def _count(flag: str, minimum: int):
    """An argparse ``type`` for integers ``>= minimum`` (errors through geomlin.validation)."""
    from geomlin.validation import check_int

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise UserError(f"{flag} must be an int, got {text!r}") from None
        try:
            return check_int(value, flag, minimum=minimum)
        except ValueError as exc:
            raise UserError(str(exc)) from None
    return parse


def _seconds(text: str) -> float:
    from geomlin.validation import check_positive_float

    try:
        return check_positive_float(float(text), "--timeout")
    except ValueError as exc:
        raise UserError(str(exc) if "--timeout" in str(exc) else f"--timeout must be a number, got {text!r}") from None


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (tasks are imported to list their options)."""
    import geomlin
    from geomlin.train.tasks import TASKS, get_task

    parser = _Parser(prog="geomlin", description="geomlin: equivariant geometric deep learning in PyTorch.")
    parser.add_argument("--version", action="version", version=f"geomlin {geomlin.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="{train,bench,audit,export}", parser_class=_Parser)

    train = sub.add_parser("train", help="train the reference models of a task",
                           description="Train models end to end on bundled or generated data. "
                                       "Runs under torchrun for distributed data parallel training.")
    tasks = train.add_subparsers(dest="task", metavar="{" + ",".join(TASKS) + "}", parser_class=_Parser)
    for name in TASKS:
        task = get_task(name)
        models = "; ".join(f"{k}: {v}" for k, v in task.models.items())
        tp = tasks.add_parser(name, help=task.description,
                              description=f"{task.description}. Models — {models}. "
                                          f"Default: {','.join(task.default_models)}.")
        _add_task_options(tp, task.all_options())
        tp.add_argument("--config", default=None, metavar="FILE",
                        help="YAML or JSON file of options (the command line overrides it)")
        tp.add_argument("--resume", nargs="?", const=True, default=None, metavar="CHECKPOINT",
                        help="continue from OUT/checkpoint.pt (or the given checkpoint file or run folder)")
        tp.add_argument("--overwrite", action="store_true",
                        help="start afresh in an --out folder that already holds a run, replacing its files")

    bench = sub.add_parser("bench", help="run benchmarks/bench_*.py and print their tables")
    bench.add_argument("--quick", action="store_true", help="pass --quick to every benchmark")
    bench.add_argument("--dir", default=None, help="benchmark folder (default: ./benchmarks)")
    bench.add_argument("--only", nargs="+", default=None, metavar="NAME", help="run only these benchmarks; with --record, a block's command as the page writes it "
                       "(\"bench_gaunt.py --drop-in\", in quotes) records that one block, a script name "
                       "(bench_gaunt) all of its blocks")
    bench.add_argument("--timeout", type=_seconds, default=900.0, help="seconds per benchmark")
    bench.add_argument("--record", action="store_true",
                       help="rerun the benchmark commands that docs pages ask for (<!-- bench: ... --> blocks) "
                            "and paste their output into the pages")
    bench.add_argument("--docs", default=None, help="docs folder for --record (default: ./docs)")
    bench.add_argument("--device", default=None, metavar="DEVICE",
                       help="run the GPU check benchmarks/gpu_check.py on this CUDA device instead (tests, GATr per "
                            "SDPA backend, Gaunt routes vs e3nn, bf16, torch.compile, two training epochs; one "
                            "table, under 8 minutes)")
    bench.add_argument("--dry-run", action="store_true", help="with --device: list the GPU check's steps, run nothing")

    audit = sub.add_parser("audit", help="measure a model's equivariance error under its declared group "
                           "(--physics: forces, symmetry and NVE energy drift of a potential); exit status 1 when "
                           "a check fails")
    audit.add_argument("target", metavar="CHECKPOINT_OR_MODULE",
                       help="a geomlin checkpoint.pt (or its run folder), a .pt2 package, or package.module:name / "
                            "file.py:name")
    audit.add_argument("--physics", action="store_true",
                       help="audit an energy model's physics on the bundled molecules in float64: forces vs central "
                            "finite differences, invariance and equivariance under rotations, reflections, "
                            "translations and permutations, energy drift of a short NVE run")
    audit.add_argument("--samples", type=_count("--samples", 1), default=None,
                       help="random group elements per model (default 10; 4 with --physics)")
    audit.add_argument("--nve-steps", type=_count("--nve-steps", 2), default=None,
                       help="velocity-Verlet steps of 0.25 fs of the --physics energy-drift run (default 800)")
    audit.add_argument("--seed", type=_count("--seed", 0), default=0, help="seed of the group elements")
    audit.add_argument("--model", default=None, help="comma-separated models of the checkpoint to audit")

    export = sub.add_parser("export", help="compile a checkpoint's model into an AOTInductor package (.pt2)",
                            description="Export a trained model with torch.export (dynamic batch and items sizes; "
                                        "potentials with their forces) and compile it with AOTInductor into a "
                                        ".pt2 package that runs without geomlin (torch._inductor.aoti_load_package).")
    export.add_argument("checkpoint", metavar="CHECKPOINT", help="a geomlin checkpoint.pt")
    export.add_argument("--out", required=True, metavar="FILE", help="the package to write (.pt2)")
    export.add_argument("--model", default=None, help="the checkpoint's model to export (needed if it holds several)")
    export.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    export.add_argument("--dtype", default="float32", choices=("float32", "float64"),
                        help="floating dtype of the package (float64 for finite-difference checks and long NVE runs)")
    return parser


def _set_threads(threads: int) -> None:
    """The process-wide torch thread count (``--threads``; 0 keeps PyTorch's default). Only the command sets it."""
    if threads > 0:
        import torch

        torch.set_num_threads(threads)


def _train(args: argparse.Namespace) -> int:
    from geomlin.train.checkpoint import load_checkpoint
    from geomlin.train.config import load_config_file, resolve_config
    from geomlin.train.loop import run_training
    from geomlin.train.tasks import get_task

    task = get_task(args.task)
    options = task.all_options()
    cli = {o.name: getattr(args, o.name) for o in options if getattr(args, o.name, None) is not None}
    file_values = load_config_file(args.config) if args.config else {}
    where = f"config file {args.config}"
    with warnings.catch_warnings(record=True) as caught:
        cfg = resolve_config(options, file_values=file_values, cli_values=cli, quick_preset=task.quick_preset,
                             where_file=where)
        resume_from = None
        if args.resume is not None:
            if args.overwrite:
                raise UserError("--resume continues the run in the folder and --overwrite replaces it; pass one")
            folder = Path(cfg["out"].format(task=task.name)) if args.resume is True else Path(args.resume)
            resume_from = folder / "checkpoint.pt" if args.resume is True or folder.is_dir() else folder
            if resume_from.parent == folder and not resume_from.is_file():
                raise UserError(f"--resume: run folder {folder} holds no checkpoint (expected {resume_from}); "
                                "start the run without --resume")
            ckpt = load_checkpoint(resume_from)
            if ckpt["task"] != task.name:
                raise UserError(f"checkpoint {resume_from} belongs to task '{ckpt['task']}', not '{task.name}'")
            base = dict(ckpt["config"])
            if "stop_after" not in cli and "stop_after" not in file_values:
                base["stop_after"] = 0  # an interruption is not part of the run's identity
            if "out" not in cli and "out" not in file_values and args.resume is not True:
                base["out"] = str(Path(resume_from).parent)
            cfg = resolve_config(options, file_values=file_values, cli_values=cli, base=base, where_file=where)
    for w in caught:
        _warn(str(w.message))
    _set_threads(cfg["threads"])
    run_training(task, cfg, resume_from=resume_from, overwrite=args.overwrite)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the ``geomlin`` command with ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = build_parser()
        if not argv:
            parser.print_help()
            return 0
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 0
        if args.command == "train":
            if args.task is None:
                raise UserError("geomlin train needs a task: pointcloud, molecules or nbody")
            return _train(args)
        if args.command == "bench":
            from geomlin.cli.bench import record, run_benchmarks, run_gpu_check

            if args.device is not None:
                if args.record or args.only:
                    raise UserError("--device runs the GPU check (benchmarks/gpu_check.py); drop --record / --only")
                return run_gpu_check(args.dir, args.device, quick=args.quick, dry_run=args.dry_run,
                                     timeout=args.timeout)
            if args.dry_run:
                raise UserError("--dry-run lists the GPU check's steps: use it with --device cuda")
            if args.record:
                if args.quick:
                    raise UserError("--record runs the commands written in the docs blocks; drop --quick")
                return record(args.dir, args.docs, only=args.only, timeout=args.timeout)
            return run_benchmarks(args.dir, quick=args.quick, only=args.only, timeout=args.timeout)
        if args.command == "audit":
            from geomlin.cli.audit import run

            return run(args.target, num_samples=args.samples, seed=args.seed, model=args.model,
                       physics=args.physics, nve_steps=args.nve_steps)
        if args.command == "export":
            from geomlin.cli.export import export_checkpoint

            meta = export_checkpoint(args.checkpoint, args.out, model=args.model, overwrite=args.overwrite,
                                     dtype=args.dtype)
            dims = " x ".join(f"{v} ({k})" for k, v in meta["dynamic_dims"].items() if k != "reason")
            print(f"wrote {args.out}: {meta['task']} model {meta['model']} ({meta['class']}, outputs {meta['outputs']}), "
                  f"dynamic dims {dims}; export {meta['export_seconds']:.1f} s, AOTInductor compile "
                  f"{meta['compile_seconds']:.1f} s")
            return 0
        raise UserError(f"unknown command {args.command!r}")
    except UserError as exc:
        print(f"geomlin: error: {exc}", file=sys.stderr)
        return USER_ERROR_EXIT
    except KeyboardInterrupt:
        print("geomlin: interrupted", file=sys.stderr)
        return 130
