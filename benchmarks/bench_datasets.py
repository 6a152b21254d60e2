"""Benchmark: QM9 processing, geomlin's V2000 parser vs PyTorch Geometric's QM9 (RDKit path).

The bundled 21-molecule QM9 sample is replicated (with renamed ids) to at least 20,000
molecules (1,000 with ``--quick``) in a temporary folder laid out as ``raw/gdb9.sdf``,
``raw/gdb9.sdf.csv``, ``raw/uncharacterized.txt``. Both loaders then build their
processed dataset from scratch (parse, pair with the CSV, collate, write the cache) in
the same process: one warm-up each, then interleaved timed runs, medians and the ratio.

RDKit is needed only for the peer (``pip install rdkit``); it is not a geomlin dependency.

    python benchmarks/bench_datasets.py [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "datasets" / "qm9"


def build_raw(folder: Path, num_molecules: int) -> int:
    """Write a QM9-format raw folder with the sample replicated to >= ``num_molecules``; returns the count."""
    records = [r for r in (SAMPLE / "gdb9.sdf").read_text().split("$$$$\n") if r.strip()]
    csv_lines = (SAMPLE / "gdb9.sdf.csv").read_text().splitlines()
    header, rows = csv_lines[0], csv_lines[1:]
    reps = -(-num_molecules // len(records))
    sdf, csv = [], [header]
    k = 0
    for _ in range(reps):
        for rec, row in zip(records, rows):
            k += 1
            name = f"gdb_{k}"
            sdf.append(name + rec[rec.index("\n"):])
            csv.append(name + row[row.index(","):])
    raw = folder / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    (raw / "gdb9.sdf").write_text("$$$$\n".join(sdf) + "$$$$\n")
    (raw / "gdb9.sdf.csv").write_text("\n".join(csv) + "\n")
    # PyG reads ids from lines 10 .. -3 of this file; an empty list here skips nothing.
    (raw / "uncharacterized.txt").write_text("header\n" * 9 + "footer\nfooter")
    return k


def run_geomlin(root: Path) -> int:
    from geomlin.datasets import QM9

    shutil.rmtree(root / "processed", ignore_errors=True)
    return len(QM9(root))


def run_pyg(root: Path) -> int:
    from torch_geometric.datasets import QM9 as PygQM9

    shutil.rmtree(root / "processed", ignore_errors=True)
    with contextlib.redirect_stderr(io.StringIO()):        # silence PyG's own progress bar
        return len(PygQM9(str(root), force_reload=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 molecules, 2 timed runs (< 60 s)")
    parser.add_argument("--molecules", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)   # 2 threads thrash on a shared 2-core machine
    n = args.molecules or (1_000 if args.quick else 20_000)
    repeats = args.repeats or (2 if args.quick else 3)
    try:
        import rdkit  # noqa: F401
        have_rdkit = True
    except ImportError:
        have_rdkit = False
        print("RDKit is not installed: PyG's QM9 cannot process raw files without it "
              "(pip install rdkit); timing geomlin only.")
    with tempfile.TemporaryDirectory() as tmp:
        ours_root, pyg_root = Path(tmp) / "ours", Path(tmp) / "pyg"
        count = build_raw(ours_root, n)
        shutil.copytree(ours_root / "raw", pyg_root / "raw")
        size_mb = os.path.getsize(ours_root / "raw" / "gdb9.sdf") / 2**20
        print(f"QM9-format SDF: {count} molecules, {size_mb:.1f} MB; {repeats} interleaved runs after warm-up")
        assert run_geomlin(ours_root) == count                     # warm-up (imports, page cache)
        if have_rdkit:
            assert run_pyg(pyg_root) == count
        t_ours, t_pyg = [], []
        for _ in range(repeats):
            t0 = time.perf_counter()
            run_geomlin(ours_root)
            t_ours.append(time.perf_counter() - t0)
            if have_rdkit:
                t0 = time.perf_counter()
                run_pyg(pyg_root)
                t_pyg.append(time.perf_counter() - t0)
    rows = [(f"QM9 raw -> processed ({count} molecules)", statistics.median(t_ours), "PyG QM9 + RDKit",
             statistics.median(t_pyg) if have_rdkit else None)]
    rows.append(bench_sample_points(20 if args.quick else 100))
    print_table(rows)
    print(f"\nQM9 per-run times geomlin: {[round(t, 3) for t in t_ours]}"
          + (f"; PyG: {[round(t, 3) for t in t_pyg]}" if have_rdkit else ""))


def bench_sample_points(iterations: int) -> tuple[str, float, str, float]:
    """Area-weighted sampling of 1024 points from the bundled airplane mesh, vs PyG's SamplePoints."""
    from torch_geometric.data import Data
    from torch_geometric.transforms import SamplePoints as PygSamplePoints

    from geomlin.datasets import read_mesh
    from geomlin.datasets.transforms import SamplePoints

    v, f = read_mesh(ROOT / "datasets" / "meshes" / "airplane.ply")
    mesh = Data(pos=torch.from_numpy(v).float(), face=torch.from_numpy(f).t().contiguous())
    ours, peer = SamplePoints(1024), PygSamplePoints(1024)

    def timed(fn) -> float:
        t0 = time.perf_counter()
        for _ in range(iterations):
            fn(mesh.clone())
        return (time.perf_counter() - t0) / iterations

    timed(ours), timed(peer)
    t_o, t_p = [], []
    for _ in range(3):
        t_o.append(timed(ours))
        t_p.append(timed(peer))
    return (f"SamplePoints 1024 from a {len(f)}-face mesh", statistics.median(t_o), "PyG SamplePoints",
            statistics.median(t_p))


def print_table(rows) -> None:
    width = max(len(r[0]) for r in rows)
    print(f"\n| {'task':<{width}} | geomlin (s) | peer             | peer (s)  | speed-up |")
    print(f"|{'-' * (width + 2)}|-------------|------------------|-----------|----------|")
    for task, ours, name, peer in rows:
        if peer is None:
            print(f"| {task:<{width}} | {ours:11.5f} | {name:<16} |         - |        - |")
        else:
            print(f"| {task:<{width}} | {ours:11.5f} | {name:<16} | {peer:9.5f} | {peer / ours:7.2f}x |")


if __name__ == "__main__":
    main()
