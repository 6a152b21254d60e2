"""Benchmark: geomlin's molecular potentials against MACE on the same data, steps and wall time.

On the bundled GFN2-xTB trajectories (``datasets/md/xtb_md_ethanol.npz``, ``xtb_md_aspirin.npz``)
every model gets the same training frames, the same batches in the same order, the same loss
(``(MSE(E) + force_weight MSE(F)) / scale^2`` with ``scale`` the RMS training force component,
forces ``-dE/dpos`` by autograd), the same optimiser (Adam, constant learning rate) and

* the same number of optimiser steps, then
* the same wall time (each model trains for ``--seconds`` from a fresh initialisation),

and is evaluated on the same test frames: energy and force MAE (kcal/mol, kcal/mol/Angstrom),
parameters, the median training step time, and the median time of one MD step (energy and
forces of one frame, neighbour search included, as a simulation calls it).

geomlin's models are built as ``geomlin train molecules`` builds them (their default sizes,
:class:`~geomlin.models.MoleculeEnergyModel` with the mean energy and force scale).
MACE (``mace-torch``) pins its own e3nn, so it runs in its own virtualenv: pass its Python with
``--mace-python PATH`` (or ``GEOMLIN_MACE_PYTHON``); this script then runs itself there as a
worker on the same split file (``--mace-worker``), sequentially after geomlin's models (the
two cannot share a process). Without it MACE is reported as not installed. The MACE model is a
small CPU configuration of its standard architecture (see :data:`MACE_CONFIG`), with its
atomic-energy shift and scale set the same way as geomlin's.

    python benchmarks/bench_molecules.py [--quick] [--mace-python .venv-mace/bin/python]
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import harness
import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
#: Molecules and their bundled trajectories.
MOLECULES = {"ethanol": ROOT / "datasets" / "md" / "xtb_md_ethanol.npz",
             "aspirin": ROOT / "datasets" / "md" / "xtb_md_aspirin.npz"}
#: geomlin models (names of ``geomlin train molecules --model``).
GEOMLIN_MODELS = ("gaunt", "ponita", "egnn")
#: Shared training settings: geomlin train molecules' defaults (lr, batch size, force weight).
TRAIN = {"lr": 2e-3, "batch_size": 32, "force_weight": 10.0}
#: Sizes of the full run and of --quick.
FULL = {"num_train": 800, "num_test": 200, "steps": 200, "seconds": 45.0, "md_repeats": 20}
QUICK = {"num_train": 64, "num_test": 32, "steps": 6, "seconds": 3.0, "md_repeats": 3, "batch_size": 8}
#: MACE's configuration: the architecture of MACE's papers (Bessel radial basis, polynomial cutoff,
#: residual agnostic interaction blocks, correlation 3) at a width a 2-core CPU trains.
MACE_CONFIG = {"r_max": 5.0, "num_bessel": 8, "num_polynomial_cutoff": 5, "max_ell": 3, "num_interactions": 2,
               "hidden_irreps": "32x0e + 32x1o", "MLP_irreps": "16x0e", "correlation": 3}
SEED = 0


# ------------------------------------------------------------------------------------------ data
def make_split(path: Path, num_train: int, num_test: int, batch_size: int, steps: int) -> dict:
    """Train / test frames and the batch order of ``steps`` optimiser steps, as numpy arrays."""
    d = np.load(path)
    pos, energy, force = d["coords"], d["energies"], d["forces"]
    rng = np.random.default_rng(SEED)
    perm = rng.permutation(pos.shape[0])
    train, test = perm[:num_train], perm[num_train:num_train + num_test]
    epochs = math.ceil(steps * batch_size / num_train) + 1
    order = np.concatenate([rng.permutation(num_train) for _ in range(epochs)])
    batches = order[:steps * batch_size].reshape(steps, batch_size)
    return {"z": d["nuclear_charges"].astype(np.int64), "pos_train": pos[train], "energy_train": energy[train],
            "force_train": force[train], "pos_test": pos[test], "energy_test": energy[test],
            "force_test": force[test], "batches": batches}


def scales(split: dict) -> tuple[float, float]:
    """(mean training energy, RMS training force component): the energy shift and scale of every model."""
    return float(split["energy_train"].mean()), float(np.sqrt((split["force_train"] ** 2).mean()))


# ------------------------------------------------------------------------ one training protocol
def train_and_evaluate(model, energy_and_forces, split: dict, steps: int, seconds: float, lr: float,
                       force_weight: float, md_repeats: int, progress: str) -> dict:
    """Train ``model`` on ``split``'s batches (by steps, or by wall time when ``seconds``) and evaluate it.

    ``energy_and_forces(pos (B, N, 3) float32, training) -> (E (B,), F (B, N, 3))`` is the model's
    call (the geomlin wrapper or the MACE graph builder); everything else is shared.
    """
    from tqdm import tqdm

    _, scale = scales(split)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    pos_tr = torch.from_numpy(split["pos_train"]).float()
    e_tr = torch.from_numpy(split["energy_train"]).double()
    f_tr = torch.from_numpy(split["force_train"]).float()
    batches = torch.from_numpy(split["batches"])
    step_times = []
    model.train()
    start = time.perf_counter()
    bar = tqdm(total=steps if not seconds else None, desc=progress, file=sys.stderr, leave=False)
    k = 0
    while (time.perf_counter() - start < seconds) if seconds else (k < steps):
        idx = batches[k % len(batches)]
        t0 = time.perf_counter()
        e, f = energy_and_forces(pos_tr[idx], True)
        loss = ((e.double() - e_tr[idx]).pow(2).mean() + force_weight * (f - f_tr[idx]).pow(2).mean()) / scale**2
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step_times.append(time.perf_counter() - t0)
        k += 1
        bar.update(1)
    bar.close()
    model.eval()
    pos_te = torch.from_numpy(split["pos_test"]).float()
    e_err, f_err = [], []
    for chunk in torch.arange(pos_te.shape[0]).split(TRAIN["batch_size"]):
        e, f = energy_and_forces(pos_te[chunk], False)
        e_err.append((e.double().detach() - torch.from_numpy(split["energy_test"][chunk.numpy()])).abs())
        f_err.append((f.detach() - torch.from_numpy(split["force_test"][chunk.numpy()]).float()).abs().flatten())
    frame = pos_te[:1]
    md = harness.measure({"md": lambda: energy_and_forces(frame, False)}, repeats=md_repeats)["md"]
    warm = step_times[1:] or step_times
    return {"steps": k, "energy_mae": float(torch.cat(e_err).mean()), "force_mae": float(torch.cat(f_err).mean()),
            "params": sum(p.numel() for p in model.parameters()), "step_s": statistics.median(warm),
            "md_step_s": md}


# --------------------------------------------------------------------------------- geomlin side
def geomlin_model(name: str, split: dict):
    """The model ``geomlin train molecules --model NAME`` builds for this data, and its call."""
    from geomlin.train.tasks import get_task

    task = get_task("molecules")
    mean, scale = scales(split)
    info = {"energy_mean": mean, "scale": scale, "num_species": int(split["z"].max()) + 1}
    model = task.build_model(name, {}, info)
    z = torch.from_numpy(split["z"])

    def energy_and_forces(pos, training):
        # the wrapper keeps the force graph when the model is in training mode
        return model(pos, z.expand(pos.shape[0], -1))

    return model, energy_and_forces


# ------------------------------------------------------------------------------------ MACE side
def mace_model(split: dict):
    """MACE (``mace.modules.ScaleShiftMACE``) for this data, and its call on padded frames."""
    from e3nn import o3
    from mace import modules

    z_list = sorted(set(split["z"].tolist()))
    node_attrs = torch.nn.functional.one_hot(torch.tensor([z_list.index(v) for v in split["z"]]),
                                             len(z_list)).float()
    mean, scale = scales(split)
    n = len(split["z"])
    cfg = MACE_CONFIG
    pos0 = torch.from_numpy(split["pos_train"]).float()
    degree = float(((torch.cdist(pos0, pos0) < cfg["r_max"]).sum(-1) - 1).float().mean())
    model = modules.ScaleShiftMACE(
        r_max=cfg["r_max"], num_bessel=cfg["num_bessel"], num_polynomial_cutoff=cfg["num_polynomial_cutoff"],
        max_ell=cfg["max_ell"], interaction_cls=modules.interaction_classes["RealAgnosticResidualInteractionBlock"],
        interaction_cls_first=modules.interaction_classes["RealAgnosticResidualInteractionBlock"],
        num_interactions=cfg["num_interactions"], num_elements=len(z_list),
        hidden_irreps=o3.Irreps(cfg["hidden_irreps"]), MLP_irreps=o3.Irreps(cfg["MLP_irreps"]),
        atomic_energies=np.zeros(len(z_list)), avg_num_neighbors=degree, atomic_numbers=z_list,
        correlation=cfg["correlation"], gate=torch.nn.functional.silu,
        atomic_inter_scale=scale, atomic_inter_shift=mean / n)

    def energy_and_forces(pos, training):
        b = pos.shape[0]
        flat = pos.reshape(b * n, 3).clone()
        d = torch.cdist(pos, pos)
        within = (d < cfg["r_max"]) & ~torch.eye(n, dtype=torch.bool)
        g, i, j = within.nonzero(as_tuple=True)
        edge_index = torch.stack([g * n + i, g * n + j])
        data = {"positions": flat, "node_attrs": node_attrs.repeat(b, 1), "edge_index": edge_index,
                "shifts": torch.zeros(edge_index.shape[1], 3), "unit_shifts": torch.zeros(edge_index.shape[1], 3),
                "cell": torch.zeros(b, 3, 3), "batch": torch.arange(b).repeat_interleave(n),
                "ptr": torch.arange(b + 1) * n, "head": torch.zeros(b, dtype=torch.long)}
        out = model(data, training=training, compute_force=True)
        return out["energy"], out["forces"].reshape(b, n, 3)

    return model, energy_and_forces


def mace_worker(split_path: str, out_path: str) -> None:
    """Run inside MACE's virtualenv: train and evaluate MACE on the split file, write JSON."""
    import mace

    args = json.loads(Path(split_path).with_suffix(".json").read_text())
    torch.set_num_threads(args["threads"])
    split = dict(np.load(split_path))
    results = {"version": getattr(mace, "__version__", "installed")}
    for regime in ("steps", "seconds"):
        torch.manual_seed(SEED)
        model, call = mace_model(split)
        results[regime] = train_and_evaluate(model, call, split, args["steps"],
                                             args["seconds"] if regime == "seconds" else 0.0, args["lr"],
                                             args["force_weight"], args["md_repeats"], f"mace ({regime})")
    Path(out_path).write_text(json.dumps(results))


def run_mace(python: str | None, split: dict, settings: dict, threads: int) -> dict | str:
    """MACE's results from its own virtualenv, or why there are none."""
    if not python:
        return "not installed (pass --mace-python or set GEOMLIN_MACE_PYTHON)"
    with tempfile.TemporaryDirectory() as tmp:
        split_path = Path(tmp) / "split.npz"
        np.savez(split_path, **split)
        split_path.with_suffix(".json").write_text(json.dumps({**settings, "threads": threads}))
        out = Path(tmp) / "mace.json"
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        proc = subprocess.run([python, __file__, "--mace-worker", str(split_path), str(out)], env=env,
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            return f"failed ({last[:200]})"
        return json.loads(out.read_text())


# ------------------------------------------------------------------------------------------ main
def _row(table, molecule, name, r):
    table.add(molecule, name, f"{r['params']:,}", r["steps"], f"{r['energy_mae']:.3f}", f"{r['force_mae']:.3f}",
              harness.ms(r["step_s"]), harness.ms(r["md_step_s"]))


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--mace-worker":
        mace_worker(sys.argv[2], sys.argv[3])
        return
    p = harness.parser(__doc__.split("\n")[0])
    p.add_argument("--mace-python", default=os.environ.get("GEOMLIN_MACE_PYTHON"),
                   help="Python of a virtualenv with mace-torch (default: $GEOMLIN_MACE_PYTHON)")
    p.add_argument("--molecules", default=",".join(MOLECULES), help="comma-separated subset of "
                   f"{', '.join(MOLECULES)}")
    args = p.parse_args()
    harness.setup(args, seed=SEED)
    sizes = {**FULL, **(QUICK if args.quick else {})}
    settings = {**TRAIN, **{k: v for k, v in sizes.items() if k in TRAIN}, "steps": sizes["steps"],
                "seconds": sizes["seconds"], "md_repeats": sizes["md_repeats"]}
    molecules = [m.strip() for m in args.molecules.split(",") if m.strip()]
    unknown = [m for m in molecules if m not in MOLECULES]
    if unknown or not molecules:
        raise SystemExit(f"--molecules must name some of {', '.join(MOLECULES)}, got {args.molecules!r}")
    print(harness.header("Molecular potentials: geomlin vs MACE at equal steps and equal wall time", args, None))
    print(f"{sizes['num_train']} training and {sizes['num_test']} test frames per molecule (GFN2-xTB, kcal/mol and "
          f"kcal/mol/Angstrom), batch {settings['batch_size']}, Adam lr {settings['lr']}, force weight "
          f"{settings['force_weight']}; MACE {MACE_CONFIG}. Step and MD-step times are medians of this run; "
          "MACE ran after geomlin's models in its own virtualenv.\n")
    columns = ["molecule", "model", "params", "steps", "energy MAE", "force MAE", "train step ms", "MD step ms"]
    tables = {"steps": harness.Table(columns), "seconds": harness.Table(columns)}
    for molecule in molecules:
        split = make_split(MOLECULES[molecule], sizes["num_train"], sizes["num_test"], settings["batch_size"],
                           sizes["steps"])
        for regime in ("steps", "seconds"):
            for name in GEOMLIN_MODELS:
                torch.manual_seed(SEED)
                model, call = geomlin_model(name, split)
                r = train_and_evaluate(model, call, split, sizes["steps"],
                                       sizes["seconds"] if regime == "seconds" else 0.0, settings["lr"],
                                       settings["force_weight"], sizes["md_repeats"], f"{molecule} {name} ({regime})")
                _row(tables[regime], molecule, f"geomlin {name}", r)
        mace = run_mace(args.mace_python, split, settings, args.threads)
        for regime in ("steps", "seconds"):
            if isinstance(mace, dict):
                _row(tables[regime], molecule, f"MACE {mace['version']}", mace[regime])
            else:
                tables[regime].add(molecule, "MACE", mace, "–", "–", "–", "–", "–")
    print(f"**Equal optimiser steps** ({sizes['steps']} steps each)\n")
    tables["steps"].print()
    print(f"**Equal wall time** ({sizes['seconds']:g} s of training each, from a fresh initialisation)\n")
    tables["seconds"].print()


if __name__ == "__main__":
    main()
