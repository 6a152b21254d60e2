"""``geomlin train nbody``: predict charged-particle positions a fixed time ahead.

Data: :func:`geomlin.datasets.nbody` (the NRI / EGNN charged-particle system, 5
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
from geomlin.train.tasks.base import AuditSpec, Fields, Stats, Task, TaskData, stat
from geomlin.train.tasks.pointcloud import _require

TEST_UPRIGHT, TEST_ROTATED = "test", "rotated"
TRAIN_SEED_OFFSET, TEST_SEED_OFFSET, MOTION_SEED_OFFSET = 0, 100_003, 200_003


class MLPDynamics(nn.Module):
    """Non-equivariant baseline: flattened ``(pos, vel, charges)`` -> MLP -> displacement.

    ``forward(pos (B, n, 3), vel (B, n, 3), charges (B, n, 1)) -> pos' (B, n, 3)``.
    """

    def __init__(self, n_particles: int, hidden: int = 128):
        super().__init__()
        self.n = n_particles
        self.net = nn.Sequential(nn.Linear(7 * n_particles, hidden), nn.SiLU(), nn.Linear(hidden, hidden),
                                 nn.SiLU(), nn.Linear(hidden, 3 * n_particles))

    def forward(self, pos: Tensor, vel: Tensor, charges: Tensor) -> Tensor:
        B = pos.shape[0]
        x = torch.cat([pos, vel, charges.reshape(B, self.n, 1).to(pos.dtype)], dim=-1).reshape(B, -1)
        return pos + vel + self.net(x).reshape(B, self.n, 3)


class GATrDynamics(nn.Module):
    """GATr for n-body: each particle is one token carrying a point, a velocity and a charge.

    ``forward(pos (B, n, 3), vel (B, n, 3), charges (B, n, 1)) -> pos' (B, n, 3)``, E(3) equivariant.
    The output token's point is read back with ``geomlin.algebra.pga.extract_point``.
    """

    def __init__(self, hidden_mv: int = 8, hidden_s: int = 16, blocks: int = 4, heads: int = 4):
        super().__init__()
        gatr = _require("geomlin.gatr", "the GATr model")
        self.pga = _require("geomlin.algebra.pga", "the GATr model")
        self.net = gatr.GATr(in_mv_channels=2, out_mv_channels=1, hidden_mv_channels=hidden_mv,
                             in_s_channels=1, out_s_channels=0, hidden_s_channels=hidden_s,
                             num_blocks=blocks, num_heads=heads)

    def forward(self, pos: Tensor, vel: Tensor, charges: Tensor) -> Tensor:
        mv = torch.stack([self.pga.embed_point(pos), self.pga.embed_translation(vel)], dim=-2)  # (B, n, 2, 16)
        out, _ = self.net(mv, scalars=charges.to(pos.dtype))
        return self.pga.extract_point(out[..., 0, :])


def build_ponita_dynamics(info: dict) -> nn.Module:
    """The ``ponita`` model: :class:`geomlin.models.PonitaDynamics` with its defaults."""
    from geomlin.models import PonitaDynamics

    return PonitaDynamics()


class NBodyTask(Task):
    """``geomlin train nbody``: fields ``pos, vel, target_pos (M, n, 3)``, ``charges (M, n, 1)`` float32;
    metric ``mse`` of the predicted positions on ``test`` and ``rotated`` (random E(3) motions)."""

    name = "nbody"
    description = "charged n-body dynamics: predict positions a fixed time ahead (GATr, EGNN, MLP)"
    options = (
        Option("n_train", int, 3000, "training systems"),
        Option("n_test", int, 500, "test systems"),
        Option("n_particles", int, 5, "particles per system"),
        Option("burn_in_steps", int, 1000, "integration steps before the input frame (EGNN uses 3000)"),
        Option("horizon_steps", int, 1000, "integration steps (of dt = 0.001) between input and target"),
        Option("schedule", str, "cosine", "learning-rate schedule", ("cosine", "constant")),
        Option("stop_after", int, 0, "stop after this epoch as if interrupted (0 = never; for resume tests)"),
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
        return {"epochs": 1, "n_train": 128, "n_test": 64, "burn_in_steps": 100, "horizon_steps": 200}

    def validate(self, cfg: dict) -> None:
        if cfg["n_particles"] < 2:
            raise UserError(f"--n-particles must be at least 2, got {cfg['n_particles']}")
        if cfg["burn_in_steps"] < 0:
            raise UserError(f"--burn-in-steps must be >= 0, got {cfg['burn_in_steps']}")
        if cfg["horizon_steps"] < 1:
            raise UserError(f"--horizon-steps must be at least 1, got {cfg['horizon_steps']}")

    def build_data(self, cfg: dict) -> TaskData:
        ds = _require("geomlin.datasets", "the n-body task")
        kw = {"n_particles": cfg["n_particles"], "horizon_steps": cfg["horizon_steps"],
              "burn_in_steps": cfg["burn_in_steps"]}
        train = ds.nbody(cfg["n_train"], seed=cfg["seed"] + TRAIN_SEED_OFFSET, **kw)
        test = ds.nbody(cfg["n_test"], seed=cfg["seed"] + TEST_SEED_OFFSET, **kw)
        pick = lambda d: {k: d[k].float() for k in ("pos", "vel", "charges", "target_pos")}
        test_f = pick(test)
        from geomlin.groups import E3

        g = torch.Generator().manual_seed(cfg["seed"] + MOTION_SEED_OFFSET)
        motion = E3().sample(cfg["n_test"], generator=g)
        R, t = motion.R, motion.t[:, None, :]
        moved = {"pos": (test["pos"] @ R.transpose(-1, -2) + t).float(),
                 "vel": (test["vel"] @ R.transpose(-1, -2)).float(), "charges": test_f["charges"],
                 "target_pos": (test["target_pos"] @ R.transpose(-1, -2) + t).float()}
        info = {"n_particles": cfg["n_particles"], "horizon_steps": cfg["horizon_steps"]}
        return TaskData(train=pick(train), evals={TEST_UPRIGHT: test_f, TEST_ROTATED: moved}, info=info)

    def build_model(self, name: str, cfg: dict, info: dict) -> nn.Module:
        if name == "egnn":
            from geomlin.models import EGNNDynamics

            return EGNNDynamics()
        if name == "mlp":
            return MLPDynamics(info["n_particles"])
        if name == "gatr":
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
        from geomlin.groups import E3

        g = torch.Generator().manual_seed(0)
        n = info.get("n_particles", 5)
        pos = torch.randn(3, n, 3, generator=g, dtype=torch.float64)
        vel = 0.5 * torch.randn(3, n, 3, generator=g, dtype=torch.float64)
        q = torch.randint(0, 2, (3, n, 1), generator=g).double() * 2 - 1
        return AuditSpec(fn=model, group=E3(), reps_in=("position", "vector", None), reps_out="position",
                         inputs=(pos, vel, q), description="future positions E(3) equivariant in "
                                                          "(positions, velocities)")

    def summary_lines(self, last: dict, model_names: list[str]) -> list[str]:
        lines = ["\nTest MSE of predicted positions (as generated / after a random E(3) motion):"]
        for n in model_names:
            a, b = last.get(f"{n}/{TEST_UPRIGHT}_mse"), last.get(f"{n}/{TEST_ROTATED}_mse")
            if a is not None and b is not None:
                lines.append(f"  {n:<6} {a:.4g} / {b:.4g}")
        return lines
