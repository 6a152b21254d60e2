"""Benchmark: training the molecule potentials on molecules of mixed sizes in the flat (PyG) layout vs the padded one.

The molecules are QM9's (a fixed random draw, seed 0, from the installed qm9pack's 130,831; the
processed set is cached in ``.geomlin_cache/qm9``), or, with ``--quick`` or without qm9pack, the
bundled 21-molecule sample (said in the output). Each batch of ``--batch-size`` molecules is a PyG
``Batch`` (as a ``torch_geometric`` ``DataLoader`` collates it); every potential of ``geomlin train
molecules`` (``MoleculeEnergyModel`` around the Gaunt potential, PONITA and EGNN, the task's sizes)
takes one optimiser step on it:

* **padded**: the batch padded to its largest molecule (``geomlin.batching.to_padded``, planned from
  the batch's own sizes, as ``geomlin train molecules --dataset qm9`` does), ``model(pos, z, mask)``:
  all pairs of every padded molecule, the padding masked out;
* **flat**: ``model(batch)``, the PyG batch as it comes: message passing over a flat edge list (the
  Gaunt potential: the pairs within its cutoff from a cell list; PONITA and EGNN: all pairs of each
  molecule), no padding.

Both layouts start from the same weights and step through the same batches; their energies on the
first batch agree to rounding (shown: the largest difference of the networks' standardised energies
relative to the largest, in float64; the energies in eV add QM9's per-element baseline of thousands
of eV, which float32 rounds at about 1e-3 eV). Reported: the median step time (forward, energy loss ``MSE(U0) / scale^2``
over the per-element baseline, backward, Adam step; interleaved), the peak memory of one step above
the memory in use before it, and the fraction of padded atom slots that hold no atom.

    python benchmarks/bench_layouts.py [--quick] [--batch-size 32] [--steps 20]
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import Table, header, measure, mib, ms, parser, peak_memory, ratio, setup

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: Where the processed QM9 is cached (shared with bench_molecules.py).
QM9_CACHE = ROOT / ".geomlin_cache" / "qm9"
#: The bundled QM9 sample.
SAMPLE = ROOT / "datasets" / "qm9"
#: The models of ``geomlin train molecules``.
MODELS = ("gaunt", "ponita", "egnn")
#: The property fitted (QM9's U0, as ``geomlin train molecules --dataset qm9`` by default).
TARGET = "U0"
SEED = 0


def molecules(quick: bool, count: int) -> tuple[list, str]:
    """``count`` molecules as PyG ``Data(pos, z, y)`` and where they come from."""
    from torch_geometric.data import Data

    from geomlin.datasets.io.qm9pack import installed_data_folder
    from geomlin.datasets.qm9 import QM9, target_index

    k = target_index(TARGET)
    if not quick and installed_data_folder() is not None:
        QM9_CACHE.mkdir(parents=True, exist_ok=True)
        ds, source = QM9(QM9_CACHE, source="qm9pack", cache=True), f"QM9 (the installed qm9pack), {count:,} molecules"
    else:
        ds, source = QM9(SAMPLE, cache=False), "the bundled 21-molecule QM9 sample" + (
            "" if quick else " (qm9pack not installed)")
    picked = torch.randperm(len(ds), generator=torch.Generator().manual_seed(SEED))[:count].tolist()
    picked = [picked[i % len(picked)] for i in range(count)]  # the sample repeats to fill the batches
    out = []
    for i in picked:
        d = ds[i]
        out.append(Data(pos=d.pos.float(), z=d.z, y=d.y[:, k].double()))
    return out, source


def batches(items: list, batch_size: int) -> list:
    from torch_geometric.loader import DataLoader

    return list(DataLoader(items, batch_size=batch_size, shuffle=False))


def build(name: str, items: list):
    """The model ``geomlin train molecules --dataset qm9 --model NAME`` builds for these molecules."""
    from geomlin.train.tasks import get_task
    from geomlin.train.tasks.molecules import fit_composition_baseline

    num_species = int(max(int(d.z.max()) for d in items)) + 1
    b, w, rms = fit_composition_baseline([d.z for d in items], torch.cat([d.y for d in items]), num_species)
    info = {"energy_mean": b, "scale": rms if rms > 0 else 1.0, "atom_energies": w.tolist(),
            "num_species": num_species}
    torch.manual_seed(SEED)
    return get_task("molecules").build_model(name, {}, info)


def padded_inputs(batch):
    """``pos (B, N, 3)``, ``z (B, N)``, ``mask (B, N)`` padded to the batch's largest molecule."""
    from geomlin.batching import layout_of, to_padded

    layout = layout_of(batch)
    pos, mask = to_padded(batch.pos, layout)
    z, _ = to_padded(batch.z, layout)
    return pos, z, mask


def stepper(model, layout: str, data: list):
    """One optimiser step per call, cycling through ``data`` (prepared batches of the layout)."""
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    scale = model.scale.float()
    state = {"i": 0}

    def loss_of(item):
        if layout == "flat":
            energy, _ = model(item, compute_forces=False)
            target = item.y
        else:
            pos, z, mask, target = item
            energy, _ = model(pos, z, mask, compute_forces=False)
        return (((energy - target.to(energy.dtype)) / scale) ** 2).mean()

    def step():
        item = data[state["i"] % len(data)]
        state["i"] += 1
        loss = loss_of(item)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss

    return step, loss_of


def energy_agreement(model, flat_batch, padded_batch) -> float:
    """``max |f_flat - f_padded| / max |f|`` of the network's standardised energies ``f`` of one batch, in
    float64 (a copy of the model)."""
    net = copy.deepcopy(model.net).double()
    pos, z, mask, _ = padded_batch
    with torch.no_grad():
        flat = net(flat_batch.pos.double(), flat_batch.z, batch=flat_batch.batch)
        padded = net(pos.double(), z, mask=mask)
    return float((flat - padded).abs().max() / padded.abs().max())


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--batch-size", type=int, default=32, help="molecules per batch (the task's default)")
    p.add_argument("--steps", type=int, default=None, help="distinct batches cycled through (default 20; quick 3)")
    args = p.parse_args()
    setup(args, SEED)
    repeats = args.repeats or (3 if args.quick else 10)
    steps = args.steps or (3 if args.quick else 20)
    items, source = molecules(args.quick, steps * args.batch_size)
    flat = batches(items, args.batch_size)
    padded = [(*padded_inputs(b), b.y) for b in flat]
    slots = sum(m.numel() for _, _, m, _ in padded)
    atoms = sum(int(m.sum()) for _, _, m, _ in padded)
    print(header("Molecules of mixed sizes: one training step, flat (PyG) vs padded layout", args, repeats))
    print(f"{source}; {steps} batches of {args.batch_size} ({atoms:,} atoms in {slots:,} padded slots: "
          f"{1 - atoms / slots:.0%} padding); target {TARGET}, energy loss, Adam, float32.\n")
    table = Table(["model", "padded step ms", "flat step ms", "flat speed-up", "padded peak", "flat peak",
                   "energy agreement (f64)"])
    for name in MODELS:
        base = build(name, items).float()
        models = {"padded": base, "flat": copy.deepcopy(base)}
        steppers = {k: stepper(m, k, padded if k == "padded" else flat) for k, m in models.items()}
        agreement = energy_agreement(base, flat[0], padded[0])
        timed = measure({k: s for k, (s, _) in steppers.items()}, repeats)
        peaks = {k: peak_memory(s) for k, (s, _) in steppers.items()}
        table.add(name, ms(timed["padded"]), ms(timed["flat"]), ratio(timed["padded"], timed["flat"]),
                  mib(peaks["padded"]), mib(peaks["flat"]), f"{agreement:.1e}")
    table.print()
    print("Speed-up = padded step time / flat step time (from this run). The flat layout computes no padded "
          "atom and no pair with a padded atom; the padded one has static shapes per batch width.")


if __name__ == "__main__":
    main()
