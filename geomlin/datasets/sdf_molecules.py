"""``SDFDataset``: molecules from any 3D V2000 SD file, with labels from a CSV table or SDF data items.

``collate_molecules`` turns parsed [`SDFRecords`][] into collated
InMemoryDataset storage with vectorised numpy (no per-molecule Python objects); QM9 uses it too.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import Data

from geomlin.datasets.base import InMemoryList, check_float_dtype
from geomlin.datasets.cache import fingerprint, load_cache, save_cache
from geomlin.datasets.io.sdf import BOND_TYPES, SDFRecords, read_sdf
from geomlin.validation import FileFormatError

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
    """Ids (or None), column names and the ``(rows, T)`` float64 labels of a CSV label table.

    Every row needs the header's number of fields and a finite number in each target column;
    errors are [`FileFormatError`][] naming the file and line.
    """
    with open(path, newline="") as f:
        rows = [(no, r) for no, r in enumerate(csv.reader(f), start=1) if r]
    if not rows:
        raise FileFormatError(path, "empty CSV; expected a header row")
    header = [h.strip() for h in rows[0][1]]
    body = rows[1:]
    if not body:
        raise FileFormatError(path, "the CSV has a header but no label rows", line=rows[0][0])
    if id_column is not None and id_column not in header:
        raise FileFormatError(path, f"id column {id_column!r} not in header {header}", line=rows[0][0])
    for no, r in body:
        if len(r) != len(header):
            raise FileFormatError(path, f"row has {len(r)} fields but the header has {len(header)}", line=no)
    if columns is None:
        columns = [h for h in header if h != id_column and _numeric_column([r for _, r in body], header.index(h))]
        if not columns:
            raise FileFormatError(path, f"no numeric label columns (header {header}); pass target_columns")
    missing = [c for c in columns if c not in header]
    if missing:
        raise FileFormatError(path, f"target columns {missing} not in header {header}", line=rows[0][0])
    values = np.empty((len(body), len(columns)), dtype=np.float64)
    for k, (no, r) in enumerate(body):
        for c, col in enumerate(columns):
            values[k, c] = parse_label(r[header.index(col)], path, no, f"column {col!r}")
    ids = [r[header.index(id_column)] for _, r in body] if id_column is not None else None
    return ids, list(columns), values


def parse_label(text: str, path: str, line: int | None, what: str) -> float:
    """A finite float from a label field; FileFormatError naming the file, line and field (``what``) otherwise."""
    try:
        value = float(text)
    except ValueError:
        raise FileFormatError(path, f"{what} is {text!r}, not a number", line=line) from None
    if not math.isfinite(value):
        raise FileFormatError(path, f"{what} is a non-finite label {text.strip()!r}; labels must be finite numbers "
                              "(drop or impute missing values first)", line=line)
    return value


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
    sdf_path : str | os.PathLike
        the ``.sdf`` file (parsed by [`geomlin.datasets.io.sdf.read_sdf`][]).
    csv_path : str | os.PathLike | None
        optional label table with one row per SDF record, in the same order.
    target_columns : Sequence[str] | None
        CSV columns (or, without a CSV, SDF ``> <tag>`` data items) stacked into
        ``y (1, T)``; default: every numeric CSV column except ``id_column``.
    id_column : str | None
        optional CSV column whose values must equal the record names (checked).
    cache_dir : str | os.PathLike | None
        if given, the processed set is cached there (atomic write, fingerprinted).

    Raises
    ------
    ValueError
        When the SDF records and CSV rows do not pair up (the message states both counts).

    Notes
    -----
    Fields: ``z (N,)`` int64, ``pos (N, 3)`` (the file's unit, usually Angstrom),
    ``edge_index (2, 2B)`` and ``edge_attr (2B, 4)`` from the bond block, ``name``, ``idx`` and
    ``y``.
    """

    def __init__(self, sdf_path: str | os.PathLike, csv_path: str | os.PathLike | None = None,
                 target_columns: Sequence[str] | None = None, id_column: str | None = None,
                 transform: Callable | None = None, pre_transform: Callable | None = None,
                 dtype: torch.dtype = torch.float32, cache_dir: str | os.PathLike | None = None):
        self._start(transform, pre_transform)
        check_float_dtype(dtype)
        if isinstance(target_columns, str):
            target_columns = [target_columns]
        if target_columns is not None and (not target_columns or not all(isinstance(c, str) for c in target_columns)):
            raise ValueError(f"target_columns must be a non-empty list of column names, got {target_columns!r}")
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
                    field = props[col].split()
                    values[k, c] = parse_label(field[0] if field else "", sdf_path, None,
                                               f"data item <{col}> of record {k} ({rec.names[k]!r})")
        if columns:
            data.y = torch.from_numpy(values).to(dtype)
            slices["y"] = torch.arange(len(rec) + 1)
        self.target_columns = columns
        self.data, self.slices = data, slices
        if pre_transform is not None:
            self._set_graphs([self.get(i) for i in range(len(self))])
        if cache_path is not None:
            save_cache(cache_path, fp, {"data": self._data.to_dict(), "slices": self.slices, "columns": columns})
