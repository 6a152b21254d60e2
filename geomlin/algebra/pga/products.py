"""Products of G(3,0,1): the geometric product, the join, the outer product and the versor action.

**Geometric product.** G(3,0,1) = G(3) + e0 G(3) (dual numbers over G(3)), and G(3) is
isomorphic to the complex 2x2 matrices (Pauli: ``e_k -> sigma_k``). With ``x = a + e0 b`` and
``y = c + e0 d``, ``x y = a c + e0 (a^ d + b c)``: three complex 2x2 products instead of a
``16^3`` Cayley table. The conversions are ``24 x 16`` / ``16 x 24`` real matrices built once
from the algebra.

**Join.** [`join`][] is the reference GATr's ``x v y = J(J(x) ^ J(y))`` with its dual ``J`` (a
signed reversal of the components, [`DUAL_SIGNS`][]; Dorst, "A Guided Tour to the Plane-Based
Geometric Algebra PGA", Table 4), computed from the 81 non-zero terms of its table. It differs
from the right-complement regressive product of
[`regressive_product`][geomlin.algebra.clifford.CliffordAlgebra.regressive_product] by signs that
depend on the grades.

**Layouts.** Each product has one kernel, written for the component-major layout ``(16, N)``
(each component one contiguous row of ``N`` numbers: [`geometric_product_columns`][],
[`join_columns`][]), which GATr's layers use directly. The functions on ``(..., 16)`` tensors
([`geometric_product`][], [`join`][]) transpose into that layout and back.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor

from geomlin.algebra.blades import selection_matrices
from geomlin.algebra.pga.basis import DEGENERATE, DIM, NONDEGENERATE, PGA, check_mv
from geomlin.precision import full_precision, output_dtype, working_dtype
from geomlin.tables import ConstantTables, table_on
from geomlin.validation import check_tensor

#: Columns per chunk of the component-major kernels: their ``(88, CHUNK_COLUMNS)`` intermediates
#: stay in the L2 cache (measured 3-5x faster on 32k columns than one pass).
CHUNK_COLUMNS = 4096
#: The reference GATr's dual ``J`` (Dorst's PGA guide, Table 4): ``J(x)[i] = DUAL_SIGNS[i] * x[15 - i]``.
DUAL_SIGNS = (1.0, -1.0, 1.0, -1.0, 1.0, 1.0, -1.0, 1.0, 1.0, -1.0, 1.0, -1.0, 1.0, -1.0, 1.0, 1.0)
#: Number of non-zero ``(i, j)`` pairs of the join table (as for any product of grades ``r + s >= 4``).
JOIN_NNZ = 81
#: The join's terms are zero-padded to a multiple of this: BLAS kernels run several times faster
#: on a multiple of 8 (measured with MKL on AVX2), 81 -> 88 terms.
JOIN_TERM_MULTIPLE = 8


# ---------------------------------------------------------------------- tables
@functools.cache
def _complex_maps() -> tuple[Tensor, Tensor, Tensor]:
    """float64 ``W_left (24, 16), W_right (24, 16), W_out (16, 24)`` of the complex 2x2 product.

    ``W_left @ x`` holds ``(a, a^, b)`` and ``W_right @ y`` holds ``(d, c, c)`` as three complex
    2x2 matrices each (24 reals: product, row, column, re/im); ``W_out`` maps the three products
    ``a d``... back: ``a c + e0 (a^ d + b c)``.
    """
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
    return w_left.T.contiguous(), w_right.T.contiguous(), w_out.T.contiguous()


def _dual_signs() -> Tensor:
    return torch.tensor(DUAL_SIGNS, dtype=torch.float64)


@functools.cache
def _join_table() -> Tensor:
    """float64 ``T (16, 16, 16)`` with ``join(x, y)_k = sum_ij x_i y_j T[i, j, k]``: ``J(J(x) ^ J(y))``."""
    jm = torch.zeros(DIM, DIM, dtype=torch.float64)  # J(x) = x @ jm
    for i in range(DIM):
        jm[DIM - 1 - i, i] = DUAL_SIGNS[i]
    return torch.einsum("ip,jq,pqr,rk->ijk", jm, jm, PGA.table("outer"), jm)


@functools.cache
def _join_selection() -> tuple[Tensor, Tensor, Tensor]:
    """[`selection_matrices`][geomlin.algebra.blades.selection_matrices] of the join table,
    transposed for the component-major layout: ``S_x (88, 16), S_y (88, 16), R (16, 88)``."""
    sx, sy, r = selection_matrices(_join_table(), multiple=JOIN_TERM_MULTIPLE)
    return sx.T.contiguous(), sy.T.contiguous(), r.T.contiguous()


#: Builders of the tables of this module by key (float64 CPU tensors), see [`tables`][].
_TABLES = {"pga:geometric_product": _complex_maps, "pga:join": _join_selection, "pga:dual": _dual_signs}


def tables(*keys: str) -> ConstantTables:
    """The tables a module's forward pass reads through ``tables=``, as non-persistent buffers.

    ``keys``: ``"pga:geometric_product"`` ([`geometric_product`][]), ``"pga:join"`` ([`join`][]),
    ``"pga:dual"`` ([`dual`][]), or any key of [`CliffordAlgebra.tables`][geomlin.algebra.clifford.CliffordAlgebra.tables]
    of [`PGA`][geomlin.algebra.pga.basis.PGA] (``"outer"`` for [`outer_product`][], ...).
    """
    return ConstantTables(table_entries(*keys))


def table_entries(*keys: str) -> dict[str, Tensor | tuple[Tensor, ...]]:
    """``{key read by the functions: float64 CPU table}`` of [`tables`][] keys (for a module that
    gathers tables of several sources into one [`ConstantTables`][geomlin.tables.ConstantTables])."""
    own = {key: _TABLES[key]() for key in keys if key in _TABLES}
    return {**own, **PGA.table_entries(*(key for key in keys if key not in _TABLES))}


def join_table() -> Tensor:
    """A copy of the float64 join table ``T (16, 16, 16)``, ``join(x, y)_k = sum_ij x_i y_j T_ijk``."""
    return _join_table().clone()


# ---------------------------------------------------------------------- component-major kernels
def _check_columns(a, name: str) -> Tensor:
    check_tensor(a, name, shape=(DIM, None), dtype="float", what="component-major multivectors (16, N)")
    return a


def _column_chunks(a: Tensor) -> tuple[Tensor, ...]:
    """Column chunks of ``a (16, N)`` of [`CHUNK_COLUMNS`][] columns (views; ``split`` rather than
    slicing, so the backward pass concatenates the chunks' gradients instead of zero-filling a
    full tensor per chunk).

    A symbolic column count (``torch.export`` with a dynamic size) is one chunk: the number of
    chunks would be a Python int fixed by the example's size.
    """
    if isinstance(a.shape[1], torch.SymInt):
        return (a,)
    return a.split(CHUNK_COLUMNS, dim=1)


def geometric_product_columns(a: Tensor, b: Tensor, *, tables: ConstantTables | None = None) -> Tensor:
    """Geometric product of component-major multivectors ``(16, N) x (16, N) -> (16, N)``.

    The complex 2x2 product of the module docstring, elementwise over column chunks. It follows
    [`geomlin.precision`][]'s rule (there is no complex half precision): float32 or float64 with
    autocast off; half-precision inputs give a float32 result under autocast (the precision it was
    computed in) and their own dtype otherwise.

    Parameters
    ----------
    a, b : Tensor of shape (16, N)
        multivectors, one per column (``b`` is cast to ``a``'s dtype).
    tables : ConstantTables, optional
        a module's [`tables`][] (``"pga:geometric_product"``); ``None`` reads a per-(device,
        dtype) cache.

    Returns
    -------
    Tensor of shape (16, N)
        ``a b`` column by column.
    """
    _check_columns(a, "a")
    _check_columns(b, "b")
    dtype = working_dtype(a.dtype)
    with full_precision(a):
        wide_a, wide_b = a.to(dtype), b.to(dtype)
        wl, wr, wo = (table_on("pga:geometric_product", _complex_maps, a.device, dtype, i, tables) for i in range(3))
        outs = []
        for x, y in zip(_column_chunks(wide_a), _column_chunks(wide_b)):
            left = (wl @ x).view(3, 2, 2, 2, -1)  # (product, row, column, re/im, columns)
            right = (wr @ y).view(3, 2, 2, 2, -1)
            lc = torch.complex(left[:, :, :, 0], left[:, :, :, 1])
            rc = torch.complex(right[:, :, :, 0], right[:, :, :, 1])
            prod = lc[:, :, 0, None] * rc[:, None, 0] + lc[:, :, 1, None] * rc[:, None, 1]
            flat = torch.view_as_real(prod).movedim(-1, 3).reshape(24, -1)
            outs.append(wo @ flat)
        out = torch.cat(outs, 1) if len(outs) > 1 else outs[0]
    return out.to(output_dtype(a))


def join_columns(a: Tensor, b: Tensor, *, tables: ConstantTables | None = None) -> Tensor:
    """Join ``J(J(a) ^ J(b))`` of component-major multivectors ``(16, N) x (16, N) -> (16, N)``.

    ``R ((S_x a) * (S_y b))`` over column chunks, with the 0/+-1 selection matrices of the 81
    non-zero terms of the join table (padded to 88). Runs in ``a``'s dtype (half precision
    included).

    Parameters
    ----------
    a, b : Tensor of shape (16, N)
        multivectors, one per column (``b`` is cast to ``a``'s dtype).
    tables : ConstantTables, optional
        a module's [`tables`][] (``"pga:join"``); ``None`` reads a per-(device, dtype) cache.

    Returns
    -------
    Tensor of shape (16, N)
        ``a v b`` column by column.
    """
    _check_columns(a, "a")
    _check_columns(b, "b")
    sx, sy, r = (table_on("pga:join", _join_selection, a.device, a.dtype, i, tables) for i in range(3))
    b = b.to(a.dtype)
    outs = [r @ ((sx @ x) * (sy @ y)) for x, y in zip(_column_chunks(a), _column_chunks(b))]
    return torch.cat(outs, 1) if len(outs) > 1 else outs[0]


# ---------------------------------------------------------------------- (..., 16) tensors
def _columns(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor, torch.Size]:
    """``x, y`` broadcast against each other as component-major ``(16, N)`` copies, and the common shape."""
    check_mv(x, "x")
    check_mv(y, "y")
    if y.dtype != x.dtype:
        y = y.to(x.dtype)
    shape = torch.broadcast_shapes(x.shape, y.shape)
    return x.expand(shape).reshape(-1, DIM).T.contiguous(), y.expand(shape).reshape(-1, DIM).T.contiguous(), shape


def _rows(out: Tensor, shape: torch.Size) -> Tensor:
    """Component-major ``(16, N)`` back to ``shape (..., 16)`` (one copy, contiguous)."""
    return out.T.contiguous().reshape(shape)


def geometric_product(x: Tensor, y: Tensor, *, tables: ConstantTables | None = None) -> Tensor:
    """G(3,0,1) geometric product ``x y`` of ``(..., 16)`` tensors (broadcasting).

    [`geometric_product_columns`][] in the row layout (dtypes as there).

    Parameters
    ----------
    x, y : Tensor of shape (..., 16)
        multivectors; the leading axes broadcast.
    tables : ConstantTables, optional
        a module's [`tables`][] (``"pga:geometric_product"``); ``None`` reads a per-(device,
        dtype) cache.

    Returns
    -------
    Tensor of shape (..., 16)
        ``x y``.
    """
    a, b, shape = _columns(x, y)
    return _rows(geometric_product_columns(a, b, tables=tables), shape)


def join(x: Tensor, y: Tensor, *, tables: ConstantTables | None = None) -> Tensor:
    """Join ``x v y = J(J(x) ^ J(y))`` (the line through two points, ...) of ``(..., 16)`` tensors.

    The reference GATr's convention (module docstring), [`join_columns`][] in the row layout.
    The join flips sign under odd versors; see
    [`geomlin.gatr.primitives.equivariant_join`][].

    Parameters
    ----------
    x, y : Tensor of shape (..., 16)
        multivectors; the leading axes broadcast.
    tables : ConstantTables, optional
        a module's [`tables`][] (``"pga:join"``); ``None`` reads a per-(device, dtype) cache.

    Returns
    -------
    Tensor of shape (..., 16)
        ``x v y``.
    """
    a, b, shape = _columns(x, y)
    return _rows(join_columns(a, b, tables=tables), shape)


def outer_product(x: Tensor, y: Tensor, *, tables: ConstantTables | None = None) -> Tensor:
    """Wedge ``x ^ y`` (meet of planes / lines) of ``(..., 16)`` tensors (the algebra's sparse product)."""
    return PGA.outer_product(x, y, tables=tables)


def dual(x: Tensor) -> Tensor:
    """The dual ``J(x)`` of ``(..., 16)``: components reversed, signs [`DUAL_SIGNS`][].

    Not equivariant by itself (it swaps e0-free and e0-carrying components); [`join`][] is
    ``J(J(x) ^ J(y))``.
    """
    check_mv(x)
    return x.flip(-1) * table_on("pga:dual", _dual_signs, x.device, x.dtype)


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
