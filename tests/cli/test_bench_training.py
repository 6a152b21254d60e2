"""benchmarks/bench_training.py prints the training table of one real `geomlin train` run."""

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_training.py"


def test_quick_nbody_table():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--task", "nbody", "--quick", "--", "--model", "egnn,mlp"],
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| `")]
    assert [r.split("|")[1].strip() for r in rows] == ["`egnn`", "`mlp`"]
    header = next(line for line in proc.stdout.splitlines() if line.startswith("| model"))
    assert "test_mse" in header and "rotated_mse" in header
    assert "epochs," in proc.stdout and "s wall" in proc.stdout
