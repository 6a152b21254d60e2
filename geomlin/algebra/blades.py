"""Blade tables of Clifford algebras of any signature: pure functions of the metric, built once in float64.

An algebra is given by the squares of its basis vectors, ``metric = (m_0, ..., m_{n-1})`` with
``m_i`` in ``{1, -1, 0}``. Its ``2**n`` basis blades are stored in the *grade-lexicographic*
order: grade 0 first, then the blades of each grade in lexicographic order of their index tuples
([`basis`][]; for ``n = 4`` with indices ``0..3``: ``[1, e0, e1, e2, e3, e01, e02, e03, e12, e13,
e23, e012, e013, e023, e123, e0123]``, the order of the reference GATr implementation).

Blades are bitmaps (bit ``i`` set when ``e_i`` is a factor). The product of two blades is
``e_A e_B = sign(A, B) * prod_{i in A & B} m_i * e_{A xor B}``, where ``sign`` counts the
transpositions that bring the concatenation into canonical order (Dorst, Fontijne and Mann,
*Geometric Algebra for Computer Science*, sec. 19.1). Every table here follows from this rule:
the Cayley table of each product ([`product_table`][]; the others are masks of the geometric
one, the regressive product goes through the complement), its sparse form
([`selection_matrices`][], [`sparse_product`][]), the per-component signs and forms
([`component_tables`][]) and the subspace paths ([`product_paths`][]). Each is cached per
metric with ``functools.cache`` (host tables, shared and read-only); kernels read them on a
device through [`geomlin.tables`][]. [`geomlin.algebra.clifford.CliffordAlgebra`][] is the
algebra built on them.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence

import torch
from torch import Tensor

from geomlin.validation import check_positive_int, check_tensor

#: Products the engine knows, each a masked Cayley table.
PRODUCTS = ("geometric", "outer", "fat_dot", "left_contraction", "right_contraction", "scalar",
            "regressive")
#: Number of subspaces of quaternion type (grades ``0, 1, 2, 3 (mod 4)``).
NUM_QUATERNION_TYPES = 4


def _popcount(x: int) -> int:
    return x.bit_count()


def _reorder_sign(a: int, b: int) -> int:
    """Sign of bringing ``e_A e_B`` (bitmaps) into canonical order."""
    swaps = 0
    a >>= 1
    while a:
        swaps += _popcount(a & b)
        a >>= 1
    return -1 if swaps & 1 else 1


@functools.cache
def basis(n: int) -> tuple[tuple[tuple[int, ...], ...], tuple[int, ...]]:
    """``(blades, bitmaps)`` of ``n`` basis vectors in grade-lexicographic order: each blade as its
    tuple of basis-vector indices and as its bitmap (bit ``i`` set when ``e_i`` is a factor)."""
    blades = tuple(c for g in range(n + 1) for c in itertools.combinations(range(n), g))
    bitmaps = tuple(sum(1 << i for i in b) for b in blades)
    return blades, bitmaps


@functools.cache
def component_tables(metric: tuple[float, ...]) -> dict[str, Tensor]:
    """Per-component tables of a metric, by name: ``"grade"`` ``(d,)`` long; the sign vectors
    ``"reverse"``, ``"involute"``, ``"conjugate"`` of the involutions; ``"square"`` (``e_A e_A``) and
    ``"quadratic_form"`` (``<e_A ~e_A>_0``); the metric-free right ``"complement"`` (a signed
    permutation ``(d, d)``) and its inverse ``"uncomplement"``. float64 (shared: read-only)."""
    n = len(metric)
    blades, bitmaps = basis(n)
    d = len(blades)
    index = {bm: i for i, bm in enumerate(bitmaps)}
    grade = torch.tensor([len(b) for b in blades])
    # Right complement (Poincare duality, metric free): e_A -> c_A e_{~A} with e_A ^ c_A e_{~A} = I.
    full = (1 << n) - 1
    comp = torch.zeros(d, d, dtype=torch.float64)  # comp[i, k]: coefficient of blade k in complement(e_i)
    for i, a in enumerate(bitmaps):
        comp[i, index[full ^ a]] = float(_reorder_sign(a, full ^ a))
    out = {"grade": grade, "complement": comp, "uncomplement": comp.T.clone(),  # inverse = transpose
           "reverse": torch.tensor([(-1.0) ** (g * (g - 1) // 2) for g in grade.tolist()], dtype=torch.float64),
           "involute": torch.tensor([(-1.0) ** g for g in grade.tolist()], dtype=torch.float64)}
    out["conjugate"] = out["reverse"] * out["involute"]
    # square: the scalar e_A e_A = sign(A, A) prod_{k in A} m_k; quadratic_form: <e_A ~e_A>_0
    out["square"] = torch.tensor([_reorder_sign(a, a) * math.prod(metric[k] for k in range(n) if a >> k & 1)
                                  for a in bitmaps], dtype=torch.float64)
    out["quadratic_form"] = out["square"] * out["reverse"]
    return out


#: The sign of grade ``k`` under each involution.
GRADE_SIGNS = {"reverse": lambda k: (-1) ** (k * (k - 1) // 2), "involute": lambda k: (-1) ** k,
                "conjugate": lambda k: (-1) ** (k * (k + 1) // 2)}


@functools.cache
def sign_runs(n: int, key: str) -> tuple[tuple[int, int, int], ...]:
    """``(start, stop, sign)`` of the runs of consecutive components with one sign under involution ``key``
    (``"reverse"``, ``"involute"`` or ``"conjugate"``; grades are contiguous in storage order)."""
    runs: list[list[int]] = []
    start = 0
    for k in range(n + 1):
        stop = start + math.comb(n, k)
        sign = GRADE_SIGNS[key](k)
        if runs and runs[-1][2] == sign:
            runs[-1][1] = stop
        else:
            runs.append([start, stop, sign])
        start = stop
    return tuple(tuple(r) for r in runs)


@functools.cache
def product_table(metric: tuple[float, ...], kind: str) -> Tensor:
    """The dense ``(d, d, d)`` float64 table of product ``kind`` ([`PRODUCTS`][]), ``(a b)_k = sum_ij a_i b_j T_ijk``,
    built on first use (``n = 8``: 128 MB each; shared: read-only)."""
    n = len(metric)
    _, bitmaps = basis(n)
    d = len(bitmaps)
    if kind == "geometric":
        # e_A e_B = sign(A, B) prod_{k in A & B} m_k e_{A xor B}, for all pairs at once (bitmaps as ints)
        bm = torch.tensor(bitmaps)
        A, B = bm[:, None], bm[None, :]
        swaps = torch.zeros(d, d, dtype=torch.long)
        for shift in range(1, n):
            overlap = (A >> shift) & B
            for k in range(n):
                swaps += (overlap >> k) & 1
        sign = 1.0 - 2.0 * (swaps % 2).double()
        common = A & B
        for k in range(n):
            sign = sign * torch.where((common >> k) & 1 == 1, metric[k], 1.0)
        position = torch.full((1 << n,), -1, dtype=torch.long)
        position[bm] = torch.arange(d)
        gp = torch.zeros(d, d, d, dtype=torch.float64)
        rows, cols = torch.meshgrid(torch.arange(d), torch.arange(d), indexing="ij")
        gp[rows, cols, position[A ^ B]] = sign
        return gp
    if kind == "regressive":
        # a v b = uncomp(comp(a) ^ comp(b)): V[i, j, k] = sum C[i,p] C[j,q] W[p,q,r] U[r,k]; with
        # C[i, p] = s_i [p = pi(i)] and U[r, k] = s_k [r = pi(k)] this is s_i s_j s_k W[pi(i), pi(j), pi(k)]
        comp = component_tables(metric)["complement"]
        perm = comp.abs().argmax(1)
        sign = comp[torch.arange(d), perm]
        outer = product_table(metric, "outer")
        return outer[perm][:, perm][:, :, perm] * sign[:, None, None] * sign[None, :, None] * sign[None, None, :]
    grade = component_tables(metric)["grade"]
    gi, gj, gk = grade[:, None, None], grade[None, :, None], grade[None, None, :]
    mask = {"outer": gk == gi + gj, "left_contraction": gk == gj - gi, "right_contraction": gk == gi - gj,
            "fat_dot": gk == (gi - gj).abs(), "scalar": gk == 0}[kind]
    return product_table(metric, "geometric") * mask


def _table_of(metric: tuple[float, ...], key: str) -> Tensor:
    """A product table ([`PRODUCTS`][]) or a per-component table ([`component_tables`][]), cached."""
    return product_table(metric, key) if key in PRODUCTS else component_tables(metric)[key]


def selection_matrices(table: Tensor, left: Sequence[int] | None = None, right: Sequence[int] | None = None,
                       multiple: int = 1) -> tuple[Tensor, Tensor, Tensor]:
    """The non-zero terms of a bilinear product table as three matrices, the sparse form of a product.

    ``(a * b)_k = sum_ij a_i b_j T[i, j, k]`` has one term per non-zero ``T[i, j, k]``; with the
    ``t``-th term ``(i, j, k)`` in column ``t``, ``S_a[i, t] = T[i, j, k]``, ``S_b[j, t] = 1`` and
    ``R[t, k] = 1``, so ``a * b = ((a @ S_a) * (b @ S_b)) @ R``. Terms are numbered in the order of
    ``(i, j, k)``.

    Parameters
    ----------
    table : Tensor of shape (d, d, d)
        a float64 product table (each ``(i, j)`` pair has at most one non-zero ``k``).
    left, right : Sequence[int], optional
        keep only the terms whose ``i`` is in ``left`` / ``j`` is in ``right`` (the product of
        multivectors known to vanish elsewhere; the other rows of ``S_a`` / ``S_b`` are zero).
    multiple : int
        pad the number of terms with zero columns to a multiple of this (BLAS kernels are faster
        on a multiple of 8).

    Returns
    -------
    S_a : Tensor of shape (d, T)
        signed selection of the left factor's components, float64.
    S_b : Tensor of shape (d, T)
        selection of the right factor's components.
    R : Tensor of shape (T, d)
        the output component of each term.
    """
    check_tensor(table, "table", shape=(None, None, None), what="a (d, d, d) product table")
    multiple = check_positive_int(multiple, "multiple")
    d = table.shape[0]
    i, j, k = table.nonzero(as_tuple=True)
    keep = torch.ones_like(i, dtype=torch.bool)
    if left is not None:
        keep &= torch.isin(i, torch.tensor(list(left)))
    if right is not None:
        keep &= torch.isin(j, torch.tensor(list(right)))
    i, j, k = i[keep], j[keep], k[keep]
    terms = -(-len(i) // multiple) * multiple
    col = torch.arange(len(i))
    sa = torch.zeros(d, terms, dtype=torch.float64)
    sa[i, col] = table[i, j, k].to(torch.float64)
    sb = torch.zeros(d, terms, dtype=torch.float64)
    sb[j, col] = 1.0
    r = torch.zeros(terms, d, dtype=torch.float64)
    r[col, k] = 1.0
    return sa, sb, r


@functools.cache
def sparse_product(metric: tuple[float, ...], kind: str) -> tuple[Tensor, Tensor, Tensor]:
    """[`selection_matrices`][] of the product table of ``kind`` (shared: read-only)."""
    return selection_matrices(product_table(metric, kind))


@functools.cache
def grade_index(n: int, k: int) -> Tensor:
    """``(C(n, k), k)`` long: the basis-vector indices of each grade-``k`` blade, storage order (read-only)."""
    return torch.tensor(list(itertools.combinations(range(n), k)), dtype=torch.long).reshape(-1, k)


@functools.cache
def product_paths(metric: tuple[float, ...], kind: str, subspaces: str) -> Tensor:
    """``(S, S, S)`` bool: the non-empty (grade or quaternion-type) subspace paths of a product table
    ([`CliffordAlgebra.product_paths`][geomlin.algebra.clifford.CliffordAlgebra.product_paths]; shared: read-only)."""
    sa, sb, r = sparse_product(metric, kind)
    i, j, k = sa.abs().argmax(0), sb.argmax(0), r.argmax(1)  # the (i, j, k) of every non-zero term
    grades = component_tables(metric)["grade"]
    index = grades if subspaces == "grade" else grades % NUM_QUATERNION_TYPES
    m = len(metric) + 1 if subspaces == "grade" else min(len(metric) + 1, NUM_QUATERNION_TYPES)
    out = torch.zeros(m, m, m, dtype=torch.bool)
    out[index[i], index[j], index[k]] = True
    return out


def table_parts(metric: tuple[float, ...], key: str) -> tuple[Tensor, ...]:
    """The float64 CPU table(s) of ``key`` as a tuple: a product kind, ``"sparse:" + kind`` (the triple
    of [`sparse_product`][]) or a name of [`component_tables`][]."""
    if key.startswith("sparse:"):
        return sparse_product(metric, key[len("sparse:"):])
    return (_table_of(metric, key),)
