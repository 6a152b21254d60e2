"""ModelNet10 / ModelNet40 (Wu et al. 2015) read offline from the unpacked OFF tree."""

from __future__ import annotations

import os
from collections.abc import Callable

import torch
from torch_geometric.data import Data

from geomlin.datasets.base import InMemoryList
from geomlin.datasets.cache import fingerprint, load_cache, save_cache
from geomlin.datasets.meshes import mesh_point_cloud
from geomlin.validation import check_int, check_positive_int

SOURCE = {"10": "http://3dvision.princeton.edu/projects/2014/3DShapeNets/ModelNet10.zip",
          "40": "http://modelnet.cs.princeton.edu/ModelNet40.zip"}
SPLITS = ("train", "test")


class ModelNet(InMemoryList):
    """ModelNet point clouds sampled area-weighted from the official ``.off`` meshes.

    ``root`` is the folder of category folders as unpacked from the official archive,
    ``<root>/<category>/{train,test}/<category>_NNNN.off`` (a single ``ModelNet10`` /
    ``ModelNet40`` folder inside ``root`` is also accepted). Labels ``y (1,)`` int64 are the index
    of the category in the sorted list of category folders (``self.categories``). Fields:
    ``pos (num_points, 3)`` (the meshes' units, float32), ``normal (num_points, 3)`` with
    ``include_normals=True``. Sampling is deterministic given ``seed``. OFF files with ModelNet's
    fused header (``OFF<nv> <nf> 0``) and polygons with 4+ vertices are handled.

    The sampled set is cached in ``<root>/processed/`` (atomic write, fingerprint of every file's
    path, size and modification time plus the options and ``pre_transform``); ``cache=False``
    keeps it in memory only. Nothing is downloaded unless ``download=True``.
    """

    def __init__(self, root: str | os.PathLike, name: str = "10", train: bool = True, num_points: int = 1024,
                 include_normals: bool = False, seed: int = 0, transform: Callable | None = None,
                 pre_transform: Callable | None = None, pre_filter: Callable | None = None,
                 cache: bool = True, download: bool = False, progress: bool = True):
        self._start(transform, pre_transform, pre_filter)
        name = str(name)
        if name not in SOURCE:
            raise ValueError(f"name must be '10' or '40', got {name!r}")
        num_points = check_positive_int(num_points, "num_points")
        seed = check_int(seed, "seed", minimum=0)
        self.name, self.train, self.num_points = name, train, num_points
        self.root_dir = root = os.fspath(root)
        tree = self._find_tree(root)
        if tree is None and download:
            from torch_geometric.data import download_url, extract_zip

            os.makedirs(root, exist_ok=True)
            extract_zip(download_url(SOURCE[name], root), root)
            tree = self._find_tree(root)
        if tree is None:
            raise FileNotFoundError(
                f"ModelNet{name} not found under {root!r}: expected category folders "
                "<category>/{train,test}/<category>_NNNN.off (e.g. chair/train/chair_0001.off). Official source: "
                f"{SOURCE[name]}; unzip it into {root!r}, or pass download=True.")
        self.tree = tree
        self.categories = sorted(d for d in os.listdir(tree)
                                 if any(os.path.isdir(os.path.join(tree, d, s)) for s in SPLITS))
        split = "train" if train else "test"
        files, labels = [], []
        for label, cat in enumerate(self.categories):
            folder = os.path.join(tree, cat, split)
            if os.path.isdir(folder):
                for f in sorted(os.listdir(folder)):
                    if f.lower().endswith(".off"):
                        files.append(os.path.join(folder, f))
                        labels.append(label)
        if not files:
            raise FileNotFoundError(f"no .off files in the {split!r} folders of {tree!r} "
                                    f"(categories found: {self.categories})")
        self.files = files
        cache_path = (os.path.join(root, "processed", f"geomlin_modelnet{name}_{split}_{num_points}"
                                   f"{'_normals' if include_normals else ''}_s{seed}.pt") if cache else None)
        stats = [(os.path.relpath(f, tree), os.path.getsize(f), os.stat(f).st_mtime_ns) for f in files]
        fp = fingerprint([], "modelnet", stats, name, split, num_points, include_normals, seed, pre_transform,
                         pre_filter)
        payload = load_cache(cache_path, fp) if cache_path else None
        if payload is not None:
            self.data, self.slices = Data.from_dict(payload["data"]), payload["slices"]
            return
        graphs = []
        it = zip(files, labels)
        if progress and len(files) > 200:
            from tqdm.auto import tqdm
            it = tqdm(it, total=len(files), desc=f"ModelNet{name} {split}", unit="mesh")
        for i, (f, label) in enumerate(it):
            d = mesh_point_cloud(f, num_points, torch.Generator().manual_seed(int(seed) * 1_000_003 + i),
                                 include_normals)
            d.y = torch.tensor([label])
            if pre_filter is not None and not pre_filter(d):
                continue
            graphs.append(d)
        self._set_graphs(graphs)
        if cache_path:
            save_cache(cache_path, fp, {"data": self._data.to_dict(), "slices": self.slices})

    @staticmethod
    def _find_tree(root: str) -> str | None:
        if not os.path.isdir(root):
            return None

        def is_tree(d):
            return any(os.path.isdir(os.path.join(d, c, s)) for c in os.listdir(d)
                       if os.path.isdir(os.path.join(d, c)) for s in SPLITS)

        if is_tree(root):
            return root
        for sub in ("ModelNet10", "ModelNet40"):
            p = os.path.join(root, sub)
            if os.path.isdir(p) and is_tree(p):
                return p
        return None

    @property
    def num_classes(self) -> int:
        return len(self.categories)
