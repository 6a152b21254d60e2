"""``geomlin train nbody``: predict charged-particle positions a fixed time ahead.

Data: [`geomlin.datasets.nbody`][geomlin.datasets.synthetic.nbody] (the NRI / EGNN charged-particle system, 5
particles, horizon 1.0 time unit by default). Models: GATr (points and velocities
embedded as PGA multivectors), the EGNN of Satorras et al. and a plain MLP
baseline. Evaluation on the test set as generated (``test``) and after a random
E(3) motion of inputs and targets (``rotated``): E(3)-equivariant models score
the same on both.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import Tensor, nn

from geomlin.train.config import Option
from geomlin.train.errors import UserError
from geomlin.train.tasks.base import AuditSpec, Fields, Stats, Task, TaskData, require_module, stat

TEST_UPRIGHT, TEST_ROTATED = "test", "rotated"
TRAIN_SEED_OFFSET, TEST_SEED_OFFSET, MOTION_SEED_OFFSET = 0, 100_003, 200_003


def _example_system(num_particles: int, generator, dtype) -> tuple[tuple[Tensor, Tensor, Tensor], dict]:
    """Two random charged systems: ``pos, vel (2, n, 3)`` and charges ``(2, n, 1)`` in ``{-1, +1}``."""
    pos = torch.randn(2, num_particles, 3, generator=generator, dtype=dtype)
    vel = 0.5 * torch.randn(2, num_particles, 3, generator=generator, dtype=dtype)
    q = torch.randint(0, 2, (2, num_particles, 1), generator=generator).to(dtype) * 2 - 1
    return (pos, vel, q), {}


def build_ponita_dynamics(info: dict) -> nn.Module:
    """The ``ponita`` model: [`geomlin.models.PonitaDynamics`][geomlin.models.ponita.PonitaDynamics] with its defaults."""
    from geomlin.models import PonitaDynamics

    return PonitaDynamics()


class NBodyTask(Task):
    """``geomlin train nbody``: fields ``pos, vel, target_pos (M, n, 3)``, ``charges (M, n, 1)`` float32;
    metric ``mse`` of the predicted positions on ``test`` and ``rotated`` (random E(3) motions)."""

    name = "nbody"
    description = "charged n-body dynamics: predict positions a fixed time ahead (GATr, EGNN, MLP)"
    options = (
        Option("num_train", int, 3000, "training systems", minimum=1),
        Option("num_test", int, 500, "test systems", minimum=1),
        Option("num_particles", int, 5, "particles per system", minimum=2),
        Option("burn_in_steps", int, 1000, "integration steps before the input frame (EGNN uses 3000)", minimum=0),
        Option("horizon_steps", int, 1000, "integration steps (of dt = 0.001) between input and target", minimum=1),
    )
    default_models = ("gatr", "egnn", "mlp")
    models: ClassVar[dict[str, str]] = {
        "gatr": "GATr: points and velocities as PGA multivectors, E(3) equivariant",
        "egnn": "EGNN (Satorras et al. 2021), E(3) equivariant",
        "mlp": "MLP on flattened coordinates (not equivariant)",
        "ponita": "PONITA (Bekkers et al. 2024): velocities lifted to an icosahedral orientation grid",
    }
    default_overrides: ClassVar[dict] = {"epochs": 10, "batch_size": 64, "lr": 1e-3}
    primary_metric = f"{TEST_ROTATED}_mse"
    higher_is_better = False

    def quick_preset(self, cfg: dict) -> dict:
        return {"epochs": 1, "num_train": 128, "num_test": 64, "burn_in_steps": 100, "horizon_steps": 200}

    def build_data(self, cfg: dict) -> TaskData:
        ds = require_module("geomlin.datasets", "the n-body task")
        kw = {"num_particles": cfg["num_particles"], "horizon_steps": cfg["horizon_steps"],
              "burn_in_steps": cfg["burn_in_steps"], "progress": None if cfg["progress"] else False}
        train = ds.nbody(cfg["num_train"], seed=cfg["seed"] + TRAIN_SEED_OFFSET, **kw)
        test = ds.nbody(cfg["num_test"], seed=cfg["seed"] + TEST_SEED_OFFSET, **kw)
        pick = lambda d: {k: d[k].float() for k in ("pos", "vel", "charges", "target_pos")}
        test_f = pick(test)
        from geomlin.groups import E3

        g = torch.Generator().manual_seed(cfg["seed"] + MOTION_SEED_OFFSET)
        motion = E3().sample(cfg["num_test"], generator=g)
        R, t = motion.R, motion.t[:, None, :]
        moved = {"pos": (test["pos"] @ R.transpose(-1, -2) + t).float(),
                 "vel": (test["vel"] @ R.transpose(-1, -2)).float(), "charges": test_f["charges"],
                 "target_pos": (test["target_pos"] @ R.transpose(-1, -2) + t).float()}
        info = {"num_particles": cfg["num_particles"], "horizon_steps": cfg["horizon_steps"]}
        return TaskData(train=pick(train), evals={TEST_UPRIGHT: test_f, TEST_ROTATED: moved}, info=info)

    def build_model(self, name: str, cfg: dict, info: dict) -> nn.Module:
        if name == "egnn":
            from geomlin.models import EGNNDynamics

            return EGNNDynamics()
        if name == "mlp":
            from geomlin.models import MLPDynamics

            return MLPDynamics(info["num_particles"])
        if name == "gatr":
            from geomlin.models import GATrDynamics

            return GATrDynamics()
        if name == "ponita":
            return build_ponita_dynamics(info)
        raise UserError(f"unknown model '{name}' for task nbody")

    def _predict(self, model: nn.Module, batch: Fields) -> Tensor:
        return model(batch["pos"], batch["vel"], batch["charges"])

    def train_step(self, name: str, model: nn.Module, batch: Fields, cfg: dict) -> tuple[Tensor, Stats]:
        pred = self._predict(model, batch)
        loss = ((pred - batch["target_pos"]) ** 2).mean()
        n = pred.shape[0]
        return loss, {"loss": stat(loss * n, n)}

    def eval_step(self, name: str, model: nn.Module, batch: Fields, cfg: dict) -> Stats:
        pred = self._predict(model, batch)
        se = ((pred - batch["target_pos"]) ** 2).mean(dim=(1, 2)).sum()
        return {"mse": stat(se, pred.shape[0])}

    def audit_spec(self, name: str, model: nn.Module, info: dict) -> AuditSpec:
        """The task's symmetry, for models that declare no types (the MLP baseline)."""
        from geomlin.groups import E3
        from geomlin.reps import Positions, Vectors

        g = torch.Generator().manual_seed(0)
        (pos, vel, q), _ = _example_system(info.get("num_particles", 5), g, torch.float64)
        return AuditSpec(fn=model, group=E3(), type_in=(Positions(3), Vectors(3), None), type_out=Positions(3),
                         inputs=(pos, vel, q), description="future positions E(3) equivariant in "
                                                          "(positions, velocities)")

    def summary_lines(self, last: dict, model_names: list[str]) -> list[str]:
        lines = ["\nTest MSE of predicted positions (as generated / after a random E(3) motion):"]
        for n in model_names:
            a, b = last.get(f"{n}/{TEST_UPRIGHT}_mse"), last.get(f"{n}/{TEST_ROTATED}_mse")
            if a is not None and b is not None:
                lines.append(f"  {n:<6} {a:.4g} / {b:.4g}")
        return lines
