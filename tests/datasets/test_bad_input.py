"""Bad input to every reader and dataset constructor: a clear error naming the file and line (or the
argument), never a silently wrong dataset. Each case asserts the exception type and a phrase of the
message; a few valid-input controls show the readers still accept what they should."""

import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch
from torch_geometric.data import Data

from geomlin.datasets import MeshPointClouds, NBody, NPZTrajectory, SDFDataset, SyntheticShapes, XYZDataset
from geomlin.datasets.cache import load_cache, save_cache
from geomlin.datasets.io.obj import read_obj
from geomlin.datasets.io.off import read_off
from geomlin.datasets.io.ply import read_ply
from geomlin.datasets.io.sdf import read_sdf
from geomlin.datasets.io.xyz import read_xyz
from geomlin.datasets.meshes import read_mesh
from geomlin.datasets.qm9 import QM9, qm9_split, read_qm9_csv
from geomlin.datasets.shapenet import read_part_file
from geomlin.datasets.surface import sample_surface
from geomlin.datasets.synthetic import nbody, synthetic_shapes
from geomlin.datasets.transforms import (
    Center,
    KNNGraph,
    NormalizeScale,
    RadiusGraph,
    RandomRotation,
    RandomTranslation,
    SamplePoints,
    knn_graph,
    radius_graph,
)
from geomlin.validation import FileFormatError
from tests.datasets.conftest import MESH_DIR, QM9_DIR

SDF, CSV = QM9_DIR / "gdb9.sdf", QM9_DIR / "gdb9.sdf.csv"


def _file(tmp_path, name, text):
    p = tmp_path / name
    (p.write_bytes if isinstance(text, bytes) else p.write_text)(text)
    return p


# ----------------------------------------------------------------------------------------- XYZ
PLAIN_FORCES = """3
-97.2
C 0.0 0.0 0.0 0.1 0.2 0.3
O 1.2 0.0 0.0 -0.1 0.0 0.0
H -0.5 0.9 0.0 0.0 -0.2 -0.3
"""


def test_xyz_line_missing_z_is_refused_not_shifted(tmp_path):
    """The issue's case: one atom line lacks its z coordinate; its first force component must not be
    read as z (and the frame's forces must not be dropped)."""
    bad = PLAIN_FORCES.replace("O 1.2 0.0 0.0 -0.1", "O 1.2 0.0 -0.1")
    p = _file(tmp_path, "f.xyz", bad)
    with pytest.raises(FileFormatError, match=r"f\.xyz:4 \(record 0\): atom line has 6 columns but .* has 7"):
        read_xyz(p)


@pytest.mark.parametrize("text, message", [
    ("2\n-1.0\nH 0 0 0 1\nH 0 0 1 1\n", "plain XYZ atom lines need 4 columns"),
    ("1\n-1.0\n0 0 0 0\n", r"atomic number must be in 1\.\.118, got 0"),
    ("1\n-1.0\n-1 0 0 0\n", r"atomic number must be in 1\.\.118, got -1"),
    ("1\n-1.0\n119 0 0 0\n", r"atomic number must be in 1\.\.118, got 119"),
    ("0\n-1.0\n", "atom count must be >= 1"),
    ("1\nProperties=species:S:1:pos:R:2 energy=1\nH 0 0\n", "'pos' must be 3 real columns"),
    ("1\nProperties=species:S:1:pos:R:x energy=1\nH 0 0 0\n", "column count of 'pos' must be a positive integer"),
    ("1\nProperties=species:S:1:pos:R:3 energy=1\nH 0 0 0 9\n", "Properties announce 4 columns but the atom lines have 5"),
    ("1\nProperties=species:S:1:pos:R:3 energy=nan\nH 0 0 0\n", "non-finite energy"),
    ("1\nProperties=species:S:1:pos:R:3 energy=abc\nH 0 0 0\n", "energy= value 'abc' is not a number"),
    ("1\nProperties=species:S:1:forces:R:3 energy=1\nH 0 0 0\n", "lack 'pos'"),
    ("2\n-1.0\nH 0 0 0 0 0 inf\nH 0 0 1 0 0 0\n", "non-finite .* force"),
])
def test_xyz_bad_files(tmp_path, text, message):
    p = _file(tmp_path, "bad.xyz", text)
    with pytest.raises(FileFormatError, match=rf"bad\.xyz:\d+ .*{message}"):
        read_xyz(p)


def test_xyz_frames_disagree_on_energy(tmp_path):
    p = _file(tmp_path, "mix.xyz", "1\n-1.0\nH 0 0 0\n1\nno energy here\nH 0 0 0\n")
    with pytest.raises(FileFormatError, match=r"mix\.xyz:5 \(record 1\): frame 1 lacks an energy but frame 0 does"):
        XYZDataset(p)


CELL_FRAME = 'Lattice="4 0 0 0 4 0 0 0 4" energy=-1.0 Properties=species:S:1:pos:R:3'


@pytest.mark.parametrize("comment, message", [
    ('Lattice="4 0 0 0 4 0 0 0" energy=-1.0', r"Lattice='4 0 0 0 4 0 0 0' must be 9 numbers \(three lattice vectors\), got 8"),
    ('Lattice="4 0 0 0 4 0 0 0 x" energy=-1.0', r"must be 9 numbers \(three lattice vectors\)"),
    ('Lattice="4 0 0 0 4 0 0 0 nan" energy=-1.0', r"Lattice='4 0 0 0 4 0 0 0 nan' holds a non-finite number"),
    ('Lattice="4 0 0 0 4 0 8 0 0" energy=-1.0', r"periodic lattice vectors \(pbc='T T T'\) are linearly dependent"),
    ('Lattice="4 0 0 0 4 0 0 0 0" pbc="T T T" energy=-1.0', r"are linearly dependent"),
    ('Lattice="4 0 0 0 4 0 0 0 4" pbc="T T" energy=-1.0', r"pbc='T T' must be three flags T or F"),
    ('Lattice="4 0 0 0 4 0 0 0 4" pbc="T T yes" energy=-1.0', r"pbc='T T yes' must be three flags"),
    ('pbc="T F F" energy=-1.0', r"pbc='T F F' makes the frame periodic but there is no Lattice="),
])
def test_xyz_bad_cells_name_the_file_and_line(tmp_path, comment, message):
    p = _file(tmp_path, "cell.xyz", f"1\n{CELL_FRAME}\nH 0 0 0\n1\n{comment}\nH 0 0 0\n")
    with pytest.raises(FileFormatError, match=rf"cell\.xyz:5 \(record 1\): .*{message}"):
        read_xyz(p)


def test_xyz_frames_disagree_on_the_cell(tmp_path):
    p = _file(tmp_path, "mixcell.xyz", f"1\n{CELL_FRAME}\nH 0 0 0\n1\nenergy=-2.0\nH 0 0 0\n")
    with pytest.raises(FileFormatError, match=r"mixcell\.xyz:5 \(record 1\): frame 1 lacks a cell \(Lattice=\) but frame 0"):
        XYZDataset(p)


def test_xyz_control_cells_that_are_fine(tmp_path):
    """A zero lattice vector along a non-periodic axis (a slab), and pbc="F F F" without a Lattice."""
    p = _file(tmp_path, "slab.xyz", '1\nLattice="4 0 0 0 4 0 0 0 0" pbc="T T F" energy=-1\nH 0 0 0\n'
                                    '1\npbc="F F F" energy=-1\nH 0 0 0\n')
    slab, free = read_xyz(p)
    assert slab.pbc.tolist() == [True, True, False] and slab.cell[2].tolist() == [0, 0, 0]
    assert free.cell is None and free.pbc is None


def test_xyz_control_numeric_species_and_forces(tmp_path):
    p = _file(tmp_path, "ok.xyz", PLAIN_FORCES.replace("C 0.0", "6 0.0"))
    (frame,) = read_xyz(p)
    assert frame.z.tolist() == [6, 8, 1] and frame.forces[1].tolist() == [-0.1, 0.0, 0.0]
    assert frame.pos[1].tolist() == [1.2, 0.0, 0.0] and frame.energy == -97.2


# ----------------------------------------------------------------------------------------- SDF
def test_sdf_empty_file(tmp_path):
    with pytest.raises(FileFormatError, match=r"empty\.sdf: no molecule records"):
        read_sdf(_file(tmp_path, "empty.sdf", "\n\n"))


def test_sdf_record_without_atoms(tmp_path):
    text = "empty\n  geomlin\n\n  0  0  0  0  0  0  0  0  0  0999 V2000\nM  END\n$$$$\n"
    with pytest.raises(FileFormatError, match=r"zero\.sdf:4 \(record 0, 'empty'\): a record needs at least one atom"):
        read_sdf(_file(tmp_path, "zero.sdf", text))


def test_sdf_unknown_bond_type(tmp_path):
    first = SDF.read_text().split("$$$$\n")[0]
    lines = first.splitlines()
    bond = 4 + int(lines[3][:3])                              # the first bond line: type 7
    lines[bond] = lines[bond][:6] + "  7" + lines[bond][9:]
    p = _file(tmp_path, "bond.sdf", "\n".join(lines) + "\n$$$$\n")
    with pytest.raises(ValueError, match=r"record 0 \('gdb_1'\) has bond type 7; expected 1-4"):
        SDFDataset(p)


# ------------------------------------------------------------------------------------ CSV labels
def _csv_with(tmp_path, row: int, column: str, value: str):
    """The bundled CSV with ``value`` in ``column`` of list index ``row`` (file line ``row + 1``)."""
    lines = CSV.read_text().splitlines()
    header = lines[0].split(",")
    cells = lines[row].split(",")
    cells[header.index(column)] = value
    lines[row] = ",".join(cells)
    return _file(tmp_path, "labels.csv", "\n".join(lines) + "\n")


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf"])
def test_csv_non_finite_label_is_refused(tmp_path, value):
    p = _csv_with(tmp_path, 3, "mu", value)
    with pytest.raises(FileFormatError, match=rf"labels\.csv:4: column 'mu' is a non-finite label '{value}'"):
        SDFDataset(SDF, p, target_columns=["mu"])


def test_qm9_csv_nan_label(tmp_path):
    p = _csv_with(tmp_path, 5, "gap", "nan")
    with pytest.raises(FileFormatError, match=r"labels\.csv:6: column 'gap' of 'gdb_5' is a non-finite label"):
        read_qm9_csv(str(p))


def test_csv_ragged_row(tmp_path):
    lines = CSV.read_text().splitlines()
    lines[4] = lines[4].rsplit(",", 1)[0]
    p = _file(tmp_path, "ragged.csv", "\n".join(lines) + "\n")
    with pytest.raises(FileFormatError, match=r"ragged\.csv:5: row has 19 fields but the header has 20"):
        SDFDataset(SDF, p, target_columns=["mu"])


def test_csv_header_only(tmp_path):
    p = _file(tmp_path, "head.csv", CSV.read_text().splitlines()[0] + "\n")
    with pytest.raises(FileFormatError, match="header but no label rows"):
        SDFDataset(SDF, p)


def test_sdf_data_item_nan(tmp_path):
    records = [r for r in SDF.read_text().split("$$$$\n") if r.strip()][:2]
    text = "".join(r.replace("M  END\n", f"M  END\n> <energy>\n{v}\n\n") + "$$$$\n"
                   for r, v in zip(records, ["-1.5", "nan"]))
    p = _file(tmp_path, "items.sdf", text)
    with pytest.raises(FileFormatError, match=r"data item <energy> of record 1 \('gdb_2'\) is a non-finite label"):
        SDFDataset(p, target_columns=["energy"])
    assert SDFDataset(_file(tmp_path, "ok.sdf", text.replace("nan", "2.5")), target_columns="energy")[1].y.item() == 2.5


def test_misaligned_labels_are_refused(tmp_path):
    lines = CSV.read_text().splitlines()
    p = _file(tmp_path, "extra.csv", "\n".join([*lines, lines[-1]]) + "\n")
    with pytest.raises(ValueError, match="has 21 molecule records but .*extra.csv has 22 label rows"):
        SDFDataset(SDF, p)


# ----------------------------------------------------------------------------------------- NPZ
def _npz(tmp_path, **over):
    rng = np.random.default_rng(0)
    arrays = {"z": np.array([6, 1, 8]), "R": rng.normal(size=(4, 3, 3)), "E": rng.normal(size=(4, 1)),
              "F": rng.normal(size=(4, 3, 3))}
    arrays.update(over)
    p = tmp_path / "traj.npz"
    np.savez(p, **arrays)
    return p


@pytest.mark.parametrize("over, message", [
    ({"z": np.array([6, 0, 8])}, r"atomic numbers must be in 1\.\.118, got z\[1\] = 0"),
    ({"z": np.array([6, -3, 8])}, r"atomic numbers must be in 1\.\.118"),
    ({"R": np.zeros((4, 3, 3), dtype=complex)}, "positions must be a real numeric array, got dtype complex128"),
    ({"R": np.zeros((0, 3, 3)), "E": np.zeros(0), "F": np.zeros((0, 3, 3))}, "no frames"),
    ({"z": np.zeros(0, dtype=int), "R": np.zeros((4, 0, 3)), "F": np.zeros((4, 0, 3))}, "no atoms"),
    ({"E": np.zeros((3, 1))}, r"energies must be \(M,\) or \(M, 1\) with M = 4"),
    ({"R": np.array([[[object()]]], dtype=object)}, "not a readable .npz archive"),
])
def test_npz_bad_trajectories(tmp_path, over, message):
    with pytest.raises(FileFormatError, match=rf"traj\.npz: .*{message}"):
        NPZTrajectory(_npz(tmp_path, **over))


def test_npz_control(tmp_path):
    ds = NPZTrajectory(_npz(tmp_path), dtype=torch.float32)
    assert len(ds) == 4 and ds[0].pos.dtype == torch.float32 and ds[0].z.tolist() == [6, 1, 8]
    with pytest.raises(TypeError, match="dtype must be a floating-point dtype"):
        NPZTrajectory(_npz(tmp_path), dtype=torch.int64)


# --------------------------------------------------------------------------------------- meshes
@pytest.mark.parametrize("reader, name, text, message", [
    (read_off, "m.off", "OFF\n3 1 0\n0 0 0\n1 0 0\n0 1 0\n3 0 1 5\n", r"m\.off:6: face line .* outside 0\.\.2"),
    (read_off, "m.off", "OFF\n3 1 0\n0 0 0\n1 0\n0 1 0\n3 0 1 2\n", r"m\.off:4: vertex line '1 0' needs 3"),
    (read_off, "m.off", "OFF\n3 1 0\n0 0 0\n1 0 0\n0 1 0\n3 0 1\n", r"m\.off:6: malformed face line"),
    (read_ply, "m.ply", ("ply\nformat ascii 1.0\nelement vertex 2\nproperty float x\nproperty float y\n"
     "property float z\nend_header\n0 0 0\n1 0\n"), r"m\.ply:9: row of element 'vertex' has 2 values"),
    (read_ply, "m.ply", ("ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\n"
     "property float z\nelement face 1\nproperty list uchar int vertex_indices\nend_header\n0 0 0\n1 0 0\n"
     "0 1 0\n3 0 1 1.5\n"), r"m\.ply:13: malformed row of element 'face'"),
    (read_ply, "m.ply", "ply\nformat ascii 1.0\nelement vertex -2\nproperty float x\nend_header\n",
     r"m\.ply:3: element 'vertex' has a negative count"),
    (read_ply, "m.ply", (b"ply\nformat binary_little_endian 1.0\nelement vertex 1\nproperty float x\n"
     b"property float y\nproperty float z\nend_header"), "truncated binary PLY"),
    (read_obj, "m.obj", "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 0 1 2\n", r"m\.obj:4: face .* does not exist"),
    (read_obj, "m.obj", "v 0 0 nan\nv 1 0 0\nv 0 1 0\nf 1 2 3\n", r"m\.obj:1: non-finite vertex"),
    (read_obj, "m.obj", "v 0 0\n", r"m\.obj:1: malformed 'v' line"),
])
def test_mesh_readers(tmp_path, reader, name, text, message):
    with pytest.raises(FileFormatError, match=message):
        reader(_file(tmp_path, name, text))


def test_mesh_unsupported_extension_and_control(tmp_path):
    with pytest.raises(ValueError, match=r"unsupported mesh format '\.stl'"):
        read_mesh(_file(tmp_path, "m.stl", "solid"))
    verts, faces = read_ply(MESH_DIR / "ant.ply")
    assert verts.shape[1] == 3 and faces.shape[1] == 3 and faces.max() < len(verts)


def test_part_file_fractional_label(tmp_path):
    p = _file(tmp_path, "s.txt", "0 0 0 0 0 1 3\n1 0 0 0 0 1 3.5\n")
    with pytest.raises(FileFormatError, match=r"s\.txt:2: part label must be an integer in 0\.\.49, got 3\.5"):
        read_part_file(str(p))


def test_mesh_point_clouds_arguments(tmp_path):
    path = MESH_DIR / "ant.ply"
    with pytest.raises(TypeError, match=r"labels\[0\] must be an int"):
        MeshPointClouds([path], num_points=16, labels=[1.5])
    with pytest.raises(TypeError, match="paths must be a list"):
        MeshPointClouds(str(path))
    with pytest.raises(ValueError, match="num_points must be >= 1"):
        MeshPointClouds([path], num_points=0)
    ds = MeshPointClouds([path], num_points=16, include_normals=True)
    assert ds[0].normal.shape == (16, 3)


# ------------------------------------------------------------------------------ generated data
@pytest.mark.parametrize("call, error, message", [
    (lambda: SyntheticShapes(2, 16, dtype=torch.int64), TypeError, "floating-point dtype"),
    (lambda: SyntheticShapes(0, 16), ValueError, "num_per_class must be >= 1"),
    (lambda: synthetic_shapes(1, 16, jitter=float("nan")), ValueError, "jitter must be finite"),
    (lambda: synthetic_shapes(1, 16, scale_range=(1.0, 0.5)), ValueError, r"scale_range\[1\] must be >= 1.0"),
    (lambda: synthetic_shapes(1, 16, classes="cube"), TypeError, "classes must be a sequence"),
    (lambda: NBody(2, num_particles=1), ValueError, "num_particles must be >= 2"),
    (lambda: nbody(2, 3, horizon_steps=0), ValueError, "horizon_steps must be >= 1"),
    (lambda: nbody(2, 3, dt=-1e-3), ValueError, "dt must be > 0"),
    (lambda: qm9_split(10, train=1.5), ValueError, r"train \(a fraction\) must be <= 1"),
    (lambda: QM9.atomref("U7"), ValueError, "unknown QM9 target 'U7'"),
])
def test_generated_and_split_arguments(call, error, message):
    with pytest.raises(error, match=message):
        call()


# -------------------------------------------------------------------------------- transforms
def test_graph_and_sampling_arguments():
    x = torch.randn(6, 3)
    with pytest.raises(ValueError, match="r must be > 0"):
        radius_graph(x, 0.0)
    with pytest.raises(ValueError, match="r must be > 0"):
        RadiusGraph(-1.0)
    with pytest.raises(ValueError, match="k must be >= 1"):
        KNNGraph(0)
    with pytest.raises(TypeError, match="batch must have an integer dtype"):
        knn_graph(x, 2, batch=torch.zeros(6))
    with pytest.raises(ValueError, match="batch must be sorted"):
        knn_graph(x, 2, batch=torch.tensor([0, 1, 0, 1, 0, 1]))
    with pytest.raises(ValueError, match="pos contains NaN"):
        knn_graph(torch.full((4, 3), float("nan")), 2)
    with pytest.raises(ValueError, match="num must be >= 1"):
        SamplePoints(0)
    with pytest.raises(TypeError, match="faces must have an integer dtype"):
        sample_surface(torch.eye(3), torch.zeros(1, 3), 4)
    d = SamplePoints(8, generator=torch.Generator().manual_seed(0))(
        Data(pos=torch.eye(3), face=torch.tensor([[0], [1], [2]])))
    assert d.pos.shape == (8, 3) and torch.allclose(d.pos.sum(1), torch.ones(8))   # on the plane x+y+z=1


# ------------------------------------------------------------------------------------- caches
KILLED_WRITER = """
import os, sys, torch
from geomlin.datasets import cache
def crash(obj, fh, *a, **k):           # fh: the open temporary file of geomlin.io_atomic
    fh.write(b"half a cache")
    fh.flush()
    os._exit(9)                         # killed mid-write: no finally, no cleanup
cache.torch.save = crash
cache.save_cache(sys.argv[1], "fp", {"x": 1})
"""


def test_interrupted_cache_write_leaves_no_temporary(tmp_path):
    target = tmp_path / "processed" / "c.pt"
    r = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(target)], check=False, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 9, r.stderr
    leftovers = list(target.parent.glob(".c.pt.*.tmp"))
    assert len(leftovers) == 1 and not target.exists()        # what a killed writer leaves behind
    assert load_cache(target, "fp") is None                    # recovered: no cache, rebuild
    assert not list(target.parent.iterdir())                   # and the temporary file is gone
    save_cache(target, "fp", {"x": 2})
    assert load_cache(target, "fp") == {"x": 2} and [p.name for p in target.parent.iterdir()] == ["c.pt"]


def test_cache_keeps_temporaries_of_live_writers(tmp_path):
    import os
    import socket

    target = tmp_path / "c.pt"
    live = tmp_path / f".c.pt.{socket.gethostname().replace('.', '_')}.{os.getppid()}.abc.tmp"
    live.write_bytes(b"being written")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_cache(target, "fp") is None
    assert live.exists()


@pytest.mark.parametrize("make", [NormalizeScale, Center, lambda: RandomRotation("O3"), RandomTranslation,
                                  lambda: RadiusGraph(1.0), lambda: KNNGraph(2)],
                         ids=["NormalizeScale", "Center", "RandomRotation", "RandomTranslation", "RadiusGraph",
                              "KNNGraph"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf")], ids=["nan", "inf"])
def test_transforms_name_non_finite_positions(make, bad):
    """NaN or inf positions are named as such by every transform (NormalizeScale called them a
    'degenerate' cloud), and a cloud of coinciding points is still the degenerate one."""
    pos = torch.randn(5, 3, dtype=torch.float64)
    pos[2, 1] = bad
    name = type(make()).__name__
    with pytest.raises(ValueError, match=rf"{name}: data.pos contains NaN or inf"):
        make()(Data(pos=pos))
    with pytest.raises(ValueError, match="degenerate point cloud"):
        NormalizeScale()(Data(pos=torch.ones(4, 3)))
