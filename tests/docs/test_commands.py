"""Every ``geomlin`` command that the README and the docs print works as printed.

The commands are read from the pages (``bash`` blocks, and inline code that is a whole command:
no placeholder such as ``CHECKPOINT`` or ``[--quick]``) and run in document order, README first,
in one empty folder outside the clone, as a reader would paste them one after the other. Training
runs are shortened only by flags that the docs show themselves ([`SHORTER`][] and the
per-command [`EXTRA`][]; a test checks that the docs name each). A file a command reads
(``pointcloud.yaml``, ``my_models.py``) is the block of the page whose first line names it.

The few commands that no test machine can run as printed (a CUDA device, several machines, the
whole QM9, hours of benchmarks, rewriting the docs' tables) match [`NOT_HERE`][] with the reason and
where else they are covered; they are parsed instead, so every option they use exists and is valid.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: A geomlin command (also under ``python -m`` or ``torchrun ... -m``) with its sub-command.
COMMAND = re.compile(r"^(?:geomlin|python -m geomlin|torchrun\b.*?-m geomlin)\s+(?:train|bench|audit|export)\b")
#: Words that mark a span as a pattern rather than a command: ``CHECKPOINT``, ``TASK``, ``=N``,
#: ``[--quick]``, ``...``, ``module:Factory``, ``train / bench``.
PLACEHOLDER = re.compile(r"\b[A-Z][A-Z_]*\b|=N\b|[\[\]{}|]|\.\.\.|\s/\s|module:Factory")
#: Flags the test adds to every single-process training run (each is shown in the docs).
SHORTER = ["--epochs", "1", "--budget-minutes", "0.05", "--no-progress", "--threads", "1", "--overwrite"]
#: Flags added to one command, after SHORTER (so they win): the resume example is interrupted by
#: ``--stop-after`` as the docs describe, which needs a second epoch to resume into.
EXTRA = {
    "geomlin train pointcloud --out runs/a": ["--epochs", "2", "--stop-after", "1"],
    "geomlin train pointcloud --out runs/a --resume": ["--epochs", "2"],
}
#: Commands parsed but not run here: (pattern, reason and where they are covered).
NOT_HERE = [
    (r"--device cuda", "needs a CUDA device (benchmarks/gpu_check.py runs on one: geomlin bench --device cuda)"),
    (r"^torchrun", "several processes or machines: tests/train/test_distributed.py runs a 2-process torchrun job"),
    (r"--source qm9pack|runs/qm9", "the whole QM9 (130k molecules): the recorded run in docs/training.md"),
    (r"^(python -m )?geomlin bench( --quick| --only .*)?$",
     "benchmarks run for minutes to hours: the slow tests run each at --quick size (tests/cli/test_bench_scripts.py)"),
    (r"bench --record", "rewrites the docs' recorded tables (done on a quiet machine, tests/cli/test_bench_record.py)"),
    (r"^geomlin export|\.pt2\b", "an AOTInductor compile of minutes: tests/cli/test_export.py"),
]


def _strip_comment(line: str) -> str:
    return line.split(" #", 1)[0].strip() if not line.lstrip().startswith("#") else ""


def printed_commands() -> list[tuple[str, str]]:
    """``(page, command)`` for every geomlin command the pages print, in order, first occurrence only."""
    found: list[tuple[str, str]] = []
    for page in PAGES:
        text = page.read_text()
        # bash blocks and inline code, in the order they appear on the page
        for m in re.finditer(r"```bash\n(?P<block>.*?)```|(?<!`)`(?P<span>[^`\n]+(?:\n[^`\n]+)?)`(?!`)", text,
                             flags=re.DOTALL):
            if m.group("block") is not None:
                lines = m.group("block").replace("\\\n", " ").splitlines()
                pieces = [p.strip() for ln in lines for p in _strip_comment(ln).split("&&")]
            else:
                pieces = [m.group("span")]
            for piece in pieces:
                command = " ".join(piece.split())
                if COMMAND.match(command) and not PLACEHOLDER.search(command) and _complete(command):
                    found.append((page.name, command))
    seen, ordered = set(), []
    for page, command in found:
        if command not in seen:
            seen.add(command)
            ordered.append((page, command))
    return ordered


def _complete(command: str) -> bool:
    """``geomlin train`` / ``audit`` / ``export`` name what they act on; a bare one is a reference."""
    words = _geomlin_args(command)
    return words[0] == "bench" or (len(words) >= 2 and not words[1].startswith("-"))


def _geomlin_args(command: str) -> list[str]:
    """The arguments after ``geomlin`` (``python -m geomlin``, ``torchrun ... -m geomlin``)."""
    words = shlex.split(command)
    start = words.index("geomlin") + 1 if words[0] == "geomlin" else words.index("-m") + 2
    return words[start:]


def _not_here(command: str) -> str | None:
    return next((reason for pattern, reason in NOT_HERE if re.search(pattern, command)), None)


def _named_blocks() -> dict[str, str]:
    """Files the pages show: a fenced block whose first line is ``# NAME.ext`` is the file NAME.ext."""
    files = {}
    for page in PAGES:
        for body in re.findall(r"```\w*\n(.*?)```", page.read_text(), flags=re.DOTALL):
            first = body.splitlines()[0] if body.strip() else ""
            m = re.fullmatch(r"# ([\w.-]+\.(?:yaml|yml|json|py))", first.strip())
            if m:
                files[m.group(1)] = body
    return files


COMMANDS = printed_commands()

#: Commands the pages say exit non-zero, with the status they promise: the pointcloud run holds the
#: rotation-sensitive baseline, so auditing it fails by design (quickstart.md, "Audit what you trained").
EXPECTED_STATUS = {"geomlin audit runs/pointcloud/checkpoint.pt": 1}


def test_the_commands_are_found():
    commands = [c for _, c in COMMANDS]
    assert "geomlin train pointcloud" in commands                          # the README's main job
    assert "geomlin train molecules --dataset qm9 --target gap" in commands  # inline, over a line break
    assert len(commands) >= 15, commands


def test_the_added_flags_are_documented():
    docs = "\n".join(p.read_text() for p in PAGES)
    added = {w for w in SHORTER + [w for extra in EXTRA.values() for w in extra] if w.startswith("--")}
    missing = sorted(f for f in added if f not in docs)
    assert not missing, f"the test shortens commands with flags the docs never show: {missing}"
    assert set(EXTRA) <= {c for _, c in COMMANDS}, "EXTRA names a command the docs no longer print"


def test_commands_that_cannot_run_here_parse():
    from geomlin.cli.main import build_parser
    from geomlin.train.config import resolve_config
    from geomlin.train.tasks import get_task

    parser = build_parser()
    skipped = [c for _, c in COMMANDS if _not_here(c)]
    for command in skipped:
        args = parser.parse_args(_geomlin_args(command))
        if args.command == "train":
            task = get_task(args.task)
            cli = {o.name: getattr(args, o.name) for o in task.all_options() if getattr(args, o.name, None) is not None}
            resolve_config(task.all_options(), cli_values=cli)


def _arguments(command: str) -> list[str]:
    """What the test passes for ``command``: its arguments, shortened if it trains."""
    args = _geomlin_args(command)
    if args[0] == "train" and "--help" not in args:
        args += [f for f in SHORTER if not (f == "--overwrite" and "--resume" in args)] + EXTRA.get(command, [])
    return args


def _run(args: list[str]) -> int:
    """The exit status of ``geomlin ARGS`` run by ``geomlin.cli.main`` in this process (``--help`` exits 0)."""
    from geomlin.cli.main import main

    try:
        return main(args)
    except SystemExit as exc:
        return int(exc.code or 0)


def test_every_printed_command_runs(tmp_path, monkeypatch, capsys):
    """Runs in document order in one folder (the audits read the runs before them)."""
    monkeypatch.chdir(tmp_path)
    for name, body in _named_blocks().items():
        (tmp_path / name).write_text(body)
    from geomlin.cli.main import build_parser

    parser = build_parser()
    ran, done = [], set()
    for page, command in COMMANDS:
        if _not_here(command):
            continue
        args = _arguments(command)
        same = repr(sorted(vars(parser.parse_args(args)).items())) if "--help" not in args else repr(args)
        if same in done:  # `X` and `X --threads 1` (the test adds --threads 1) run once
            continue
        status = _run(args)
        expected = EXPECTED_STATUS.get(command, 0)
        assert status == expected, (f"{page}: `{command}` exited {status}, the pages promise {expected}:\n"
                                    f"{capsys.readouterr().err[-2000:]}")
        capsys.readouterr()
        ran.append(command)
        done.add(same)
    assert any(c.startswith("geomlin audit runs/") for c in ran), ran
    assert set(EXPECTED_STATUS) <= set(ran), "EXPECTED_STATUS names a command the pages no longer print"
