"""OFF / PLY / OBJ readers: bundled PLY meshes against plyfile (oracle), hand-written files, bad files."""

import numpy as np
import pytest

from geomlin.datasets.io.obj import read_obj
from geomlin.datasets.io.off import read_off
from geomlin.datasets.io.ply import read_ply
from tests.datasets.conftest import MESH_DIR
from tests.datasets.helpers import CUBE_QUADS, CUBE_VERTS, write_off
from tests.oracles import require

MESHES = ("airplane", "ant", "nut", "sphere")


@pytest.mark.parametrize("name", MESHES)
def test_bundled_ply_matches_plyfile(name):
    plyfile = require("plyfile")
    ref = plyfile.PlyData.read(str(MESH_DIR / f"{name}.ply"))
    v, f = read_ply(MESH_DIR / f"{name}.ply")
    rv = np.stack([ref["vertex"][k] for k in "xyz"], axis=1).astype(np.float64)
    assert np.array_equal(v, rv)
    rf = np.array([list(p) for p in ref["face"]["vertex_indices"]])
    assert rf.shape[1] == 3 and np.array_equal(f, rf)


def _write_ply(path, verts, faces, fmt):
    header = ["ply", f"format {fmt} 1.0", "comment test", f"element vertex {len(verts)}",
              "property double x", "property double y", "property double z", "property uchar red",
              f"element face {len(faces)}", "property list uchar int vertex_indices", "end_header"]
    with open(path, "wb") as fh:
        fh.write(("\n".join(header) + "\n").encode())
        if fmt == "ascii":
            fh.writelines((" ".join(repr(float(x)) for x in v) + " 7\n").encode() for v in verts)
            fh.writelines((" ".join(map(str, [len(f), *f])) + "\n").encode() for f in faces)
        else:
            e = "<" if fmt == "binary_little_endian" else ">"
            vdt = np.dtype([("x", e + "f8"), ("y", e + "f8"), ("z", e + "f8"), ("r", "u1")])
            arr = np.zeros(len(verts), vdt)
            arr["x"], arr["y"], arr["z"] = verts.T
            fh.write(arr.tobytes())
            fh.writelines(np.array([len(f)], "u1").tobytes() + np.array(f, e + "i4").tobytes() for f in faces)


@pytest.mark.parametrize("fmt", ["ascii", "binary_little_endian", "binary_big_endian"])
def test_ply_formats_and_quads(tmp_path, fmt):
    faces = [list(q) for q in CUBE_QUADS[:4]] + [[0, 1, 2], [4, 5, 6]]   # mixed quads and triangles
    p = tmp_path / "cube.ply"
    _write_ply(p, CUBE_VERTS, faces, fmt)
    v, f = read_ply(p)
    assert np.array_equal(v, CUBE_VERTS)
    assert f.shape == (4 * 2 + 2, 3)
    assert f[:2].tolist() == [[0, 1, 3], [0, 3, 2]]          # fan of the first quad


def test_off_header_bug_quads_comments(tmp_path):
    p = tmp_path / "a.off"
    write_off(p, CUBE_VERTS, CUBE_QUADS, header_bug=True)
    v, f = read_off(p)
    assert np.array_equal(v, CUBE_VERTS) and f.shape == (12, 3)
    q = tmp_path / "b.off"
    q.write_text("OFF\n# comment\n3 1 0\n0 0 0\n1 0 0\n0 1 0  # trailing\n3 0 1 2 255 0 0\n")
    v, f = read_off(q)
    assert f.tolist() == [[0, 1, 2]] and v.shape == (3, 3)


def test_obj(tmp_path):
    p = tmp_path / "m.obj"
    p.write_text("# quad\nv 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nvn 0 0 1\nf 1/1/1 2/2/1 3/3/1 4/4/1\nf -4 -3 -2\n")
    v, f = read_obj(p)
    assert v.shape == (4, 3) and f.tolist() == [[0, 1, 2], [0, 2, 3], [0, 1, 2]]


@pytest.mark.parametrize("text, match", [
    ("PLX\n", "not an OFF file"),
    ("OFF\n4 1 0\n0 0 0\n1 0 0\n", "truncated"),
    ("OFF\n3 1 0\n0 0 0\n1 0 0\n0 1 0\n3 0 1 7\n", "outside 0..2"),
    ("OFF\n3 1 0\n0 0 0\n1 nan 0\n0 1 0\n3 0 1 2\n", "vertex 1 has a NaN"),
    ("OFF\n3 1 0\n0 0 0\n1 0 0\n0 1 0\n2 0 1\n", "vertex count >= 3"),
    ("OFF\nx y z\n", "malformed counts"),
])
def test_bad_off(tmp_path, text, match):
    p = tmp_path / "bad.off"
    p.write_text(text)
    with pytest.raises(ValueError, match=rf"bad\.off.*{match}"):
        read_off(p)


def test_bad_ply(tmp_path):
    p = tmp_path / "bad.ply"
    p.write_bytes(b"ply\nformat binary_little_endian 1.0\nelement vertex 10\nproperty float x\n"
                  b"property float y\nproperty float z\nend_header\n" + b"\0" * 20)
    with pytest.raises(ValueError, match=r"bad\.ply: truncated"):
        read_ply(p)
    p.write_bytes(b"nope")
    with pytest.raises(ValueError, match="not a PLY"):
        read_ply(p)
    with pytest.raises(FileNotFoundError):
        read_ply(tmp_path / "missing.ply")
