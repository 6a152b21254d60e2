"""ShapeNetPart on a miniature release tree built in a temporary folder."""

import json

import numpy as np
import pytest
import torch

from geomlin.datasets import ShapeNetPart


@pytest.fixture
def shapenet_root(tmp_path):
    root = tmp_path / "shapenet"
    (root / "train_test_split").mkdir(parents=True)
    (root / "synsetoffset2category.txt").write_text("Airplane\t02691156\nMug\t03797390\nBag\t02773838\n")
    rng = np.random.default_rng(0)
    lists = {"train": [], "val": [], "test": []}
    for k, (synset, split) in enumerate([("02691156", "train"), ("03797390", "train"), ("02773838", "val"),
                                         ("02691156", "test")]):
        (root / synset).mkdir(exist_ok=True)
        rows = np.concatenate([rng.normal(size=(10 + k, 6)), rng.integers(0, 4, (10 + k, 1))], axis=1)
        np.savetxt(root / synset / f"shape{k}.txt", rows, fmt="%.6f")
        lists[split].append(f"shape_data/{synset}/shape{k}")
    for split, entries in lists.items():
        (root / "train_test_split" / f"shuffled_{split}_file_list.json").write_text(json.dumps(entries))
    return root


def test_fields_categories_and_splits(shapenet_root):
    ds = ShapeNetPart(shapenet_root, "trainval")
    assert ds.categories == ["Airplane", "Bag", "Mug"] and len(ds) == 3
    d = ds[1]
    raw = np.loadtxt(shapenet_root / "03797390" / "shape1.txt")
    assert torch.allclose(d.pos, torch.tensor(raw[:, :3], dtype=torch.float32))
    assert torch.allclose(d.x, torch.tensor(raw[:, 3:6], dtype=torch.float32))
    assert d.y.tolist() == raw[:, 6].astype(int).tolist() and d.category.tolist() == [2]
    assert [int(g.category) for g in ds] == [0, 2, 1]
    assert len(ShapeNetPart(shapenet_root, "test")) == 1
    assert len(ShapeNetPart(shapenet_root, "train", categories=["Mug"])) == 1
    assert (shapenet_root / "processed").is_dir()


def test_bad_inputs(shapenet_root, tmp_path):
    with pytest.raises(FileNotFoundError, match="synsetoffset2category.txt"):
        ShapeNetPart(tmp_path)
    with pytest.raises(ValueError, match="unknown categories"):
        ShapeNetPart(shapenet_root, categories=["Rocket"])
    bad = shapenet_root / "02691156" / "shape0.txt"
    bad.write_text("0 0 0 1 0 0 nan\n")
    with pytest.raises(ValueError, match=r"shape0\.txt:1: NaN or infinite"):
        ShapeNetPart(shapenet_root, "train")
    bad.write_text("0 0 0 1 0\n")
    with pytest.raises(ValueError, match="expected 7 columns"):
        ShapeNetPart(shapenet_root, "train")
