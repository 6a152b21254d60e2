"""The fast factored product of a diagram with a tensor, never building ``n^(k+l)``.

Pearce-Crump ("Brauer's Group Equivariant Neural Networks", ICML 2023, Sec. 6;
"Connecting Permutation Equivariant Neural Networks and Partition Diagrams",
2022, Sec. 5) factor every diagram as (permutation of the input axes) ∘
(planar diagram) ∘ (permutation of the output axes). The planar diagram
itself factors into a *bottom* half that only reads the input and a *top* half
that only writes the output:

* bottom ([`bottom_apply`][]): on the input ``x (..., n^k)``, take the
  generalised diagonal over each block's bottom vertices, sum out the blocks
  that live only on the bottom row (traces / contractions), keep one axis per
  propagating block (the permutation is the order of those axes). SO(n):
  contract the bottom free vertices with the Levi-Civita symbol, producing one
  axis per top free vertex. Sp(n): a bottom pair ``{a < b}`` contracts with
  ``J`` - done by applying ``J`` along axis ``b`` (a signed half swap) and tracing.
  Cost: one read of the needed diagonal entries, ``n^(#bottom blocks)``.
* top ([`top_add`][]): add the result into the output through one strided
  *view* of the output buffer: a propagating block's top vertices share one
  index (stride = sum of their strides), a top-only block is a broadcast
  (the result is constant along it), top free vertices get their own axes.
  Sp: a top pair ``{u < v}`` carries ``J[y_u, y_v]``: two strided views of
  length ``n/2`` with signs ``+1`` (``y_v = y_u + m``) and ``-1`` (``y_u = y_v + m``).
  Cost: the ``n^(#top blocks)`` entries the diagram actually writes.

The only ``O(n^(k+l))`` object is never formed; for O(n) and Sp(n) the bottom
half costs at most ``O(n^(k-1))`` per batch element when a bottom pair exists
(else it is a pure axis permutation).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import lru_cache

import torch
from torch import Tensor

from geomlin.linear.diagrams.diagram import Diagram
from geomlin.linear.diagrams.families import check_diagram_for, check_n, group_name
from geomlin.tables import device_cache

#: Levi-Civita tables with at most this many dense entries are stored dense, larger ones sparse.
MAX_DENSE_LEVI_CIVITA = 2 ** 20


@dataclass(frozen=True)
class BottomOp:
    """The input half of a diagram: ``x (..., n^k) -> z (..., n^(c + s))``.

    Attributes
    ----------
    k : int
        input order.
    traced : tuple[tuple[int, ...], ...]
        input axes of the blocks living only on the bottom row (summed out).
    passing : tuple[tuple[int, ...], ...]
        input axes of each propagating block, in the order of the ``c`` kept axes.
    eps_in : tuple[int, ...]
        input axes joined to the Levi-Civita symbol (SO(n)).
    eps_out : int
        number ``s`` of top free vertices the symbol produces (axes after the ``c``).
    twist : tuple[int, ...]
        input axes to which ``J`` is applied before tracing (Sp(n) bottom pairs).
    """

    k: int
    traced: tuple[tuple[int, ...], ...]
    passing: tuple[tuple[int, ...], ...]
    eps_in: tuple[int, ...] = ()
    eps_out: int = 0
    twist: tuple[int, ...] = ()

    @property
    def out_axes(self) -> int:
        return len(self.passing) + self.eps_out


@dataclass(frozen=True)
class TopOp:
    """The output half of a diagram: add ``z (..., n^(c + s))`` into ``out (..., n^l)``.

    Attributes
    ----------
    l : int
        output order.
    passing : tuple[tuple[int, ...], ...]
        output axes of each propagating block (z axes ``0..c-1``).
    eps_out : tuple[int, ...]
        output axes of the top free vertices (z axes ``c..c+s-1``).
    broadcast : tuple[tuple[int, ...], ...]
        output axes of the blocks living only on the top row.
    symplectic : bool
        top-only pairs carry ``J`` instead of ``δ`` (Sp(n)).
    """

    l: int
    passing: tuple[tuple[int, ...], ...]
    eps_out: tuple[int, ...] = ()
    broadcast: tuple[tuple[int, ...], ...] = ()
    symplectic: bool = False

    @property
    def in_axes(self) -> int:
        return len(self.passing) + len(self.eps_out)


def split_diagram(diagram: Diagram, group) -> tuple[BottomOp, TopOp]:
    """Factor ``diagram`` into its [`BottomOp`][] and [`TopOp`][] for the family ``group``."""
    name = group_name(group)
    d = diagram
    passing = d.propagating
    traced = tuple(d.bottom_part(b) for b in d.blocks if b[0] >= d.l)
    broadcast = tuple(d.top_part(b) for b in d.blocks if b[-1] < d.l)
    eps_top = tuple(v for v in d.free if v < d.l)
    eps_bottom = tuple(v - d.l for v in d.free if v >= d.l)
    twist = tuple(b[1] for b in traced) if name == "Sp" else ()
    bottom = BottomOp(d.k, traced, tuple(d.bottom_part(b) for b in passing), eps_bottom,
                      len(eps_top), twist)
    top = TopOp(d.l, tuple(d.top_part(b) for b in passing), eps_top, broadcast, name == "Sp")
    return bottom, top


# ---------------------------------------------------------------------------- Levi-Civita
@lru_cache(maxsize=32)
def _levi_civita_entries(n: int, s: int) -> tuple[Tensor, Tensor, Tensor]:
    """Rows (first ``s`` indices), columns (last ``n - s``) and signs of ε's ``n!`` nonzeros."""
    perms = torch.tensor(list(itertools.permutations(range(n))), dtype=torch.long).reshape(-1, n)
    # sign of each permutation by counting inversions
    inv = (perms[:, :, None] > perms[:, None, :]).triu(1).sum((1, 2))
    signs = 1.0 - 2.0 * (inv % 2).to(torch.float64)
    weights = n ** torch.arange(n - 1, -1, -1)
    rows = (perms[:, :s] * weights[n - s:]).sum(1) if s else torch.zeros(len(perms), dtype=torch.long)
    cols = (perms[:, s:] * weights[s:]).sum(1) if s < n else torch.zeros(len(perms), dtype=torch.long)
    return rows, cols, signs


def levi_civita_matrix(n: int, s: int, sparse: bool | None = None) -> Tensor:
    """ε reshaped to ``(n^s, n^(n-s))`` in float64: row = first ``s`` indices, column = the rest.

    Dense when it has at most [`MAX_DENSE_LEVI_CIVITA`][] entries, else a sparse COO
    tensor with the ``n!`` nonzeros (``sparse`` forces either). A copy of a cached table (safe to modify).
    """
    return _levi_civita_matrix(n, s, sparse).clone()


@lru_cache(maxsize=32)
def _levi_civita_matrix(n: int, s: int, sparse: bool | None = None) -> Tensor:
    """The cached [`levi_civita_matrix`][] itself (read-only)."""
    rows, cols, signs = _levi_civita_entries(n, s)
    shape = (n ** s, n ** (n - s))
    if sparse is None:
        sparse = shape[0] * shape[1] > MAX_DENSE_LEVI_CIVITA
    if sparse:
        return torch.sparse_coo_tensor(torch.stack([rows, cols]), signs, shape, check_invariants=True).coalesce()
    out = torch.zeros(shape, dtype=torch.float64)
    out[rows, cols] = signs
    return out


def levi_civita_on(n: int, s: int, device, dtype: torch.dtype) -> Tensor:
    """[`levi_civita_matrix`][] ``(n, s)`` on ``device`` in ``dtype`` (read-only).

    On an accelerator it is cached per (device, dtype): uploaded once, on the first call there.
    """
    E = _levi_civita_matrix(n, s)
    device = torch.device(device)
    if device.type == "cpu":
        return E.to(dtype)
    return device_cache(("linear:levi-civita", n, s, E.is_sparse), lambda: E, device, dtype)


def _apply_levi_civita(z: Tensor, n: int, n_in: int, s: int, E: Tensor | None = None) -> Tensor:
    """Contract the last ``n_in = n - s`` axes of ``z`` with ε, producing ``s`` new last axes.

    ``E``: ε as [`levi_civita_matrix`][] ``(n, s)`` on ``z``'s device (a layer's buffer), else
    read from [`levi_civita_on`][].
    """
    lead = z.shape[: z.ndim - n_in]
    flat = z.reshape(-1, n ** n_in)
    E = levi_civita_on(n, s, z.device, z.dtype) if E is None else E.to(z.dtype)
    out = torch.sparse.mm(E, flat.T).T if E.is_sparse else flat @ E.T
    return out.reshape((*lead, *([n] * s)))


# ---------------------------------------------------------------------------- halves
def _apply_J(x: Tensor, dim: int) -> Tensor:
    """``J`` along ``dim``: ``(J v) = (p, -q)`` for ``v = (q, p)``, J = [[0, I], [-I, 0]]."""
    q, p = x.chunk(2, dim=dim)
    return torch.cat([p, -q], dim=dim)


def bottom_apply(op: BottomOp, x: Tensor, n: int, levi_civita: Tensor | None = None) -> Tensor:
    """Apply the input half of a diagram.

    Parameters
    ----------
    op : BottomOp
        the [`BottomOp`][].
    x : Tensor of shape (..., n, .., n)
        with ``op.k`` trailing axes, floating point.
    levi_civita : Tensor | None
        for SO(n) halves with ε, [`levi_civita_matrix`][] ``(n, op.eps_out)`` on ``x``'s
        device (a layer keeps it as a buffer); ``None`` reads it from [`levi_civita_on`][].

    Returns
    -------
    Tensor
        ``(..., n, .., n)`` with ``op.out_axes`` trailing axes, same dtype and device.
    """
    k = op.k
    for a in op.twist:
        x = _apply_J(x, x.ndim - k + a)
    if k:
        # one strided view: a block's generalised diagonal has stride = sum of its axes' strides (at x's
        # own storage offset, as_strided's default: dynamo cannot trace storage_offset())
        lead = x.ndim - k
        st = x.stride()[lead:]
        blocks = (*op.traced, *op.passing, *((a,) for a in op.eps_in))
        view = x.as_strided((*x.shape[:lead], *([n] * len(blocks))),
                            (*x.stride()[:lead], *(sum(st[a] for a in b) for b in blocks)))
        traced = len(op.traced)
        x = view.sum(tuple(range(lead, lead + traced))) if traced else view
    z = x
    if op.eps_in or op.eps_out:
        z = _apply_levi_civita(z, n, len(op.eps_in), op.eps_out, levi_civita)
    return z


def top_add(op: TopOp, out: Tensor, z: Tensor, n: int, alpha: float = 1.0, offset: int | None = None) -> Tensor:
    """Add the output half of a diagram applied to ``z`` into ``out`` (in place) and return ``out``.

    Parameters
    ----------
    op : TopOp
        the [`TopOp`][].
    out : Tensor
        contiguous ``(..., n, .., n)`` with ``op.l`` trailing axes.
    z : Tensor of shape (..., n, .., n)
        with ``op.in_axes`` trailing axes; leading shape equal to out's.
    alpha : float
        scalar factor.
    offset : int or None
        ``out.storage_offset()`` when the caller knows it (a compiled caller must: dynamo cannot
        trace ``storage_offset()``); ``None`` reads it.
    """
    l = op.l
    lead = out.shape[: out.ndim - l]
    lead_strides = out.stride()[: out.ndim - l]
    st = out.stride()[out.ndim - l:]
    sizes = [n] * op.in_axes
    strides = [sum(st[a] for a in b) for b in op.passing] + [st[a] for a in op.eps_out]
    z = z.reshape((*z.shape, *([1] * len(op.broadcast))))
    # each broadcast block: list of (offset, length, sign) variants
    variants = []
    for block in op.broadcast:
        if op.symplectic:
            m = n // 2
            u, v = block
            variants.append([(m * st[v], m, 1.0), (m * st[u], m, -1.0)])
        else:
            variants.append([(0, n, 1.0)])
    bstrides = [sum(st[a] for a in b) for b in op.broadcast]
    start = out.storage_offset() if offset is None else offset
    for combo in itertools.product(*variants):
        shift = sum(c[0] for c in combo)
        sign = math.prod([c[2] for c in combo])  # a list: dynamo cannot trace math.prod of a generator
        view = out.as_strided((*lead, *sizes, *[c[1] for c in combo]), (*lead_strides, *strides, *bstrides),
                              start + shift)
        view.add_(z, alpha=alpha * sign)
    return out


def check_diagram_input(x, k: int, n: int, what: str = "x") -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{what} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{what} must be floating point, got dtype {x.dtype}")
    if x.ndim < k or tuple(x.shape[x.ndim - k:]) != (n,) * k:
        raise ValueError(f"{what} must have k = {k} trailing axes of size n = {n}, i.e. shape "
                         f"(..., {', '.join(['n'] * k) if k else ''}) with n = {n}; got {tuple(x.shape)}")


def apply_diagram(diagram: Diagram, x: Tensor, n: int, group, orbit: bool = False) -> Tensor:
    """Multiply ``x`` by the diagram's matrix without building it (fast factored product).

    Equals ``(diagram_matrix(diagram, n, group, orbit) @ x.reshape(..., n^k).T)``
    reshaped, see [`geomlin.linear.diagrams.dense`][] for the entry conventions.

    Parameters
    ----------
    diagram : Diagram
        a [`Diagram`][] with ``k`` bottom and ``l`` top vertices valid for ``group``.
    x : Tensor of shape (..., n, .., n)
        with ``k`` trailing axes of size ``n``, floating point.
    n : int
        dimension of R^n.
    group : str or Group
        ``"S"``, ``"O"``, ``"SO"``, ``"Sp"`` (or a geomlin group instance).
    orbit : bool
        S only: apply the orbit basis element ``X_π`` (Möbius sum of diagram
        basis elements over the coarsenings of ``π``).

    Returns
    -------
    Tensor
        ``(..., n, .., n)`` with ``l`` trailing axes, dtype and device of ``x``; no host
        synchronisation (SO(n): ε is uploaded once per device and dtype).
    """
    name = group_name(group, n)
    check_n(name, n)
    if not isinstance(diagram, Diagram):
        raise TypeError(f"diagram must be a Diagram, got {type(diagram).__name__}")
    check_diagram_for(name, diagram, n)
    check_diagram_input(x, diagram.k, n)
    if orbit and name != "S":
        raise ValueError(f"orbit=True is the S_n orbit basis; group {name!r} has no orbit basis")
    lead = x.shape[: x.ndim - diagram.k]
    out = x.new_zeros((*lead, *([n] * diagram.l)))
    if orbit:
        from geomlin.linear.diagrams.orbit import orbit_expansion

        terms = orbit_expansion(diagram)
    else:
        terms = [(1.0, diagram)]
    for coeff, d in terms:
        bottom, top = split_diagram(d, name)
        top_add(top, out, bottom_apply(bottom, x, n), n, alpha=coeff)
    return out
