"""ShapeNet-Part (Yi et al. 2016) part segmentation, read offline from the official release folder."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch_geometric.data import Data

from geomlin.datasets.base import InMemoryList, check_float_dtype
from geomlin.datasets.cache import fingerprint, load_cache, save_cache
from geomlin.validation import FileFormatError

SOURCE = ("shapenetcore_partanno_segmentation_benchmark_v0_normal.zip, "
          "https://shapenet.cs.stanford.edu/media/shapenetcore_partanno_segmentation_benchmark_v0_normal.zip")
CATEGORY_FILE = "synsetoffset2category.txt"
SPLIT_DIR = "train_test_split"
SPLITS = ("train", "val", "test", "trainval")
ROW_COLUMNS = 7            # x y z nx ny nz label
#: Number of part labels of the release (0 ... 49).
NUM_PART_LABELS = 50


def read_part_file(path: str) -> np.ndarray:
    """Rows ``(N, 7)`` float64 ``x y z nx ny nz label`` of one shape file.

    Raises [`FileFormatError`][] naming the file (and line) for a malformed
    or ragged row, an empty file, a NaN / infinite value or a label that is not an integer in 0..49.
    """
    try:
        arr = np.loadtxt(path, dtype=np.float64, ndmin=2)
    except ValueError as err:
        raise FileFormatError(path, f"malformed row ({err}); expected 'x y z nx ny nz label' per line") from None
    if arr.size == 0:
        raise FileFormatError(path, "empty point file")
    if arr.shape[1] != ROW_COLUMNS:
        raise FileFormatError(path, f"expected {ROW_COLUMNS} columns 'x y z nx ny nz label', got {arr.shape[1]}")
    if not np.isfinite(arr).all():
        bad = int(np.flatnonzero(~np.isfinite(arr).all(axis=1))[0])
        raise FileFormatError(path, "NaN or infinite value", line=bad + 1)
    labels = arr[:, ROW_COLUMNS - 1]
    bad = (labels != np.round(labels)) | (labels < 0) | (labels >= NUM_PART_LABELS)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise FileFormatError(path, f"part label must be an integer in 0..{NUM_PART_LABELS - 1}, got {labels[k]:g}",
                              line=k + 1)
    return arr


class ShapeNetPart(InMemoryList):
    """ShapeNet-Part: ~16.9k shapes of 16 categories with 50 part labels per point.

    ``root`` is the unpacked ``shapenetcore_partanno_segmentation_benchmark_v0_normal`` folder:
    ``synsetoffset2category.txt``, ``<synset>/<shape>.txt`` (rows ``x y z nx ny nz label``) and
    ``train_test_split/shuffled_{train,val,test}_file_list.json``. ``split`` is ``"train"``,
    ``"val"``, ``"test"`` or ``"trainval"``; ``categories`` restricts to some category names.

    Fields: ``pos (N, 3)`` (unit-normalised coordinates of the release), ``x (N, 3)`` the point
    normals (``include_normals=True``), ``y (N,)`` int64 global part label (0-49), ``category
    (1,)`` int64 index of the category in the sorted category names. Cached in
    ``<root>/processed/`` (atomic, fingerprinted by file stats, options and ``pre_transform``).
    """

    def __init__(self, root: str | os.PathLike, split: str = "trainval", categories: Sequence[str] | None = None,
                 include_normals: bool = True, transform: Callable | None = None,
                 pre_transform: Callable | None = None, cache: bool = True, dtype: torch.dtype = torch.float32):
        self._start(transform, pre_transform)
        check_float_dtype(dtype)
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        self.root_dir = root = os.fspath(root)
        cat_file = os.path.join(root, CATEGORY_FILE)
        parts = ["train", "val"] if split == "trainval" else [split]
        lists = [os.path.join(root, SPLIT_DIR, f"shuffled_{p}_file_list.json") for p in parts]
        missing = [p for p in [cat_file, *lists] if not os.path.isfile(p)]
        if missing:
            raise FileNotFoundError(
                f"ShapeNetPart files not found under {root!r}: {missing}. Expected {CATEGORY_FILE}, "
                f"{SPLIT_DIR}/shuffled_{{train,val,test}}_file_list.json and <synset>/<shape>.txt. "
                f"Official source: {SOURCE}; unzip it and pass the inner folder as root.")
        synset_of = {}
        with open(cat_file) as f:
            for line in f:
                if line.strip():
                    if len(line.split()) < 2:
                        raise FileFormatError(cat_file, f"expected 'category synset' per line, got {line.strip()!r}")
                    name, synset = line.split()[:2]
                    synset_of[name] = synset
        self.categories = sorted(synset_of)
        wanted = self.categories if categories is None else list(categories)
        unknown = [c for c in wanted if c not in synset_of]
        if unknown:
            raise ValueError(f"unknown categories {unknown}; the release has {self.categories}")
        cat_index = {synset_of[c]: self.categories.index(c) for c in wanted}
        files = []
        for lst in lists:
            with open(lst) as f:
                try:
                    entries = json.load(f)
                except json.JSONDecodeError as err:
                    raise FileFormatError(lst, f"not valid JSON ({err})") from None
            if not isinstance(entries, list) or not all(isinstance(e, str) and e.count("/") >= 2 for e in entries):
                raise FileFormatError(lst, "expected a JSON list of 'shape_data/<synset>/<shape>' strings")
            for e in entries:
                _, synset, shape = e.split("/")[-3:]
                if synset in cat_index:
                    files.append((os.path.join(root, synset, shape + ".txt"), cat_index[synset]))
        absent = [p for p, _ in files if not os.path.isfile(p)]
        if absent:
            raise FileNotFoundError(f"{len(absent)} shape files listed in the split are missing, e.g. {absent[0]}")
        if not files:
            raise ValueError(f"no shapes of categories {wanted} in split {split!r}")
        cache_path = (os.path.join(root, "processed", f"geomlin_shapenetpart_{split}_"
                                   f"{'-'.join(sorted(wanted)) if categories else 'all'}.pt") if cache else None)
        stats = [(os.path.relpath(p, root), os.path.getsize(p), os.stat(p).st_mtime_ns) for p, _ in files]
        fp = fingerprint(lists + [cat_file], "shapenetpart", stats, include_normals, dtype, pre_transform)
        payload = load_cache(cache_path, fp) if cache_path else None
        if payload is not None:
            self.data, self.slices = Data.from_dict(payload["data"]), payload["slices"]
            return
        it = files
        if len(files) > 200:
            from tqdm.auto import tqdm
            it = tqdm(files, desc=f"ShapeNetPart {split}", unit="shape")
        graphs = []
        for path, cat in it:
            arr = read_part_file(path)
            d = Data(pos=torch.from_numpy(arr[:, :3]).to(dtype), y=torch.from_numpy(arr[:, 6]).long(),
                     category=torch.tensor([cat]))
            if include_normals:
                d.x = torch.from_numpy(arr[:, 3:6]).to(dtype)
            graphs.append(d)
        self._set_graphs(graphs)
        if cache_path:
            save_cache(cache_path, fp, {"data": self._data.to_dict(), "slices": self.slices})
