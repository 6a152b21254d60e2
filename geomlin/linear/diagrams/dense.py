"""Dense matrices of diagrams: the reference for tests and small cases.

[`diagram_matrix`][] builds the ``n^l x n^k`` matrix of a diagram entry by
entry from its definition, independently of the fast product in
[`geomlin.linear.diagrams.apply`][]. Row index = output multi-index
``(i_1..i_l)``, column index = input multi-index ``(j_1..j_k)``, both
row-major (last axis fastest), matching ``geomlin.reps`` ``V(G)**k``.

Entry of a diagram at the vertex labelling ``a`` (``a_v`` = index on vertex v):

* partition / Brauer (S, O, SO): ``1`` if ``a`` is constant on every block, else 0;
* S orbit basis (``orbit=True``): additionally ``a`` takes different values on
  different blocks (Pearce-Crump's orbit basis ``X_π``);
* Sp: product over pairs ``{u < v}``: ``δ(a_u, a_v)`` if the pair joins the rows,
  else ``J[a_u, a_v]`` with ``J = symplectic_form(n // 2)``;
* SO ``(l+k)\\n`` diagrams: ``ε(a_{f_1}, .., a_{f_n})`` for the free vertices
  ``f_1 < .. < f_n`` times the pair deltas.
"""

from __future__ import annotations

import torch
from torch import Tensor

from geomlin.groups import symplectic_form
from geomlin.linear.diagrams.diagram import Diagram
from geomlin.linear.diagrams.families import check_diagram_for, check_n, group_name

#: Refuse dense matrices with more entries than this (2^27 float64 = 1 GiB).
MAX_DENSE_ENTRIES = 2 ** 27


def _axis_index(n: int, v: int, m: int) -> Tensor:
    """``arange(n)`` shaped to vary along axis ``v`` of an ``m``-axis grid."""
    shape = [1] * m
    shape[v] = n
    return torch.arange(n).reshape(shape)


def levi_civita(n: int) -> Tensor:
    """The Levi-Civita symbol as a dense ``(n,)*n`` float64 tensor (small n only)."""
    idx = [_axis_index(n, v, n) for v in range(n)]
    out = torch.ones([n] * n, dtype=torch.float64)
    for i in range(n):
        for j in range(i + 1, n):
            out = out * torch.sign(idx[j] - idx[i]).to(torch.float64)
    return out


def diagram_matrix(diagram: Diagram, n: int, group, orbit: bool = False,
                   dtype: torch.dtype = torch.float64) -> Tensor:
    """The dense matrix of ``diagram`` as a map ``(R^n)^{⊗k} -> (R^n)^{⊗l}``.

    Parameters
    ----------
    diagram : Diagram
        a [`Diagram`][] valid for ``group``.
    n : int
        dimension of R^n (even for ``"Sp"``; equal to the number of free
        vertices for an SO determinant diagram).
    group : str or Group
        ``"S"``, ``"O"``, ``"SO"``, ``"Sp"`` or a geomlin group instance.
    orbit : bool
        S only: the orbit basis element ``X_π`` instead of the diagram
        basis element ``D_π``.

    Returns
    -------
    Tensor of shape (n^l, n^k)
        of ``dtype`` (float64 default); ``(1, 1)`` for ``k = l = 0``.
        For tests and small cases: it has ``n^(k+l)`` entries.
    """
    name = group_name(group, n)
    check_n(name, n)
    if not isinstance(diagram, Diagram):
        raise TypeError(f"diagram must be a Diagram, got {type(diagram).__name__}")
    check_diagram_for(name, diagram, n)
    if orbit and name != "S":
        raise ValueError(f"orbit=True is the S_n orbit basis; group {name!r} has no orbit basis")
    m = diagram.size
    if n ** m > MAX_DENSE_ENTRIES:
        raise ValueError(f"diagram_matrix would have n^(k+l) = {n}^{m} entries (> {MAX_DENSE_ENTRIES}); "
                         "use apply_diagram for large cases")
    idx = [_axis_index(n, v, m) for v in range(m)]
    out = torch.ones([n] * m, dtype=torch.float64)
    J = symplectic_form(n // 2) if name == "Sp" else None
    for block in diagram.blocks:
        first = block[0]
        if name == "Sp" and not (block[0] < diagram.l <= block[1]):
            u, v = block
            out = out * J[idx[u], idx[v]]
            continue
        for v in block[1:]:
            out = out * (idx[v] == idx[first])
    if orbit:
        reps = [b[0] for b in diagram.blocks]
        for i in range(len(reps)):
            for j in range(i + 1, len(reps)):
                out = out * (idx[reps[i]] != idx[reps[j]])
    if diagram.free:
        f = diagram.free
        for i in range(len(f)):
            for j in range(i + 1, len(f)):
                out = out * torch.sign(idx[f[j]] - idx[f[i]]).to(torch.float64)
    return out.reshape(n ** diagram.l, n ** diagram.k).to(dtype)
