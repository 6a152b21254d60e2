"""Benchmark: geomlin's molecular potentials against MACE on the same data, steps and wall time.

Two kinds of data, one protocol each, the same for all four models (geomlin's Gaunt potential,
PONITA and EGNN, and MACE):

* **MD trajectories** (the bundled GFN2-xTB ``datasets/md/xtb_md_ethanol.npz``, ``xtb_md_aspirin.npz``):
  energies and forces. Every model gets the same training frames, the same batches in the same
  order, the same loss (``(MSE(E) + force_weight MSE(F)) / scale^2`` with ``scale`` the RMS training
  force component, forces ``-dE/dpos`` by autograd), the same optimiser (Adam, constant learning
  rate), and trains once for the same number of optimiser steps and once for the same wall time
  (each from a fresh initialisation). Evaluated on the same test frames: energy and force MAE
  (kcal/mol, kcal/mol/Angstrom), parameters, the median training step and the median MD step
  (energy and forces of one frame, neighbour search included, as a simulation calls it).
* **A fixed QM9 subset** (``--qm9-train`` training and ``--qm9-test`` test molecules drawn once with a
  fixed seed from the installed ``qm9pack``'s 130,831, target ``gap`` in eV): molecules of different
  sizes in padded batches, the loss ``MSE(y) / scale^2`` over a least-squares per-element baseline
  ``y ~ b + sum_i w[z_i]`` fitted on the training molecules (as ``geomlin train molecules --dataset
  qm9`` does; MACE gets ``w`` as its atomic energies and ``b`` added to its output), equal steps and
  equal wall time again; test MAE in eV.

Beside the tables, the share of a training step spent in tensor products, for the Gaunt potential
and for MACE (a few profiled steps on the ethanol frames, :func:`tensor_product_share`), and with
``--tune`` instead the grid that chose the models' defaults (:func:`tune`).

geomlin's models are built as ``geomlin train molecules`` builds them (their default sizes,
:class:`~geomlin.models.MoleculeEnergyModel` with the data's energy shift and scale). MACE
(``mace-torch``) pins its own e3nn, so it runs in its own virtualenv: pass its Python with
``--mace-python PATH`` (or ``GEOMLIN_MACE_PYTHON``); this script then runs itself there as a
worker on the same split files (``--mace-worker``), sequentially after geomlin's models (the two
cannot share a process). Without it MACE is reported as not installed. The MACE model is a small
CPU configuration of its standard architecture (see :data:`MACE_CONFIG`), with its atomic-energy
shift and scale set the same way as geomlin's.

``--datasets``, ``--regimes`` and ``--seconds`` pick a part of the run: e.g. ``--datasets aspirin
--regimes seconds --seconds 240`` compares the models on aspirin at a longer equal wall time alone.

    python benchmarks/bench_molecules.py [--quick] [--mace-python .venv-mace/bin/python] [--tune]
                                         [--datasets ethanol,aspirin,qm9] [--regimes steps,seconds] [--seconds S]
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
#: The QM9 subset's name in ``--datasets``.
QM9 = "qm9"
#: geomlin models (names of ``geomlin train molecules --model``).
GEOMLIN_MODELS = ("gaunt", "ponita", "egnn")
#: Shared training settings: geomlin train molecules' defaults (lr, batch size, force weight).
TRAIN = {"lr": 2e-3, "batch_size": 32, "force_weight": 10.0}
#: Sizes of the full run and of --quick (MD trajectories).
FULL = {"num_train": 800, "num_test": 200, "steps": 200, "seconds": 45.0, "md_repeats": 20}
QUICK = {"num_train": 64, "num_test": 32, "steps": 6, "seconds": 3.0, "md_repeats": 3, "batch_size": 8}
#: The QM9 subset: target, sizes, steps and seconds of the full run and of --quick.
QM9_FULL = {"target": "gap", "num_train": 10_000, "num_test": 1_000, "steps": 300, "seconds": 60.0}
QM9_QUICK = {"target": "gap", "num_train": 64, "num_test": 16, "steps": 4, "seconds": 2.0}
#: The two comparisons: the same number of optimiser steps, the same training wall time.
REGIMES = ("steps", "seconds")
#: Folder where the processed QM9 is cached (gitignored).
QM9_CACHE = ROOT / ".geomlin_cache" / "qm9"
#: Profiled training steps (after two warm-up steps) for the tensor-product share.
PROFILE_STEPS = {False: 5, True: 2}
#: MACE's configuration: the architecture of MACE's papers (Bessel radial basis, polynomial cutoff,
#: residual agnostic interaction blocks, correlation 3) at a width a 2-core CPU trains.
MACE_CONFIG = {"r_max": 5.0, "num_bessel": 8, "num_polynomial_cutoff": 5, "max_ell": 3, "num_interactions": 2,
               "hidden_irreps": "32x0e + 32x1o", "MLP_irreps": "16x0e", "correlation": 3}
SEED = 0
#: Labels of the profiled tensor products (record_function ranges).
CONV_TP, MANY_BODY_TP = "tensor product: convolution", "tensor product: many-body"
#: ``--tune``: the settings tried per model at the task's learning rate, then the learning rates tried
#: with each model's best setting; frames: the MD protocol's training frames of ethanol, split in
#: ``TUNE_SPLIT`` training / validation frames (the test frames are never seen).
TUNE_GRID = {
    "gaunt": [{"hidden_channels": c, "lmax": l, "correlation": nu} for c in (16, 32) for l in (2, 3) for nu in (2, 3)],
    "ponita": [{"hidden_channels": c, "num_blocks": b, "num_basis": c} for c in (64, 128) for b in (2, 4)],
    "egnn": [{"hidden_channels": c, "num_blocks": b} for c in (64, 128) for b in (3, 4)],
}
TUNE_LRS = (1e-3, 2e-3, 5e-3)
TUNE_SPLIT = (600, 200)


# ------------------------------------------------------------------------------------------ data
def make_split(path: Path, num_train: int, num_test: int, batch_size: int, steps: int) -> dict:
    """Train / test frames and the batch order of ``steps`` optimiser steps, as numpy arrays."""
    d = np.load(path)
    pos, energy, force = d["coords"], d["energies"], d["forces"]
    rng = np.random.default_rng(SEED)
    perm = rng.permutation(pos.shape[0])
    train, test = perm[:num_train], perm[num_train:num_train + num_test]
    return {"kind": np.array("md"), "z": d["nuclear_charges"].astype(np.int64), "pos_train": pos[train],
            "energy_train": energy[train], "force_train": force[train], "pos_test": pos[test],
            "energy_test": energy[test], "force_test": force[test],
            "batches": batch_order(rng, num_train, batch_size, steps)}


def batch_order(rng, num_train: int, batch_size: int, steps: int) -> np.ndarray:
    """``(steps, batch_size)`` training indices: epochs of random permutations, in order."""
    epochs = math.ceil(steps * batch_size / num_train) + 1
    order = np.concatenate([rng.permutation(num_train) for _ in range(epochs)])
    return order[:steps * batch_size].reshape(steps, batch_size)


def scales(split: dict) -> tuple[float, float]:
    """(mean training energy, RMS training force component): the energy shift and scale of every model."""
    return float(split["energy_train"].mean()), float(np.sqrt((split["force_train"] ** 2).mean()))


def make_qm9_split(root: Path, sizes: dict, batch_size: int) -> dict | str:
    """The fixed QM9 subset as padded numpy arrays, or why there is none.

    ``z (M, 29)``, ``pos (M, 29, 3)``, ``atoms (M,)`` and ``y (M,)`` for the training and test
    molecules (a permutation of the whole set with :data:`SEED`), the batch order, and the
    least-squares per-element baseline of the training molecules (``b``, ``w`` per atomic number,
    RMS residual) as ``geomlin train molecules --dataset qm9`` fits it.
    """
    from geomlin.datasets.io.qm9pack import installed_data_folder
    from geomlin.datasets.qm9 import QM9 as QM9Dataset
    from geomlin.datasets.qm9 import target_index
    from geomlin.train.tasks.molecules import fit_composition_baseline

    if installed_data_folder() is None:
        return "qm9pack not installed (pip install qm9pack)"
    root.mkdir(parents=True, exist_ok=True)
    ds = QM9Dataset(root, source="qm9pack", cache=True)
    data, slices = ds._data, ds.slices
    atoms = slices["z"].diff()
    rng = np.random.default_rng(SEED)
    perm = rng.permutation(len(atoms))
    picked = {"train": perm[:sizes["num_train"]], "test": perm[sizes["num_train"]:sizes["num_train"] + sizes["num_test"]]}
    width = int(atoms.max())
    y_all = data.y[:, target_index(sizes["target"])].double()
    out = {"kind": np.array(QM9), "batches": batch_order(rng, sizes["num_train"], batch_size, sizes["steps"])}
    for part, index in picked.items():
        z = np.zeros((len(index), width), dtype=np.int64)
        pos = np.zeros((len(index), width, 3), dtype=np.float32)
        for row, m in enumerate(index):
            a, b = int(slices["z"][m]), int(slices["z"][m + 1])
            z[row, :b - a] = data.z[a:b].numpy()
            pos[row, :b - a] = data.pos[a:b].numpy()
        out[f"z_{part}"], out[f"pos_{part}"] = z, pos
        out[f"atoms_{part}"], out[f"y_{part}"] = atoms[index].numpy(), y_all[index].numpy()
    num_species = int(data.z.max()) + 1
    b, w, rms = fit_composition_baseline([torch.from_numpy(z[:n]) for z, n in zip(out["z_train"], out["atoms_train"])],
                                         torch.from_numpy(out["y_train"]), num_species)
    out["baseline_b"], out["baseline_w"], out["baseline_rms"] = np.array(b), w.numpy(), np.array(rms)
    return out


def qm9_batch(split: dict, part: str, index) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``pos (B, n, 3)``, ``z (B, n)``, ``mask (B, n)``, ``y (B,)`` of molecules ``index``, padded to the
    largest of them."""
    index = np.asarray(index)
    atoms = split[f"atoms_{part}"][index]
    n = int(atoms.max())
    mask = torch.arange(n)[None, :] < torch.from_numpy(atoms)[:, None]
    return (torch.from_numpy(split[f"pos_{part}"][index, :n]), torch.from_numpy(split[f"z_{part}"][index, :n]),
            mask, torch.from_numpy(split[f"y_{part}"][index]))


# ------------------------------------------------------------------------ one training protocol
def train_loop(model, loss_of_batch, batches, steps: int, seconds: float, lr: float, progress: str) -> tuple[int, list]:
    """Adam on ``loss_of_batch(indices)`` over ``batches`` (by steps, or by wall time when ``seconds``);
    returns the steps taken and the time of each."""
    from tqdm import tqdm

    opt = torch.optim.Adam(model.parameters(), lr=lr)
    batches = torch.from_numpy(batches)
    step_times = []
    model.train()
    start = time.perf_counter()
    bar = tqdm(total=steps if not seconds else None, desc=progress, file=sys.stderr, leave=False)
    k = 0
    while (time.perf_counter() - start < seconds) if seconds else (k < steps):
        t0 = time.perf_counter()
        loss = loss_of_batch(batches[k % len(batches)])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step_times.append(time.perf_counter() - t0)
        k += 1
        bar.update(1)
    bar.close()
    model.eval()
    return k, step_times


def md_loss(energy_and_forces, split: dict, force_weight: float):
    """The MD protocol's loss of a batch of training frames."""
    _, scale = scales(split)
    pos_tr = torch.from_numpy(split["pos_train"]).float()
    e_tr = torch.from_numpy(split["energy_train"]).double()
    f_tr = torch.from_numpy(split["force_train"]).float()

    def loss(idx):
        e, f = energy_and_forces(pos_tr[idx], True)
        return ((e.double() - e_tr[idx]).pow(2).mean() + force_weight * (f - f_tr[idx]).pow(2).mean()) / scale ** 2

    return loss


def md_errors(energy_and_forces, pos, energy, force, batch_size: int) -> tuple[float, float]:
    """Energy and force MAE of frames ``pos`` (numpy) against their labels."""
    pos = torch.from_numpy(pos).float()
    e_err, f_err = [], []
    for chunk in torch.arange(pos.shape[0]).split(batch_size):
        e, f = energy_and_forces(pos[chunk], False)
        e_err.append((e.double().detach() - torch.from_numpy(energy[chunk.numpy()])).abs())
        f_err.append((f.detach() - torch.from_numpy(force[chunk.numpy()]).float()).abs().flatten())
    return float(torch.cat(e_err).mean()), float(torch.cat(f_err).mean())


def train_and_evaluate(model, energy_and_forces, split: dict, steps: int, seconds: float, lr: float,
                       force_weight: float, md_repeats: int, progress: str) -> dict:
    """Train ``model`` on ``split``'s batches (by steps, or by wall time when ``seconds``) and evaluate it.

    ``energy_and_forces(pos (B, N, 3) float32, training) -> (E (B,), F (B, N, 3))`` is the model's
    call (the geomlin wrapper or the MACE graph builder); everything else is shared.
    """
    k, step_times = train_loop(model, md_loss(energy_and_forces, split, force_weight), split["batches"], steps,
                               seconds, lr, progress)
    energy_mae, force_mae = md_errors(energy_and_forces, split["pos_test"], split["energy_test"], split["force_test"],
                                      TRAIN["batch_size"])
    frame = torch.from_numpy(split["pos_test"][:1]).float()
    md = harness.measure({"md": lambda: energy_and_forces(frame, False)}, repeats=md_repeats)["md"]
    warm = step_times[1:] or step_times
    return {"steps": k, "energy_mae": energy_mae, "force_mae": force_mae,
            "params": sum(p.numel() for p in model.parameters()), "step_s": statistics.median(warm), "md_step_s": md}


def train_and_evaluate_qm9(model, energy, split: dict, steps: int, seconds: float, lr: float, progress: str) -> dict:
    """The QM9 protocol: ``energy(pos, z, mask) -> (B,)`` in the target's unit; loss ``MSE / scale^2``."""
    scale = float(split["baseline_rms"])

    def loss(idx):
        pos, z, mask, y = qm9_batch(split, "train", idx.numpy())
        return (energy(pos, z, mask).double() - y).pow(2).mean() / scale ** 2

    k, step_times = train_loop(model, loss, split["batches"], steps, seconds, lr, progress)
    errors = []
    with torch.no_grad():
        for chunk in np.array_split(np.arange(len(split["y_test"])), max(1, len(split["y_test"]) // 64)):
            pos, z, mask, y = qm9_batch(split, "test", chunk)
            errors.append((energy(pos, z, mask).double() - y).abs())
    warm = step_times[1:] or step_times
    return {"steps": k, "mae": float(torch.cat(errors).mean()), "params": sum(p.numel() for p in model.parameters()),
            "step_s": statistics.median(warm)}


# ------------------------------------------------------------------------ tensor-product share
def tensor_product_share(events) -> dict:
    """Share of profiled CPU time spent in the ranges :data:`CONV_TP` and :data:`MANY_BODY_TP`, their
    backward passes included.

    The forward of a labelled range is its own time. Its backward is found by autograd's sequence
    numbers: a backward node (``autograd::engine::evaluate_function: ...``) carries the number of the
    forward operation it differentiates, so the nodes of the labelled operations are counted too,
    and so are, in turn, the nodes that differentiate those backward operations (the double backward
    of force training). Returns the share of each label and the profiled total in seconds.
    """
    events = sorted(events, key=lambda e: (e.time_range.start, -e.time_range.end))
    owner: dict = {}   # sequence number -> label
    counted: dict = {}  # id(event) -> label
    totals = {CONV_TP: 0.0, MANY_BODY_TP: 0.0}
    total = 0.0
    for ev in events:
        parent, label = ev.cpu_parent, None
        while parent is not None and label is None:
            label = counted.get(id(parent))
            parent = parent.cpu_parent
        if label is not None:  # inside a counted range: its operations belong to the label
            if ev.sequence_nr >= 0:
                owner[ev.sequence_nr] = label
            continue
        if ev.cpu_parent is None:
            total += ev.cpu_time_total
        if ev.name in totals:
            label = ev.name
        elif ev.name.startswith("autograd::engine::evaluate_function") and ev.sequence_nr in owner:
            label = owner[ev.sequence_nr]
        if label is not None:
            counted[id(ev)] = label
            totals[label] += ev.cpu_time_total
    return {"conv": totals[CONV_TP] / total, "many_body": totals[MANY_BODY_TP] / total, "total_s": total / 1e6}


def labelled(module, label: str) -> None:
    """Run every forward of ``module`` inside a profiler range named ``label``."""
    def enter(mod, args):
        mod._range = torch.autograd.profiler.record_function(label)
        mod._range.__enter__()

    def leave(mod, args, out):
        mod._range.__exit__(None, None, None)

    module.register_forward_pre_hook(enter)
    module.register_forward_hook(leave)


def profile_steps(model, loss_of_batch, batches, steps: int, lr: float) -> dict:
    """Tensor-product share over ``steps`` training steps, after two warm-up steps."""
    from torch.profiler import ProfilerActivity, profile

    opt = torch.optim.Adam(model.parameters(), lr=lr)
    batches = torch.from_numpy(batches)

    def step(k):
        loss = loss_of_batch(batches[k % len(batches)])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    model.train()
    for k in range(2):
        step(k)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        t0 = time.perf_counter()
        for k in range(steps):
            step(2 + k)
        wall = (time.perf_counter() - t0) / steps
    share = tensor_product_share(prof.events())
    return {**share, "step_s": wall}


# --------------------------------------------------------------------------------- geomlin side
def geomlin_model(name: str, split: dict, **sizes):
    """The model ``geomlin train molecules --model NAME`` builds for this data (or with other ``sizes``,
    for tuning), and its call."""
    from geomlin.models import MoleculeEnergyModel
    from geomlin.train.tasks import get_task

    task = get_task("molecules")
    mean, scale = scales(split)
    info = {"energy_mean": mean, "scale": scale, "num_species": int(split["z"].max()) + 1}
    model = (task.build_model(name, {}, info) if not sizes else
             MoleculeEnergyModel(task._net_class(name)(num_species=info["num_species"], **sizes), mean, scale))
    z = torch.from_numpy(split["z"])

    def energy_and_forces(pos, training):
        # the wrapper keeps the force graph when the model is in training mode
        return model(pos, z.expand(pos.shape[0], -1))

    return model, energy_and_forces


def geomlin_qm9_model(name: str, split: dict):
    """The model ``geomlin train molecules --dataset qm9 --model NAME`` builds, and its call on padded batches."""
    from geomlin.train.tasks import get_task

    task = get_task("molecules")
    info = {"energy_mean": float(split["baseline_b"]), "scale": float(split["baseline_rms"]),
            "atom_energies": split["baseline_w"].tolist(), "num_species": len(split["baseline_w"])}
    model = task.build_model(name, {}, info)

    def energy(pos, z, mask):
        return model(pos, z, mask=mask, compute_forces=False)[0]

    return model, energy


def label_gaunt_products(model):
    """Profiler ranges around the Gaunt potential's tensor products: the product of every convolution
    message and every many-body layer. Returns the call that removes the convolutions' ranges again."""
    from geomlin.gaunt import conv

    product = conv.gaunt_tensor_product

    def labelled_product(*args, **kwargs):
        with torch.autograd.profiler.record_function(CONV_TP):
            return product(*args, **kwargs)

    def restore():
        conv.gaunt_tensor_product = product

    conv.gaunt_tensor_product = labelled_product
    for layer in model.net.many_body:
        labelled(layer, MANY_BODY_TP)
    return restore


# ------------------------------------------------------------------------------------ MACE side
def build_mace(z_list: list, atomic_energies, avg_num_neighbors: float, scale: float, shift: float):
    """MACE's ``ScaleShiftMACE`` in the configuration :data:`MACE_CONFIG` (also used by ``bench_scaling.py``)."""
    from e3nn import o3
    from mace import modules

    cfg = MACE_CONFIG
    block = modules.interaction_classes["RealAgnosticResidualInteractionBlock"]
    return modules.ScaleShiftMACE(
        r_max=cfg["r_max"], num_bessel=cfg["num_bessel"], num_polynomial_cutoff=cfg["num_polynomial_cutoff"],
        max_ell=cfg["max_ell"], interaction_cls=block, interaction_cls_first=block,
        num_interactions=cfg["num_interactions"], num_elements=len(z_list),
        hidden_irreps=o3.Irreps(cfg["hidden_irreps"]), MLP_irreps=o3.Irreps(cfg["MLP_irreps"]),
        atomic_energies=np.asarray(atomic_energies, dtype=np.float64), avg_num_neighbors=avg_num_neighbors,
        atomic_numbers=z_list, correlation=cfg["correlation"], gate=torch.nn.functional.silu,
        atomic_inter_scale=scale, atomic_inter_shift=shift)


def _mace_graph(pos: torch.Tensor, mask: torch.Tensor, node_attrs: torch.Tensor) -> dict:
    """MACE's input dictionary for padded molecules ``pos (B, n, 3)`` with real atoms ``mask (B, n)``."""
    b, n, _ = pos.shape
    flat = pos[mask].clone()
    counts = mask.sum(dim=1)
    first = torch.cumsum(counts, 0) - counts
    slot = torch.cumsum(mask.flatten().long(), 0).view(b, n) - 1                  # index among the real atoms
    d = torch.cdist(pos, pos)
    within = (d < MACE_CONFIG["r_max"]) & ~torch.eye(n, dtype=torch.bool) & mask[:, :, None] & mask[:, None, :]
    g, i, j = within.nonzero(as_tuple=True)
    edge_index = torch.stack([slot[g, i], slot[g, j]])
    e = edge_index.shape[1]
    return {"positions": flat, "node_attrs": node_attrs, "edge_index": edge_index, "shifts": torch.zeros(e, 3),
            "unit_shifts": torch.zeros(e, 3), "cell": torch.zeros(b, 3, 3),
            "batch": torch.arange(b).repeat_interleave(counts), "ptr": torch.cat([first, counts.sum()[None]]),
            "head": torch.zeros(b, dtype=torch.long)}


def mace_model(split: dict):
    """MACE (``mace.modules.ScaleShiftMACE``) for this trajectory, and its call on padded frames."""
    z_list = sorted(set(split["z"].tolist()))
    node_attrs = torch.nn.functional.one_hot(torch.tensor([z_list.index(v) for v in split["z"]]),
                                             len(z_list)).float()
    mean, scale = scales(split)
    n = len(split["z"])
    pos0 = torch.from_numpy(split["pos_train"]).float()
    degree = float(((torch.cdist(pos0, pos0) < MACE_CONFIG["r_max"]).sum(-1) - 1).float().mean())
    model = build_mace(z_list, np.zeros(len(z_list)), degree, scale, mean / n)

    def energy_and_forces(pos, training):
        b = pos.shape[0]
        data = _mace_graph(pos, torch.ones(b, n, dtype=torch.bool), node_attrs.repeat(b, 1))
        out = model(data, training=training, compute_force=True)
        return out["energy"], out["forces"].reshape(b, n, 3)

    return model, energy_and_forces


def mace_qm9_model(split: dict):
    """MACE for the QM9 subset: the per-element baseline ``w`` as its atomic energies, ``b`` added to its
    output; its call on padded batches."""
    z_list = sorted(set(split["z_train"][split["z_train"] > 0].tolist()))
    index = torch.zeros(int(max(z_list)) + 1, dtype=torch.long)
    index[z_list] = torch.arange(len(z_list))
    pos, _, mask, _ = qm9_batch(split, "train", np.arange(min(1000, len(split["y_train"]))))
    d = torch.cdist(pos, pos)
    near = (d < MACE_CONFIG["r_max"]) & mask[:, :, None] & mask[:, None, :]
    degree = float((near.sum(-1)[mask] - 1).float().mean())
    model = build_mace(z_list, split["baseline_w"][z_list], degree, float(split["baseline_rms"]), 0.0)
    b = float(split["baseline_b"])

    def energy(pos, z, mask):
        attrs = torch.nn.functional.one_hot(index[z[mask]], len(z_list)).float()
        out = model(_mace_graph(pos, mask, attrs), training=model.training, compute_force=False)
        return out["energy"] + b

    return model, energy


def label_mace_products(model) -> None:
    """Profiler ranges around MACE's tensor products: each interaction's ``conv_tp`` and each product
    block's symmetric contraction."""
    for block in model.interactions:
        labelled(block.conv_tp, CONV_TP)
    for block in model.products:
        labelled(block.symmetric_contractions, MANY_BODY_TP)


def mace_worker(split_path: str, out_path: str) -> None:
    """Run inside MACE's virtualenv: train and evaluate MACE on the split file, write JSON."""
    import mace

    args = json.loads(Path(split_path).with_suffix(".json").read_text())
    torch.set_num_threads(args["threads"])
    split = dict(np.load(split_path))
    results = {"version": getattr(mace, "__version__", "installed")}
    qm9 = str(split["kind"]) == QM9
    for regime in args["regimes"]:
        torch.manual_seed(SEED)
        seconds = args["seconds"] if regime == "seconds" else 0.0
        if qm9:
            model, call = mace_qm9_model(split)
            results[regime] = train_and_evaluate_qm9(model, call, split, args["steps"], seconds, args["lr"],
                                                     f"mace qm9 ({regime})")
        else:
            model, call = mace_model(split)
            results[regime] = train_and_evaluate(model, call, split, args["steps"], seconds, args["lr"],
                                                 args["force_weight"], args["md_repeats"], f"mace ({regime})")
    if args.get("profile_steps") and not qm9:
        torch.manual_seed(SEED)
        model, call = mace_model(split)
        label_mace_products(model)
        results["profile"] = profile_steps(model, md_loss(call, split, args["force_weight"]), split["batches"],
                                           args["profile_steps"], args["lr"])
    Path(out_path).write_text(json.dumps(results))


def run_mace(python: str | None, split: dict, settings: dict, threads: int, script: str = __file__) -> dict | str:
    """MACE's results from its own virtualenv, or why there are none.

    Runs ``script --mace-worker SPLIT OUT`` there (this file's [`mace_worker`][], or another
    benchmark's worker on the same split and settings files).
    """
    if not python:
        return "not installed (pass --mace-python or set GEOMLIN_MACE_PYTHON)"
    with tempfile.TemporaryDirectory() as tmp:
        split_path = Path(tmp) / "split.npz"
        np.savez(split_path, **split)
        split_path.with_suffix(".json").write_text(json.dumps({**settings, "threads": threads}))
        out = Path(tmp) / "mace.json"
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        proc = subprocess.run([python, script, "--mace-worker", str(split_path), str(out)], env=env,
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            return f"failed ({last[:200]})"
        return json.loads(out.read_text())


# ------------------------------------------------------------------------------------------ tuning
def tune(sizes: dict, settings: dict) -> None:
    """The grid that chose the geomlin models' defaults, on a validation split of ethanol's training frames.

    The MD protocol's training frames (never its test frames) are split into :data:`TUNE_SPLIT`
    training / validation frames; every setting of :data:`TUNE_GRID` trains for the protocol's steps
    at the task's learning rate, then each model's best setting (lowest validation force MAE) for
    every rate of :data:`TUNE_LRS`. One run each, seed :data:`SEED`.
    """
    full = make_split(MOLECULES["ethanol"], sizes["num_train"], sizes["num_test"], settings["batch_size"],
                      sizes["steps"])
    n_train, n_valid = TUNE_SPLIT if sizes["num_train"] >= sum(TUNE_SPLIT) else (sizes["num_train"] // 2,) * 2
    rng = np.random.default_rng(SEED + 1)
    split = {"kind": full["kind"], "z": full["z"], "pos_train": full["pos_train"][:n_train],
             "energy_train": full["energy_train"][:n_train], "force_train": full["force_train"][:n_train],
             "batches": batch_order(rng, n_train, settings["batch_size"], sizes["steps"])}
    valid = (full["pos_train"][n_train:n_train + n_valid], full["energy_train"][n_train:n_train + n_valid],
             full["force_train"][n_train:n_train + n_valid])
    print(f"ethanol: {n_train} training and {n_valid} validation frames from the benchmark's {sizes['num_train']} "
          f"training frames (its test frames unseen); {sizes['steps']} steps of batch {settings['batch_size']}, "
          f"force weight {settings['force_weight']}; one run per setting.\n")
    table = harness.Table(["model", "setting", "lr", "params", "valid force MAE", "valid energy MAE", "step ms"])
    best: dict = {}

    def run(name, setting, lr):
        torch.manual_seed(SEED)
        model, call = geomlin_model(name, split, **setting)
        _, times = train_loop(model, md_loss(call, split, settings["force_weight"]), split["batches"],
                              sizes["steps"], 0.0, lr, f"tune {name} {setting} lr {lr}")
        energy_mae, force_mae = md_errors(call, *valid, settings["batch_size"])
        table.add(name, ", ".join(f"{k} {v}" for k, v in setting.items()), lr, f"{sum(p.numel() for p in model.parameters()):,}",
                  f"{force_mae:.3f}", f"{energy_mae:.3f}", harness.ms(statistics.median(times[1:] or times)))
        return force_mae

    for name, grid in TUNE_GRID.items():
        scores = [(run(name, setting, settings["lr"]), i) for i, setting in enumerate(grid)]
        best[name] = grid[min(scores)[1]]
        for lr in TUNE_LRS:
            if lr != settings["lr"]:
                run(name, best[name], lr)
    table.print()
    print("Best setting per model at the task's learning rate: " +
          "; ".join(f"{n}: {', '.join(f'{k} {v}' for k, v in s.items())}" for n, s in best.items()) + "\n")


# ------------------------------------------------------------------------------------------ main
def _row(table, molecule, name, r):
    table.add(molecule, name, f"{r['params']:,}", r["steps"], f"{r['energy_mae']:.3f}", f"{r['force_mae']:.3f}",
              harness.ms(r["step_s"]), harness.ms(r["md_step_s"]))


def _qm9_row(table, name, r):
    table.add(name, f"{r['params']:,}", r["steps"], f"{r['mae']:.4f}", harness.ms(r["step_s"]))


def _print_regimes(tables: dict, regimes: tuple, titles: dict) -> None:
    """Each run regime's table under its title, in the order of :data:`REGIMES`."""
    for regime in REGIMES:
        if regime in regimes:
            print(titles[regime] + "\n")
            tables[regime].print()


def run_md(molecules, sizes, settings, args, tables, shares) -> None:
    """The MD rows (and, on ethanol, the tensor-product shares)."""
    for molecule in molecules:
        split = make_split(MOLECULES[molecule], sizes["num_train"], sizes["num_test"], settings["batch_size"],
                           sizes["steps"])
        for regime in settings["regimes"]:
            for name in GEOMLIN_MODELS:
                torch.manual_seed(SEED)
                model, call = geomlin_model(name, split)
                r = train_and_evaluate(model, call, split, sizes["steps"],
                                       sizes["seconds"] if regime == "seconds" else 0.0, settings["lr"],
                                       settings["force_weight"], sizes["md_repeats"], f"{molecule} {name} ({regime})")
                _row(tables[regime], molecule, f"geomlin {name}", r)
        profile = settings["profile_steps"] if molecule == "ethanol" else 0
        mace = run_mace(args.mace_python, split, {**settings, "profile_steps": profile}, args.threads)
        for regime in settings["regimes"]:
            if isinstance(mace, dict):
                _row(tables[regime], molecule, f"MACE {mace['version']}", mace[regime])
            else:
                tables[regime].add(molecule, "MACE", mace, "–", "–", "–", "–", "–")
        if profile:
            torch.manual_seed(SEED)
            model, call = geomlin_model("gaunt", split)
            restore = label_gaunt_products(model)
            try:
                shares["geomlin gaunt"] = profile_steps(model, md_loss(call, split, settings["force_weight"]),
                                                        split["batches"], profile, settings["lr"])
            finally:
                restore()
            shares["MACE"] = mace["profile"] if isinstance(mace, dict) else mace


def run_qm9(sizes: dict, settings: dict, args, tables) -> str:
    """The QM9 rows; returns the line that describes the subset."""
    split = make_qm9_split(Path(args.qm9_root), sizes, settings["batch_size"])
    if isinstance(split, str):
        for regime in settings["regimes"]:
            tables[regime].add("–", split, "–", "–", "–")
        return split
    for regime in settings["regimes"]:
        for name in GEOMLIN_MODELS:
            torch.manual_seed(SEED)
            model, call = geomlin_qm9_model(name, split)
            r = train_and_evaluate_qm9(model, call, split, sizes["steps"], sizes["seconds"] if regime == "seconds" else 0.0,
                                       settings["lr"], f"qm9 {name} ({regime})")
            _qm9_row(tables[regime], f"geomlin {name}", r)
    mace = run_mace(args.mace_python, split, {**settings, "steps": sizes["steps"], "seconds": sizes["seconds"]},
                    args.threads)
    for regime in settings["regimes"]:
        if isinstance(mace, dict):
            _qm9_row(tables[regime], f"MACE {mace['version']}", mace[regime])
        else:
            tables[regime].add("MACE", mace, "–", "–", "–")
    return (f"QM9 subset: {sizes['num_train']:,} training and {sizes['num_test']:,} test molecules of the installed "
            f"qm9pack (seed {SEED}), target {sizes['target']} (eV); baseline b + sum_i w[z_i] fitted on the training "
            f"molecules, RMS residual {float(split['baseline_rms']):.3f} eV; batch {settings['batch_size']}, "
            f"Adam lr {settings['lr']}.")


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--mace-worker":
        mace_worker(sys.argv[2], sys.argv[3])
        return
    p = harness.parser(__doc__.split("\n")[0])
    p.add_argument("--mace-python", default=os.environ.get("GEOMLIN_MACE_PYTHON"),
                   help="Python of a virtualenv with mace-torch (default: $GEOMLIN_MACE_PYTHON)")
    p.add_argument("--datasets", default=",".join([*MOLECULES, QM9]),
                   help=f"comma-separated subset of {', '.join([*MOLECULES, QM9])}")
    p.add_argument("--qm9-root", default=str(QM9_CACHE), help="folder caching the processed QM9")
    p.add_argument("--tune", action="store_true", help="the grid that chose the models' defaults instead")
    p.add_argument("--seconds", type=float, default=None,
                   help=f"training seconds of the MD equal-wall-time comparison (default {FULL['seconds']:g})")
    p.add_argument("--regimes", default=",".join(REGIMES),
                   help="comma-separated comparisons to run: steps (equal optimiser steps), seconds (equal wall time)")
    args = p.parse_args()
    harness.setup(args, seed=SEED)
    regimes = tuple(r.strip() for r in args.regimes.split(",") if r.strip())
    if not regimes or any(r not in REGIMES for r in regimes):
        raise SystemExit(f"--regimes must name some of {', '.join(REGIMES)}, got {args.regimes!r}")
    if args.seconds is not None and not args.seconds > 0:
        raise SystemExit(f"--seconds must be a positive number of seconds, got {args.seconds:g}")
    sizes = {**FULL, **(QUICK if args.quick else {})}
    if args.seconds is not None:
        sizes["seconds"] = args.seconds
    qm9_sizes = QM9_QUICK if args.quick else QM9_FULL
    settings = {**TRAIN, **{k: v for k, v in sizes.items() if k in TRAIN}, "steps": sizes["steps"],
                "seconds": sizes["seconds"], "md_repeats": sizes["md_repeats"],
                "profile_steps": PROFILE_STEPS[args.quick], "regimes": regimes}
    if args.tune:
        print(harness.header("Molecular potentials: the grid behind geomlin's default sizes", args, None))
        tune(sizes, settings)
        return
    datasets = [m.strip() for m in args.datasets.split(",") if m.strip()]
    unknown = [m for m in datasets if m not in [*MOLECULES, QM9]]
    if unknown or not datasets:
        raise SystemExit(f"--datasets must name some of {', '.join([*MOLECULES, QM9])}, got {args.datasets!r}")
    print(harness.header("Molecular potentials: geomlin vs MACE at equal steps and equal wall time", args, None))
    print(f"MD: {sizes['num_train']} training and {sizes['num_test']} test frames per molecule (GFN2-xTB, kcal/mol "
          f"and kcal/mol/Angstrom), batch {settings['batch_size']}, Adam lr {settings['lr']}, force weight "
          f"{settings['force_weight']}; MACE {MACE_CONFIG}. Step and MD-step times are medians of this run; "
          "MACE ran after geomlin's models in its own virtualenv.\n")
    columns = ["molecule", "model", "params", "steps", "energy MAE", "force MAE", "train step ms", "MD step ms"]
    tables = {"steps": harness.Table(columns), "seconds": harness.Table(columns)}
    shares: dict = {}
    molecules = [m for m in datasets if m in MOLECULES]
    if molecules:
        run_md(molecules, sizes, settings, args, tables, shares)
        _print_regimes(tables, regimes, {
            "steps": f"**Equal optimiser steps** ({sizes['steps']} steps each)",
            "seconds": f"**Equal wall time** ({sizes['seconds']:g} s of training each, from a fresh initialisation)"})
    if QM9 in datasets:
        qm9_columns = ["model", "params", "steps", f"test MAE {qm9_sizes['target']} (eV)", "train step ms"]
        qm9_tables = {"steps": harness.Table(qm9_columns), "seconds": harness.Table(qm9_columns)}
        print(run_qm9(qm9_sizes, settings, args, qm9_tables) + "\n")
        _print_regimes(qm9_tables, regimes, {
            "steps": f"**QM9 subset, equal optimiser steps** ({qm9_sizes['steps']} steps each)",
            "seconds": f"**QM9 subset, equal wall time** ({qm9_sizes['seconds']:g} s of training each)"})
    if shares:
        print(f"**Share of a training step in tensor products** (ethanol, batch {settings['batch_size']}, forces "
              f"trained; {settings['profile_steps']} profiled steps after two warm-up steps; backward passes "
              "included, found by autograd's sequence numbers)\n")
        table = harness.Table(["model", "profiled step ms", "convolution TP", "many-body TP", "all tensor products"])
        for name, r in shares.items():
            if isinstance(r, str):
                table.add(name, r, "–", "–", "–")
            else:
                table.add(name, harness.ms(r["step_s"]), f"{100 * r['conv']:.0f}%", f"{100 * r['many_body']:.0f}%",
                          f"{100 * (r['conv'] + r['many_body']):.0f}%")
        table.print()


if __name__ == "__main__":
    main()
