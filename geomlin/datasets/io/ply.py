"""Reader for PLY meshes (Turk 1994 "The PLY polygon file format"): ASCII and binary, both endians.

Reads the ``vertex`` element's ``x, y, z`` and the ``face`` element's vertex-index list
(``vertex_indices`` or ``vertex_index``); other elements and properties are parsed and
skipped. Faces with four or more vertices are fan-triangulated. No ``plyfile`` needed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from geomlin.datasets.io.mesh_utils import check_finite, check_indices, fan_triangulate
from geomlin.validation import FileFormatError, check_file

PLY_TYPES = {
    "char": "i1", "int8": "i1", "uchar": "u1", "uint8": "u1", "short": "i2", "int16": "i2",
    "ushort": "u2", "uint16": "u2", "int": "i4", "int32": "i4", "uint": "u4", "uint32": "u4",
    "float": "f4", "float32": "f4", "double": "f8", "float64": "f8",
}
FORMATS = {"ascii": None, "binary_little_endian": "<", "binary_big_endian": ">"}
FACE_LISTS = ("vertex_indices", "vertex_index")


@dataclass
class _Prop:
    name: str
    dtype: str
    count_dtype: str | None = None      # set for list properties


@dataclass
class _Element:
    name: str
    count: int
    props: list[_Prop]


def _parse_header(data: bytes, path: str) -> tuple[str | None, list[_Element], int]:
    if not data.startswith(b"ply"):
        raise FileFormatError(path, "not a PLY file (missing the 'ply' magic line)", line=1)
    end = data.find(b"end_header")
    if end < 0:
        raise FileFormatError(path, "PLY header has no 'end_header' line")
    newline = data.find(b"\n", end)
    body_start = len(data) if newline < 0 else newline + 1
    fmt, elements = None, []
    for no, line in enumerate(data[:end].decode("ascii", errors="replace").splitlines()[1:], start=2):
        parts = line.split()
        if not parts or parts[0] in ("comment", "obj_info"):
            continue
        try:
            if parts[0] == "format":
                if parts[1] not in FORMATS:
                    raise FileFormatError(path, f"unknown PLY format {parts[1]!r}; expected one of {list(FORMATS)}",
                                          line=no)
                fmt = FORMATS[parts[1]]
            elif parts[0] == "element":
                if int(parts[2]) < 0:
                    raise FileFormatError(path, f"element {parts[1]!r} has a negative count {parts[2]}", line=no)
                elements.append(_Element(parts[1], int(parts[2]), []))
            elif parts[0] == "property":
                if not elements:
                    raise FileFormatError(path, "property before any element", line=no)
                if parts[1] == "list":
                    elements[-1].props.append(_Prop(parts[4], PLY_TYPES[parts[3]], PLY_TYPES[parts[2]]))
                else:
                    elements[-1].props.append(_Prop(parts[2], PLY_TYPES[parts[1]]))
        except FileFormatError:
            raise
        except (IndexError, KeyError, ValueError):
            raise FileFormatError(path, f"malformed PLY header line {line!r}", line=no) from None
    if "format" not in data[:end].decode("ascii", errors="replace"):
        raise FileFormatError(path, "PLY header lacks a 'format' line")
    return fmt, elements, body_start


def _read_binary_element(el: _Element, buf: memoryview, offset: int, endian: str, path: str):
    """Returns ({prop: array}, new offset). Scalar-only elements and uniform lists are vectorised."""
    scalar = all(p.count_dtype is None for p in el.props)
    if scalar:
        dt = np.dtype([(p.name, endian + p.dtype) for p in el.props])
        need = dt.itemsize * el.count
        if offset + need > len(buf):
            raise FileFormatError(path, f"truncated binary PLY: element {el.name!r} needs {need} bytes")
        arr = np.frombuffer(buf, dtype=dt, count=el.count, offset=offset)
        return {p.name: arr[p.name] for p in el.props}, offset + need
    if el.count == 0:
        return {p.name: np.zeros((0, 0)) for p in el.props}, offset
    # Fast path: every list has the length of the first row's lists.
    fields, probe = [], offset
    for p in el.props:
        if p.count_dtype is None:
            fields.append((p.name, endian + p.dtype))
            probe += np.dtype(p.dtype).itemsize
        else:
            if probe + np.dtype(p.count_dtype).itemsize > len(buf):
                raise FileFormatError(path, f"truncated binary PLY in element {el.name!r}")
            n = int(np.frombuffer(buf, dtype=endian + p.count_dtype, count=1, offset=probe)[0])
            fields += [(p.name + "__n", endian + p.count_dtype), (p.name, endian + p.dtype, (n,))]
            probe += np.dtype(p.count_dtype).itemsize + n * np.dtype(p.dtype).itemsize
    dt = np.dtype(fields)
    if offset + dt.itemsize * el.count <= len(buf):
        arr = np.frombuffer(buf, dtype=dt, count=el.count, offset=offset)
        lists = [p for p in el.props if p.count_dtype is not None]
        if all((arr[p.name + "__n"] == arr.dtype[p.name].shape[0]).all() for p in lists):
            return {p.name: arr[p.name] for p in el.props}, offset + dt.itemsize * el.count
    # General path: variable-length lists, one row at a time.
    out = {p.name: [] for p in el.props}
    for row in range(el.count):
        for p in el.props:
            try:
                if p.count_dtype is None:
                    out[p.name].append(np.frombuffer(buf, endian + p.dtype, 1, offset)[0])
                    offset += np.dtype(p.dtype).itemsize
                else:
                    n = int(np.frombuffer(buf, endian + p.count_dtype, 1, offset)[0])
                    offset += np.dtype(p.count_dtype).itemsize
                    out[p.name].append(np.frombuffer(buf, endian + p.dtype, n, offset).tolist())
                    offset += n * np.dtype(p.dtype).itemsize
            except ValueError:
                raise FileFormatError(path, f"truncated binary PLY at {el.name!r} row {row}") from None
    return out, offset


def _read_ascii_element(el: _Element, lines: list[tuple[int, str]], start: int, path: str):
    """Rows of one element from ``lines`` (``(1-based line number, text)`` pairs) starting at ``start``."""
    if start + el.count > len(lines):
        raise FileFormatError(path, f"truncated ASCII PLY: element {el.name!r} announces {el.count} rows, "
                              f"{max(len(lines) - start, 0)} remain")
    numbered = lines[start:start + el.count]
    rows = [r for _, r in numbered]
    if all(p.count_dtype is None for p in el.props):
        for no, r in numbered:
            if len(r.split()) != len(el.props):
                raise FileFormatError(path, f"row of element {el.name!r} has {len(r.split())} values, the header "
                                      f"declares {len(el.props)} properties: {r!r}", line=no)
        try:
            arr = np.array([r.split() for r in rows], dtype=np.float64).reshape(el.count, -1)
        except ValueError:
            for no, r in numbered:
                try:
                    [float(t) for t in r.split()]
                except ValueError:
                    raise FileFormatError(path, f"malformed number in a row of element {el.name!r}: {r!r}",
                                          line=no) from None
            raise
        # Round through the declared type so ASCII and binary files of the same mesh agree.
        return {p.name: arr[:, k].astype(p.dtype) for k, p in enumerate(el.props)}, start + el.count
    out = {p.name: [] for p in el.props}
    for no, r in numbered:
        toks, pos = r.split(), 0
        try:
            for p in el.props:
                if p.count_dtype is None:
                    out[p.name].append(float(toks[pos]))
                    pos += 1
                else:
                    n = int(toks[pos])
                    out[p.name].append([_list_entry(t, p.dtype) for t in toks[pos + 1:pos + 1 + n]])
                    if len(out[p.name][-1]) != n:
                        raise IndexError
                    pos += 1 + n
            if pos != len(toks):
                raise IndexError
        except (IndexError, ValueError):
            raise FileFormatError(path, f"malformed row of element {el.name!r}: {r!r}", line=no) from None
    return out, start + el.count


def _list_entry(token: str, dtype: str):
    """One entry of an ASCII list property; integer lists (face indices) refuse fractions."""
    if dtype[0] in "iu":
        return int(token)
    return float(token)


def read_ply(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """Vertices ``(V, 3)`` float64 and triangles ``(T, 3)`` int64 of a PLY file.

    Raises FileNotFoundError for a missing file and [`FileFormatError`][]
    (a ValueError) naming the file (and line, for ASCII files) for a bad header, truncated data,
    rows of the wrong width, missing ``x, y, z`` properties, non-finite coordinates or out-of-range
    faces. A file without a face element returns ``(0, 3)`` faces.
    """
    path = os.fspath(check_file(path, "path"))
    with open(path, "rb") as f:
        data = f.read()
    fmt, elements, start = _parse_header(data, path)
    values = {}
    if fmt is None:
        first = data[:start].count(b"\n") + 1
        lines = [(first + k, ln) for k, ln in enumerate(data[start:].decode("ascii", errors="replace").splitlines())
                 if ln.strip()]
        cursor = 0
        for el in elements:
            values[el.name], cursor = _read_ascii_element(el, lines, cursor, path)
    else:
        buf, offset = memoryview(data), start
        for el in elements:
            values[el.name], offset = _read_binary_element(el, buf, offset, fmt, path)
    vert = values.get("vertex")
    if vert is None or not all(k in vert for k in "xyz"):
        raise FileFormatError(path, "PLY file needs a 'vertex' element with x, y, z properties")
    verts = np.stack([np.asarray(vert[k], dtype=np.float64) for k in "xyz"], axis=1).reshape(-1, 3)
    check_finite(verts, path)
    face = values.get("face", {})
    key = next((k for k in FACE_LISTS if k in face), None)
    if key is None or len(face[key]) == 0:
        return verts, np.zeros((0, 3), dtype=np.int64)
    polys = face[key]
    if isinstance(polys, np.ndarray):
        faces = fan_triangulate(polys.astype(np.int64), path)
    else:
        faces = fan_triangulate([list(map(int, p)) for p in polys], path)
    check_indices(faces, len(verts), path)
    return verts, faces
