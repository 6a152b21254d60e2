"""The whole of QM9 at real scale, from the installed qm9pack (the one pip-installable copy; ``dev`` extra).

Skipped when qm9pack is missing, a failure under ``CI=true`` (it is in the ``dev`` extra, so CI
has it). Oracles: the bundled MoleculeNet sample for the first 21 molecules, the original
``uncharacterized.txt`` for the first excluded indices, and the same tables written as dsgdb9nsd
XYZ files in a tar by :mod:`tests.datasets.qm9_formats` (Python's csv module, not geomlin's
reader) for the XYZ path.
"""

import numpy as np
import pytest
import torch

from geomlin.datasets import QM9
from geomlin.datasets.io.qm9pack import find_parts, installed_data_folder
from geomlin.datasets.qm9 import (
    ATOMIZATION_COLUMNS,
    NUM_MOLECULES,
    NUM_UNCHARACTERIZED,
    QM9_TARGETS,
    QM9Files,
    process_qm9,
)
from tests.datasets.conftest import QM9_DIR
from tests.datasets.qm9_formats import read_qm9pack_text, require_qm9pack, write_xyz_archive

pytestmark = pytest.mark.slow

#: The first indices of the original uncharacterized.txt (figshare file 3195404).
FIRST_UNCHARACTERIZED = [58, 61, 80, 185, 186, 245, 267, 280, 286, 752]
#: Atoms in the 130,831 characterized molecules (qm9pack 1.0.3).
NUM_ATOMS = 2_359_210
MAX_ATOMS = 29


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    require_qm9pack()
    return QM9(tmp_path_factory.mktemp("qm9pack"), source="qm9pack")


def test_whole_dataset_loads(full):
    assert len(full) == NUM_MOLECULES - NUM_UNCHARACTERIZED == 130_831
    idx = full._data.idx.numpy()
    assert (np.diff(idx) > 0).all() and idx[0] == 0 and idx[-1] == NUM_MOLECULES - 1
    missing = sorted(set(range(1, NUM_MOLECULES + 1)) - set((idx + 1).tolist()))
    assert len(missing) == NUM_UNCHARACTERIZED and missing[:10] == FIRST_UNCHARACTERIZED
    sizes = full.slices["z"].diff()
    assert int(sizes.sum()) == NUM_ATOMS and int(sizes.max()) == MAX_ATOMS
    assert set(full._data.z.unique().tolist()) == {1, 6, 7, 8, 9}
    assert torch.isfinite(full._data.y).all() and torch.isfinite(full._data.pos).all()
    assert full[-1].name == "gdb_133885"


def test_first_molecules_equal_moleculenet_sample(full):
    sample = QM9(QM9_DIR, cache=False)
    atom_cols = [t for t, (_, col, _, _) in enumerate(QM9_TARGETS) if col in ATOMIZATION_COLUMNS]
    other = [t for t in range(len(QM9_TARGETS)) if t not in atom_cols]
    for a, b in zip(sample, full[:21]):
        assert a.name == b.name and int(a.idx) == int(b.idx) and torch.equal(a.z, b.z)
        assert (a.pos.double() - b.pos.double()).abs().max() <= 5e-5 + 1e-6     # the SDF keeps 4 decimals
        assert torch.equal(a.y[:, other], b.y[:, other])
        torch.testing.assert_close(a.y[:, atom_cols], b.y[:, atom_cols], rtol=1e-6, atol=0)


def test_whole_dataset_as_xyz_archive(full, tmp_path):
    """All 130,831 molecules through the XYZ reader: written as one plain tar (bzip2 would triple the
    test's time; the small tests cover the compressions), read back equal to qm9pack's."""
    molecules = read_qm9pack_text(find_parts(installed_data_folder()))
    path = tmp_path / "dsgdb9nsd.xyz.tar"
    write_xyz_archive(path, molecules, compression="")
    data, slices = process_qm9(QM9Files("xyz", (str(path),), str(tmp_path)))
    for key in ("z", "pos", "x", "y", "idx"):
        assert torch.equal(data[key], full._data[key]) and torch.equal(slices[key], full.slices[key]), key
    assert data.name == full._data.name
