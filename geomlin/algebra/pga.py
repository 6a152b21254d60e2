"""Projective geometric algebra G(3,0,1): basis constants, a fast product, embed/extract pairs.

Basis order (the reference GATr's, so checkpoints and intuitions transfer)::

    index  0  1   2   3   4   5    6    7    8    9    10   11    12    13    14    15
    blade  1  e0  e1  e2  e3  e01  e02  e03  e12  e13  e23  e012  e013  e023  e123  e0123

``e0`` squares to 0, ``e1, e2, e3`` to 1. Geometric objects (Brehmer et al., "Geometric
Algebra Transformer", NeurIPS 2023, Table 1):

* plane ``n . x + d = 0``: vector ``d e0 + n1 e1 + n2 e2 + n3 e3``;
* point ``x``: trivector ``e123 - x e023 + y e013 - z e012``;
* line: bivector (join of two points);
* isometries: versors acting by ``rho_u(x) = u x^ u^-1`` (reflections in planes are the planes
  themselves, rotations are even rotors, translations ``1 + t e0 / 2``).

A point under an odd versor (a reflection) comes back as ``-P'``: PGA points are oriented, and a
reflection reverses the orientation (the weight ``e123`` becomes ``-1``). [`extract_point`][]
divides by the ``e123`` component, so it returns the reflected coordinates either way.

**Join**

[`join`][] is the reference GATr's ``x v y = J(J(x) ^ J(y))`` with its dual ``J`` (a signed
reversal of the components, [`DUAL_SIGNS`][]; Dorst, "A Guided Tour to the Plane-Based
Geometric Algebra PGA", Table 4). It differs from the right-complement regressive product of
[`regressive_product`][geomlin.algebra.clifford.CliffordAlgebra.regressive_product] by signs that depend on
the grades.

**Fast geometric product**

G(3,0,1) = G(3) + e0 G(3) (dual numbers over G(3)), and G(3) is isomorphic to complex
2x2 matrices (Pauli: ``e_k -> sigma_k``). With ``x = a + e0 b``, ``y = c + e0 d``,
``x y = a c + e0 (a^ d + b c)``: three complex 2x2 products instead of a 16^3 table.
The conversions are 16x24 / 24x16 real matrices built once from the algebra.

**Conventions that differ from the reference GATr (``gatr.interface``)**

* quaternions are ``(w, x, y, z)`` (scalar first) in [`embed_rotation`][],
  [`extract_rotation`][] and [`matrix_to_quaternion`][]; the reference uses
  ``(x, y, z, w)`` (``ijkw``, Hamilton convention in both). Convert with
  ``q[..., [1, 2, 3, 0]]`` (reference from geomlin) or ``q[..., [3, 0, 1, 2]]`` (the other way);
* [`extract_point`][] clamps a small weight ``|e123| < threshold`` to ``+-threshold`` keeping
  its sign (so the result does not depend on the orientation a reflection gives the point);
  the reference replaces it by ``+threshold`` whatever its sign;
* [`extract_oriented_plane`][] returns ``(normal, offset)``; the reference returns the
  normal only;
* [`extract_translation`][] is equivariant only for pure translators (as in the reference,
  where it is deprecated for that reason); it is kept for reading back [`embed_translation`][].

Everything else (basis order, point, plane, translation and scalar embeddings, products, join,
inner product) is the reference's, tested component by component against its formulas.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor

from geomlin.algebra.clifford import CliffordAlgebra, ConstantTables, table_on
from geomlin.validation import check_finite, check_orthogonal, check_tensor

#: G(3,0,1) with ``e0`` the degenerate direction (basis vectors labelled e0..e3).
PGA = CliffordAlgebra((0.0, 1.0, 1.0, 1.0), first_index=0)
DIM = 16

SCALAR = 0
E0, E1, E2, E3 = 1, 2, 3, 4
E01, E02, E03, E12, E13, E23 = 5, 6, 7, 8, 9, 10
E012, E013, E023, E123 = 11, 12, 13, 14
E0123 = 15
PSEUDOSCALAR = E0123

#: Blade names in storage order.
BLADE_NAMES = PGA.blade_names
#: Components of each grade 0..4.
GRADE_SLICES = PGA.grade_slices
#: Components without an e0 factor: the ones the (degenerate) inner product sees.
NONDEGENERATE = (SCALAR, E1, E2, E3, E12, E13, E23, E123)
#: Components with an e0 factor, in the order of [`NONDEGENERATE`][] (``e0 * blade``).
DEGENERATE = (E0, E01, E02, E03, E012, E013, E023, E0123)
#: The point's ``(x, y, z)`` are ``(-e023, +e013, -e012) / e123``.
POINT_COMPONENTS = (E023, E013, E012)
POINT_SIGNS = (-1.0, 1.0, -1.0)
PLANE_NORMAL = (E1, E2, E3)
TRANSLATION_COMPONENTS = (E01, E02, E03)

assert BLADE_NAMES == ("1", "e0", "e1", "e2", "e3", "e01", "e02", "e03", "e12", "e13", "e23",
                       "e012", "e013", "e023", "e123", "e0123")


def check_mv(x: Tensor, name: str = "x") -> Tensor:
    """Validate a G(3,0,1) multivector ``(..., 16)`` of floating dtype; returns it."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.ndim == 0 or x.shape[-1] != DIM:
        raise ValueError(f"{name} must have last dimension 16 (a G(3,0,1) multivector), "
                         f"got shape {tuple(x.shape)}")
    return check_tensor(x, name, dtype="float")


@functools.cache
def _runs(components: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    """Maximal runs of consecutive increasing indices of ``components`` as ``(start, stop)`` pairs."""
    runs: list[list[int]] = []
    for c in components:
        if runs and runs[-1][1] == c:
            runs[-1][1] = c + 1
        else:
            runs.append([c, c + 1])
    return tuple((a, b) for a, b in runs)


def select_components(x: Tensor, components: tuple[int, ...], dim: int = -1) -> Tensor:
    """The entries ``components`` (a tuple of indices such as [`NONDEGENERATE`][]) of ``x`` along
    ``dim``, in that order: ``(..., 16, ...) -> (..., len(components), ...)``.

    Taken as slices of the runs of consecutive indices (one view for a single run, one copy
    otherwise), so no index tensor is built or uploaded to ``x``'s device.
    """
    pieces = [x.narrow(dim, a, b - a) for a, b in _runs(tuple(components))]
    return pieces[0] if len(pieces) == 1 else torch.cat(pieces, dim)


def sum_components(x: Tensor, components: tuple[int, ...], keepdim: bool = False) -> Tensor:
    """``sum_{c in components} x[..., c]``: ``(..., 16) -> (...)`` (``(..., 1)`` with ``keepdim``)."""
    parts = [x[..., a:b].sum(-1, keepdim=True) for a, b in _runs(tuple(components))]
    out = parts[0]
    for part in parts[1:]:
        out = out + part
    return out if keepdim else out[..., 0]


def _signed(x: Tensor, components: tuple[int, ...], signs: tuple[float, ...]) -> Tensor:
    """``(signs[i] * x[..., components[i]])_i`` as ``(..., len(components))`` (no constant tensor)."""
    return torch.stack([x[..., c] if sign == 1.0 else sign * x[..., c] for c, sign in zip(components, signs)], -1)


def _place(out: Tensor, components: tuple[int, ...], values: Tensor) -> Tensor:
    """Write ``values (..., len(components))`` into ``out[..., components]`` (integer indices, in place)."""
    for i, c in enumerate(components):
        out[..., c] = values[..., i]
    return out


def _check_last(x: Tensor, size: int, name: str) -> Tensor:
    """A real floating tensor ``(..., size)`` (integer input is refused, not converted)."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.ndim == 0 or x.shape[-1] != size:
        raise ValueError(f"{name} must have last dimension {size}, got shape {tuple(x.shape)}")
    return check_tensor(x, name, dtype="float")


# ---------------------------------------------------------------------- fast product
@functools.cache
def _matrix_maps() -> tuple[Tensor, Tensor, Tensor]:
    """float64 ``W_left (16, 24), W_right (16, 24), W_out (24, 16)`` of the M2(C) product."""
    sigma = {1: torch.tensor([[0, 1], [1, 0]], dtype=torch.complex128),
             2: torch.tensor([[0, -1j], [1j, 0]], dtype=torch.complex128),
             3: torch.tensor([[1, 0], [0, -1]], dtype=torch.complex128)}
    eye = torch.eye(2, dtype=torch.complex128)
    # rep[k]: complex 2x2 of the k-th e0-free blade, as 8 reals (re, im interleaved)
    reps = []
    for idx in NONDEGENERATE:
        m = eye
        for i in PGA.blades[idx]:
            m = m @ sigma[i]
        reps.append(torch.view_as_real(m).reshape(8))
    rep = torch.stack(reps)  # (8 blades, 8 reals)
    involute = torch.tensor([(-1.0) ** len(PGA.blades[i]) for i in NONDEGENERATE], dtype=torch.float64)

    def place(components, r):  # 16 -> 8 reals through the blades listed in `components`
        out = torch.zeros(DIM, 8, dtype=torch.float64)
        out[list(components)] = r
        return out

    ma, mah, mb = place(NONDEGENERATE, rep), place(NONDEGENERATE, involute[:, None] * rep), place(DEGENERATE, rep)
    inv = torch.linalg.inv(rep)  # (8 reals -> 8 blade coefficients)
    na = torch.zeros(8, DIM, dtype=torch.float64)
    na[:, list(NONDEGENERATE)] = inv
    nb = torch.zeros(8, DIM, dtype=torch.float64)
    nb[:, list(DEGENERATE)] = inv
    w_left = torch.cat([ma, mah, mb], 1)
    w_right = torch.cat([ma, mb, ma], 1)
    w_out = torch.cat([na, nb, nb], 0)  # a c  +  e0 (a^ d  +  b c)
    return w_left, w_right, w_out


def _matrix_maps_on(device: torch.device, dtype: torch.dtype, tables: ConstantTables | None = None
                    ) -> tuple[Tensor, Tensor, Tensor]:
    return tuple(table_on("pga:matrix", _matrix_maps, device, dtype, i, tables) for i in range(3))


#: Tables of this module by key, for [`tables`][] (builders of float64 CPU tensors).
_TABLES = {}


def tables(*keys: str) -> ConstantTables:
    """The tables a module's forward pass reads through ``tables=``, as non-persistent buffers.

    ``keys``: ``"pga:matrix"`` ([`geometric_product`][], ``method="matrix"``), ``"pga:join"``
    ([`join`][]), ``"pga:join_table"`` (``join(method="dense")``), or any key of
    [`CliffordAlgebra.tables`][] of [`PGA`][] (``"geometric"``, ``"outer"``, ``"reverse"``, ...).
    """
    return ConstantTables(dict(build_table(key) for key in keys))


def build_table(key: str) -> tuple[str, Tensor | tuple[Tensor, ...]]:
    """``(key read by the functions, float64 / long CPU table)`` of a [`tables`][] key."""
    if key in _TABLES:
        return key, _TABLES[key]()
    key = PGA._table_key(key)
    return key, PGA._table_parts(key)


def geometric_product(x: Tensor, y: Tensor, method: str = "auto", *, tables: ConstantTables | None = None) -> Tensor:
    """G(3,0,1) geometric product ``x y`` of ``(..., 16)`` tensors (broadcasting).

    ``method``: ``"matrix"`` (the complex 2x2 dual-number product of the module docstring,
    float32/float64), ``"sparse"`` or ``"dense"`` (Cayley table, see
    [`CliffordAlgebra`][]). ``"auto"`` = ``"matrix"`` for
    float32/float64, ``"sparse"`` otherwise. ``tables``: a module's [`tables`][] (``"pga:matrix"``
    or the Cayley table); ``None`` reads a per-(device, dtype) cache.
    """
    if method == "auto":
        method = "matrix" if x.dtype in (torch.float32, torch.float64) else "sparse"
    if method != "matrix":
        return PGA.geometric_product(x, y, method, tables=tables)
    check_mv(x, "x")
    check_mv(y, "y")
    x, y, shape = _rows(x, y)
    wl, wr, wo = _matrix_maps_on(x.device, x.dtype, tables)
    left = torch.view_as_complex((x @ wl).unflatten(-1, (3, 2, 2, 2)))
    right = torch.view_as_complex((y @ wr).unflatten(-1, (3, 2, 2, 2)))
    prod = left @ right  # (rows, 3, 2, 2): a c, a^ d, b c
    return (torch.view_as_real(prod).flatten(-4) @ wo).reshape(shape)


def _rows(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor, torch.Size]:
    """``x, y`` broadcast against each other as ``(rows, 16)`` matrices, and the common shape.

    Products then run as one 2-D matrix multiplication: a strided ``(..., 16)`` view would
    otherwise become a batched product with the table copied for every batch entry.
    """
    if y.dtype != x.dtype:
        y = y.to(x.dtype)
    shape = torch.broadcast_shapes(x.shape, y.shape)
    return x.expand(shape).reshape(-1, DIM), y.expand(shape).reshape(-1, DIM), shape


def outer_product(x: Tensor, y: Tensor, method: str = "auto", *, tables: ConstantTables | None = None) -> Tensor:
    """Wedge ``x ^ y`` (meet of planes / lines) of ``(..., 16)`` tensors."""
    return PGA.outer_product(x, y, method, tables=tables)


#: The reference GATr's dual ``J`` (Dorst's PGA guide, Table 4): ``J(x)[i] = DUAL_SIGNS[i] * x[15 - i]``.
DUAL_SIGNS = (1.0, -1.0, 1.0, -1.0, 1.0, 1.0, -1.0, 1.0, 1.0, -1.0, 1.0, -1.0, 1.0, -1.0, 1.0, 1.0)
#: Number of non-zero ``(i, j)`` pairs of the join table (as for any product of grades ``r + s >= 4``).
JOIN_NNZ = 81


def dual(x: Tensor) -> Tensor:
    """The dual ``J(x)`` of ``(..., 16)``: components reversed, signs [`DUAL_SIGNS`][].

    Not equivariant by itself (it swaps e0-free and e0-carrying components); [`join`][] uses it
    twice.
    """
    check_mv(x)
    return x.flip(-1) * table_on("pga:dual", _dual_signs, x.device, x.dtype)


def _dual_signs() -> Tensor:
    return torch.tensor(DUAL_SIGNS, dtype=torch.float64)


@functools.cache
def _join_table() -> Tensor:
    """float64 ``T (16, 16, 16)`` with ``join(x, y)_k = sum_ij x_i y_j T[i, j, k]``: ``J(J(x) ^ J(y))``."""
    jm = torch.zeros(DIM, DIM, dtype=torch.float64)  # J(x) = x @ jm
    for i in range(DIM):
        jm[DIM - 1 - i, i] = DUAL_SIGNS[i]
    return torch.einsum("ip,jq,pqr,rk->ijk", jm, jm, PGA.table("outer"), jm)


#: The join's selection matrices are zero-padded from 81 to this many columns: BLAS kernels
#: run several times faster on a multiple of 8 (measured with MKL on AVX2).
JOIN_PADDED = 88
#: The sparse join runs over at most this many rows at a time, so its ``(rows, 88)``
#: intermediates stay in cache (measured 3-5x faster on 32k rows than one pass).
JOIN_CHUNK_ROWS = 4096


@functools.cache
def _join_sparse() -> tuple[Tensor, Tensor, Tensor]:
    """Selection matrices ``(S_x (16, 88), S_y (16, 88), R (88, 16))`` of the join table (81 pairs, zero-padded)."""
    table = _join_table()
    i, j, k = table.nonzero(as_tuple=True)
    col = torch.arange(len(i))
    sx = torch.zeros(DIM, JOIN_PADDED, dtype=torch.float64)
    sx[i, col] = table[i, j, k]
    sy = torch.zeros(DIM, JOIN_PADDED, dtype=torch.float64)
    sy[j, col] = 1.0
    r = torch.zeros(JOIN_PADDED, DIM, dtype=torch.float64)
    r[col, k] = 1.0
    return sx, sy, r


def join_table() -> Tensor:
    """A copy of the float64 join table ``T (16, 16, 16)``, ``join(x, y)_k = sum_ij x_i y_j T_ijk``."""
    return _join_table().clone()


def join(x: Tensor, y: Tensor, method: str = "auto", *, tables: ConstantTables | None = None) -> Tensor:
    """Join ``x v y = J(J(x) ^ J(y))`` (the line through two points, ...) of ``(..., 16)`` tensors.

    The reference GATr's convention (see the module docstring). ``method``: ``"auto"`` /
    ``"sparse"`` (the 81 non-zero pairs: ``((x S_x) * (y S_y)) R`` with 0/+-1 selection
    matrices) or ``"dense"`` (the ``16^3``
    einsum). The join flips sign under odd versors; see
    [`geomlin.gatr.primitives.equivariant_join`][]. ``tables``: a
    module's [`tables`][] (``"pga:join"`` / ``"pga:join_table"``); ``None`` reads a per-(device, dtype) cache.
    """
    check_mv(x, "x")
    check_mv(y, "y")
    if method not in ("auto", "sparse", "dense"):
        raise ValueError(f"method must be one of 'auto', 'sparse', 'dense', got {method!r}")
    if y.dtype != x.dtype:
        y = y.to(x.dtype)
    if method == "dense":
        table = table_on("pga:join_table", _join_table, x.device, x.dtype, tables=tables)
        return torch.einsum("...i,...j,ijk->...k", x, y, table)
    sx, sy, r = (table_on("pga:join", _join_sparse, x.device, x.dtype, i, tables) for i in range(3))
    x, y, shape = _rows(x, y)
    if x.shape[0] <= JOIN_CHUNK_ROWS:
        return (((x @ sx) * (y @ sy)) @ r).reshape(shape)
    parts = [((a @ sx) * (b @ sy)) @ r for a, b in zip(x.split(JOIN_CHUNK_ROWS), y.split(JOIN_CHUNK_ROWS))]
    return torch.cat(parts).reshape(shape)


def reverse(x: Tensor) -> Tensor:
    """Reversion of ``(..., 16)``."""
    return PGA.reverse(x)


def grade_involution(x: Tensor) -> Tensor:
    """Grade involution of ``(..., 16)``."""
    return PGA.grade_involution(x)


def sandwich(v: Tensor, x: Tensor) -> Tensor:
    """Pin(3,0,1) action ``v x^ v^-1`` of a versor ``v (..., 16)`` on ``x (..., 16)`` (broadcasting).

    For a single versor ``v (16,)`` and ``x (..., items, channels, 16)`` the versor acts on
    every multivector. Odd versors (reflections) apply the grade involution.
    """
    check_mv(v, "v")
    check_mv(x, "x")
    odd = PGA.parity(v)[..., None]
    xs = torch.where(odd, PGA.grade_involution(x), x)
    inv = PGA.inverse_versor(v)
    if v.ndim == 1:
        # x -> (v xs) v^-1 is linear in x: build the 16x16 matrix once
        left = geometric_product(v, torch.eye(DIM, dtype=x.dtype, device=x.device))  # rows: v e_j
        mat = geometric_product(left, inv.to(x.dtype))  # (16 in, 16 out)
        return xs @ mat
    return geometric_product(geometric_product(v, xs), inv)


def versor_matrix(v: Tensor) -> Tensor:
    """The ``(16, 16)`` matrix ``M`` with ``sandwich(v, x) = x @ M`` for a single versor ``v (16,)``."""
    check_mv(v, "v")
    if v.ndim != 1:
        raise ValueError(f"versor_matrix needs one versor of shape (16,), got {tuple(v.shape)}")
    eye = torch.eye(DIM, dtype=v.dtype, device=v.device)
    return sandwich(v, eye)


# ---------------------------------------------------------------------- embeddings
def _zeros(like: Tensor, lead) -> Tensor:
    return torch.zeros(*lead, DIM, dtype=like.dtype if like.is_floating_point() else torch.get_default_dtype(),
                       device=like.device)


def embed_scalar(s: Tensor) -> Tensor:
    """Scalars ``(..., 1)`` -> multivectors ``(..., 16)``."""
    _check_last(s, 1, "scalar")
    out = _zeros(s, s.shape[:-1])
    out[..., SCALAR] = s[..., 0]
    return out


def extract_scalar(x: Tensor) -> Tensor:
    """Scalar component ``(..., 16) -> (..., 1)``."""
    return check_mv(x)[..., SCALAR:SCALAR + 1]


def embed_pseudoscalar(p: Tensor) -> Tensor:
    """Pseudoscalars ``(..., 1)`` -> ``(..., 16)`` on ``e0123``."""
    _check_last(p, 1, "pseudoscalar")
    out = _zeros(p, p.shape[:-1])
    out[..., E0123] = p[..., 0]
    return out


def extract_pseudoscalar(x: Tensor) -> Tensor:
    """``e0123`` component ``(..., 16) -> (..., 1)``."""
    return check_mv(x)[..., E0123:E0123 + 1]


def embed_point(pos: Tensor) -> Tensor:
    """Points ``(..., 3)`` -> trivectors ``(..., 16)``: ``e123 = 1, e023 = -x, e013 = y, e012 = -z``."""
    _check_last(pos, 3, "point coordinates")
    check_finite(pos, "point coordinates")
    out = _zeros(pos, pos.shape[:-1])
    out[..., E123] = 1.0
    for c, (idx, sign) in enumerate(zip(POINT_COMPONENTS, POINT_SIGNS)):
        out[..., idx] = sign * pos[..., c]
    return out


def extract_point(x: Tensor, threshold: float = 1e-3) -> Tensor:
    """Trivector ``(..., 16)`` -> coordinates ``(..., 3)``, dividing by the ``e123`` weight.

    The division makes the result independent of the sign a reflection puts on the point.
    Weights with ``|e123| < threshold`` (points at infinity) are clamped to ``+-threshold``, keeping
    their sign (a weight of exactly 0 counts as positive). The reference GATr clamps them to
    ``+threshold`` whatever their sign, so the two differ only for ``-threshold < e123 < 0``.
    """
    check_mv(x)
    from geomlin.validation import check_positive_float

    check_finite(x, "x")
    threshold = check_positive_float(threshold, "threshold")
    w = x[..., E123:E123 + 1]
    clamped = w.new_full((), threshold)
    w = torch.where(w.abs() < threshold, torch.where(w < 0, -clamped, clamped), w)
    return _signed(x, POINT_COMPONENTS, POINT_SIGNS) / w


def embed_oriented_plane(normal: Tensor, position: Tensor) -> Tensor:
    """Plane through ``position (..., 3)`` with normal ``normal (..., 3)`` -> vector ``(..., 16)``.

    ``n1 e1 + n2 e2 + n3 e3 + d e0`` with ``d = -n . position``.
    """
    _check_last(normal, 3, "normal")
    _check_last(position, 3, "position")
    normal, position = torch.broadcast_tensors(normal, position)
    out = _zeros(normal, normal.shape[:-1])
    _place(out, PLANE_NORMAL, normal)
    out[..., E0] = -(normal * position).sum(-1)
    return out


def extract_oriented_plane(x: Tensor) -> tuple[Tensor, Tensor]:
    """Vector part of ``(..., 16)`` -> ``(normal (..., 3), offset (..., 1))`` with the plane
    ``normal . p + offset = 0``."""
    check_mv(x)
    return select_components(x, PLANE_NORMAL), x[..., E0:E0 + 1]


def plane_closest_point(x: Tensor) -> Tensor:
    """Point of the plane ``(..., 16)`` closest to the origin, ``(..., 3)``: ``-d n / |n|^2``."""
    n, d = extract_oriented_plane(x)
    return -d * n / (n * n).sum(-1, keepdim=True).clamp_min(1e-12)


def embed_reflection(normal: Tensor, position: Tensor) -> Tensor:
    """Reflection in a plane: the plane itself with unit normal ``(..., 16)`` (an odd versor)."""
    normal = _check_last(normal, 3, "normal")
    normal = normal / normal.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    return embed_oriented_plane(normal, position)


def embed_line(point: Tensor, direction: Tensor) -> Tensor:
    """Line through ``point (..., 3)`` along ``direction (..., 3)`` -> bivector ``(..., 16)``.

    The join of the points ``point`` and ``point + direction``: the ``e12, e13, e23``
    components carry the direction, ``e01, e02, e03`` the moment.
    """
    _check_last(point, 3, "point")
    _check_last(direction, 3, "direction")
    point, direction = torch.broadcast_tensors(point, direction)
    return join(embed_point(point), embed_point(point + direction))


#: (e23, e13, e12) components of a line hold (direction_x, -direction_y, direction_z) up to
#: the orientation set by the join; see [`extract_line`][].
LINE_DIRECTION_COMPONENTS = (E23, E13, E12)


@functools.cache
def _line_maps() -> tuple[Tensor, Tensor]:
    """Linear maps from a line bivector to its direction (3) and moment (3), float64.

    Found once from the embedding itself: a line is linear in (direction, point x direction).
    """
    # the join of P(p) and P(p + d) is linear in (d, p x d); fit the exact 6x16 map on samples
    gen = torch.Generator().manual_seed(0)
    p = torch.randn(32, 3, generator=gen, dtype=torch.float64)
    d = torch.randn(32, 3, generator=gen, dtype=torch.float64)
    feats = torch.cat([d, torch.linalg.cross(p, d)], -1)  # (32, 6)
    mv = embed_line(p, d)  # (32, 16)
    sol = torch.linalg.lstsq(feats, mv).solution  # (6, 16): mv = feats @ sol
    return sol, torch.linalg.pinv(sol)  # embed (6, 16), extract (16, 6)


def _line_map_on(index: int, device: torch.device, dtype: torch.dtype) -> Tensor:
    """``_line_maps()[index]`` cached on ``device`` / ``dtype``."""
    return table_on("pga:line_maps", _line_maps, device, dtype, index)


def extract_line(x: Tensor) -> tuple[Tensor, Tensor]:
    """Line bivector ``(..., 16)`` -> ``(point closest to the origin (..., 3), direction (..., 3))``.

    Uses Pluecker coordinates ``(d, m = p x d)``; the closest point is ``d x m / |d|^2``.
    """
    check_mv(x)
    pl = x @ _line_map_on(1, x.device, x.dtype)
    d, m = pl[..., :3], pl[..., 3:]
    point = torch.linalg.cross(d, m) / (d * d).sum(-1, keepdim=True).clamp_min(1e-12)
    return point, d


def embed_pluecker_ray(pluecker: Tensor) -> Tensor:
    """Pluecker coordinates ``(..., 6) = (direction, moment = p x direction)`` -> bivector ``(..., 16)``."""
    _check_last(pluecker, 6, "pluecker coordinates")
    return pluecker @ _line_map_on(0, pluecker.device, pluecker.dtype)


def extract_pluecker_ray(x: Tensor) -> Tensor:
    """Bivector ``(..., 16)`` -> Pluecker coordinates ``(..., 6)`` (inverse of [`embed_pluecker_ray`][])."""
    check_mv(x)
    return x @ _line_map_on(1, x.device, x.dtype)


def embed_translation(t: Tensor) -> Tensor:
    """Translation by ``t (..., 3)`` -> even versor ``1 + (t1 e01 + t2 e02 + t3 e03) / 2``.

    The sign convention is fixed by the test ``extract_point(sandwich(T, P)) == x + t``.
    """
    _check_last(t, 3, "translation")
    out = _zeros(t, t.shape[:-1])
    out[..., SCALAR] = 1.0
    return _place(out, TRANSLATION_COMPONENTS, TRANSLATION_SIGN * 0.5 * t)


def extract_translation(x: Tensor) -> Tensor:
    """Translation versor ``(..., 16)`` -> ``t (..., 3)`` (normalised by the scalar part)."""
    check_mv(x)
    return TRANSLATION_SIGN * 2.0 * select_components(x, TRANSLATION_COMPONENTS) / x[..., SCALAR:SCALAR + 1]


#: Sign of the ``e0i`` components of a translator (determined by the point convention).
TRANSLATION_SIGN = -1.0
#: Rotor components for quaternion ``(w, x, y, z)``: ``w + sx x e23 + sy y e13 + sz z e12``.
ROTOR_COMPONENTS = (E23, E13, E12)
ROTOR_SIGNS = (-1.0, 1.0, -1.0)


def embed_rotation(quaternion: Tensor) -> Tensor:
    """Unit quaternion ``(..., 4)`` in ``(w, x, y, z)`` order (scalar first) -> even rotor ``(..., 16)``.

    The rotor acts on points and planes as the rotation ``q v q*`` (Hamilton convention). The
    reference GATr's ``embed_rotation`` takes ``(x, y, z, w)``: pass ``q[..., [3, 0, 1, 2]]`` of a
    reference quaternion here.
    """
    _check_last(quaternion, 4, "quaternion")
    out = _zeros(quaternion, quaternion.shape[:-1])
    out[..., SCALAR] = quaternion[..., 0]
    for c, (idx, sign) in enumerate(zip(ROTOR_COMPONENTS, ROTOR_SIGNS)):
        out[..., idx] = sign * quaternion[..., c + 1]
    return out


def extract_rotation(x: Tensor) -> Tensor:
    """Rotor ``(..., 16)`` -> unit quaternion ``(..., 4)`` ``(w, x, y, z)`` (normalised)."""
    check_mv(x)
    q = torch.cat([x[..., SCALAR:SCALAR + 1], _signed(x, ROTOR_COMPONENTS, ROTOR_SIGNS)], -1)
    return q / q.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def matrix_to_quaternion(R: Tensor) -> Tensor:
    """Rotation matrices ``(..., 3, 3)`` (orthogonal, det +1) -> unit quaternions ``(..., 4)`` ``(w, x, y, z)``.

    Scalar first, unlike the reference GATr's ``(x, y, z, w)``. Shepperd's method: branch on the
    largest of ``trace, R00, R11, R22`` for stability. Refuses non-orthogonal and improper
    matrices ([`geomlin.validation.check_orthogonal`][]).
    """
    check_tensor(R, "R", shape=(..., 3, 3), what="rotation matrices")
    check_orthogonal(R, "R", special=True)
    r00, r11, r22 = R[..., 0, 0], R[..., 1, 1], R[..., 2, 2]
    tr = r00 + r11 + r22
    cands = torch.stack([
        torch.stack([1 + tr, R[..., 2, 1] - R[..., 1, 2], R[..., 0, 2] - R[..., 2, 0], R[..., 1, 0] - R[..., 0, 1]], -1),
        torch.stack([R[..., 2, 1] - R[..., 1, 2], 1 + r00 - r11 - r22, R[..., 0, 1] + R[..., 1, 0], R[..., 0, 2] + R[..., 2, 0]], -1),
        torch.stack([R[..., 0, 2] - R[..., 2, 0], R[..., 0, 1] + R[..., 1, 0], 1 - r00 + r11 - r22, R[..., 1, 2] + R[..., 2, 1]], -1),
        torch.stack([R[..., 1, 0] - R[..., 0, 1], R[..., 0, 2] + R[..., 2, 0], R[..., 1, 2] + R[..., 2, 1], 1 - r00 - r11 + r22], -1),
    ], -2)  # (..., 4 candidates, 4); candidate c has component c equal to 4 q_c^2
    choice = torch.stack([tr, r00, r11, r22], -1).argmax(-1)
    q = torch.gather(cands, -2, choice[..., None, None].expand(*choice.shape, 1, 4)).squeeze(-2)
    return q / q.norm(dim=-1, keepdim=True)


def embed_rigid_motion(R: Tensor, t: Tensor) -> Tensor:
    """Rigid motion ``p -> R p + t`` (``R (..., 3, 3)`` orthogonal, det +-1; ``t (..., 3)``) -> versor ``(..., 16)``.

    Proper rotations give even motors ``T * rotor``; improper ones (det -1) are written as
    ``R = R' H`` with ``H`` the reflection in the plane ``x = 0`` and give odd versors
    ``T * rotor(R') * e1``. ``R`` must be orthogonal to the dtype's tolerance
    ([`geomlin.validation.check_orthogonal`][]): a shear or a scaled
    rotation is refused rather than turned into some unrelated rotation.
    """
    check_tensor(R, "R", shape=(..., 3, 3), what="orthogonal matrices")
    check_orthogonal(R, "R")
    _check_last(t, 3, "translation")
    det = torch.linalg.det(R)
    improper = det < 0
    flip = torch.ones(3, dtype=R.dtype, device=R.device)
    flip[0] = -1.0
    R_proper = torch.where(improper[..., None, None], R * flip, R)  # R H: flips column 0
    rotor = embed_rotation(matrix_to_quaternion(R_proper))
    plane = torch.zeros(DIM, dtype=R.dtype, device=R.device)
    plane[E1] = 1.0
    rotor = torch.where(improper[..., None], geometric_product(rotor, plane.expand_as(rotor)), rotor)
    return geometric_product(embed_translation(t.to(R.dtype)).expand_as(rotor), rotor)


_TABLES.update({"pga:matrix": _matrix_maps, "pga:join": _join_sparse, "pga:join_table": _join_table,
                "pga:dual": _dual_signs})


def rigid_motion_versor(g) -> Tensor:
    """A [`geomlin.groups.RigidTransform`][geomlin.groups.euclidean.RigidTransform] (single or batched) -> versor(s) ``(..., 16)``."""
    return embed_rigid_motion(g.R, g.t)
