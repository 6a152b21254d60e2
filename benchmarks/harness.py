"""Shared timing, memory and table helpers for ``benchmarks/bench_*.py``.

Every benchmark script:

1. parses its options with :func:`parser` (``--quick``, ``--threads``, ``--repeats``), then calls
   :func:`setup` (threads, seed) and prints :func:`header` first;
2. times geomlin and the peer *in this process* with :func:`measure` (one warm-up call each,
   then interleaved runs, medians) and peak memory with :func:`peak_memory`;
3. prints markdown tables with :class:`Table` (ratios computed from this run only).

Progress bars go to stderr, so stdout is exactly what ``geomlin bench --record`` pastes into the
docs. A peer that is not installed is reported in the output ("not installed"), never silently
dropped; a benchmark whose peer is missing says so in its table.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import datetime
import gc
import os
import platform
import shlex
import statistics
import sys
import threading
import time
from collections.abc import Callable

import torch


def deferred_checks():
    """geomlin's ``deferred_checks`` scope; a no-op scope in a peer's virtualenv without geomlin (MACE workers)."""
    try:
        from geomlin.validation import deferred_checks as scope
    except ImportError:
        return contextlib.nullcontext()
    return scope()


#: Interval of the background RSS sampler used when the kernel cannot reset the peak (seconds).
RSS_SAMPLE_INTERVAL = 0.002


def parser(description: str) -> argparse.ArgumentParser:
    """An argument parser with the options every benchmark takes."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true", help="small sizes (each script well under a minute)")
    p.add_argument("--threads", type=int, default=1, help="intra-op threads (default 1)")
    p.add_argument("--repeats", type=int, default=None, help="timed runs per case (median reported)")
    return p


def setup(args: argparse.Namespace, seed: int = 0) -> None:
    """Apply ``--threads`` and seed the generators (a benchmark script owns its process)."""
    if args.threads < 1:
        raise SystemExit(f"--threads must be >= 1, got {args.threads}")
    torch.set_num_threads(args.threads)
    torch.manual_seed(seed)


def header(title: str, args: argparse.Namespace, repeats: int | None) -> str:
    """The run's provenance as a markdown paragraph: what, when, where, and the exact command.

    ``repeats=None`` describes a single run (no warm-up, no median), as for training results.
    """
    import geomlin

    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    command = "python " + " ".join(shlex.quote(a) for a in [os.path.relpath(sys.argv[0])] + sys.argv[1:])
    lines = [
        f"**{title}**",
        "",
        (f"`{command}` — {datetime.date.today().isoformat()}, geomlin {geomlin.__version__}, "
         f"torch {torch.__version__}, {platform.machine()} {_cpu_name()}, {args.threads} thread(s), "
         + ("one run, " if repeats is None else f"median of {repeats} interleaved runs after a warm-up, ")
         + "load average "
         f"{load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} at the start."),
        "",
    ]
    return "\n".join(lines)


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"


def measure(fns: dict[str, Callable[[], object]], repeats: int, warmup: int = 1) -> dict[str, float]:
    """Median seconds of each callable: ``warmup`` calls each, then ``repeats`` interleaved rounds.

    The calls run in one ``geomlin.validation.deferred_checks`` scope, as in a training loop: on an
    accelerator the input checks stay on the device (no host sync per call) and are read at the end.
    """
    times: dict[str, list[float]] = {k: [] for k in fns}
    with deferred_checks():
        for fn in fns.values():
            for _ in range(warmup):
                fn()
        for _ in range(repeats):
            for k, fn in fns.items():
                _sync()
                t0 = time.perf_counter()
                fn()
                _sync()
                times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def _sync() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def _trim_heap() -> None:
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _hwm_bytes() -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _reset_hwm() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets the peak resident set size to the current one (Linux >= 4.0)
        return True
    except OSError:
        return False


def peak_memory(fn: Callable[[], object], device: str = "cpu") -> int:
    """Peak memory in bytes that ``fn()`` needs above what was in use when it started.

    CUDA: ``torch.cuda.max_memory_allocated``. CPU: the process's peak resident set size, reset
    before the call through ``/proc/self/clear_refs`` (or sampled every few ms where the kernel
    refuses the reset). Freed heap memory is handed back to the system first (glibc's
    ``malloc_trim``), so memory that earlier cases freed but kept cannot hide this call's peak.
    The call runs in a ``geomlin.validation.deferred_checks`` scope (see ``measure``).
    """
    with deferred_checks():
        return _peak_memory(fn, device)


def _peak_memory(fn: Callable[[], object], device: str) -> int:
    gc.collect()
    _trim_heap()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        fn()
        torch.cuda.synchronize()
        return max(0, torch.cuda.max_memory_allocated() - base)
    base = _rss_bytes()
    if _reset_hwm() and _hwm_bytes() is not None:
        fn()
        return max(0, (_hwm_bytes() or 0) - base)
    peak = [base]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], _rss_bytes())
            time.sleep(RSS_SAMPLE_INTERVAL)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    try:
        fn()
    finally:
        stop.set()
        t.join()
    return max(0, peak[0] - base)


def mib(nbytes: float) -> str:
    """Bytes as MiB (or GiB above 10 GiB) for tables."""
    if nbytes >= 10 * 2**30:
        return f"{nbytes / 2**30:.1f} GiB"
    return f"{nbytes / 2**20:.1f} MiB"


def ms(seconds: float) -> str:
    """Seconds as milliseconds (or seconds above 10 s) for tables."""
    return f"{seconds:.2f} s" if seconds >= 10 else f"{seconds * 1e3:.2f}"


def ratio(slow: float, fast: float) -> str:
    """``slow / fast`` as ``12.3x`` (how many times faster ``fast`` is)."""
    return f"{slow / fast:.2f}x" if fast > 0 else "–"


class Table:
    """A markdown table printed in one piece (so ratios in it come from one run)."""

    def __init__(self, columns: list[str]):
        self.columns = list(columns)
        self.rows: list[list[str]] = []

    def add(self, *cells) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"row has {len(cells)} cells, table has {len(self.columns)} columns")
        self.rows.append([str(c) for c in cells])

    def markdown(self) -> str:
        lines = ["| " + " | ".join(self.columns) + " |", "|" + "|".join("---" for _ in self.columns) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in self.rows]
        return "\n".join(lines)

    def print(self) -> None:
        print(self.markdown(), flush=True)
        print(flush=True)


def peer_version(module_name: str) -> str | None:
    """The installed version of a peer package, or ``None`` when it cannot be imported."""
    try:
        module = __import__(module_name)
    except (ImportError, OSError, RuntimeError):  # a broken optional install counts as missing
        return None
    return getattr(module, "__version__", "installed")
