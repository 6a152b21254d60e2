"""ModelNet on an OFF tree built in a temporary folder (header bug, quads); MeshPointClouds on bundled PLYs."""

import numpy as np
import pytest
import torch

from geomlin.datasets import MeshPointClouds, ModelNet
from geomlin.datasets.io.ply import read_ply
from tests.datasets.conftest import MESH_DIR
from tests.datasets.helpers import CUBE_QUADS, CUBE_VERTS, TETRA_TRIS, TETRA_VERTS, on_surface, write_off


@pytest.fixture
def modelnet_root(tmp_path):
    root = tmp_path / "ModelNet10"
    shapes = {"toilet": (CUBE_VERTS, CUBE_QUADS), "bed": (TETRA_VERTS, TETRA_TRIS),
              "chair": (CUBE_VERTS * [1, 2, 0.5], CUBE_QUADS)}
    for cat, (v, f) in shapes.items():
        for split, count in (("train", 2), ("test", 1)):
            d = root / cat / split
            d.mkdir(parents=True)
            for i in range(count):
                write_off(d / f"{cat}_{i + 1:04d}.off", v, f, header_bug=(i == 0))
    return root


def test_labels_follow_sorted_categories(modelnet_root):
    ds = ModelNet(modelnet_root, "10", train=True, num_points=256)
    assert ds.categories == ["bed", "chair", "toilet"]
    assert len(ds) == 6 and ds.num_classes == 3
    assert [int(d.y) for d in ds] == [0, 0, 1, 1, 2, 2]
    assert [int(d.y) for d in ModelNet(modelnet_root, train=False, num_points=16)] == [0, 1, 2]


def test_points_on_surface(modelnet_root):
    ds = ModelNet(modelnet_root, train=True, num_points=300, include_normals=True)
    tetra = ds[0].pos.double().numpy()
    assert on_surface(tetra, TETRA_VERTS, np.array(TETRA_TRIS)).all()
    cube = ds[4].pos.double()
    assert torch.allclose(cube.abs().max(dim=1).values, torch.ones(300, dtype=torch.float64), atol=1e-6)
    # normals are unit and perpendicular to the face the point lies on (axis-aligned for the cube)
    n = ds[4].normal
    assert torch.allclose(n.norm(dim=1), torch.ones(300), atol=1e-6)
    assert torch.allclose(n.abs().max(dim=1).values, torch.ones(300), atol=1e-6)
    # area weighting: the stretched box's faces have areas 2*1 (x), 1*0.5... fraction on the big faces
    box = ds[2].pos.double()
    on_z = ((box[:, 2].abs() - 0.5).abs() < 1e-6).double().mean().item()
    assert abs(on_z - 8 / (8 + 2 + 4)) < 0.1     # z faces 2x4=8, x faces 4x1=4, y faces 2x1=2


def test_cache_and_determinism(modelnet_root):
    a = ModelNet(modelnet_root, num_points=64, seed=3)
    files = list((modelnet_root / "processed").iterdir())
    assert len(files) == 1
    b = ModelNet(modelnet_root, num_points=64, seed=3)
    c = ModelNet(modelnet_root, num_points=64, seed=3, cache=False)
    assert torch.equal(a[5].pos, b[5].pos) and torch.equal(a[5].pos, c[5].pos)
    assert not torch.equal(a[5].pos, ModelNet(modelnet_root, num_points=64, seed=4, cache=False)[5].pos)


def test_empty_mesh_error_no_cache_then_fix(modelnet_root):
    bad = modelnet_root / "chair" / "train" / "chair_0002.off"
    good = bad.read_text()
    bad.write_text("OFF\n3 0 0\n0 0 0\n1 0 0\n0 1 0\n")
    with pytest.raises(ValueError, match=r"chair_0002\.off: empty mesh"):
        ModelNet(modelnet_root, num_points=32)
    assert not (modelnet_root / "processed").exists() or not list((modelnet_root / "processed").iterdir())
    bad.write_text(good)
    assert len(ModelNet(modelnet_root, num_points=32)) == 6


def test_missing_tree_message(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"<category>/\{train,test\}.*ModelNet10\.zip"):
        ModelNet(tmp_path)


@pytest.mark.parametrize("name", ["airplane", "ant", "nut", "sphere"])
def test_mesh_point_clouds_on_bundled_ply(name):
    path = MESH_DIR / f"{name}.ply"
    ds = MeshPointClouds([path], num_points=200, labels=[7], include_normals=True, seed=1)
    d = ds[0]
    assert d.pos.shape == (200, 3) and int(d.y) == 7 and d.name == name
    v, f = read_ply(path)
    assert on_surface(d.pos.double().numpy(), v, f, tol=1e-5).all()


def test_mesh_point_clouds_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.ply"):
        MeshPointClouds([tmp_path / "nope.ply"])
    with pytest.raises(ValueError, match="2 labels for 1"):
        MeshPointClouds([MESH_DIR / "ant.ply"], labels=[1, 2])
    p = tmp_path / "x.stl"
    p.write_text("solid")
    with pytest.raises(ValueError, match="unsupported mesh format"):
        MeshPointClouds([p])


def test_pointcloud_task_trains_on_a_modelnet_folder(modelnet_root, tmp_path):
    # the training command reads the category names of the folder, not a placeholder range
    from geomlin.cli.main import main

    out = tmp_path / "run"
    assert main(["train", "pointcloud", "--dataset", "modelnet10", "--root", str(modelnet_root), "--model",
                 "pointnet", "--epochs", "1", "--num-points", "32", "--out", str(out), "--no-progress"]) == 0
    from geomlin.train.checkpoint import load_checkpoint

    assert load_checkpoint(out / "checkpoint.pt")["run"]["data"]["classes"] == ["bed", "chair", "toilet"]


@pytest.mark.parametrize("per_class, train_count", [(None, 6), (1, 3), (5, 6)])
def test_train_pointcloud_takes_the_first_shapes_per_class_of_modelnet(modelnet_root, per_class, train_count):
    """--train-per-class / --test-per-class cap ModelNet's classes (they were silently ignored)."""
    from geomlin.train import get_task
    from geomlin.train.config import resolve_config

    task = get_task("pointcloud")
    cli = {"dataset": "modelnet10", "root": str(modelnet_root), "num_points": 16, "progress": False,
           "train_per_class": per_class, "test_per_class": 1}
    cfg = resolve_config(task.all_options(), cli_values=cli)
    data = task.build_data(cfg)
    assert data.train["pos"].shape == (train_count, 16, 3)
    assert sorted(data.train["y"].tolist()) == sorted([0, 1, 2] * (train_count // 3))
    assert data.evals["test"]["y"].tolist() == [0, 1, 2]


def test_first_per_class_against_a_loop():
    from geomlin.train.tasks.pointcloud import first_per_class

    g = torch.Generator().manual_seed(0)
    for count in (1, 2, 5):
        y = torch.randint(0, 4, (40,), generator=g)
        seen, expected = {}, []
        for i, label in enumerate(y.tolist()):
            seen[label] = seen.get(label, 0) + 1
            if seen[label] <= count:
                expected.append(i)
        assert first_per_class(y, count).tolist() == expected
