"""``geomlin bench``: run every ``benchmarks/bench_*.py`` script and show its table.

Each script runs in its own process (``python bench_X.py [--quick]``), with its
output streamed through; a final table lists each script's status and wall time.

``geomlin bench --record`` regenerates the benchmark tables in the docs (and in the README next to
the docs folder). A page asks for a table with a block

    <!-- bench: bench_gaunt.py --quick -->
    (anything: replaced by the script's output)
    <!-- /bench -->

and ``--record`` runs each distinct command once and pastes its standard output verbatim between
the markers (the output starts with the command, date, threads and load average, so every table
carries its provenance and every ratio in it comes from one run).

``geomlin bench --device cuda [--quick] [--dry-run]`` runs the GPU check ``benchmarks/gpu_check.py``
instead: the CUDA paths a CPU machine cannot exercise, as one table in under eight minutes
([`run_gpu_check`][]).
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

from geomlin.io_atomic import FileWriteError, atomic_write_text
from geomlin.train.errors import UserError

#: The GPU check script, in the benchmark folder.
GPU_CHECK = "gpu_check.py"
#: A docs block filled by ``geomlin bench --record``: ``<!-- bench: SCRIPT ARGS -->`` ... ``<!-- /bench -->``.
BLOCK = re.compile(r"(<!-- bench: (?P<command>[^>]*?) -->\n)(?P<body>.*?)(<!-- /bench -->)", re.DOTALL)


def _project_folder(name: str) -> Path | None:
    candidates = [Path.cwd() / name, Path(__file__).resolve().parents[2] / name]
    return next((c for c in candidates if c.is_dir()), None)


def find_benchmarks(directory: str | Path | None = None) -> list[Path]:
    """The ``bench_*.py`` scripts of ``directory`` (default: ``./benchmarks``, else the source tree's)."""
    if directory is None:
        directory = _project_folder("benchmarks")
        if directory is None:
            raise UserError("no benchmarks/ folder here or next to the geomlin sources; pass --dir PATH")
    directory = Path(directory)
    if not directory.is_dir():
        raise UserError(f"benchmark folder not found: {directory}")
    return sorted(directory.glob("bench_*.py"))


def run_benchmarks(directory: str | Path | None = None, quick: bool = False, only: list[str] | None = None,
                   timeout: float = 900.0) -> int:
    """Run the benchmarks (those named in ``only`` when given); return 0 if all succeeded, else 1."""
    scripts = find_benchmarks(directory)
    if only:
        wanted = {o.removeprefix("bench_").removesuffix(".py") for o in only}
        unknown = wanted - {s.stem.removeprefix("bench_") for s in scripts}
        if unknown:
            raise UserError(f"no benchmark named {', '.join(sorted(unknown))}; available: "
                            + ", ".join(s.stem.removeprefix("bench_") for s in scripts))
        scripts = [s for s in scripts if s.stem.removeprefix("bench_") in wanted]
    if not scripts:
        print("no benchmarks/bench_*.py scripts found")
        return 0
    results = []
    for script in scripts:
        print(f"\n=== {script.stem} {'--quick' if quick else ''}".rstrip() + " ===", flush=True)
        t0 = time.perf_counter()
        try:
            rc = subprocess.run([sys.executable, str(script), *(["--quick"] if quick else [])],
                                cwd=script.parent.parent, timeout=timeout, check=False).returncode
            status = "ok" if rc == 0 else f"failed (exit {rc})"
        except subprocess.TimeoutExpired:
            status = f"timed out after {timeout:.0f} s"
        results.append((script.stem, status, time.perf_counter() - t0))
    width = max(len(n) for n, _, _ in results)
    print("\nbenchmark".ljust(width + 1) + "  status            wall s")
    for name, status, wall in results:
        print(f"{name:<{width}}  {status:<16}  {wall:7.1f}")
    return 0 if all(s == "ok" for _, s, _ in results) else 1


def run_gpu_check(directory: str | Path | None, device: str, quick: bool = False, dry_run: bool = False,
                  timeout: float = 900.0) -> int:
    """Run ``benchmarks/gpu_check.py --device DEVICE`` in its own process; return its exit status.

    Without a CUDA device (and without ``dry_run``, which only lists the steps) this is a
    [`UserError`][] saying so, before anything starts.
    """
    import torch

    folder = Path(directory) if directory is not None else _project_folder("benchmarks")
    script = folder / GPU_CHECK if folder is not None else None
    if script is None or not script.is_file():
        raise UserError(f"the GPU check {GPU_CHECK} was not found in {folder or './benchmarks'}; pass --dir PATH")
    try:
        kind = torch.device(device).type
    except (RuntimeError, ValueError):
        kind = None
    if kind != "cuda":
        raise UserError(f"--device must be cuda or cuda:N for the GPU check, got {device!r}")
    if not dry_run and not torch.cuda.is_available():
        build = f"built with CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
        raise UserError(f"--device {device}: the GPU check needs a CUDA GPU and torch {torch.__version__} ({build}) "
                        "sees none; run it on a GPU machine (--dry-run lists its steps)")
    command = [sys.executable, str(script), "--device", device, *(["--quick"] if quick else []),
               *(["--dry-run"] if dry_run else [])]
    try:
        return subprocess.run(command, cwd=script.parent.parent, timeout=timeout, check=False).returncode
    except subprocess.TimeoutExpired:
        print(f"geomlin bench --device {device}: the GPU check timed out after {timeout:.0f} s", file=sys.stderr)
        return 1


_OPEN = re.compile(r"<!-- bench: (?P<command>[^>]*?) -->")
_CLOSE = "<!-- /bench -->"
#: A line that looks like a bench marker (an HTML comment mentioning bench) but may be mistyped.
_LOOKS_LIKE = re.compile(r"^\s*<!--.*\bbench\b", re.IGNORECASE)


def parse_page(page: Path, text: str | None = None) -> list[str]:
    """The ``bench`` commands of one page, in order, after checking every block of it.

    Raises [`UserError`][] (one line naming the file and line) for a block without its
    closing marker, a closing marker without a block, a mistyped marker, an unbalanced quote
    or an empty command.
    """
    text = page.read_text() if text is None else text
    commands: list[str] = []
    opened: int | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        where = f"{page}:{number}"
        opener = _OPEN.fullmatch(line)
        if opener:
            if opened is not None:
                raise UserError(f"{where}: a bench block starts inside the block opened at line {opened}, "
                                f"which has no closing marker {_CLOSE}")
            command = opener.group("command").strip()
            if not command:
                raise UserError(f"{where}: empty bench command; write <!-- bench: bench_NAME.py ARGS -->")
            try:
                argv = shlex.split(command)
            except ValueError as exc:
                raise UserError(f"{where}: cannot parse the bench command {command!r} ({exc})") from None
            if not argv:
                raise UserError(f"{where}: empty bench command; write <!-- bench: bench_NAME.py ARGS -->")
            commands.append(command)
            opened = number
        elif line == _CLOSE:
            if opened is None:
                raise UserError(f"{where}: closing marker {_CLOSE} without a <!-- bench: ... --> block")
            opened = None
        elif _LOOKS_LIKE.match(line):
            raise UserError(f"{where}: mistyped bench marker {line.strip()[:80]!r}; the markers are "
                            f"'<!-- bench: SCRIPT ARGS -->' and '{_CLOSE}', each on its own line")
    if opened is not None:
        raise UserError(f"{page}:{opened}: the bench block has no closing marker {_CLOSE}")
    return commands


def _doc_blocks(docs: Path) -> dict[Path, list[str]]:
    """The ``bench`` commands requested by each markdown page under ``docs`` and by the README next to it.

    Every block of every page is checked ([`parse_page`][]) before anything runs.
    """
    out = {}
    readme = docs.parent / "README.md"
    for page in sorted(docs.rglob("*.md")) + ([readme] if readme.is_file() else []):
        commands = parse_page(page)
        if commands:
            out[page] = commands
    return out


def record(directory: str | Path | None = None, docs: str | Path | None = None, only: list[str] | None = None,
           timeout: float = 900.0) -> int:
    """Run every benchmark command that a docs page asks for and paste its output into the page.

    Returns 0 when every requested run succeeded; a failed run leaves its blocks untouched.
    """
    scripts = {s.name: s for s in find_benchmarks(directory)}
    docs = Path(docs) if docs is not None else _project_folder("docs")
    if docs is None or not docs.is_dir():
        raise UserError("no docs/ folder found; pass --docs PATH")
    pages = _doc_blocks(docs)
    commands = sorted({c for cs in pages.values() for c in cs})
    for c in commands:
        script = shlex.split(c)[0]
        if script not in scripts:
            raise UserError(f"a docs block asks for {script!r}, which is not in {sorted(scripts)}")
    if only:
        # a block's command as the page writes it picks that block; any other name, every block of its script
        def normal(command: str) -> str:
            try:
                return " ".join(shlex.split(command))
            except ValueError as exc:
                raise UserError(f"--only {command!r}: cannot parse it ({exc})") from None

        asked = {normal(o) for o in only}
        blocks = asked & {normal(c) for c in commands}
        wanted = {"bench_" + o.removeprefix("bench_").removesuffix(".py") + ".py" for o in asked - blocks}
        commands = [c for c in commands if shlex.split(c)[0] in wanted or normal(c) in blocks]
        if not commands:
            raise UserError(f"no docs block runs {' or '.join(map(repr, only))}")
    outputs, failed = {}, []
    for c in commands:
        argv = shlex.split(c)
        print(f"\n=== recording: python benchmarks/{c} ===", flush=True)
        t0 = time.perf_counter()
        try:
            proc = subprocess.run([sys.executable, str(scripts[argv[0]]), *argv[1:]],
                                  cwd=scripts[argv[0]].parent.parent, timeout=timeout, check=False,
                                  stdout=subprocess.PIPE, text=True)
        except subprocess.TimeoutExpired:
            failed.append(f"{c} (timed out after {timeout:.0f} s)")
            continue
        print(proc.stdout, flush=True)
        if proc.returncode != 0:
            failed.append(f"{c} (exit {proc.returncode})")
            continue
        outputs[c] = proc.stdout.rstrip() + "\n"
        print(f"({time.perf_counter() - t0:.0f} s)", flush=True)
    for page in pages:
        text = page.read_text()

        def fill(m):
            c = m.group("command").strip()
            return m.group(1) + outputs[c] + m.group(4) if c in outputs else m.group(0)

        new = BLOCK.sub(fill, text)
        if new != text:
            try:
                atomic_write_text(page, new)
            except FileWriteError as exc:
                raise UserError(str(exc)) from None
            print(f"updated {page}")
    for f in failed:
        print(f"geomlin bench --record: failed: {f}", file=sys.stderr)
    return 1 if failed else 0
