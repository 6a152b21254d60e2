"""Benchmark: geomlin's datasets and transforms against PyTorch Geometric (and SciPy's KD-tree).

All in one process, one warm-up each, then interleaved timed runs (medians) and the peak memory
of one more run (:mod:`benchmarks.harness`):

* **QM9 raw -> processed**: :class:`geomlin.datasets.QM9` (geomlin's vectorised V2000 parser)
  against PyG's ``torch_geometric.datasets.QM9`` processing the same raw files with RDKit. The
  bundled 21-molecule sample is replicated (renamed ids) to the requested size in a temporary
  ``raw/`` folder; every timed run rebuilds the processed set from scratch (parse, pair with
  the CSV, collate, write the cache). Both results are checked to hold the same molecules.
* **SamplePoints**: area-weighted surface sampling of the bundled airplane mesh, geomlin's
  ``SamplePoints`` against PyG's ``SamplePoints``.
* **radius / kNN graphs**: geomlin's exact ``radius_graph`` / ``knn_graph`` (a cell-list search in
  plain torch, :mod:`geomlin.neighbors`; no compiled extension) against PyG's ``RadiusGraph`` / ``KNNGraph`` when ``torch-cluster`` or
  ``pyg-lib`` is installed (reported as missing otherwise: neither is a geomlin dependency), and
  against SciPy's ``cKDTree`` (``query_pairs`` / ``query``), the neighbour search a user without
  those extensions would reach for. Point clouds are uniform in a cube with ~16 neighbours per
  point; edge sets are checked to agree.

    python benchmarks/bench_datasets.py [--quick] [--threads 1] [--repeats 3]
"""

from __future__ import annotations

import contextlib
import io
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import Table, header, measure, mib, ms, parser, peak_memory, peer_version, ratio, setup

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "datasets" / "qm9"
MESH = ROOT / "datasets" / "meshes" / "airplane.ply"
#: Molecules of the QM9 runs (quick, full). Full QM9 has 130,831; PyG needs ~1 min per 20,000.
QM9_SIZES = {True: (1_000,), False: (2_000, 20_000)}
#: Surface points of the SamplePoints runs.
SAMPLE_SIZES = {True: (1_024, 100_000), False: (1_024, 100_000, 1_000_000)}
#: Points of the neighbour-graph runs, and the mean number of neighbours within the radius.
GRAPH_SIZES = {True: (1_000, 5_000), False: (1_000, 10_000, 100_000)}
NEIGHBOURS = 16
MISSING = "not installed"


def build_raw(folder: Path, num_molecules: int) -> int:
    """A QM9-format raw folder with the bundled sample replicated to >= ``num_molecules``; returns the count."""
    records = [r for r in (SAMPLE / "gdb9.sdf").read_text().split("$$$$\n") if r.strip()]
    csv_lines = (SAMPLE / "gdb9.sdf.csv").read_text().splitlines()
    header_line, rows = csv_lines[0], csv_lines[1:]
    sdf, csv = [], [header_line]
    k = 0
    for _ in range(-(-num_molecules // len(records))):
        for rec, row in zip(records, rows):
            k += 1
            sdf.append(f"gdb_{k}" + rec[rec.index("\n"):])
            csv.append(f"gdb_{k}" + row[row.index(","):])
    raw = folder / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    (raw / "gdb9.sdf").write_text("$$$$\n".join(sdf) + "$$$$\n")
    (raw / "gdb9.sdf.csv").write_text("\n".join(csv) + "\n")
    # PyG reads the skipped ids from lines 10 .. -3 of this file: an empty list skips nothing.
    (raw / "uncharacterized.txt").write_text("header\n" * 9 + "footer\nfooter")
    return k


def qm9_rows(table: Table, sizes, repeats: int) -> None:
    from geomlin.datasets import QM9

    have_rdkit = peer_version("rdkit") is not None
    for n in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            ours, pyg = Path(tmp) / "ours", Path(tmp) / "pyg"
            count = build_raw(ours, n)
            shutil.copytree(ours / "raw", pyg / "raw")

            def run_ours(root=ours):
                shutil.rmtree(root / "processed", ignore_errors=True)
                return QM9(root)

            def run_pyg(root=pyg):
                from torch_geometric.datasets import QM9 as PygQM9

                shutil.rmtree(root / "processed", ignore_errors=True)
                with contextlib.redirect_stderr(io.StringIO()):      # PyG's own progress bar
                    return PygQM9(str(root), force_reload=True)

            a = run_ours()
            fns = {"geomlin": run_ours}
            if have_rdkit:
                b = run_pyg()
                assert len(a) == len(b) == count
                assert torch.equal(a._data.z, b._data.z) and torch.allclose(a._data.pos, b._data.pos)
                fns["peer"] = run_pyg
            mem = {k: peak_memory(f) for k, f in fns.items()}
            t = measure(fns, repeats, warmup=0)
            peer = f"PyG QM9 + RDKit {peer_version('rdkit')}" if have_rdkit else f"PyG QM9: RDKit {MISSING}"
            table.add(f"QM9 raw -> processed, {count:,} molecules", "geomlin.datasets.QM9", ms(t["geomlin"]),
                      peer, ms(t["peer"]) if have_rdkit else "–",
                      ratio(t["peer"], t["geomlin"]) if have_rdkit else "–",
                      mib(mem["geomlin"]), mib(mem["peer"]) if have_rdkit else "–")


def sample_points_rows(table: Table, sizes, repeats: int) -> None:
    from torch_geometric.data import Data
    from torch_geometric.transforms import SamplePoints as PygSamplePoints

    from geomlin.datasets import read_mesh
    from geomlin.datasets.transforms import SamplePoints

    v, f = read_mesh(MESH)
    mesh = Data(pos=torch.from_numpy(v).float(), face=torch.from_numpy(f).t().contiguous())
    for n in sizes:
        ours, peer = SamplePoints(n), PygSamplePoints(n)
        fns = {"geomlin": lambda ours=ours: ours(mesh.clone()), "peer": lambda peer=peer: peer(mesh.clone())}
        mem = {k: peak_memory(fn) for k, fn in fns.items()}
        t = measure(fns, repeats)
        table.add(f"SamplePoints {n:,} points, {len(f):,}-face mesh", "SamplePoints", ms(t["geomlin"]),
                  "PyG SamplePoints", ms(t["peer"]), ratio(t["peer"], t["geomlin"]), mib(mem["geomlin"]),
                  mib(mem["peer"]))


def _pyg_graph_transform(name: str):
    """PyG's RadiusGraph / KNNGraph when its compiled neighbour search (pyg-lib or torch-cluster) is there."""
    import torch_geometric.typing as pyg_typing

    available = pyg_typing.WITH_RADIUS if name == "RadiusGraph" else pyg_typing.WITH_KNN
    if not (available or peer_version("torch_cluster")):
        return None
    import torch_geometric.transforms as T

    return getattr(T, name)


def _cloud(n: int, seed: int = 0) -> torch.Tensor:
    return torch.rand(n, 3, generator=torch.Generator().manual_seed(seed), dtype=torch.float32)


def _edges(edge_index: torch.Tensor) -> set:
    return set(map(tuple, edge_index.t().tolist()))


def graph_rows(table: Table, sizes, repeats: int) -> None:
    from scipy.spatial import cKDTree

    from geomlin.datasets.transforms import knn_graph, radius_graph

    scipy_name = f"SciPy cKDTree {peer_version('scipy')}"
    pyg_radius, pyg_knn = _pyg_graph_transform("RadiusGraph"), _pyg_graph_transform("KNNGraph")
    for n in sizes:
        x = _cloud(n)
        # the radius holding NEIGHBOURS points on average in a unit cube of n uniform points
        r = float((3 * NEIGHBOURS / (4 * np.pi * n)) ** (1 / 3))
        pts = x.double().numpy()

        def scipy_radius(pts=pts, r=r):
            return cKDTree(pts).query_pairs(r, output_type="ndarray")

        def scipy_knn(pts=pts):
            return cKDTree(pts).query(pts, NEIGHBOURS + 1)

        def ours_radius(x=x, r=r, n=n):
            return radius_graph(x, r, max_num_neighbors=n)

        def ours_knn(x=x):
            return knn_graph(x, NEIGHBOURS)

        assert ours_radius().shape[1] == 2 * len(scipy_radius())
        assert ours_knn().shape[1] == n * NEIGHBOURS
        cases = [("radius graph", ours_radius, scipy_radius, pyg_radius, {"r": r, "max_num_neighbors": n}),
                 ("kNN graph", ours_knn, scipy_knn, pyg_knn, {"k": NEIGHBOURS})]
        for what, ours, scipy_fn, pyg_cls, kw in cases:
            mem_ours, mem_scipy = peak_memory(ours), peak_memory(scipy_fn)
            t = measure({"geomlin": ours, "scipy": scipy_fn}, repeats)
            size = f"{what}, {n:,} points" + (f", r = {r:.3f}" if what == "radius graph" else f", k = {NEIGHBOURS}")
            table.add(size, f"{what.split()[0]}_graph", ms(t["geomlin"]), scipy_name, ms(t["scipy"]),
                      ratio(t["scipy"], t["geomlin"]), mib(mem_ours), mib(mem_scipy))
            if pyg_cls is None:
                table.add(size, f"{what.split()[0]}_graph", ms(t["geomlin"]),
                          f"PyG {'RadiusGraph' if 'radius' in what else 'KNNGraph'}: torch-cluster / pyg-lib "
                          f"{MISSING}", "–", "–", mib(mem_ours), "–")
            else:
                from torch_geometric.data import Data

                transform = pyg_cls(**kw)

                def run_pyg(transform=transform, x=x):
                    return transform(Data(pos=x))

                assert _edges(run_pyg().edge_index) == _edges(ours())
                mem_pyg = peak_memory(run_pyg)
                tp = measure({"peer": run_pyg}, repeats)
                table.add(size, f"{what.split()[0]}_graph", ms(t["geomlin"]), f"PyG {type(transform).__name__}",
                          ms(tp["peer"]), ratio(tp["peer"], t["geomlin"]), mib(mem_ours), mib(mem_pyg))


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    args = p.parse_args()
    setup(args)
    repeats = args.repeats or (2 if args.quick else 3)
    print(header("geomlin.datasets vs PyTorch Geometric (and SciPy's KD-tree)", args, repeats))
    print(f"Peers: torch_geometric {peer_version('torch_geometric') or MISSING}, rdkit "
          f"{peer_version('rdkit') or MISSING}, scipy {peer_version('scipy') or MISSING}, torch_cluster "
          f"{peer_version('torch_cluster') or MISSING}, pyg_lib {peer_version('pyg_lib') or MISSING}.\n")
    table = Table(["operation", "geomlin", "geomlin ms", "peer", "peer ms", "peer / geomlin",
                   "geomlin peak", "peer peak"])
    qm9_rows(table, QM9_SIZES[args.quick], repeats)
    sample_points_rows(table, SAMPLE_SIZES[args.quick], repeats)
    graph_rows(table, GRAPH_SIZES[args.quick], repeats)
    table.print()
    print("`peer / geomlin` > 1: geomlin is faster. Peak memory: resident memory one run needs above what was in "
          "use when it started (measured before the timed runs; memory the allocator kept from an earlier run "
          "is not counted again). geomlin's neighbour graphs are an exact cell-list search in plain torch (any "
          "device, no compiled extension); on a CPU, SciPy's C KD-tree is faster.")


if __name__ == "__main__":
    main()
