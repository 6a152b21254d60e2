"""Geometric products of tuples of points in G(3) and the rotation invariants and covariants read off
them (Spellings, "Geometric algebra attention networks for small point clouds", 2021): the pure
functions behind [`geomlin.clifford.ga_attention`][].

For a tuple ``(i, j, k, ...)`` of ``rank`` items the products of their vectors are
``p_i = r_i``, ``p_ij = r_i r_j``, ``p_ijk = r_i r_j r_k``, ... ([`tuple_products`][]):

=====  ==========================  ==============================================================
rank   product                     invariants ([`product_invariants`][])
=====  ==========================  ==============================================================
1      ``r``                       ``|r|``
2      ``a.b + a^b``               ``(a.b, |a x b|)``
3      ``(a.b)c - (a.c)b + (b.c)a  ``(|(a.b)c - (a.c)b + (b.c)a|, det[a b c])``
       + det[a b c] e123``
4      scalar + bivector           ``(scalar, |bivector|)``, and so on alternating
=====  ==========================  ==============================================================

The covariant of a product ([`product_covariant`][]) is its vector part (odd ranks) or the dual
of its bivector (even ranks, a pseudovector); G(3) multivectors ``(..., 8)`` give
``(scalar, |vector|, |bivector|, trivector)`` ([`multivector_invariants`][]). Multivectors use
the basis ``(1, e1, e2, e3, e12, e13, e23, e123)``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from geomlin.algebra import CliffordAlgebra
from geomlin.algebra.blades import selection_matrices
from geomlin.tables import ConstantTables, table_on
from geomlin.validation import check_choice, check_positive_int, check_tensor

#: G(3): the algebra of the products (basis ``1, e1, e2, e3, e12, e13, e23, e123``).
G3 = CliffordAlgebra((1.0, 1.0, 1.0))
#: Which products' invariants enter the values.
INVARIANT_MODES = ("single", "partial", "full")
#: Scalar, vector, bivector and trivector components of a G(3) multivector.
SCALAR, VECTOR, BIVECTOR, TRIVECTOR = slice(0, 1), slice(1, 4), slice(4, 7), slice(7, 8)
#: Bivector components ``(e12, e13, e23)`` -> dual vector ``(e23, -e13, e12)`` (the cross product).
DUAL_ORDER, DUAL_SIGNS = (6, 5, 4), (1.0, -1.0, 1.0)


def embed_vectors(r: Tensor) -> Tensor:
    """``(..., 3)`` vectors -> ``(..., 8)`` G(3) multivectors."""
    check_tensor(r, "r", shape=(..., 3), what="vectors of R^3")
    return torch.nn.functional.pad(r, (1, 4))


def _norm(x: Tensor) -> Tensor:
    return torch.linalg.vector_norm(x, dim=-1, keepdim=True)


def bivector_dual(p: Tensor) -> Tensor:
    """The vector ``(e23, -e13, e12)`` dual to the bivector part of ``p (..., 8)``: ``a x b`` for ``p = ab``."""
    G3.check(p, "p")
    return torch.stack([p[..., c] if sign > 0 else -p[..., c] for c, sign in zip(DUAL_ORDER, DUAL_SIGNS)], -1)


def product_invariants(p: Tensor, rank: int, parity_invariant: bool = False) -> Tensor:
    """Invariants of a product ``p (..., 8)`` of ``rank`` vectors: ``(..., 1)`` for rank 1
    (``|r|``), else ``(..., 2)``: ``(scalar, |bivector|)`` for even ranks, ``(|vector|, trivector)``
    for odd ranks (``|trivector|`` when ``parity_invariant``)."""
    G3.check(p, "p")
    check_positive_int(rank, "rank")
    if rank == 1:
        return _norm(p[..., VECTOR])
    if rank % 2 == 0:
        return torch.cat([p[..., SCALAR], _norm(p[..., BIVECTOR])], -1)
    tri = p[..., TRIVECTOR].abs() if parity_invariant else p[..., TRIVECTOR]
    return torch.cat([_norm(p[..., VECTOR]), tri], -1)


def product_covariant(p: Tensor, rank: int) -> Tensor:
    """The vector of a product ``p (..., 8)`` of ``rank`` vectors, ``(..., 3)``: its vector part for odd
    ranks (a true vector), the dual of its bivector for even ranks (a pseudovector)."""
    G3.check(p, "p")
    check_positive_int(rank, "rank")
    return p[..., VECTOR] if rank % 2 else bivector_dual(p)


def multivector_invariants(p: Tensor, parity_invariant: bool = False) -> Tensor:
    """``(scalar, |vector|, |bivector|, trivector)`` of ``p (..., 8)``, ``(..., 4)``."""
    G3.check(p, "p")
    tri = p[..., TRIVECTOR].abs() if parity_invariant else p[..., TRIVECTOR]
    return torch.cat([p[..., SCALAR], _norm(p[..., VECTOR]), _norm(p[..., BIVECTOR]), tri], -1)


#: Components that can be non-zero in a product of an odd / even number of vectors.
ODD_COMPONENTS, EVEN_COMPONENTS = (1, 2, 3, 7), (0, 4, 5, 6)
VECTOR_COMPONENTS = (1, 2, 3)


def _plan(left: tuple[int, ...], right: tuple[int, ...]) -> tuple[Tensor, Tensor, Tensor]:
    """Sparse G(3) product of multivectors supported on ``left`` and ``right`` components, float64:
    ``(S_a (8, T), S_b (8, T), R (T, 8))`` for the ``T`` non-zero terms (the rows of ``S_a`` / ``S_b``
    outside ``left`` / ``right`` are zero, so no components are gathered)."""
    return selection_matrices(G3.table("geometric"), left, right)


def _left_components(rank: int) -> tuple[int, ...]:
    """The components a product of ``rank`` vectors can have."""
    return VECTOR_COMPONENTS if rank == 1 else (ODD_COMPONENTS if rank % 2 else EVEN_COMPONENTS)


def _plan_key(rank: int) -> str:
    return "ga:vector_product:" + ("vector" if rank == 1 else ("odd" if rank % 2 else "even"))


def ga_tables() -> ConstantTables:
    """The constant tables of the attention layers' products as non-persistent buffers: the plans of
    [`vector_product`][] (``"ga:vector_product:vector" / ":odd" / ":even"``) and the G(3) Cayley
    table (``"geometric"``, for [`tuple_products`][] of multivectors)."""
    plans = {_plan_key(rank): _plan(_left_components(rank), VECTOR_COMPONENTS) for rank in (1, 2, 3)}
    return ConstantTables({**plans, **G3.table_entries("geometric")})


def vector_product(p: Tensor, rank: int, r: Tensor, *, tables: ConstantTables | None = None) -> Tensor:
    """``p r`` for a product ``p (..., 8)`` of ``rank`` vectors and a vector ``r (..., 8)``, forming
    only the 12 non-zero terms (instead of 64); equal to ``G3.geometric_product(p, r)``.
    ``tables``: a module's [`ga_tables`][] (``None``: a per-(device, dtype) cache)."""
    G3.check(p, "p")
    G3.check(r, "r")
    check_positive_int(rank, "rank")
    key = _plan_key(rank)
    left = _left_components(rank)
    sa, sb, out = (table_on(key, lambda: _plan(left, VECTOR_COMPONENTS), p.device, p.dtype, i, tables)
                   for i in range(3))
    return ((p @ sa) * (r.to(p.dtype) @ sb)) @ out


def tuple_products(slots: list[Tensor], vectors: bool = False, *,
                   tables: ConstantTables | None = None) -> dict[str, list[tuple[int, Tensor]]]:
    """Products of the contiguous sub-tuples of ``slots`` (each ``(..., 8)``, broadcastable);
    ``vectors=True`` when the slots are vectors (a faster product with the same result).
    ``tables``: a module's [`ga_tables`][].

    Returns ``{"single": [(rank, p_0..R)], "partial": [(R, p_0..R), ..., (1, p_0)],
    "full": the partial list of every start 0, 1, ...}``, the reference package's order.
    """
    if not isinstance(slots, (list, tuple)) or not slots:
        raise ValueError("slots must be a non-empty list of (..., 8) multivectors")
    for i, x in enumerate(slots):
        G3.check(x, f"slots[{i}]")
    out: dict[str, list] = {"single": [], "partial": [], "full": []}
    for start in range(len(slots)):
        series, p = [], None
        for m, right in enumerate(slots[start:], 1):
            if p is None:
                p = right
            else:
                p = (vector_product(p, m - 1, right, tables=tables) if vectors
                     else G3.geometric_product(p, right, tables=tables))
            series.append((m, p))
        series.reverse()
        if start == 0:
            out["single"], out["partial"] = [series[0]], list(series)
        out["full"].extend(series)
    return out


def invariant_count(rank: int, invariant_mode: str, include_normalized_products: bool = False,
                    multivector: bool = False) -> int:
    """Number of invariants per tuple (the input width of ``value_net``)."""
    check_positive_int(rank, "rank")
    check_choice(invariant_mode, "invariant_mode", INVARIANT_MODES)
    ranks = {"single": [rank], "partial": list(range(rank, 0, -1)),
             "full": [m for s in range(rank) for m in range(rank - s, 0, -1)]}[invariant_mode]
    total = sum(4 if multivector else (1 if m == 1 else 2) for m in ranks)
    return total * (2 if include_normalized_products else 1)
