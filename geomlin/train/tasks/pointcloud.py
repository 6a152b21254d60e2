"""``geomlin train pointcloud``: shape classification, trained upright, tested rotated.

The data are [`geomlin.datasets.synthetic_shapes`][geomlin.datasets.synthetic.synthetic_shapes] clouds (or
ModelNet with ``--dataset modelnet10|modelnet40 --root PATH``). Every model trains on upright
shapes; two evaluation sets hold the same test shapes upright (``test``) and
under Haar-random rotations (``rotated``). A model that is rotation invariant by
construction scores the same on both; the plain PointNet baseline collapses on
``rotated``. The printed comparison is the point of the exercise.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from geomlin.reps import Positions, Scalars
from geomlin.train.config import Option
from geomlin.train.errors import UserError
from geomlin.train.tasks.base import (
    AuditSpec,
    Fields,
    Stats,
    Task,
    TaskData,
    bundled_path,
    require_module,
    stat,
)

#: Evaluation set names.
TEST_UPRIGHT, TEST_ROTATED = "test", "rotated"
#: Seed offsets so that train / test / rotation draws never coincide.
TRAIN_SEED_OFFSET, TEST_SEED_OFFSET, ROTATION_SEED_OFFSET = 0, 100_003, 200_003


def rotate_clouds(pos: Tensor, seed: int, reflections: bool = False) -> Tensor:
    """``pos (M, N, 3)`` with cloud ``i`` multiplied by its own Haar-random rotation (fixed by ``seed``)."""
    from geomlin.groups import haar_orthogonal

    g = torch.Generator().manual_seed(seed)
    R = haar_orthogonal(pos.shape[0], 3, generator=g, special=not reflections).to(pos.dtype)
    return pos @ R.transpose(-1, -2)


def random_rotations(n: int, *, device: torch.device | str | None = None, dtype: torch.dtype = torch.float32,
                     generator: torch.Generator | None = None) -> Tensor:
    """``n`` Haar-random rotations ``(n, 3, 3)`` drawn on ``device`` (the augmentation of ``pointnet_aug``).

    A normalised Gaussian 4-vector is a uniform unit quaternion, and the map from unit quaternions
    to SO(3) carries that measure to the Haar measure (Shoemake 1992, "Uniform random rotations").
    Drawn on the training device with its RNG, so a batch on an accelerator gets its rotations
    without a CPU tensor and an upload per step.
    """
    q = torch.randn(n, 4, device=device, dtype=torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype,
                    generator=generator)
    w, x, y, z = (q / q.norm(dim=-1, keepdim=True)).unbind(-1)
    R = torch.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
                     2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
                     2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], dim=-1)
    return R.reshape(n, 3, 3).to(dtype)


#: Relative eigenvalue gap below which the frame-averaged model takes axes from higher moments
#: (most synthetic classes are symmetric: their covariance spectrum is (nearly) degenerate).
FRAME_GAP_TOL = 0.2
#: Vector channels of the canonicalizer's network (it only has to find a pose, not classify).
CANON_WIDTH = 8
#: Vector-neuron layers of the vn_pointnet classifier.
VN_BLOCKS = 1

#: Generated training shapes per class of ``--dataset synthetic`` without ``--train-per-class`` (ModelNet
#: then takes every shape).
SYNTHETIC_TRAIN_PER_CLASS = 120
#: Generated test shapes per class of ``--dataset synthetic`` without ``--test-per-class``.
SYNTHETIC_TEST_PER_CLASS = 40

#: Bundled meshes used as extra classes (the sphere is already a synthetic class).
MESH_NAMES = ("airplane", "ant", "nut")
#: Random isotropic scale and jitter of the mesh clouds (as for the synthetic shapes).
MESH_SCALE_RANGE, MESH_JITTER = (0.75, 1.25), 0.01


#: What each ``--frame-group`` does to a cloud, in words, by the group's name.
GROUP_WORDS = {"E(3)": "rotations, reflections and translations of the cloud",
               "SE(3)": "rotations and translations of the cloud",
               "O(3)": "rotations and reflections about the origin",
               "SO(3)": "rotations about the origin"}


def declared_group(name: str):
    """The symmetry group named by ``--frame-group`` (parsed by [`geomlin.groups.as_group`][]), and in words."""
    from geomlin.groups import as_group

    try:
        group = as_group(name, "--frame-group")
    except ValueError as exc:
        raise UserError(str(exc)) from None
    if str(group) not in GROUP_WORDS:
        raise UserError(f"--frame-group must be one of {', '.join(GROUP_WORDS)}, got {name!r}")
    return group, f"{group} ({GROUP_WORDS[str(group)]})"


def bundled_meshes() -> list:
    """Paths of the bundled meshes ``datasets/meshes/{airplane,ant,nut}.ply`` (all three, or none), found
    by [`bundled_path`][geomlin.train.tasks.base.bundled_path]."""
    found = [bundled_path(f"meshes/{n}.ply") for n in MESH_NAMES]
    return found if all(p is not None and p.is_file() for p in found) else []


def mesh_clouds(path, count: int, num_points: int, seed: int) -> Tensor:
    """``count`` clouds ``(count, num_points, 3)`` float64 sampled on one mesh, centred, radius ~1,
    randomly scaled and jittered like [`geomlin.datasets.synthetic_shapes`][geomlin.datasets.synthetic.synthetic_shapes] (upright)."""
    from geomlin.datasets.meshes import read_mesh
    from geomlin.datasets.surface import sample_surface

    g = torch.Generator().manual_seed(seed)
    verts, faces = read_mesh(path)
    v = torch.from_numpy(verts).double()
    v = v - v.mean(0)
    v = v / v.norm(dim=-1).max()
    pts = sample_surface(v, torch.from_numpy(faces), count * num_points, generator=g).reshape(count, num_points, 3)
    pts = pts - pts.mean(dim=1, keepdim=True)
    lo, hi = MESH_SCALE_RANGE
    pts = pts * (lo + (hi - lo) * torch.rand(count, 1, 1, generator=g, dtype=torch.float64))
    return pts + MESH_JITTER * torch.randn(pts.shape, generator=g, dtype=torch.float64)


def first_per_class(y: Tensor, count: int | None) -> Tensor:
    """Indices ``(K,)`` of the first ``count`` examples of each class of labels ``y (M,)``, in their order
    (all of them when ``count`` is None)."""
    if count is None:
        return torch.arange(y.shape[0])
    order = torch.argsort(y, stable=True)                        # by class, file order within a class
    sorted_y = y[order]
    starts = torch.searchsorted(sorted_y, sorted_y, right=False)  # first index of each one's class
    rank = torch.arange(y.shape[0]) - starts
    return torch.sort(order[rank < count]).values


class PointCloudTask(Task):
    """``geomlin train pointcloud``: fields ``pos (M, N, 3)`` float32, ``y (M,)`` int64; metrics
    ``loss`` and ``acc`` on ``test`` (upright) and ``rotated`` (Haar-random SO(3) rotations)."""

    name = "pointcloud"
    description = "shape classification: train upright, test on randomly rotated shapes"
    options = (
        Option("dataset", str, "synthetic", "synthetic (generated, no files), modelnet10 or modelnet40",
               ("synthetic", "modelnet10", "modelnet40")),
        Option("root", str, None, "ModelNet root folder (for --dataset modelnet10|modelnet40)"),
        Option("num_points", int, 128, "points per cloud", minimum=8),
        Option("train_per_class", int, None, "training shapes per class (synthetic: generated, default "
               f"{SYNTHETIC_TRAIN_PER_CLASS}; ModelNet: the first this many of each class, default all)", minimum=1),
        Option("test_per_class", int, None, "test shapes per class (synthetic: generated, default "
               f"{SYNTHETIC_TEST_PER_CLASS}; ModelNet: the first this many of each class, default all)", minimum=1),
        Option("meshes", bool, True, "add the bundled meshes (datasets/meshes: airplane, ant, nut) as classes "
               "(--dataset synthetic)"),
        Option("width", int, 32, "PointNet width w: per-point MLP 3 -> w -> 2w -> 4w, head 4w -> 2w -> classes",
               minimum=1),
        Option("gatr_points", int, 32, "points per cloud seen by the GATr model (attention is O(N^2))", minimum=1),
        Option("frame_group", str, "SE3", "group of the frame-averaged / canonicalized models",
               ("E3", "SE3", "O3", "SO3")),
        Option("frame_signs", str, "skewness", "signs of the frame axes: one element signed by third moments, "
               "or all sign patterns (|F| = 4 or 8, one random element per shape while training)",
               ("skewness", "all")),
        Option("prior_weight", float, 0.1, "weight of the canonicalization prior |R - I|^2 (canonical model)",
               minimum=0.0),
        Option("vn_width", int, 8, "vector channels of the vector-neuron classifier (vn_pointnet)", minimum=1),
    )
    default_models = ("pointnet", "frame_avg", "canonical", "vn_pointnet")
    models: ClassVar[dict[str, str]] = {
        "pointnet": "PointNet baseline (not rotation invariant)",
        "pointnet_aug": "PointNet trained with random-rotation augmentation",
        "frame_avg": "FrameAveraging(PointNet): invariant by PCA frames (moment axes for symmetric shapes)",
        "canonical": "Canonicalization(PointNet): learned vector-neuron pose (Procrustes, canonicalization prior)",
        "vn_pointnet": "VNPointNetClassifier: vector neurons, E(3) invariant by construction",
        "gatr": "GATr (geometric algebra transformer), E(3) equivariant by construction",
    }
    default_overrides: ClassVar[dict] = {"epochs": 10, "lr": 3e-3, "batch_size": 32}
    primary_metric = f"{TEST_ROTATED}_acc"

    def quick_preset(self, cfg: dict) -> dict:
        return {"epochs": 1, "train_per_class": 8, "test_per_class": 4, "num_points": 64}

    def validate(self, cfg: dict) -> None:
        from pathlib import Path

        if cfg["dataset"] == "synthetic":
            if cfg.get("root"):
                raise UserError("--root applies to --dataset modelnet10 or modelnet40, not --dataset synthetic")
            return
        if not cfg.get("root"):
            raise UserError(f"--dataset {cfg['dataset']} needs --root PATH (the ModelNet folder)")
        root = Path(cfg["root"])
        if not root.exists():
            raise UserError(f"--root {root} does not exist")
        if not root.is_dir():
            raise UserError(f"--root {root} is a file; pass the ModelNet folder")

    # ---------------------------------------------------------------- data
    def build_data(self, cfg: dict) -> TaskData:
        if cfg["dataset"] == "synthetic":
            ds = require_module("geomlin.datasets", "--dataset synthetic")
            seed = cfg["seed"]
            kw = {"num_points": cfg["num_points"], "rotation": None, "dtype": torch.float32}
            per_class = {"train": cfg["train_per_class"] or SYNTHETIC_TRAIN_PER_CLASS,
                         "test": cfg["test_per_class"] or SYNTHETIC_TEST_PER_CLASS}
            pos, y = ds.synthetic_shapes(per_class["train"], seed=seed + TRAIN_SEED_OFFSET, **kw)
            tpos, ty = ds.synthetic_shapes(per_class["test"], seed=seed + TEST_SEED_OFFSET, **kw)
            classes = list(ds.SHAPE_CLASSES)
            if cfg["meshes"]:
                for k, path in enumerate(bundled_meshes()):
                    label = len(classes)
                    classes.append(path.stem)
                    for split, n, off in (("train", per_class["train"], TRAIN_SEED_OFFSET),
                                          ("test", per_class["test"], TEST_SEED_OFFSET)):
                        p = mesh_clouds(path, n, cfg["num_points"], seed + off + 7 * k).float()
                        yy = torch.full((n,), label, dtype=torch.long)
                        if split == "train":
                            pos, y = torch.cat([pos, p]), torch.cat([y, yy])
                        else:
                            tpos, ty = torch.cat([tpos, p]), torch.cat([ty, yy])
        else:
            pos, y, tpos, ty, classes = self._modelnet(cfg)
        rotated = rotate_clouds(tpos.double(), cfg["seed"] + ROTATION_SEED_OFFSET).to(tpos.dtype)
        info = {"num_classes": len(classes), "classes": classes, "num_points": int(pos.shape[1]),
                "dataset": cfg["dataset"], "frame_group": cfg["frame_group"]}
        return TaskData(train={"pos": pos, "y": y.long().reshape(-1)},
                        evals={TEST_UPRIGHT: {"pos": tpos, "y": ty.long().reshape(-1)},
                               TEST_ROTATED: {"pos": rotated, "y": ty.long().reshape(-1)}},
                        info=info)

    def _modelnet(self, cfg: dict):
        from pathlib import Path

        root = Path(cfg["root"])
        ds = require_module("geomlin.datasets", f"--dataset {cfg['dataset']}")
        if not hasattr(ds, "ModelNet"):
            raise UserError(f"--dataset {cfg['dataset']} needs geomlin.datasets.ModelNet, "
                            "which this checkout does not have yet")
        classes_n = 10 if cfg["dataset"] == "modelnet10" else 40
        out = []
        for split in ("train", "test"):
            try:
                data = ds.ModelNet(str(root), name=str(classes_n), train=(split == "train"),
                                   num_points=cfg["num_points"], progress=cfg["progress"])
            except (FileNotFoundError, ValueError) as exc:
                raise UserError(f"cannot read ModelNet{classes_n} from {root}: {exc}") from None
            pos, y = torch.stack([d.pos for d in data]).float(), torch.cat([d.y.reshape(-1) for d in data])
            keep = first_per_class(y, cfg[f"{split}_per_class"])
            out.append((pos[keep], y[keep]))
        classes = list(data.categories)
        return out[0][0], out[0][1], out[1][0], out[1][1], classes

    # -------------------------------------------------------------- models
    def build_model(self, name: str, cfg: dict, info: dict) -> nn.Module:
        from geomlin.models import PointNet as _PointNet

        k = info["num_classes"]
        w = cfg.get("width", 32)

        def PointNet(classes):
            return _PointNet(classes, point_widths=(w, 2 * w, 4 * w), head_widths=(2 * w,))

        if name in ("pointnet", "pointnet_aug"):
            return PointNet(k)
        if name == "frame_avg":
            frames = require_module("geomlin.frames", "the frame-averaged model")
            # Symmetric shapes have (nearly) degenerate spectra: their axes come from higher moments.
            # signs="all" trains on one random frame element per shape (|F| times cheaper) and
            # averages all of them at evaluation; "skewness" has one element (|F| = 1).
            return frames.FrameAveraging(PointNet(k), group=cfg["frame_group"], output=Scalars(k),
                                         stochastic=cfg["frame_signs"] == "all", on_degenerate="moments",
                                         gap_tol=FRAME_GAP_TOL, signs=cfg["frame_signs"])
        if name == "canonical":
            frames = require_module("geomlin.frames", "the canonicalized model")
            canon = frames.PointCloudCanonicalizer(group=cfg["frame_group"], hidden_channels=CANON_WIDTH,
                                                   num_blocks=1, orthogonalization="procrustes",
                                                   moment_frame=True, gap_tol=FRAME_GAP_TOL)
            return frames.Canonicalization(canon, PointNet(k), output=Scalars(k))
        if name == "vn_pointnet":
            from geomlin.models import VNPointNetClassifier

            return VNPointNetClassifier(k, hidden_channels=cfg["vn_width"], num_blocks=VN_BLOCKS,
                                        point_widths=(w, 2 * w, 4 * w), head_widths=(2 * w,))
        if name == "gatr":
            from geomlin.models import GATrClassifier

            return GATrClassifier(k)
        raise UserError(f"unknown model '{name}' for task pointcloud")

    @staticmethod
    def _logits(name: str, model: nn.Module, pos: Tensor, cfg: dict) -> Tensor:
        if name == "gatr":  # attention is O(N^2): the first --gatr-points of each cloud (i.i.d. surface samples)
            pos = pos[:, :cfg["gatr_points"]]
        return model(pos)

    def train_step(self, name: str, model: nn.Module, batch: Fields, cfg: dict) -> tuple[Tensor, Stats]:
        pos = batch["pos"]
        if name == "pointnet_aug":
            R = random_rotations(pos.shape[0], device=pos.device, dtype=pos.dtype)
            pos = pos @ R.transpose(-1, -2)
        prior = None
        if name == "canonical":
            logits, g = model(pos, return_elements=True)
            prior = getattr(model, "module", model).prior_loss(g)
        else:
            logits = self._logits(name, model, pos, cfg)
        loss = F.cross_entropy(logits, batch["y"])
        n = batch["y"].shape[0]
        correct = (logits.argmax(-1) == batch["y"]).sum()
        # the logged loss is the cross-entropy alone (comparable across models and with the test loss);
        # the canonicalization prior is logged beside it and added to what is minimised
        stats = {"loss": stat(loss * n, n), "acc": stat(correct, n)}
        if prior is None:
            return loss, stats
        return loss + cfg["prior_weight"] * prior, {**stats, "prior": stat(prior * n, n)}

    def eval_step(self, name: str, model: nn.Module, batch: Fields, cfg: dict) -> Stats:
        logits = self._logits(name, model, batch["pos"], cfg)
        n = batch["y"].shape[0]
        loss = F.cross_entropy(logits, batch["y"], reduction="sum")
        correct = (logits.argmax(-1) == batch["y"]).sum()
        return {"loss": stat(loss, n), "acc": stat(correct, n)}

    # --------------------------------------------------------------- audit
    def audit_spec(self, name: str, model: nn.Module, info: dict) -> AuditSpec:
        g = torch.Generator().manual_seed(0)
        pos = torch.randn(2, info.get("num_points", 64), 3, generator=g, dtype=torch.float64)
        pos = pos * torch.tensor([1.0, 0.7, 0.4], dtype=torch.float64)  # a clear PCA spectrum
        group, words = declared_group(info.get("frame_group", "E3"))
        return AuditSpec(fn=model, group=group, type_in=(Positions(3),), type_out=Scalars(), inputs=(pos,),
                         description=f"class logits invariant under {words}")

    def summary_lines(self, last: dict, model_names: list[str]) -> list[str]:
        key = f"/{TEST_ROTATED}_acc"
        if "pointnet" not in model_names or f"pointnet{key}" not in last:
            return []
        base = last[f"pointnet{key}"]
        lines = [f"\nRotated-test accuracy (trained upright): pointnet baseline {100 * base:.1f}%"]
        for n in model_names:
            if n != "pointnet" and f"{n}{key}" in last:
                acc = last[f"{n}{key}"]
                lines.append(f"  {n:<12} {100 * acc:5.1f}%  ({100 * (acc - base):+.1f} points vs baseline)")
        return lines

