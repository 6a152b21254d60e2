"""Task helpers that keep training on the device: statistics left where they are computed, QM9 batches
padded without reading the device (oracle: PyG's ``to_dense_batch``), rotations drawn on the device."""

from pathlib import Path

import torch
from torch_geometric.data import Data
from torch_geometric.utils import to_dense_batch

from geomlin.train.tasks.base import STAT_DTYPE, GraphSet, stat
from geomlin.train.tasks.molecules import MoleculesTask
from geomlin.train.tasks.pointcloud import random_rotations
from geomlin.validation import deferred_checks
from tests.device import simulated as sim


def test_stat_leaves_sums_on_their_device_and_counts_on_the_host():
    loss = torch.tensor([2.5], device=sim.DEVICE)
    with sim.watch() as log:
        total, count = stat(loss, 4)
    assert not log.events
    assert total.device == sim.DEVICE and total.dtype == STAT_DTYPE and total.shape == ()
    assert count == 4.0 and isinstance(count, float)


def test_padding_matches_pygs_dense_batch():
    graphs = GraphSet(Data(pos=torch.randn(n, 3), z=torch.randint(1, 9, (n,))) for n in (3, 7, 5, 1))
    batch = graphs.batch(torch.tensor([2, 0, 1, 3]))
    assert batch.max_num_nodes == 7
    pos, z, mask = MoleculesTask._dense(batch)
    want_pos, want_mask = to_dense_batch(batch.pos, batch.batch)
    assert torch.equal(pos, want_pos) and torch.equal(mask, want_mask)
    assert torch.equal(z, to_dense_batch(batch.z, batch.batch)[0])


def test_padding_on_the_device_reads_nothing_back():
    graphs = GraphSet(Data(pos=torch.randn(n, 3), z=torch.ones(n, dtype=torch.long)) for n in (4, 2))
    batch = graphs.batch(torch.tensor([0, 1]), sim.DEVICE)
    with deferred_checks(), sim.watch() as log:  # as the training loop calls it
        pos, _, mask = MoleculesTask._dense(batch)
    assert not log.events and pos.shape == (2, 4, 3) and mask.device == sim.DEVICE


def test_random_rotations_are_rotations_drawn_on_the_device():
    with sim.watch() as log:
        R = random_rotations(4096, device=sim.DEVICE, dtype=torch.float64)
    assert not log.events and R.device == sim.DEVICE
    R = sim.to_cpu(R)
    eye = torch.eye(3, dtype=torch.float64)
    assert (R @ R.transpose(-1, -2) - eye).abs().max() < 1e-12
    assert (torch.linalg.det(R) - 1).abs().max() < 1e-12
    # Haar measure: E[R] = 0 and E[R_ij^2] = 1/3 (each entry of a uniform rotation)
    assert R.mean(0).abs().max() < 0.05
    assert ((R ** 2).mean(0) - 1 / 3).abs().max() < 0.02
    assert random_rotations(2, dtype=torch.bfloat16).dtype == torch.bfloat16


def test_bundled_samples_are_found_under_an_explicit_root_and_nowhere_else(tmp_path, monkeypatch):
    """An install without the samples (a wheel) finds them under $GEOMLIN_DATA; the source tree is
    found through the imported package, not the file's depth. Oracle: files made here."""
    import geomlin
    from geomlin.train.tasks.base import DATA_ROOT_ENV, bundled_path

    monkeypatch.chdir(tmp_path)
    clone = Path(geomlin.__file__).resolve().parent.parent
    assert bundled_path("qm9") == clone / "datasets" / "qm9"  # this checkout holds them
    root = tmp_path / "root"
    (root / "datasets" / "md").mkdir(parents=True)
    (root / "datasets" / "md" / "xtb_md_ethanol.npz").write_bytes(b"")
    monkeypatch.setenv(DATA_ROOT_ENV, str(root))
    assert bundled_path("md/xtb_md_ethanol.npz") == root / "datasets" / "md" / "xtb_md_ethanol.npz"
    assert bundled_path("md/no_such_file.npz") is None
