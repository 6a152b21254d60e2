"""QM9 (Ramakrishnan et al. 2014) from MoleculeNet's SDF + CSV, the original XYZ files, or qm9pack.

Same 19 targets, order and units as PyTorch Geometric's ``QM9`` from every source, parsed by
geomlin's own readers ([`geomlin.datasets.io.sdf`][],
[`geomlin.datasets.io.dsgdb9nsd`][],
[`geomlin.datasets.io.qm9pack`][]), so RDKit is not needed. Processing builds the
collated storage directly from the flat arrays (no per-molecule Python objects) and caches it atomically with a fingerprint.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import Data

from geomlin.datasets.base import InMemoryList
from geomlin.datasets.cache import file_stats, fingerprint, load_cache, save_cache
from geomlin.datasets.io import dsgdb9nsd, qm9pack
from geomlin.datasets.io.sdf import COUNTS_LINE, read_sdf
from geomlin.datasets.sdf_molecules import collate_molecules, parse_label
from geomlin.validation import FileFormatError, check_bool, check_float, check_int

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

#: Isolated-atom energies (Hartree) of H, C, N, O, F from the QM9 paper's atomref table
#: (``atomref.txt`` of the original distribution), for targets U0, U, H, G; ``*_atom`` =
#: total - sum of these (converted to eV). MoleculeNet's ``*_atom`` columns use these values.
ATOM_REFERENCE_HARTREE = {
    "U0": {1: -0.500273, 6: -37.846772, 7: -54.583861, 8: -75.064579, 9: -99.718730},
    "U": {1: -0.498857, 6: -37.845355, 7: -54.582445, 8: -75.063163, 9: -99.717314},
    "H": {1: -0.497912, 6: -37.844411, 7: -54.581501, 8: -75.062219, 9: -99.716370},
    "G": {1: -0.510927, 6: -37.861317, 7: -54.598897, 8: -75.079532, 9: -99.733544},
}
MAX_Z = 100

#: The factor (kcal/mol per Hartree) of the ``*_atom`` columns of MoleculeNet's ``gdb9.sdf.csv``:
#: ``u0_atom = (U0 - sum of ATOM_REFERENCE_HARTREE["U0"]) * 627.509``. The XYZ and qm9pack sources
#: carry no ``*_atom`` values, so they are computed this way, equal to MoleculeNet's to ~1e-12.
MOLECULENET_HARTREE_TO_KCALMOL = 627.509
#: The ``*_atom`` columns of the MoleculeNet CSV and the total energy (XYZ property) each is computed from.
ATOMIZATION_COLUMNS = {"u0_atom": "U0", "u298_atom": "U", "h298_atom": "H", "g298_atom": "G"}
#: The MoleculeNet CSV column of every other target and the XYZ / qm9pack property it equals.
CSV_TO_PROPERTY = {"mu": "mu", "alpha": "alpha", "homo": "homo", "lumo": "lumo", "gap": "gap", "r2": "r2",
                   "zpve": "zpve", "u0": "U0", "u298": "U", "h298": "H", "g298": "G", "cv": "Cv",
                   "A": "A", "B": "B", "C": "C"}

#: Where QM9 can be read from (``QM9(source=...)``); ``"auto"`` takes the first found in this order.
SOURCES = ("moleculenet", "xyz", "qm9pack")
RAW_FILES = ("gdb9.sdf", "gdb9.sdf.csv")
#: The original distribution's list of the 3,054 molecules that failed its consistency check.
UNCHARACTERIZED = "uncharacterized.txt"
#: Number of molecules in QM9 and of uncharacterized ones among them.
NUM_MOLECULES, NUM_UNCHARACTERIZED = 133_885, 3_054
SOURCE = ("MoleculeNet qm9.zip (https://deepchemdata.s3-us-west-1.amazonaws.com/datasets/molnet_publish/qm9.zip), "
          "or the original dsgdb9nsd.xyz.tar.bz2 (https://doi.org/10.6084/m9.figshare.c.978904: "
          "https://ndownloader.figshare.com/files/3195389), each with uncharacterized.txt "
          "(https://ndownloader.figshare.com/files/3195404); or `pip install qm9pack`")
_URLS = {"qm9.zip": "https://deepchemdata.s3-us-west-1.amazonaws.com/datasets/molnet_publish/qm9.zip",
         UNCHARACTERIZED: "https://ndownloader.figshare.com/files/3195404"}


def read_qm9_csv(path: str) -> tuple[list[str], np.ndarray]:
    """Molecule ids and the ``(M, 19)`` float64 target table (PyG order, converted units) of ``gdb9.sdf.csv``.

    Every row needs the header's number of fields and finite numbers in the 19 target columns;
    errors are [`FileFormatError`][] naming the file and line. A file
    without quotes (MoleculeNet's) is converted in one ``numpy.loadtxt`` call; anything
    else, and every error message, goes through Python's csv module.
    """
    with open(path, "rb") as f:
        data = f.read()
    plain = _read_plain_csv(data) if b'"' not in data else None
    if plain is not None:
        return plain
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


def _read_plain_csv(data: bytes) -> tuple[list[str], np.ndarray] | None:
    """[`read_qm9_csv`][] of an unquoted CSV, vectorised; None when anything is off (the csv path says what)."""
    lines = [ln for ln in data.replace(b"\r\n", b"\n").split(b"\n") if ln]
    if len(lines) < 2:
        return None
    header = [h.strip() for h in lines[0].decode("utf-8", errors="replace").split(",")]
    if "mol_id" not in header or any(col not in header for _, col, _, _ in QM9_TARGETS):
        return None
    body = lines[1:]
    if any(ln.count(b",") != len(header) - 1 for ln in body):
        return None
    cols = [header.index(col) for _, col, _, _ in QM9_TARGETS]
    id_col = header.index("mol_id")
    try:
        table = np.loadtxt(io.BytesIO(b"\n".join(body)), delimiter=",", usecols=cols, dtype=np.float64,
                           comments=None, ndmin=2)
    except ValueError:
        return None
    if table.shape != (len(body), len(cols)) or not np.isfinite(table).all():
        return None
    ids = [ln.split(b",", id_col + 1)[id_col].decode("utf-8", errors="replace") for ln in body]
    return ids, table * np.array([f for _, _, f, _ in QM9_TARGETS])


def target_index(target: int | str) -> int:
    """Column of ``target`` (a name of [`QM9_TARGETS`][] such as ``"U0"``, or an index 0..18) in ``y``."""
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


@dataclass(frozen=True)
class QM9Files:
    """The raw files of one QM9 source found under a root.

    Attributes
    ----------
    source : str
        One of [`SOURCES`][].
    paths : tuple of str
        ``moleculenet``: the SDF and the CSV; ``xyz``: the archive or the folder of XYZ files;
        ``qm9pack``: the ``qm9_part<k>.csv`` tables in order.
    folder : str
        Where ``uncharacterized.txt`` is looked for (the folder that holds the raw files, or
        for an installed qm9pack the root's ``raw/`` or the root).
    """

    source: str
    paths: tuple[str, ...]
    folder: str

    def uncharacterized(self) -> str | None:
        """The ``uncharacterized.txt`` beside the raw files, if there is one."""
        path = os.path.join(self.folder, UNCHARACTERIZED)
        return path if os.path.isfile(path) else None


def find_qm9_files(root: str | os.PathLike, source: str = "auto") -> QM9Files | None:
    """The raw files of a QM9 source in ``<root>/raw`` or ``<root>``.

    Parameters
    ----------
    root : str or os.PathLike
        The dataset folder.
    source : str
        ``"moleculenet"``: ``gdb9.sdf`` and ``gdb9.sdf.csv``. ``"xyz"``: ``dsgdb9nsd_*.xyz``
        files, or else the archive ``dsgdb9nsd.xyz.tar.bz2``. ``"qm9pack"``: ``qm9_part1.csv``,
        ``qm9_part2.csv``, ... or else the tables of the installed qm9pack package. ``"auto"``:
        the first of the three found in the root (an installed qm9pack only when named).

    Returns
    -------
    QM9Files or None
        None when the root has none of them.
    """
    if source not in ("auto", *SOURCES):
        raise ValueError(f"source must be 'auto' or one of {', '.join(map(repr, SOURCES))}, got {source!r}")
    root = os.fspath(root)
    folders = [f for f in (os.path.join(root, "raw"), root) if os.path.isdir(f)]
    for kind in SOURCES if source == "auto" else (source,):
        for folder in folders:
            found = _find_in(kind, folder)
            if found:
                return QM9Files(kind, found, folder)
    if source == "qm9pack":
        data = qm9pack.installed_data_folder()
        parts = qm9pack.find_parts(data) if data is not None else []
        if parts:
            return QM9Files("qm9pack", tuple(map(str, parts)), folders[0] if folders else root)
    return None


def _find_in(kind: str, folder: str) -> tuple[str, ...]:
    if kind == "moleculenet":
        paths = tuple(os.path.join(folder, f) for f in RAW_FILES)
        return paths if all(os.path.isfile(p) for p in paths) else ()
    if kind == "xyz":
        with os.scandir(folder) as entries:
            if any(dsgdb9nsd.FILE_PATTERN.fullmatch(e.name) for e in entries):
                return (folder,)
        archive = os.path.join(folder, dsgdb9nsd.ARCHIVE_NAME)
        return (archive,) if os.path.isfile(archive) else ()
    return tuple(map(str, qm9pack.find_parts(folder)))


def _download(root: str) -> None:
    from torch_geometric.data import download_url, extract_zip

    raw = os.path.join(root, "raw")
    os.makedirs(raw, exist_ok=True)
    zpath = download_url(_URLS["qm9.zip"], raw)
    extract_zip(zpath, raw)
    os.remove(zpath)
    tmp = download_url(_URLS[UNCHARACTERIZED], raw)
    os.replace(tmp, os.path.join(raw, UNCHARACTERIZED))


def _check_elements(z: np.ndarray, where) -> None:
    """FileFormatError at ``where(a)`` -> ``(file, line)`` for the first atom ``a`` with an element outside QM9's."""
    bad = ~np.isin(z, QM9_ELEMENTS)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        path, line = where(first)
        raise FileFormatError(path, f"element Z={int(z[first])} is not one of QM9's H, C, N, O, F", line=line)


def _one_hot_elements(z: np.ndarray, dtype: torch.dtype) -> Tensor:
    """``x (N, 5)`` of ``dtype``: the one-hot of H, C, N, O, F for atomic numbers ``z (N,)``."""
    elem_idx = np.searchsorted(QM9_ELEMENTS, z)
    return torch.nn.functional.one_hot(torch.from_numpy(elem_idx), len(QM9_ELEMENTS)).to(dtype)


def process_moleculenet(sdf_path: str, csv_path: str, skip_ids: set[int] = frozenset(), dtype=torch.float32,
                        progress: bool | None = None) -> tuple[Data, dict[str, Tensor]]:
    """Parse and pair MoleculeNet's SDF and CSV into collated InMemoryDataset storage.

    Parameters
    ----------
    sdf_path, csv_path : str
        ``gdb9.sdf`` and ``gdb9.sdf.csv``. Records pair with CSV rows by position; their names
        (``gdb_<index>``) must agree.
    skip_ids : set of int
        1-based indices to leave out (``uncharacterized.txt``).
    dtype : torch.dtype
        Of ``pos``, ``x``, ``edge_attr`` and ``y``.
    progress : bool, optional
        a tqdm bar over the SDF records (``None``: for large files, see [`read_sdf`][geomlin.datasets.io.sdf.read_sdf]).

    Returns
    -------
    (Data, dict of str to Tensor)
        ``(data, slices)`` with the fields of [`QM9`][]; ``idx`` is the index minus one.
    """
    rec = read_sdf(sdf_path, parse_properties=False, progress=progress)
    ids, table = read_qm9_csv(csv_path)
    if len(rec) != len(ids):
        raise ValueError(f"{sdf_path} has {len(rec)} molecule records but {csv_path} has {len(ids)} label rows; "
                         "they must pair up one to one")
    names = np.array(rec.names)
    mismatch = np.flatnonzero(names != np.array(ids))
    if mismatch.size:
        k = int(mismatch[0])
        raise ValueError(f"record {k} of {sdf_path} is {rec.names[k]!r} but row {k + 2} of {csv_path} is {ids[k]!r}")
    index = np.empty(len(rec), dtype=np.int64)
    for k, name in enumerate(rec.names):
        tag, _, number = name.partition("_")
        if tag != "gdb" or not number.isdigit():
            raise FileFormatError(sdf_path, f"record {k} is named {name!r}; QM9 records are named gdb_<index>",
                                  line=int(rec.atom_lines[k]) - COUNTS_LINE - 1, record=k)
        index[k] = int(number)
    starts = rec.atom_offsets

    def atom_line(a):
        k = int(np.searchsorted(starts, a, side="right")) - 1
        return sdf_path, int(rec.atom_lines[k]) + a - int(starts[k])

    _check_elements(rec.z, atom_line)
    keep = ~np.isin(index, np.fromiter(skip_ids, dtype=np.int64, count=len(skip_ids)))
    data, slices = collate_molecules(rec, keep, dtype, where=sdf_path)
    data.x = _one_hot_elements(data.z.numpy(), dtype)
    data.y = torch.from_numpy(table[keep]).to(dtype)
    data.idx = torch.from_numpy(index[keep] - 1)
    slices["x"], slices["y"] = slices["z"], slices["idx"]
    return data, slices


def gdb9_targets(rec: dsgdb9nsd.GDB9Records) -> np.ndarray:
    """The targets of XYZ or qm9pack records, in PyG order and units ([`QM9_TARGETS`][]).

    The 15 properties are converted like MoleculeNet's CSV columns; the four ``*_atom`` targets,
    which these sources do not carry, are computed as MoleculeNet's are: ``(E - sum of
    ATOM_REFERENCE_HARTREE) * MOLECULENET_HARTREE_TO_KCALMOL`` in kcal/mol, then converted to eV.

    Parameters
    ----------
    rec : GDB9Records
        ``M`` molecules.

    Returns
    -------
    numpy.ndarray
        ``(M, 19)`` float64.
    """
    column = {name: rec.properties[:, k] for k, name in enumerate(dsgdb9nsd.PROPERTY_NAMES)}
    molecule = np.repeat(np.arange(len(rec)), rec.num_atoms)
    out = np.empty((len(rec), len(QM9_TARGETS)))
    for t, (_, col, factor, _) in enumerate(QM9_TARGETS):
        if col in ATOMIZATION_COLUMNS:
            energy = ATOMIZATION_COLUMNS[col]
            table = np.zeros(MAX_Z)
            for zz, e in ATOM_REFERENCE_HARTREE[energy].items():
                table[zz] = e
            reference = np.bincount(molecule, weights=table[rec.z], minlength=len(rec))
            out[:, t] = (column[energy] - reference) * MOLECULENET_HARTREE_TO_KCALMOL * factor
        else:
            out[:, t] = column[CSV_TO_PROPERTY[col]] * factor
    return out


def process_gdb9(rec: dsgdb9nsd.GDB9Records, skip_ids: set[int] = frozenset(), dtype=torch.float32
                 ) -> tuple[Data, dict[str, Tensor]]:
    """Collated InMemoryDataset storage of XYZ or qm9pack records.

    Parameters
    ----------
    rec : GDB9Records
        As read; sorted here by index (a folder or an archive may list them in any order). Two
        molecules with one index raise ValueError naming both files.
    skip_ids : set of int
        1-based indices to leave out.
    dtype : torch.dtype
        Of ``pos``, ``x`` and ``y``.

    Returns
    -------
    (Data, dict of str to Tensor)
        ``(data, slices)`` with the fields of [`QM9`][] except the bonds, which these sources
        do not have.
    """
    order = np.argsort(rec.index, kind="stable")
    dup = np.flatnonzero(np.diff(rec.index[order]) == 0)
    if dup.size:
        a, b = int(order[dup[0]]), int(order[dup[0] + 1])
        raise ValueError(f"molecule {int(rec.index[a])} appears twice: in {rec.files[a]}:{rec.lines[a]} and in "
                         f"{rec.files[b]}:{rec.lines[b]}")
    _check_elements(rec.z, rec.atom_line)
    keep = order[~np.isin(rec.index[order], np.fromiter(skip_ids, dtype=np.int64, count=len(skip_ids)))]
    y = gdb9_targets(rec)[keep]
    rec = rec.select(keep)
    m = len(rec)
    node_sl = torch.from_numpy(rec.atom_offsets)
    graph_sl = torch.arange(m + 1)
    data = Data(z=torch.from_numpy(rec.z), pos=torch.from_numpy(rec.pos).to(dtype), x=_one_hot_elements(rec.z, dtype),
                y=torch.from_numpy(y).to(dtype), name=[f"gdb_{i}" for i in rec.index.tolist()],
                idx=torch.from_numpy(rec.index - 1))
    slices = {"z": node_sl, "pos": node_sl, "x": node_sl, "y": graph_sl, "name": graph_sl, "idx": graph_sl}
    return data, slices


def process_qm9(files: QM9Files, skip_ids: set[int] = frozenset(), dtype=torch.float32,
                progress: bool | None = None) -> tuple[Data, dict[str, Tensor]]:
    """Collated storage ``(data, slices)`` of the QM9 source ``files`` ([`find_qm9_files`][]).

    See [`process_moleculenet`][] and [`process_gdb9`][] for ``skip_ids`` and ``dtype``; ``progress``
    shows a tqdm bar while the raw files are read (``None``: for large sources, ``False``: never).
    """
    if files.source == "moleculenet":
        return process_moleculenet(*files.paths, skip_ids=skip_ids, dtype=dtype, progress=progress)
    if files.source == "xyz":
        rec = dsgdb9nsd.read_qm9_xyz(files.paths[0], progress=progress)
    else:
        rec = qm9pack.read_qm9pack(list(files.paths))
    return process_gdb9(rec, skip_ids, dtype)


class QM9(InMemoryList):
    """QM9: ~130k small organic molecules (H, C, N, O, F) with 19 DFT targets, read offline.

    Three sources hold the same molecules (``source="auto"`` takes the first found, looking in
    ``<root>/raw`` and then ``<root>``):

    * ``"moleculenet"``: ``gdb9.sdf`` and ``gdb9.sdf.csv`` as unpacked from MoleculeNet's
      ``qm9.zip`` (what PyTorch Geometric reads); the only source with bonds;
    * ``"xyz"``: the original distribution, ``dsgdb9nsd_*.xyz`` files or the archive
      ``dsgdb9nsd.xyz.tar.bz2`` itself (streamed, never unpacked);
    * ``"qm9pack"``: qm9pack's ``qm9_part<k>.csv`` tables in the root, or (asked for by name) those
      of the installed ``qm9pack`` package.

    The 3,054 molecules of the original ``uncharacterized.txt`` (optional, beside the raw files)
    are skipped with ``skip_uncharacterized=True``, as in PyG; qm9pack's tables leave them out
    already, so there ``skip_uncharacterized=False`` is refused. Nothing is downloaded unless
    ``download=True`` (MoleculeNet's files only).

    Fields per molecule: ``z (N,)`` int64 atomic numbers; ``pos (N, 3)`` Angstrom, the file's
    coordinates (the SDF has 4 decimals, the XYZ files and qm9pack 10); ``x (N, 5)`` one-hot of
    H, C, N, O, F; ``y (1, 19)`` targets in PyG order and units ([`QM9_TARGETS`][]: ``mu`` D,
    ``alpha`` a0^3, ``homo, lumo, gap, zpve, U0, U, H, G`` and the four ``*_atom`` energies in eV,
    ``r2`` a0^2, ``cv`` cal/(mol K), ``A, B, C`` GHz); ``name`` (``"gdb_<index>"``); ``idx`` the
    index minus one (PyG's ``idx``, the position in the full ``gdb9.sdf``). From the SDF also
    ``edge_index (2, 2B)``, both directions of its bond block sorted by (row, col), and
    ``edge_attr (2B, 4)``, one-hot single / double / triple / aromatic. Molecules come in file
    order (SDF) or sorted by index (XYZ, qm9pack): the same order for complete sources.

    The processed result is cached in ``<root>/processed/geomlin_qm9.pt`` (``cache=True``),
    written atomically and keyed by a fingerprint of the source, its raw files (their bytes; a
    folder of XYZ files by every file's name, size and modification time), the
    ``pre_transform`` and ``pre_filter``; a stale or corrupt cache is rebuilt. A root where the
    cache cannot be written (read-only, full disk) raises an OSError naming the folder: pass
    ``cache=False`` there. ``progress`` shows a tqdm bar while raw files are read (``None``, the
    default: for the full dataset; ``False``: never).
    """

    targets = tuple(t[0] for t in QM9_TARGETS)
    units: ClassVar[dict[str, str]] = {t[0]: t[3] for t in QM9_TARGETS}
    cache_name = "geomlin_qm9.pt"

    def __init__(self, root: str | os.PathLike, transform: Callable | None = None,
                 pre_transform: Callable | None = None, pre_filter: Callable | None = None,
                 skip_uncharacterized: bool = True, cache: bool = True, download: bool = False,
                 source: str = "auto", progress: bool | None = None):
        self._start(transform, pre_transform, pre_filter)
        self.root_dir = root = os.fspath(root)
        check_bool(skip_uncharacterized, "skip_uncharacterized")
        check_bool(cache, "cache")
        if progress is not None:
            check_bool(progress, "progress")
        files = find_qm9_files(root, source)
        if files is None and download:
            if source not in ("auto", "moleculenet"):
                raise ValueError(f"download=True fetches MoleculeNet's qm9.zip only; source={source!r} must be "
                                 "put in place by hand (see the error without download=True)")
            _download(root)
            files = find_qm9_files(root, "moleculenet")
        if files is None:
            raise FileNotFoundError(_missing_message(root, source))
        if files.source == "qm9pack" and not skip_uncharacterized:
            raise ValueError(f"qm9pack's tables hold only the {NUM_MOLECULES - NUM_UNCHARACTERIZED:,} characterized "
                             f"molecules (the {NUM_UNCHARACTERIZED:,} of uncharacterized.txt are missing from its "
                             "Index column), so skip_uncharacterized=False cannot include them; use the MoleculeNet "
                             "or XYZ files for all 133,885")
        self.source, self.raw_files, self.raw_folder = files.source, files.paths, files.folder
        skip_file = files.uncharacterized() if skip_uncharacterized else None
        cache_path = os.path.join(root, "processed", self.cache_name) if cache else None
        if cache_path:
            fp = _fingerprint(files, skip_file, pre_transform, pre_filter)
            payload = load_cache(cache_path, fp)
            if payload is not None:
                self.data, self.slices = Data.from_dict(payload["data"]), payload["slices"]
                self._data_list = None
                return
        skip = read_uncharacterized(skip_file) if skip_file else set()
        self.data, self.slices = process_qm9(files, skip, progress=progress)
        if pre_filter is not None or pre_transform is not None:
            graphs = [self.get(i) for i in range(len(self))]
            if pre_filter is not None:
                graphs = [g for g in graphs if pre_filter(g)]
            self._set_graphs(graphs)
        if cache_path:
            save_cache(cache_path, fp, {"data": self._data.to_dict(), "slices": self.slices})
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
        """Seeded train / val / test indices; see [`qm9_split`][]."""
        return qm9_split(len(self), seed, train, val)

    def __repr__(self) -> str:
        return f"QM9({len(self)})"


def _fingerprint(files: QM9Files, skip_file: str | None, pre_transform, pre_filter) -> str:
    """Cache key: the bytes of the raw files (a folder of XYZ files: every file's name, size and mtime)."""
    hashed = [p for p in files.paths if os.path.isfile(p)] + ([skip_file] if skip_file else [])
    stats = [file_stats(folder, dsgdb9nsd.FILE_PATTERN) for folder in files.paths if os.path.isdir(folder)]
    return fingerprint(hashed, "qm9", files.source, stats, pre_transform, pre_filter)


def _missing_message(root: str, source: str) -> str:
    places = f"{os.path.join(root, 'raw')!r} or {root!r}"
    wanted = {
        "moleculenet": f"{' + '.join(RAW_FILES)} (MoleculeNet)",
        "xyz": f"dsgdb9nsd_*.xyz files or {dsgdb9nsd.ARCHIVE_NAME} (the original distribution)",
        "qm9pack": "qm9_part1.csv, qm9_part2.csv, ... (qm9pack's tables; or install qm9pack: pip install qm9pack)",
    }
    asked = SOURCES if source == "auto" else (source,)
    return (f"QM9 raw files not found under {root!r}: expected " + "; or ".join(wanted[k] for k in asked)
            + f", optionally with {UNCHARACTERIZED}, in {places}. Official sources: {SOURCE}. Unzip qm9.zip into "
            "<root>/raw, or pass download=True to fetch it"
            + ("; with qm9pack installed, pass source='qm9pack'." if source == "auto" else "."))


