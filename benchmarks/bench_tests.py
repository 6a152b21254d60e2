"""The README's test command, timed: one run of the default test suite, its counts and its wall time.

Reads the test command from the README the way ``.ci/run`` does (the second line of the first
``bash`` blocks), runs its pytest part in a fresh process from the repository root and prints how
many tests passed, skipped and failed, and the wall time. The README's statement of how long the
tests take is this script's output, pasted by ``geomlin bench --record``. ``--quick`` runs one small
test file instead (the slow suite runs every benchmark at its quick size).

    python benchmarks/bench_tests.py [--quick]
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import harness

ROOT = Path(__file__).resolve().parents[1]
#: What ``--quick`` runs instead of the whole suite.
QUICK_TARGET = "tests/test_layout.py"
#: pytest's closing line, e.g. ``2387 passed, 37 skipped, 33 deselected in 306.12s``.
COUNTS = re.compile(r"(\d+) (passed|failed|skipped|deselected|xfailed|xpassed|errors?)")


def readme_test_command() -> str:
    """The README's test command (the second line of its first ``bash`` blocks)."""
    lines, inside = [], False
    for line in (ROOT / "README.md").read_text().splitlines():
        if line.strip() == "```bash":
            inside = True
        elif line.strip() == "```":
            inside = False
        elif inside:
            lines.append(line)
    if len(lines) < 2 or "pytest" not in lines[1]:
        raise SystemExit("could not read the test command (the second README command) from README.md")
    return lines[1]


def main() -> None:
    args = harness.parser(__doc__.split("\n")[0]).parse_args()
    harness.setup(args)
    command = readme_test_command()
    pytest_part = command[command.index("python -m pytest"):] if "python -m pytest" in command else "python -m pytest"
    extra = pytest_part.split()[3:]
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra,
            *([QUICK_TARGET] if args.quick else [])]
    print(harness.header(f"the README's test command: {command}", args, repeats=None))
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False, env=env)
    wall = time.perf_counter() - t0
    sys.stderr.write(proc.stdout[-2000:] + proc.stderr[-2000:])
    last = [ln for ln in proc.stdout.splitlines() if COUNTS.search(ln)]
    counts = {kind: int(n) for n, kind in COUNTS.findall(last[-1])} if last else {}
    table = harness.Table(["tests run", "passed", "skipped", "failed", "deselected (slow)", "wall"])
    table.add(QUICK_TARGET if args.quick else "the default suite", counts.get("passed", 0), counts.get("skipped", 0),
              counts.get("failed", 0) + counts.get("error", 0) + counts.get("errors", 0), counts.get("deselected", 0),
              f"{wall:.0f} s ({wall / 60:.1f} min)")
    table.print()
    print(f"`{command}`: {wall / 60:.1f} minutes wall on this machine ({os.cpu_count()} cores).")
    if proc.returncode != 0:
        raise SystemExit(f"the test command failed with exit {proc.returncode}")


if __name__ == "__main__":
    main()
