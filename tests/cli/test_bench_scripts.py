"""Every benchmark script runs at its quick size and ends with status ok, with or without the peer
packages installed (a missing peer is reported in the table, not a crash)."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_every_benchmark_runs_quick():
    scripts = sorted(p.stem for p in (ROOT / "benchmarks").glob("bench_*.py"))
    proc = subprocess.run([sys.executable, "-m", "geomlin", "bench", "--quick", "--timeout", "900"],
                          cwd=ROOT, capture_output=True, text=True, timeout=3600, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    status = {line.split()[0]: line.split()[1] for line in proc.stdout.splitlines()
              if line.startswith("bench_") and len(line.split()) >= 3}
    assert status == dict.fromkeys(scripts, "ok"), status
