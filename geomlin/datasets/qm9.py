"""QM9 (Ramakrishnan et al. 2014) read from the MoleculeNet ``gdb9.sdf`` + ``gdb9.sdf.csv`` files.

Same 19 targets, order and units as PyTorch Geometric's ``QM9``, parsed by
geomlin's own V2000 reader (:mod:`geomlin.datasets.io.sdf`), so RDKit is not
needed. Processing builds the collated storage directly from the flat arrays
(no per-molecule Python objects) and caches it atomically with a fingerprint.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Callable
from typing import ClassVar

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import Data

from geomlin.datasets.base import InMemoryList
from geomlin.datasets.cache import fingerprint, load_cache, save_cache
from geomlin.datasets.io.sdf import read_sdf
from geomlin.datasets.sdf_molecules import collate_molecules, parse_label
from geomlin.validation import FileFormatError, check_float, check_int

HARTREE_TO_EV = 27.211386246
KCALMOL_TO_EV = 0.04336414

#: Target names in PyG order, the CSV column each comes from, its factor to the stated unit, and the unit.
QM9_TARGETS = (
    ("mu", "mu", 1.0, "D"),
    ("alpha", "alpha", 1.0, "a0^3"),
    ("homo", "homo", HARTREE_TO_EV, "eV"),
    ("lumo", "lumo", HARTREE_TO_EV, "eV"),
    ("gap", "gap", HARTREE_TO_EV, "eV"),
    ("r2", "r2", 1.0, "a0^2"),
    ("zpve", "zpve", HARTREE_TO_EV, "eV"),
    ("U0", "u0", HARTREE_TO_EV, "eV"),
    ("U", "u298", HARTREE_TO_EV, "eV"),
    ("H", "h298", HARTREE_TO_EV, "eV"),
    ("G", "g298", HARTREE_TO_EV, "eV"),
    ("cv", "cv", 1.0, "cal/(mol K)"),
    ("U0_atom", "u0_atom", KCALMOL_TO_EV, "eV"),
    ("U_atom", "u298_atom", KCALMOL_TO_EV, "eV"),
    ("H_atom", "h298_atom", KCALMOL_TO_EV, "eV"),
    ("G_atom", "g298_atom", KCALMOL_TO_EV, "eV"),
    ("A", "A", 1.0, "GHz"),
    ("B", "B", 1.0, "GHz"),
    ("C", "C", 1.0, "GHz"),
)
TARGET_INDEX = {name: k for k, (name, *_rest) in enumerate(QM9_TARGETS)}

#: Elements of QM9 in the order of the one-hot ``x`` columns.
QM9_ELEMENTS = (1, 6, 7, 8, 9)

#: Isolated-atom energies (Hartree) of H, C, N, O, F from the QM9 paper's atomref table,
#: for targets U0, U, H, G; ``*_atom`` = total - sum of these (converted to eV).
ATOM_REFERENCE_HARTREE = {
    "U0": {1: -0.500273, 6: -37.846772, 7: -54.583861, 8: -75.064579, 9: -99.718730},
    "U": {1: -0.498857, 6: -37.845355, 7: -54.582445, 8: -75.063162, 9: -99.717314},
    "H": {1: -0.497912, 6: -37.844411, 7: -54.581501, 8: -75.062219, 9: -99.716370},
    "G": {1: -0.510927, 6: -37.861317, 7: -54.598897, 8: -75.079532, 9: -99.733544},
}
MAX_Z = 100

RAW_FILES = ("gdb9.sdf", "gdb9.sdf.csv")
OPTIONAL_RAW = "uncharacterized.txt"
SOURCE = ("MoleculeNet qm9.zip (https://deepchemdata.s3-us-west-1.amazonaws.com/datasets/molnet_publish/qm9.zip) "
          "and uncharacterized.txt (https://ndownloader.figshare.com/files/3195404)")
_URLS = {"qm9.zip": "https://deepchemdata.s3-us-west-1.amazonaws.com/datasets/molnet_publish/qm9.zip",
         OPTIONAL_RAW: "https://ndownloader.figshare.com/files/3195404"}


def read_qm9_csv(path: str) -> tuple[list[str], np.ndarray]:
    """Molecule ids and the ``(M, 19)`` float64 target table (PyG order, converted units) of ``gdb9.sdf.csv``.

    Every row needs the header's number of fields and finite numbers in the 19 target columns;
    errors are :class:`~geomlin.validation.FileFormatError` naming the file and line.
    """
    with open(path, newline="") as f:
        rows = [(no, r) for no, r in enumerate(csv.reader(f), start=1) if r]
    if not rows:
        raise FileFormatError(path, "empty CSV; expected a header row with mol_id and the 19 QM9 columns")
    header = [h.strip() for h in rows[0][1]]
    missing = [col for _, col, _, _ in QM9_TARGETS if col not in header]
    if "mol_id" not in header or missing:
        raise FileFormatError(path, f"header lacks columns {(['mol_id'] if 'mol_id' not in header else []) + missing}; "
                              f"got {header}", line=rows[0][0])
    cols = [header.index(col) for _, col, _, _ in QM9_TARGETS]
    id_col = header.index("mol_id")
    body = rows[1:]
    for no, r in body:
        if len(r) != len(header):
            raise FileFormatError(path, f"row has {len(r)} fields but the header has {len(header)}", line=no)
    ids = [r[id_col] for _, r in body]
    try:
        table = np.array([[float(r[c]) for c in cols] for _, r in body], dtype=np.float64).reshape(len(body), len(cols))
        ok = np.isfinite(table).all()
    except ValueError:
        ok = False
    if not ok:
        for no, r in body:
            for (name, col, _, _), c in zip(QM9_TARGETS, cols):
                parse_label(r[c], path, no, f"column {col!r} of {r[id_col]!r}")
    factors = np.array([f for _, _, f, _ in QM9_TARGETS])
    return ids, table * factors


def target_index(target: int | str) -> int:
    """Column of ``target`` (a name of :data:`QM9_TARGETS` such as ``"U0"``, or an index 0..18) in ``y``."""
    if isinstance(target, str):
        if target not in TARGET_INDEX:
            raise ValueError(f"unknown QM9 target {target!r}; expected one of {', '.join(TARGET_INDEX)}")
        return TARGET_INDEX[target]
    return check_int(target, "target", minimum=0, maximum=len(QM9_TARGETS) - 1)


def read_uncharacterized(path: str) -> set[int]:
    """1-based gdb indices listed in ``uncharacterized.txt`` (lines whose first field is an integer)."""
    out = set()
    with open(path) as f:
        for line in f:
            parts = line.split()
            if parts and parts[0].isdigit():
                out.add(int(parts[0]))
    return out


def qm9_split(num_graphs: int, seed: int = 0, train: float = 110_000, val: float = 10_000
              ) -> dict[str, Tensor]:
    """Seeded random split into train / val / test index tensors (int64).

    The standard QM9 protocol (e.g. DimeNet, EGNN) is 110k train, 10k val and the rest (~10.8k)
    test. ``train`` / ``val`` may be counts or fractions of ``num_graphs``.
    """
    num_graphs = check_int(num_graphs, "num_graphs", minimum=1)
    seed = check_int(seed, "seed", minimum=0)

    def count(v, what):
        if isinstance(v, float):
            return round(check_float(v, f"{what} (a fraction)", minimum=0.0, maximum=1.0) * num_graphs)
        return check_int(v, what, minimum=0)
    n_train, n_val = count(train, "train"), count(val, "val")
    if n_train + n_val > num_graphs:
        raise ValueError(f"split of {n_train} train + {n_val} val exceeds the {num_graphs} graphs; pass smaller "
                         "counts or fractions (e.g. train=0.8, val=0.1)")
    perm = torch.randperm(num_graphs, generator=torch.Generator().manual_seed(int(seed)))
    return {"train": perm[:n_train], "val": perm[n_train:n_train + n_val], "test": perm[n_train + n_val:]}


def _find_raw(root: str) -> str | None:
    for folder in (os.path.join(root, "raw"), root):
        if all(os.path.isfile(os.path.join(folder, f)) for f in RAW_FILES):
            return folder
    return None


def _download(root: str) -> None:
    from torch_geometric.data import download_url, extract_zip

    raw = os.path.join(root, "raw")
    os.makedirs(raw, exist_ok=True)
    zpath = download_url(_URLS["qm9.zip"], raw)
    extract_zip(zpath, raw)
    os.remove(zpath)
    tmp = download_url(_URLS[OPTIONAL_RAW], raw)
    os.replace(tmp, os.path.join(raw, OPTIONAL_RAW))


def process_qm9(sdf_path: str, csv_path: str, skip_ids: set[int] = frozenset(), dtype=torch.float32
                ) -> tuple[Data, dict[str, Tensor]]:
    """Parse and pair the SDF and CSV into collated InMemoryDataset storage ``(data, slices)``.

    Records are paired with CSV rows by position and their names must agree; molecules whose
    ``gdb_<id>`` is in ``skip_ids`` are dropped.
    """
    rec = read_sdf(sdf_path, parse_properties=False)
    ids, table = read_qm9_csv(csv_path)
    if len(rec) != len(ids):
        raise ValueError(f"{sdf_path} has {len(rec)} molecule records but {csv_path} has {len(ids)} label rows; "
                         "they must pair up one to one")
    names = np.array(rec.names)
    mismatch = np.flatnonzero(names != np.array(ids))
    if mismatch.size:
        k = int(mismatch[0])
        raise ValueError(f"record {k} of {sdf_path} is {rec.names[k]!r} but row {k + 2} of {csv_path} is {ids[k]!r}")
    keep = np.ones(len(rec), dtype=bool)
    if skip_ids:
        gdb = np.array([int(n.split("_")[-1]) if n.split("_")[-1].isdigit() else -1 for n in rec.names])
        keep = ~np.isin(gdb, np.fromiter(skip_ids, dtype=np.int64))
    bad = ~np.isin(rec.z, QM9_ELEMENTS)
    if bad.any():
        atom_rec = np.repeat(np.arange(len(rec)), rec.num_atoms)
        k = int(atom_rec[np.flatnonzero(bad)[0]])
        raise ValueError(f"{sdf_path}: record {k} ({rec.names[k]!r}) has element Z={int(rec.z[bad][0])}, not one of "
                         f"QM9's H, C, N, O, F")

    data, slices = collate_molecules(rec, keep, dtype, where=sdf_path)
    elem_idx = np.searchsorted(QM9_ELEMENTS, data.z.numpy())
    data.x = torch.nn.functional.one_hot(torch.from_numpy(elem_idx), len(QM9_ELEMENTS)).to(dtype)
    data.y = torch.from_numpy(table[keep]).to(dtype)
    slices["x"], slices["y"] = slices["z"], slices["idx"]
    return data, slices


class QM9(InMemoryList):
    """QM9: ~130k small organic molecules (H, C, N, O, F) with 19 DFT targets, read offline.

    ``root`` holds ``raw/gdb9.sdf`` and ``raw/gdb9.sdf.csv`` (or the two files directly in
    ``root``), as unpacked from MoleculeNet's ``qm9.zip``; an optional ``raw/uncharacterized.txt``
    lists the 3054 molecules that failed the consistency check, which are skipped
    (``skip_uncharacterized=True``). Nothing is downloaded unless ``download=True``.

    Fields per molecule: ``z (N,)`` int64 atomic numbers; ``pos (N, 3)`` Angstrom, equal to the
    SDF coordinates; ``x (N, 5)`` one-hot of H, C, N, O, F; ``edge_index (2, 2B)`` both directions
    of the SDF bond block, sorted by (row, col); ``edge_attr (2B, 4)`` one-hot single / double /
    triple / aromatic; ``y (1, 19)`` targets in PyG order and units (:data:`QM9_TARGETS`:
    ``mu`` D, ``alpha`` a0^3, ``homo, lumo, gap, zpve, U0, U, H, G`` and the four ``*_atom``
    energies in eV, ``r2`` a0^2, ``cv`` cal/(mol K), ``A, B, C`` GHz); ``name`` (``"gdb_<id>"``);
    ``idx`` the record's position in the SDF.

    The processed result is cached in ``<root>/processed/geomlin_qm9.pt`` (``cache=True``),
    written atomically and keyed by a fingerprint of the raw files, the ``pre_transform`` and
    ``pre_filter``; a stale or corrupt cache is rebuilt.
    """

    targets = tuple(t[0] for t in QM9_TARGETS)
    units: ClassVar[dict[str, str]] = {t[0]: t[3] for t in QM9_TARGETS}
    cache_name = "geomlin_qm9.pt"

    def __init__(self, root: str | os.PathLike, transform: Callable | None = None,
                 pre_transform: Callable | None = None, pre_filter: Callable | None = None,
                 skip_uncharacterized: bool = True, cache: bool = True, download: bool = False):
        self._start(transform, pre_transform, pre_filter)
        self.root_dir = root = os.fspath(root)
        raw = _find_raw(root)
        if raw is None and download:
            _download(root)
            raw = _find_raw(root)
        if raw is None:
            raise FileNotFoundError(
                f"QM9 raw files not found under {root!r}: expected {', '.join(RAW_FILES)} (and optionally "
                f"{OPTIONAL_RAW}) in {os.path.join(root, 'raw')!r} or {root!r}. Official source: {SOURCE}. "
                "Unzip qm9.zip into <root>/raw, or pass download=True to fetch it.")
        files = [os.path.join(raw, f) for f in RAW_FILES]
        unchar = os.path.join(raw, OPTIONAL_RAW)
        skip_file = unchar if skip_uncharacterized and os.path.isfile(unchar) else None
        if skip_file:
            files.append(skip_file)
        self.raw_folder = raw
        cache_path = os.path.join(root, "processed", self.cache_name) if cache else None
        fp = fingerprint(files, "qm9", pre_transform, pre_filter)
        payload = load_cache(cache_path, fp) if cache_path else None
        if payload is None:
            skip = read_uncharacterized(skip_file) if skip_file else set()
            data, slices = process_qm9(files[0], files[1], skip)
            self.data, self.slices = data, slices
            if pre_filter is not None or pre_transform is not None:
                graphs = [self.get(i) for i in range(len(self))]
                if pre_filter is not None:
                    graphs = [g for g in graphs if pre_filter(g)]
                self._set_graphs(graphs)
            if cache_path:
                save_cache(cache_path, fp, {"data": self._data.to_dict(), "slices": self.slices})
        else:
            self.data, self.slices = Data.from_dict(payload["data"]), payload["slices"]
        self._data_list = None

    @staticmethod
    def atomref(target: int | str) -> Tensor | None:
        """Per-element isolated-atom energies ``(100, 1)`` float32 in eV for U0 / U / H / G (targets 7-10).

        Indexed by atomic number; ``None`` for targets without atom references.
        """
        name = QM9_TARGETS[target_index(target)][0]
        if name not in ATOM_REFERENCE_HARTREE:
            return None
        out = torch.zeros(MAX_Z, 1)
        for zz, e in ATOM_REFERENCE_HARTREE[name].items():
            out[zz, 0] = e * HARTREE_TO_EV
        return out

    def split(self, seed: int = 0, train: float = 110_000, val: float = 10_000) -> dict[str, Tensor]:
        """Seeded train / val / test indices; see :func:`qm9_split`."""
        return qm9_split(len(self), seed, train, val)

    def __repr__(self) -> str:
        return f"QM9({len(self)})"


