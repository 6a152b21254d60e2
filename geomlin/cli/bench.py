"""``geomlin bench``: run every ``benchmarks/bench_*.py`` script and show its table.

Each script runs in its own process (``python bench_X.py [--quick]``), with its
output streamed through; a final table lists each script's status and wall time.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from geomlin.train.errors import UserError


def find_benchmarks(directory: str | Path | None = None) -> list[Path]:
    """The ``bench_*.py`` scripts of ``directory`` (default: ``./benchmarks``, else the source tree's)."""
    if directory is None:
        candidates = [Path.cwd() / "benchmarks", Path(__file__).resolve().parents[2] / "benchmarks"]
        directory = next((c for c in candidates if c.is_dir()), None)
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
