"""``SDFDataset``: molecules from any 3D V2000 SD file, with labels from a CSV table or SDF data items.

``collate_molecules`` turns parsed :class:`~geomlin.datasets.io.sdf.SDFRecords` into collated
InMemoryDataset storage with vectorised numpy (no per-molecule Python objects); QM9 uses it too.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import Data

from geomlin.datasets.base import InMemoryList
from geomlin.datasets.cache import fingerprint, load_cache, save_cache
from geomlin.datasets.io.sdf import BOND_TYPES, SDFRecords, read_sdf

#: V2000 bond types in the order of the one-hot ``edge_attr`` columns: single, double, triple, aromatic.
EDGE_BOND_TYPES = tuple(BOND_TYPES)


def collate_molecules(rec: SDFRecords, keep: np.ndarray | None = None, dtype: torch.dtype = torch.float32,
                      where: str = "<sdf>") -> tuple[Data, dict[str, Tensor]]:
    """Collated storage ``(data, slices)`` with ``z, pos, edge_index, edge_attr, name, idx`` per kept record.

    ``edge_index`` holds both directions of every bond, sorted per molecule by (row, col) as PyG's
    QM9 does; ``edge_attr (2B, 4)`` is the one-hot bond type. ``idx`` is the record's position in
    the file. Bond types outside 1..4 raise ValueError naming the record.
    """
    keep = np.ones(len(rec), dtype=bool) if keep is None else keep
    atom_keep = np.repeat(keep, rec.num_atoms)
    bond_keep = np.repeat(keep, rec.num_bonds)
    num_atoms, num_bonds = rec.num_atoms[keep], rec.num_bonds[keep]
    bonds = rec.bonds[bond_keep]
    bad = ~np.isin(rec.bonds[:, 2], EDGE_BOND_TYPES)
    if bad.any():
        r = int(np.repeat(np.arange(len(rec)), rec.num_bonds)[np.flatnonzero(bad)[0]])
        raise ValueError(f"{where}: record {r} ({rec.names[r]!r}) has bond type {int(rec.bonds[bad][0, 2])}; "
                         "expected 1-4 (single, double, triple, aromatic)")
    mol = np.repeat(np.arange(int(keep.sum())), num_bonds)
    row = np.concatenate([bonds[:, 0], bonds[:, 1]])
    col = np.concatenate([bonds[:, 1], bonds[:, 0]])
    btype = np.concatenate([bonds[:, 2], bonds[:, 2]])
    order = np.lexsort((col, row, np.concatenate([mol, mol])))
    row, col, btype = row[order], col[order], btype[order]
    m = int(keep.sum())
    data = Data(
        z=torch.from_numpy(rec.z[atom_keep]),
        pos=torch.from_numpy(rec.pos[atom_keep]).to(dtype),
        edge_index=torch.from_numpy(np.stack([row, col])),
        edge_attr=torch.nn.functional.one_hot(torch.from_numpy(btype - 1), len(EDGE_BOND_TYPES)).to(dtype),
        name=[n for n, k in zip(rec.names, keep) if k],
        idx=torch.from_numpy(np.flatnonzero(keep)),
    )
    node_sl = torch.from_numpy(np.concatenate([[0], np.cumsum(num_atoms)]))
    edge_sl = torch.from_numpy(2 * np.concatenate([[0], np.cumsum(num_bonds)]))
    graph_sl = torch.arange(m + 1)
    slices = {"z": node_sl, "pos": node_sl, "edge_index": edge_sl, "edge_attr": edge_sl,
              "name": graph_sl, "idx": graph_sl}
    return data, slices


def _read_label_table(path: str, columns: Sequence[str] | None, id_column: str | None
                      ) -> tuple[list[str] | None, list[str], np.ndarray]:
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(f) if r]
    if not rows:
        raise ValueError(f"{path}: empty CSV; expected a header row")
    header = [h.strip() for h in rows[0]]
    body = rows[1:]
    if id_column is not None and id_column not in header:
        raise ValueError(f"{path}: id column {id_column!r} not in header {header}")
    if columns is None:
        columns = [h for h in header if h != id_column and _numeric_column(body, header.index(h))]
    missing = [c for c in columns if c not in header]
    if missing:
        raise ValueError(f"{path}: target columns {missing} not in header {header}")
    idx = [header.index(c) for c in columns]
    values = np.empty((len(body), len(idx)), dtype=np.float64)
    for k, r in enumerate(body):
        try:
            values[k] = [float(r[i]) for i in idx]
        except (ValueError, IndexError):
            raise ValueError(f"{path}: row {k + 2} has a missing or non-numeric target in {list(columns)}: "
                             f"{r}") from None
    ids = [r[header.index(id_column)] for r in body] if id_column is not None else None
    return ids, list(columns), values


def _numeric_column(body, i) -> bool:
    try:
        for r in body[:50]:
            float(r[i])
        return True
    except (ValueError, IndexError):
        return False


class SDFDataset(InMemoryList):
    """Molecules of a 3D V2000 SD file, optionally labelled from a CSV table or SDF data items.

    Parameters
    ----------
    sdf_path: the ``.sdf`` file (parsed by :func:`geomlin.datasets.io.sdf.read_sdf`).
    csv_path: optional label table with one row per SDF record, in the same order.
    target_columns: CSV columns (or, without a CSV, SDF ``> <tag>`` data items) stacked into
        ``y (1, T)``; default: every numeric CSV column except ``id_column``.
    id_column: optional CSV column whose values must equal the record names (checked).
    cache_dir: if given, the processed set is cached there (atomic write, fingerprinted).

    Fields: ``z (N,)`` int64, ``pos (N, 3)`` (the file's unit, usually Angstrom), ``edge_index
    (2, 2B)`` and ``edge_attr (2B, 4)`` from the bond block, ``name``, ``idx`` and ``y``. When the
    SDF records and CSV rows do not pair up, ValueError states both counts.
    """

    def __init__(self, sdf_path: str | os.PathLike, csv_path: str | os.PathLike | None = None,
                 target_columns: Sequence[str] | None = None, id_column: str | None = None,
                 transform: Callable | None = None, pre_transform: Callable | None = None,
                 dtype: torch.dtype = torch.float32, cache_dir: str | os.PathLike | None = None):
        self._start(transform, pre_transform)
        self.sdf_path = sdf_path = os.fspath(sdf_path)
        self.csv_path = csv_path = None if csv_path is None else os.fspath(csv_path)
        for p in (sdf_path, csv_path):
            if p is not None and not os.path.isfile(p):
                raise FileNotFoundError(f"SDFDataset: file not found: {p}")
        files = [p for p in (sdf_path, csv_path) if p is not None]
        cache_path = None
        if cache_dir is not None:
            stem = os.path.splitext(os.path.basename(sdf_path))[0]
            cache_path = os.path.join(os.fspath(cache_dir), f"geomlin_sdf_{stem}.pt")
            fp = fingerprint(files, "sdf", target_columns, id_column, dtype, pre_transform)
            payload = load_cache(cache_path, fp)
            if payload is not None:
                self.data, self.slices = Data.from_dict(payload["data"]), payload["slices"]
                self.target_columns = payload["columns"]
                return
        rec = read_sdf(sdf_path)
        data, slices = collate_molecules(rec, dtype=dtype, where=sdf_path)
        columns: list[str] = []
        if csv_path is not None:
            ids, columns, values = _read_label_table(csv_path, target_columns, id_column)
            if len(values) != len(rec):
                raise ValueError(f"{sdf_path} has {len(rec)} molecule records but {csv_path} has {len(values)} "
                                 "label rows; they must pair up one to one (same order)")
            if ids is not None:
                bad = [k for k, (a, b) in enumerate(zip(rec.names, ids)) if a.strip() != b.strip()]
                if bad:
                    k = bad[0]
                    raise ValueError(f"record {k} of {sdf_path} is named {rec.names[k]!r} but row {k + 2} of "
                                     f"{csv_path} has {id_column}={ids[k]!r}")
        elif target_columns is not None:
            columns = list(target_columns)
            values = np.empty((len(rec), len(columns)))
            for k, props in enumerate(rec.properties):
                for c, col in enumerate(columns):
                    if col not in props:
                        raise ValueError(f"{sdf_path}: record {k} ({rec.names[k]!r}) lacks the data item <{col}>")
                    try:
                        values[k, c] = float(props[col].split()[0])
                    except (ValueError, IndexError):
                        raise ValueError(f"{sdf_path}: record {k} ({rec.names[k]!r}) data item <{col}> is not a "
                                         f"number: {props[col]!r}") from None
        if columns:
            data.y = torch.from_numpy(values).to(dtype)
            slices["y"] = torch.arange(len(rec) + 1)
        self.target_columns = columns
        self.data, self.slices = data, slices
        if pre_transform is not None:
            self._set_graphs([self.get(i) for i in range(len(self))])
        if cache_path is not None:
            save_cache(cache_path, fp, {"data": self._data.to_dict(), "slices": self.slices, "columns": columns})
