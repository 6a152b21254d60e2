r"""``geomlin train molecules``: energies (and forces) of molecules.

Two datasets:

* ``--dataset md`` (default): a molecular-dynamics trajectory, every frame the same molecule.
  Default data: the bundled GFN2-xTB ethanol trajectory ``datasets/md/xtb_md_ethanol.npz``;
  ``--data PATH`` reads any MD17 / revised-MD17 ``.npz`` or extended-XYZ file with energies and
  forces (energies alone with ``--force-weight 0``). Forces are ``-dE/dpos`` of the learned energy
  (so they are conservative and, for an invariant energy, equivariant). Extended-XYZ frames with
  ``Lattice=`` (and ``pbc=``) train in their periodic cells: the potentials find their neighbours
  among the periodic images ([`geomlin.models.edges`][]), and the checkpoint records
  ``periodic``. The Gaunt potential's ``avg_num_neighbors`` is measured on the training frames
  ([`mean_neighbors`][]).
* ``--dataset qm9``: molecules of different sizes, batched the PyTorch Geometric way (nodes
  concatenated, a ``batch`` vector; padded per batch for the dense models), fitting the QM9
  property ``--target`` (default ``U0``; any of
  [`geomlin.datasets.QM9_TARGETS`][geomlin.datasets.qm9.QM9_TARGETS], in PyG's units). Default data: the
  bundled 21-molecule sample ``datasets/qm9``; ``--root PATH`` reads a full QM9 folder (``--source`` picks MoleculeNet's SDF, the original XYZ files or qm9pack's tables;
  ``--source qm9pack`` without raw files in ``--root`` reads the installed ``qm9pack`` package and
  caches the processed set in ``--root``). ``--split standard`` is QM9's usual protocol, 110,000
  training, 10,000 validation and the remaining test molecules
  ([`qm9_split`][geomlin.datasets.qm9.qm9_split]).

On a trajectory, with $s$ the RMS force component of the training frames (their energies' spread
for data without forces) and $w_F$ the ``--force-weight``, the model and its loss on a batch of
$B$ frames of $N$ atoms are

$$E(x) = \bar E + s\, f(x), \qquad F(x) = -\nabla_x E(x), \qquad
\mathcal{L} = \frac{1}{B s^2} \sum_{b} \big(E(x_b) - E_b\big)^2
+ \frac{w_F}{3 B N s^2} \sum_{b, i} \big\lVert F_i(x_b) - F_{b i} \big\rVert^2.$$

On QM9 the prediction is

$$y(x, z) = b + \sum_i w_{z_i} + s\, f(x, z)$$

with the per-element baseline $w, b$ fitted by least squares on the training molecules (composition
alone explains most of an extensive property such as U0) and $s$ the RMS residual; the
loss is the mean squared error divided by $s^2$.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import torch
from torch import Tensor, nn

from geomlin.train.config import Option
from geomlin.train.errors import UserError
from geomlin.train.tasks.base import GraphSet, Stats, Task, TaskData, require_bundled, require_module, stat

#: The bundled trajectory and QM9 sample, under ``datasets/`` ([`bundled_path`][geomlin.train.tasks.base.bundled_path]).
BUNDLED_ETHANOL = Path("md") / "xtb_md_ethanol.npz"
BUNDLED_QM9 = Path("qm9")
TEST = "test"
VALID = "valid"
#: ``--split`` choices: random ``--num-train`` / ``--num-test`` counts, or QM9's 110k / 10k / rest.
SPLITS = ("counts", "standard")
#: QM9 property fitted when ``--target`` is not given.
DEFAULT_QM9_TARGET = "U0"
#: ``--num-train`` when not given, for data of at least 1000 examples (smaller data, such as the
#: bundled 21-molecule QM9 sample, train on what the test examples leave).
DEFAULT_NUM_TRAIN = 800
#: ``--num-test`` when not given, for data of at least 1000 examples (smaller data: a fifth of them).
DEFAULT_NUM_TEST = 200
#: ``--quick``'s training examples (at most: smaller data train on what the test examples leave).
QUICK_NUM_TRAIN = 64
#: ``--quick``'s test examples (at most: smaller data test on a fifth of them).
QUICK_NUM_TEST = 32
#: Interaction cutoff (Angstrom) of the task's potentials (their default), for the neighbour statistics.
CUTOFF = 5.0
#: Training frames (or molecules) whose neighbours are counted for ``avg_num_neighbors``.
NEIGHBOR_FRAMES = 64


def split_counts(m: int, num_train: int | None, num_test: int | None,
                 defaults: tuple[int, int] = (DEFAULT_NUM_TRAIN, DEFAULT_NUM_TEST)) -> tuple[int, int]:
    """``(num_train, num_test)`` for data of ``m`` examples; ``None`` takes the default.

    The defaults are ``defaults`` ([`DEFAULT_NUM_TRAIN`][] and [`DEFAULT_NUM_TEST`][]; ``--quick``:
    [`QUICK_NUM_TRAIN`][] and [`QUICK_NUM_TEST`][]) where the data hold them; for fewer examples the
    test set gets a fifth (at least one) and training the rest. Counts given that do not fit raise
    [`UserError`][] naming both.
    """
    default_train, default_test = defaults
    if num_test is None and num_train is None and m < 2:
        raise UserError(f"the data hold {m} example(s), too few for a training and a test example")
    if num_test is None:
        if num_train is not None and num_train >= m:
            raise UserError(f"--num-train {num_train} leaves no test example of the {m} examples of the data")
        room = m - (num_train or 1)
        num_test = min(default_test, max(1, m // 5), room)
    if num_train is None:
        if num_test >= m:
            raise UserError(f"--num-test {num_test} leaves no training example of the {m} examples of the data")
        num_train = min(default_train, m - num_test)
    if num_train + num_test > m:
        raise UserError(f"--num-train {num_train} + --num-test {num_test} exceeds the {m} examples of the data")
    return num_train, num_test


def mean_neighbors(frames: list[Tensor], cell: Tensor | None = None, pbc: Tensor | None = None,
                   most: int = NEIGHBOR_FRAMES) -> float:
    """Mean number of neighbours within [`CUTOFF`][] of an atom over the first ``most`` frames ``(n, 3)``
    (in their periodic cells ``(M, 3, 3)`` with ``pbc (M, 3)`` when given): the ``avg_num_neighbors``
    that normalises the Gaunt potential's messages (at least 1)."""
    from geomlin.neighbors import neighbor_list

    edges = atoms = 0
    for k, pos in enumerate(frames[:most]):
        frame_cell = None if cell is None else cell[k].double()
        index, _ = neighbor_list(pos.double(), CUTOFF, cell=frame_cell, pbc=None if pbc is None else pbc[k])
        edges, atoms = edges + index.shape[1], atoms + pos.shape[0]
    return max(edges / max(atoms, 1), 1.0)


def fit_composition_baseline(z: list[Tensor], y: Tensor, num_species: int) -> tuple[float, Tensor, float]:
    """Least-squares ``y_m ~ b + sum_{i in m} w[z_i]`` over molecules: ``(b, w (num_species,), RMS residual)``.

    ``z`` holds each molecule's atomic numbers, ``y (M,)`` the targets (float64). The minimum-norm
    solution is taken when some element never occurs (``torch.linalg.lstsq`` with ``gelsd``).
    """
    counts = torch.stack([torch.bincount(zi, minlength=num_species) for zi in z]).to(torch.float64)
    design = torch.cat([torch.ones(len(z), 1, dtype=torch.float64), counts], dim=1)
    sol = torch.linalg.lstsq(design, y.to(torch.float64)[:, None], driver="gelsd").solution[:, 0]
    residual = y.to(torch.float64) - design @ sol
    rms = float(residual.pow(2).mean().sqrt())
    return float(sol[0]), sol[1:], rms


class MoleculesTask(Task):
    """``geomlin train molecules``.

    ``--dataset md``: fields ``pos (M, N, 3)``, ``forces (M, N, 3)`` float32, ``z (M, N)`` int64,
    ``energy (M,)`` float64 (periodic frames: ``cell (M, 3, 3)`` float32 and ``pbc (M, 3)`` bool); metrics ``energy_mae`` and ``force_mae`` (data units) on ``test``.
    ``--dataset qm9``: a [`GraphSet`][] of molecules ``pos (n, 3)``, ``z (n,)``, ``energy (1,)``
    (the ``--target`` property); metric ``mae`` (the target's unit) on ``test``.
    """

    name = "molecules"
    description = "energy and force regression on a molecular-dynamics trajectory, or a QM9 property"
    options = (
        Option("dataset", str, "md", "md (the bundled ethanol trajectory or --data FILE) or qm9 (molecules of "
               "different sizes: the bundled 21-molecule sample or --root PATH)", ("md", "qm9")),
        Option("data", str, None, "an MD17 / rMD17 .npz or extended-XYZ file (--dataset md; default: the "
               "bundled ethanol trajectory)"),
        Option("root", str, None, "QM9 folder holding the raw files of --source (--dataset qm9; default: the "
               "bundled sample datasets/qm9); the processed set is cached in ROOT/processed"),
        Option("source", str, "auto", "QM9 files to read (--dataset qm9): auto (the first found in --root), "
               "moleculenet (gdb9.sdf + gdb9.sdf.csv), xyz (dsgdb9nsd_*.xyz or their .tar.bz2) or qm9pack (its "
               "CSV tables in --root, else the installed qm9pack package)", ("auto", "moleculenet", "xyz", "qm9pack")),
        Option("split", str, "counts", "counts: --num-train and --num-test examples at random; standard "
               "(--dataset qm9 --root): QM9's 110,000 train / 10,000 valid / rest test", SPLITS),
        Option("target", str, None, f"QM9 property to fit (--dataset qm9; default {DEFAULT_QM9_TARGET}; any name of "
               "geomlin.datasets.QM9_TARGETS: mu, alpha, homo, lumo, gap, r2, zpve, U0, U, H, G, cv, ...)"),
        Option("num_train", int, None, f"training examples (frames or molecules; default {DEFAULT_NUM_TRAIN}, or "
               "what the data hold beside the test examples)", minimum=1),
        Option("num_test", int, None, f"test examples (default {DEFAULT_NUM_TEST}, or a fifth of smaller data)",
               minimum=1),
        Option("force_weight", float, 10.0, "weight of the force term of the loss (0 = energy only, which also "
               "accepts data without forces; --dataset md)", minimum=0.0),
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
        if cfg.get("dataset") == "qm9":
            if cfg.get("split") == "standard":  # the split fixes the sizes
                return {"epochs": 1, "batch_size": 8}
            return {"epochs": 1, "num_train": 16, "num_test": 5, "batch_size": 8}
        return {"epochs": 1}  # the counts: at most QUICK_NUM_TRAIN / QUICK_NUM_TEST, what the data hold (_split)

    def _net_class(self, name: str):
        models = require_module("geomlin.models", "the molecule models")
        return {"egnn": models.EGNNPotential, "gaunt": models.GauntPotential, "ponita": models.PonitaPotential}[name]

    def validate(self, cfg: dict) -> None:
        qm9 = cfg["dataset"] == "qm9"
        for key, needs in (("data", "md"), ("root", "qm9"), ("target", "qm9")):
            if cfg.get(key) is not None and cfg["dataset"] != needs:
                raise UserError(f"--{key} applies to --dataset {needs}, not --dataset {cfg['dataset']}")
        if cfg.get("source", "auto") != "auto" and not qm9:
            raise UserError(f"--source applies to --dataset qm9, not --dataset {cfg['dataset']}")
        if cfg.get("split", "counts") == "standard":
            if not qm9 or not cfg.get("root"):
                raise UserError("--split standard is QM9's 110,000 / 10,000 / rest protocol: it needs --dataset qm9 "
                                "and --root with the whole dataset")
            defaults = {o.name: o.default for o in self.options}
            given = [n for n in ("num_train", "num_test") if cfg.get(n, defaults[n]) != defaults[n]]
            if given:
                raise UserError(f"--split standard fixes the split sizes; drop --{given[0].replace('_', '-')} "
                                "(or use --split counts)")
        if cfg.get("data") and not Path(cfg["data"]).is_file():
            raise UserError(f"data file not found: {cfg['data']}")
        if cfg.get("root") and not Path(cfg["root"]).is_dir():
            if cfg.get("source") != "qm9pack" or Path(cfg["root"]).exists():
                raise UserError(f"--root {cfg['root']} is not a folder")
            # the installed qm9pack holds the raw tables; --root is only where the processed set is cached
            Path(cfg["root"]).mkdir(parents=True)
        if qm9:
            from geomlin.datasets.qm9 import target_index

            try:
                target_index(cfg.get("target") or DEFAULT_QM9_TARGET)
            except ValueError as exc:
                raise UserError(f"--target: {exc}") from None
        # the metric and whether evaluation needs autograd depend on the dataset
        self.primary_metric = f"{TEST}_mae" if qm9 else f"{TEST}_force_mae"
        self.eval_needs_grad = not qm9

    # ---------------------------------------------------------------- data
    def _load(self, cfg: dict) -> dict[str, Tensor]:
        path = Path(cfg["data"]) if cfg.get("data") else require_bundled(BUNDLED_ETHANOL, "--data FILE")
        ds = require_module("geomlin.datasets", "reading trajectories")
        try:
            if path.suffix.lower() == ".npz":
                from geomlin.datasets.md17 import MD17_UNITS, read_npz_trajectory

                raw = read_npz_trajectory(path, require_forces=False)
                pos = torch.from_numpy(raw["pos"]).double()
                d = {"pos": pos, "z": torch.from_numpy(raw["z"]).long().expand(pos.shape[0], -1).clone(),
                     "energy_unit": MD17_UNITS["energy"], "length_unit": MD17_UNITS["pos"],
                     "energy": torch.from_numpy(raw["energy"]).double().reshape(-1)}
                if raw["force"] is not None:
                    d["forces"] = torch.from_numpy(raw["force"]).double().reshape(pos.shape)
                return self._check_forces(d, path, cfg)
            data = ds.XYZDataset(str(path))
        except (ValueError, OSError) as exc:
            raise UserError(f"cannot read {path}: {str(exc).splitlines()[0]}") from None
        frames = [data[i] for i in range(len(data))]
        if any(getattr(f, "energy", None) is None for f in frames):
            raise UserError(f"{path}: every frame needs an energy for this task")
        with_forces = [getattr(f, "force", None) is not None for f in frames]
        if any(with_forces) and not all(with_forces):
            raise UserError(f"{path}: frame {with_forces.index(False)} has no forces but frame "
                            f"{with_forces.index(True)} has; give every frame forces, or none (with --force-weight 0)")
        if len({int(f.pos.shape[0]) for f in frames}) != 1:
            raise UserError(f"{path}: all frames must have the same atoms for --dataset md (molecules of "
                            "different sizes: --dataset qm9)")
        d = {"pos": torch.stack([f.pos for f in frames]).double(),
             "z": torch.stack([f.z for f in frames]).long(),
             "energy": torch.cat([f.energy.reshape(-1) for f in frames]).double()}
        if all(with_forces):
            d["forces"] = torch.stack([f.force for f in frames]).double()
        if getattr(frames[0], "cell", None) is not None:  # periodic frames (every frame has a cell, or none)
            d["cell"] = torch.cat([f.cell for f in frames]).double()
            d["pbc"] = torch.cat([f.pbc for f in frames]).bool()
        return self._check_forces(d, path, cfg)

    @staticmethod
    def _check_forces(d: dict[str, Tensor], path: Path, cfg: dict) -> dict[str, Tensor]:
        """Data without forces train on energies alone, which ``--force-weight 0`` asks for explicitly."""
        if "forces" not in d and cfg["force_weight"] != 0:
            raise UserError(f"{path} has energies but no forces; pass --force-weight 0 to train on energies alone")
        return d

    def _split(self, m: int, cfg: dict) -> dict[str, Tensor]:
        """Indices of the training and test examples of ``m``; the counts used are written back into ``cfg``
        (so the run's config, card and ``--resume`` hold them, not ``None``)."""
        defaults = (QUICK_NUM_TRAIN, QUICK_NUM_TEST) if cfg.get("quick") else (DEFAULT_NUM_TRAIN, DEFAULT_NUM_TEST)
        num_train, num_test = split_counts(m, cfg.get("num_train"), cfg.get("num_test"), defaults)
        cfg["num_train"], cfg["num_test"] = num_train, num_test
        perm = torch.randperm(m, generator=torch.Generator().manual_seed(cfg["seed"]))
        return {"train": perm[:num_train], TEST: perm[num_train:num_train + num_test]}

    def build_data(self, cfg: dict) -> TaskData:
        if cfg["dataset"] == "qm9":
            return self._build_qm9(cfg)
        d = self._load(cfg)
        d["path"] = cfg.get("data") or str(BUNDLED_ETHANOL)
        if not all(torch.isfinite(v).all() for k, v in d.items() if k in ("energy", "forces")):
            raise UserError("the trajectory has NaN or infinite energies/forces")
        split = self._split(d["pos"].shape[0], cfg)
        fields = {k: {"pos": d["pos"][i].float(), "z": d["z"][i], "energy": d["energy"][i],
                      **({"forces": d["forces"][i].float()} if "forces" in d else {}),
                      **({"cell": d["cell"][i].float(), "pbc": d["pbc"][i]} if "cell" in d else {})}
                  for k, i in split.items()}
        tr = fields["train"]
        # the energy unit of the standardised loss: the RMS force component, or without forces the
        # spread of the training energies
        scale = float(tr["forces"].double().pow(2).mean().sqrt() if "forces" in tr else tr["energy"].std(correction=0))
        self.primary_metric = f"{TEST}_force_mae" if "forces" in tr else f"{TEST}_energy_mae"
        self.eval_needs_grad = "forces" in tr
        # units: MD17's for an .npz (the reader's convention), none for an XYZ file, which does not state them;
        # the species index of an atom is its atomic number
        info = {"energy_mean": float(tr["energy"].mean()), "scale": scale if scale > 0 else 1.0,
                "num_species": int(d["z"].max()) + 1, "num_atoms": int(d["pos"].shape[1]),
                "frames": int(d["pos"].shape[0]), "dataset": "md", "data": d["path"],
                "atomic_numbers": sorted(set(d["z"].reshape(-1).tolist())), "periodic": "cell" in d,
                "avg_num_neighbors": mean_neighbors(list(tr["pos"].double()), tr.get("cell"), tr.get("pbc"))}
        info.update({k: d[k] for k in ("energy_unit", "length_unit") if k in d})
        return TaskData(train=fields["train"], evals={TEST: fields[TEST]}, info=info)

    def _build_qm9(self, cfg: dict) -> TaskData:
        from torch_geometric.data import Data

        from geomlin.datasets.qm9 import QM9, QM9_TARGETS, target_index

        bundled = not cfg.get("root")
        root = require_bundled(BUNDLED_QM9, "--root PATH") if bundled else Path(cfg["root"])
        try:
            ds = QM9(root, cache=not bundled, source=cfg.get("source", "auto"),
                     progress=None if cfg.get("progress", True) else False)
        except (FileNotFoundError, ValueError, OSError) as exc:
            raise UserError(f"cannot read QM9 from {root}: {str(exc).splitlines()[0]}") from None
        target = cfg.get("target") or DEFAULT_QM9_TARGET
        k = target_index(target)
        data, slices = ds._data, ds.slices
        sizes = slices["z"].diff().tolist()
        pos, z = data.pos.double().split(sizes), data.z.split(sizes)
        y = data.y[:, k].double()
        if not torch.isfinite(y).all():
            raise UserError(f"QM9 target {target} has NaN or infinite values")
        if cfg.get("split") == "standard":
            from geomlin.datasets.qm9 import qm9_split

            try:
                parts = qm9_split(len(sizes), seed=cfg["seed"])
            except ValueError as exc:
                raise UserError(f"--split standard: {exc}") from None
            split = {"train": parts["train"], VALID: parts["val"], TEST: parts["test"]}
        else:
            split = self._split(len(sizes), cfg)
        num_species = int(data.z.max()) + 1
        train = split["train"].tolist()
        mean, ref, rms = fit_composition_baseline([z[i] for i in train], y[split["train"]], num_species)

        def graphs(index):
            return GraphSet(Data(pos=pos[i].float(), z=z[i], energy=y[i].reshape(1)) for i in index.tolist())

        info = {"energy_mean": mean, "scale": rms if rms > 0 else 1.0, "atom_energies": ref.tolist(),
                "avg_num_neighbors": mean_neighbors([pos[i] for i in train]), "num_species": num_species, "dataset": "qm9", "target": QM9_TARGETS[k][0],
                "unit": QM9_TARGETS[k][3], "molecules": len(sizes), "max_atoms": max(sizes),
                "atomic_numbers": sorted(set(data.z.tolist()))}
        if QM9_TARGETS[k][3] == "eV":  # an energy target: a potential in eV
            info.update(energy_unit="eV", length_unit="Angstrom")
        evals = {name: graphs(split[name]) for name in (VALID, TEST) if name in split}
        return TaskData(train=graphs(split["train"]), evals=evals, info=info)

    def build_model(self, name: str, cfg: dict, info: dict) -> nn.Module:
        if name not in self.models:
            raise UserError(f"unknown model '{name}' for task molecules")
        extra = {"avg_num_neighbors": info["avg_num_neighbors"]} if name == "gaunt" and "avg_num_neighbors" in info else {}
        net = self._net_class(name)(num_species=info["num_species"], **extra)
        models = require_module("geomlin.models", "the molecule models")
        return models.MoleculeEnergyModel(net, info.get("energy_mean", 0.0), info.get("scale", 1.0),
                                   info.get("atom_energies"))

    @staticmethod
    def _dense(batch) -> tuple[Tensor, Tensor, Tensor]:
        """A PyG batch of molecules as padded ``pos (B, N, 3)``, ``z (B, N)`` and ``mask (B, N)``.

        ``N`` is the batch's largest molecule, ``batch.max_num_nodes`` (set on the host by
        ``GraphSet.batch``), so padding reads nothing back from the device
        ([`geomlin.batching.to_padded`][]).
        """
        from geomlin.batching import layout_of, to_padded

        layout = layout_of(batch, max_items=int(batch.max_num_nodes))
        pos, mask = to_padded(batch.pos, layout)
        z, _ = to_padded(batch.z, layout)
        return pos, z, mask

    def _errors(self, model: nn.Module, batch) -> tuple[Tensor, Tensor | None, Tensor]:
        """Standardised energy and force errors of a batch, and the scale that undoes the standardisation."""
        inner = getattr(model, "module", model)
        if isinstance(batch, dict):
            cell = {"cell": batch["cell"], "pbc": batch["pbc"]} if "cell" in batch else {}
            e, f = model(batch["pos"], batch["z"], compute_forces="forces" in batch, **cell)
            target_e, target_f = batch["energy"], batch.get("forces")
        else:
            pos, z, mask = self._dense(batch)
            e, f = model(pos, z, mask=mask, compute_forces=False)
            target_e, target_f = batch.energy, None
        scale = inner.scale.to(e.dtype)
        df = None if f is None else (f - target_f) / scale
        return (e - target_e.to(e.dtype)) / scale, df, scale

    def train_step(self, name: str, model: nn.Module, batch, cfg: dict) -> tuple[Tensor, Stats]:
        de, df, scale = self._errors(model, batch)
        n = de.shape[0]
        loss = (de ** 2).mean()
        if df is None:
            key = "mae" if cfg["dataset"] == "qm9" else "energy_mae"
            return loss, {"loss": stat(loss * n, n), key: stat(de.abs().sum() * scale, n)}
        loss = loss + cfg["force_weight"] * (df ** 2).mean()
        return loss, {"loss": stat(loss * n, n), "energy_mae": stat(de.abs().sum() * scale, n),
                      "force_mae": stat(df.abs().sum() * scale, df.numel())}

    def eval_step(self, name: str, model: nn.Module, batch, cfg: dict) -> Stats:
        de, df, scale = self._errors(model, batch)
        de = de.detach()
        if df is None:
            return {"mae" if cfg["dataset"] == "qm9" else "energy_mae": stat(de.abs().sum() * scale, de.shape[0])}
        df = df.detach()
        return {"energy_mae": stat(de.abs().sum() * scale, de.shape[0]),
                "force_mae": stat(df.abs().sum() * scale, df.numel())}

    def summary_lines(self, last: dict, model_names: list[str]) -> list[str]:
        if any(f"{n}/{TEST}_mae" in last for n in model_names):
            lines = ["\nTest mean absolute error of the QM9 target:"]
            lines += [f"  {n:<6} {last[f'{n}/{TEST}_mae']:.4g}" for n in model_names if f"{n}/{TEST}_mae" in last]
            return lines
        lines = [("\nTest mean absolute errors (energy per molecule, force per component, in the data's units: "
                  "kcal/mol and kcal/mol/Angstrom for the bundled trajectories):")]
        for n in model_names:
            e, f = last.get(f"{n}/{TEST}_energy_mae"), last.get(f"{n}/{TEST}_force_mae")
            if e is not None:
                lines.append(f"  {n:<6} energy {e:.4g}" + (f"   forces {f:.4g}" if f is not None else ""))
        return lines
