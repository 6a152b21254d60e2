"""Benchmark: processing the whole of QM9 with geomlin from each of its sources vs PyTorch Geometric's QM9.

The molecules are the installed qm9pack's 130,831 (``--quick``: its first 2,000); without qm9pack,
the bundled 21-molecule sample replicated under new indices to the same counts (said in the
output). From their text, :mod:`tests.datasets.qm9_formats` writes every layout into a temporary
folder: MoleculeNet's ``gdb9.sdf`` + ``gdb9.sdf.csv`` (with single bonds between atoms closer than
1.15 x their covalent radii: qm9pack has no bond block, and PyG's RDKit loop needs bonds to do its
usual work), a folder of ``dsgdb9nsd_NNNNNN.xyz`` files, the archive ``dsgdb9nsd.xyz.tar.bz2``,
and qm9pack's tables (for the whole set, the installed package is read in place).

Timed, one run each (the whole dataset is the size; a second run would hit the page cache, not
the parser, the same way for both): :class:`geomlin.datasets.QM9` from each source, processing
from scratch and writing its cache; and ``torch_geometric.datasets.QM9`` (RDKit's
``SDMolSupplier`` and a per-molecule Python loop) on the same SDF + CSV in a local ``raw/``
folder, writing its processed file (nothing is downloaded: without RDKit, PyG would fetch a
preprocessed copy, so it is then reported as missing). Checked: PyG's and geomlin's SDF datasets
hold the same atoms, positions, bonds and targets; geomlin's four sources the same molecules.

    python benchmarks/bench_qm9.py [--quick]
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import Table, header, mib, parser, peak_memory, peer_version, ratio, setup

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.datasets.qm9_formats import (
    read_moleculenet_text,
    read_qm9pack_text,
    write_moleculenet,
    write_qm9pack,
    write_xyz_archive,
    write_xyz_folder,
)

#: Molecules processed (quick, whole); the whole set is every molecule qm9pack has.
SIZES = {True: 2_000, False: None}
#: Stand-in size of the whole set when qm9pack is missing (QM9 less its uncharacterized molecules).
WHOLE = 130_831
MISSING = "not installed"


def molecules(quick: bool) -> tuple[list, str]:
    """The molecules as text and a description of where they come from."""
    from geomlin.datasets.io.qm9pack import find_parts, installed_data_folder

    data = installed_data_folder()
    if data is not None:
        mols = read_qm9pack_text(find_parts(data), limit=SIZES[quick], moleculenet=True)
        return mols, f"qm9pack {qm9pack_version()}" + (f", its first {len(mols):,}" if quick else ", all of them")
    sample = read_moleculenet_text(ROOT / "datasets" / "qm9")
    count = SIZES[quick] or WHOLE
    mols = [replace(sample[k % len(sample)], index=k + 1) for k in range(count)]
    return mols, f"the bundled 21-molecule sample replicated (qm9pack {MISSING})"


def build(folder: Path, mols: list, whole_installed: bool) -> dict[str, Path]:
    """A QM9 root per source; PyG's root holds the same SDF + CSV and an empty skip list."""
    roots = {k: folder / k for k in ("moleculenet", "xyz folder", "xyz archive", "qm9pack", "pyg")}
    write_moleculenet(roots["moleculenet"] / "raw", mols)
    write_moleculenet(roots["pyg"] / "raw", mols)
    # PyG reads the skipped positions from lines 10 .. -3 of this file: an empty list skips nothing.
    (roots["pyg"] / "raw" / "uncharacterized.txt").write_text("header\n" * 9 + "footer\nfooter")
    write_xyz_folder(roots["xyz folder"] / "raw", mols)
    write_xyz_archive(roots["xyz archive"] / "raw" / "dsgdb9nsd.xyz.tar.bz2", mols)
    roots["qm9pack"].mkdir()
    if not whole_installed:
        write_qm9pack(roots["qm9pack"] / "raw", mols, parts=3)
    return roots


def timed(fn) -> tuple[object, float, int]:
    """``fn()``'s result, its seconds and its peak memory, from one run."""
    out = {}

    def run():
        t0 = time.perf_counter()
        out["value"] = fn()
        out["seconds"] = time.perf_counter() - t0

    peak = peak_memory(run)
    return out["value"], out["seconds"], peak


def check(ours: dict, pyg) -> None:
    ref = ours["moleculenet"]._data
    for key, ds in ours.items():
        d = ds._data
        assert len(ds) == len(ours["moleculenet"]) and torch.equal(d.z, ref.z), key
        assert (d.pos - ref.pos).abs().max() <= 5.1e-5, key                  # the SDF keeps 4 decimals
        assert torch.allclose(d.y, ref.y, rtol=1e-6) and d.name == ref.name, key
    if pyg is not None:
        p = pyg._data
        assert len(pyg) == len(ours["moleculenet"]) and torch.equal(p.z, ref.z) and torch.equal(p.pos, ref.pos)
        assert torch.equal(p.edge_index, ref.edge_index) and torch.allclose(p.y, ref.y, rtol=1e-6)


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    args = p.parse_args()
    setup(args)
    from geomlin.datasets import QM9
    from geomlin.datasets.io.qm9pack import installed_data_folder

    print(header("QM9 raw -> processed: geomlin.datasets.QM9 (every source) vs PyTorch Geometric's QM9", args, None))
    print(f"{os.cpu_count()} logical cores. Peers: torch_geometric "
          f"{peer_version('torch_geometric') or MISSING}, rdkit {peer_version('rdkit') or MISSING}, qm9pack "
          f"{qm9pack_version()}.\n")
    mols, origin = molecules(args.quick)
    whole_installed = not args.quick and installed_data_folder() is not None
    have_rdkit = peer_version("rdkit") is not None
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        roots = build(Path(tmp), mols, whole_installed)
        built = time.perf_counter() - t0
        ours, seconds, peaks = {}, {}, {}
        sources = {"moleculenet": "moleculenet", "xyz folder": "xyz", "xyz archive": "xyz", "qm9pack": "qm9pack"}
        for key, source in sources.items():
            ours[key], seconds[key], peaks[key] = timed(lambda r=roots[key], s=source: QM9(r, source=s))
        pyg = None
        if have_rdkit:
            from torch_geometric.datasets import QM9 as PygQM9

            def run_pyg():
                with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
                    return PygQM9(str(roots["pyg"]))

            pyg, seconds["pyg"], peaks["pyg"] = timed(run_pyg)
        check(ours, pyg)
        sizes = {k: sum(f.stat().st_size for f in roots[k].rglob("*") if f.is_file() and "processed" not in f.parts)
                 for k in ("moleculenet", "xyz folder", "xyz archive", "qm9pack")}
    if whole_installed:
        sizes["qm9pack"] = sum(f.stat().st_size for f in installed_data_folder().glob("qm9_part*.csv"))
    n = len(ours["moleculenet"])
    table = Table(["source", "molecules", "raw MB", "geomlin s", "PyG QM9 + RDKit s", "PyG / geomlin",
                   "geomlin peak", "PyG peak"])
    names = {"moleculenet": "MoleculeNet gdb9.sdf + gdb9.sdf.csv", "xyz folder": "dsgdb9nsd_*.xyz folder",
             "xyz archive": "dsgdb9nsd.xyz.tar.bz2 (streamed)",
             "qm9pack": "qm9pack tables" + (" (installed package)" if whole_installed else "")}
    for key, label in names.items():
        if have_rdkit:
            peer = (f"{seconds['pyg']:.2f}", ratio(seconds["pyg"], seconds[key]), mib(peaks["pyg"]))
        else:
            peer = (f"RDKit {MISSING}", "–", "–")
        table.add(label, f"{n:,}", f"{sizes[key] / 1e6:.2f}", f"{seconds[key]:.2f}", peer[0], peer[1],
                  mib(peaks[key]), peer[2])
    table.print()
    print(f"Molecules: {origin}. Every run processes from scratch and writes its cache (PyG its processed file), "
          f"once; PyG processes the SDF (same molecules, same targets; it has no XYZ or qm9pack reader), so each "
          f"row's ratio is PyG's SDF time over that source's. Writing the raw folders took {built:.0f} s (not "
          "timed). Peak memory: resident memory one run needs above what was in use when it started.")


def qm9pack_version() -> str:
    """qm9pack's version from its metadata (importing it needs setuptools' pkg_resources, which geomlin does not)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("qm9pack")
    except PackageNotFoundError:
        return MISSING


if __name__ == "__main__":
    main()
