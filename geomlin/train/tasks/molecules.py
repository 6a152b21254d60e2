"""``geomlin train molecules``: energies and forces of a molecular-dynamics trajectory.

Default data: the bundled GFN2-xTB ethanol trajectory ``datasets/md/xtb_md_ethanol.npz``.
``--data PATH`` reads any MD17 / revised-MD17 ``.npz`` or extended-XYZ file with
energies and forces; ``--dataset qm9 --root PATH --target U0`` fits QM9 energies
(no forces). Forces are ``-dE/dpos`` of the learned energy (so they are
conservative and, for an invariant energy, equivariant).

Targets are standardised with training-set statistics: ``E = mean + scale * f(pos)``
with ``scale`` the RMS force component, and the loss is
``w_E MSE(E)/scale^2 + w_F MSE(F)/scale^2``.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import torch
from torch import Tensor, nn

from geomlin.train.config import Option
from geomlin.train.errors import UserError
from geomlin.train.tasks.base import AuditSpec, Fields, Stats, Task, TaskData, stat
from geomlin.train.tasks.pointcloud import _require

#: The bundled trajectory, relative to the source tree / working directory.
BUNDLED_ETHANOL = Path("datasets") / "md" / "xtb_md_ethanol.npz"
TEST = "test"


def find_bundled(relative: Path) -> Path | None:
    """``relative`` under the working directory or the geomlin source tree, if it exists."""
    for base in (Path.cwd(), Path(__file__).resolve().parents[3]):
        if (base / relative).is_file():
            return base / relative
    return None


class MoleculeEnergyModel(nn.Module):
    """Wraps an invariant energy network: standardised energy -> physical energy and forces.

    ``forward(pos (B, N, 3), species (B, N)) -> (energy (B,), forces (B, N, 3))`` with
    ``forces = -dE/dpos`` (graph kept for training when ``create_graph``).
    """

    def __init__(self, net: nn.Module, energy_mean: float = 0.0, scale: float = 1.0):
        super().__init__()
        self.net = net
        self.register_buffer("energy_mean", torch.tensor(float(energy_mean), dtype=torch.float64))
        self.register_buffer("scale", torch.tensor(float(scale), dtype=torch.float64))

    def energy(self, pos: Tensor, species: Tensor) -> Tensor:
        """Energy ``(B,)`` in data units."""
        return self.energy_mean.to(pos.dtype) + self.scale.to(pos.dtype) * self.net(pos, species)

    def forward(self, pos: Tensor, species: Tensor) -> tuple[Tensor, Tensor]:
        with torch.enable_grad():
            if not pos.requires_grad:
                pos = pos.detach().requires_grad_(True)
            e = self.energy(pos, species)
            (grad,) = torch.autograd.grad(e.sum(), pos, create_graph=self.training)
        return e, -grad


def build_ponita_potential(info: dict) -> nn.Module:
    """The ``ponita`` model: :class:`geomlin.models.PonitaPotential` with its defaults."""
    from geomlin.models import PonitaPotential

    return PonitaPotential(num_species=info["num_species"])


class MoleculesTask(Task):
    """``geomlin train molecules``: fields ``pos (M, N, 3)``, ``forces (M, N, 3)`` float32, ``z (M, N)``
    int64, ``energy (M,)`` float64; metrics ``energy_mae`` and ``force_mae`` (data units) on ``test``."""

    name = "molecules"
    description = "energy and force regression on a molecular-dynamics trajectory (Gaunt potential, EGNN)"
    options = (
        Option("dataset", str, "md", "md (the bundled ethanol trajectory or --data FILE) or qm9",
               ("md", "qm9")),
        Option("data", str, None, "an MD17 / rMD17 .npz or extended-XYZ file (default: bundled ethanol)"),
        Option("root", str, None, "QM9 root folder (for --dataset qm9)"),
        Option("target", str, "U0", "QM9 target (for --dataset qm9)"),
        Option("n_train", int, 800, "training frames"),
        Option("n_test", int, 200, "test frames"),
        Option("force_weight", float, 10.0, "weight of the force term of the loss (0 = energy only)"),
        Option("schedule", str, "cosine", "learning-rate schedule", ("cosine", "constant")),
        Option("stop_after", int, 0, "stop after this epoch as if interrupted (0 = never; for resume tests)"),
    )
    default_models = ("gaunt", "egnn")
    models: ClassVar[dict[str, str]] = {
        "gaunt": "Gaunt-tensor-product potential (geomlin.gaunt), E(3) invariant energy",
        "egnn": "EGNN-style invariant message passing potential (Satorras et al. 2021)",
        "ponita": "PONITA (Bekkers et al. 2024), point-cloud mode: E(3) invariant energy",
    }
    default_overrides: ClassVar[dict] = {"epochs": 15, "batch_size": 32, "lr": 2e-3}
    primary_metric = f"{TEST}_force_mae"
    higher_is_better = False
    eval_needs_grad = True

    def quick_preset(self, cfg: dict) -> dict:
        return {"epochs": 1, "n_train": 64, "n_test": 32}

    def validate(self, cfg: dict) -> None:
        if cfg["dataset"] == "qm9" and not cfg.get("root"):
            raise UserError("--dataset qm9 needs --root PATH (the QM9 folder)")
        if cfg.get("data") and not Path(cfg["data"]).is_file():
            raise UserError(f"data file not found: {cfg['data']}")
        if cfg["dataset"] == "qm9" and cfg.get("root") and not Path(cfg["root"]).exists():
            raise UserError(f"--root {cfg['root']} does not exist")

    # ---------------------------------------------------------------- data
    def _load(self, cfg: dict) -> dict[str, Tensor]:
        if cfg["dataset"] == "qm9":
            return self._load_qm9(cfg)
        path = Path(cfg["data"]) if cfg.get("data") else find_bundled(BUNDLED_ETHANOL)
        if path is None:
            raise UserError(f"the bundled trajectory {BUNDLED_ETHANOL} was not found (run from the "
                            "geomlin source tree or pass --data FILE)")
        ds = _require("geomlin.datasets", "reading trajectories")
        try:
            if path.suffix.lower() == ".npz":
                from geomlin.datasets.md17 import read_npz_trajectory

                raw = read_npz_trajectory(path)
                pos = torch.from_numpy(raw["pos"]).double()
                return {"pos": pos, "z": torch.from_numpy(raw["z"]).long().expand(pos.shape[0], -1).clone(),
                        "energy": torch.from_numpy(raw["energy"]).double().reshape(-1),
                        "forces": torch.from_numpy(raw["force"]).double().reshape(pos.shape)}
            data = ds.XYZDataset(str(path))
        except (ValueError, OSError) as exc:
            raise UserError(f"cannot read {path}: {str(exc).splitlines()[0]}") from None
        frames = [data[i] for i in range(len(data))]
        if any(getattr(f, "energy", None) is None or getattr(f, "force", None) is None for f in frames):
            raise UserError(f"{path}: every frame needs an energy and forces for this task")
        if len({int(f.pos.shape[0]) for f in frames}) != 1:
            raise UserError(f"{path}: all frames must have the same atoms for this task")
        return {"pos": torch.stack([f.pos for f in frames]).double(),
                "z": torch.stack([f.z for f in frames]).long(),
                "energy": torch.cat([f.energy.reshape(-1) for f in frames]).double(),
                "forces": torch.stack([f.force for f in frames]).double()}

    def _load_qm9(self, cfg: dict) -> dict[str, Tensor]:
        raise UserError("--dataset qm9: molecules of different sizes are not supported by this task yet; "
                        "use --data FILE with an MD trajectory")

    def build_data(self, cfg: dict) -> TaskData:
        d = self._load(cfg)
        m = d["pos"].shape[0]
        if not torch.isfinite(d["energy"]).all() or not torch.isfinite(d["forces"]).all():
            raise UserError("the trajectory has NaN or infinite energies/forces")
        n_train, n_test = cfg["n_train"], cfg["n_test"]
        if n_train + n_test > m:
            raise UserError(f"--n-train {n_train} + --n-test {n_test} exceeds the {m} frames of the data")
        perm = torch.randperm(m, generator=torch.Generator().manual_seed(cfg["seed"]))
        split = {"train": perm[:n_train], TEST: perm[n_train:n_train + n_test]}
        fields = {k: {"pos": d["pos"][i].float(), "z": d["z"][i], "energy": d["energy"][i],
                      "forces": d["forces"][i].float()} for k, i in split.items()}
        tr = fields["train"]
        scale = float(tr["forces"].double().pow(2).mean().sqrt())
        info = {"energy_mean": float(tr["energy"].mean()), "scale": scale if scale > 0 else 1.0,
                "num_species": int(d["z"].max()) + 1, "n_atoms": int(d["pos"].shape[1]), "frames": m}
        return TaskData(train=fields["train"], evals={TEST: fields[TEST]}, info=info)

    def build_model(self, name: str, cfg: dict, info: dict) -> nn.Module:
        if name == "egnn":
            from geomlin.models import EGNNPotential

            net = EGNNPotential(num_species=info["num_species"])
        elif name == "gaunt":
            from geomlin.models import GauntPotential

            net = GauntPotential(num_species=info["num_species"])
        elif name == "ponita":
            net = build_ponita_potential(info)
        else:
            raise UserError(f"unknown model '{name}' for task molecules")
        return MoleculeEnergyModel(net, info.get("energy_mean", 0.0), info.get("scale", 1.0))

    def _errors(self, model: nn.Module, batch: Fields) -> tuple[Tensor, Tensor, Tensor]:
        e, f = model(batch["pos"], batch["z"])
        inner = getattr(model, "module", model)
        scale = inner.scale.to(e.dtype)
        return (e - batch["energy"].to(e.dtype)) / scale, (f - batch["forces"]) / scale, scale

    def train_step(self, name: str, model: nn.Module, batch: Fields, cfg: dict) -> tuple[Tensor, Stats]:
        de, df, scale = self._errors(model, batch)
        loss_e, loss_f = (de ** 2).mean(), (df ** 2).mean()
        loss = loss_e + cfg["force_weight"] * loss_f
        n = de.shape[0]
        return loss, {"loss": stat(loss * n, n), "energy_mae": stat(de.abs().sum() * scale, n),
                      "force_mae": stat(df.abs().sum() * scale, df.numel())}

    def eval_step(self, name: str, model: nn.Module, batch: Fields, cfg: dict) -> Stats:
        de, df, scale = self._errors(model, batch)
        de, df = de.detach(), df.detach()
        return {"energy_mae": stat(de.abs().sum() * scale, de.shape[0]),
                "force_mae": stat(df.abs().sum() * scale, df.numel())}

    def audit_spec(self, name: str, model: nn.Module, info: dict) -> AuditSpec:
        from geomlin.groups import E3

        g = torch.Generator().manual_seed(0)
        n = info.get("n_atoms", 9)
        pos = 1.5 * torch.randn(2, n, 3, generator=g, dtype=torch.float64)
        z = torch.randint(1, info.get("num_species", 10), (2, n), generator=g)
        return AuditSpec(fn=model, group=E3(), reps_in=("position", None), reps_out=("scalar", "vector"),
                         inputs=(pos, z), description="energy E(3) invariant, forces E(3) equivariant")

    def summary_lines(self, last: dict, model_names: list[str]) -> list[str]:
        lines = ["\nTest mean absolute errors (data units: energy per molecule, force per component):"]
        for n in model_names:
            e, f = last.get(f"{n}/{TEST}_energy_mae"), last.get(f"{n}/{TEST}_force_mae")
            if e is not None:
                lines.append(f"  {n:<6} energy {e:.4g}   forces {f:.4g}")
        return lines
