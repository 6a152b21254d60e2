"""Bases of equivariant maps between tensor reps read off from diagrams, with no constraint solve.

For the groups whose invariant theory is classical, the equivariant maps between tensor
products of ``V`` and ``V*`` are spanned by diagrams (Brauer 1937; Pearce-Crump 2022/2023):

==============================  =====================================================  ============
group                           spanning tensors                                       form ``B``
==============================  =====================================================  ============
``S(n)``                        partition diagrams (orbit basis: an exact basis)       --
``O(n)``                        Brauer diagrams                                        ``I``
``SO(n)``                       Brauer + Levi-Civita diagrams                          ``I``
``Sp(m)``                       Brauer diagrams                                        ``J``
``Lorentz()`` = O(1,3)          Brauer diagrams                                        ``eta``
``SO13p()`` = SO+(1,3)          Brauer + Levi-Civita diagrams                          ``eta``
==============================  =====================================================  ============

A map ``W`` in ``Hom(rep_in, rep_out)`` is a tensor with one *slot* per factor: an output ``V``
and an input ``V*`` are *upper* slots (acted on by ``g``), an output ``V*`` and an input ``V``
*lower* ones (acted on by ``g^{-T}``). A pair of a diagram contributes ``B^{-1}`` on two upper
slots, ``B`` on two lower ones and ``delta`` on one of each: each piece is invariant
(``g^T B g = B``), so every diagram tensor is exactly equivariant. The Levi-Civita symbol with
lower indices is invariant under determinant-one groups; its upper slots are raised with
``B^{-1}``. The Lorentz groups are the real forms of
O(4, C) / SO(4, C) (Zariski dense in them), so their invariants are spanned by the same diagrams
with ``eta`` for ``I``; mapping lower slots to upper ones with ``B`` turns each diagram into
(up to sign) the all-upper diagram of the same shape, so linear independence is decided once by
[`geomlin.linear.diagrams.diagram_basis`][geomlin.linear.diagrams.basis.diagram_basis] for every mix of slots.

[`diagram_solution`][] builds the dense diagram tensors of a basis (``n^(k+l)`` entries each)
and orthonormalises them (QR; the S(n) orbit basis is already orthogonal), so the result is
exact to float64 round-off. It declines (returns ``None``) for other groups and reps, and for
problems beyond [`MAX_DIAGRAM_ENTRIES`][].
"""

from __future__ import annotations

import math
import string

import torch
from torch import Tensor

from geomlin.groups.classical import SO, Lorentz, O, S, SO13p, Sp
from geomlin.linear.diagrams.basis import all_independent, diagram_basis
from geomlin.linear.diagrams.dense import levi_civita
from geomlin.linear.diagrams.enumerate import count_set_partitions, matching_count, set_partitions
from geomlin.reps.base import DualRep, Rep, TensorRep, Vector

#: Largest number of dense entries (diagrams x n^(k+l)) built; beyond it the general solvers run.
MAX_DIAGRAM_ENTRIES = 2 ** 24
#: Largest spanning set whose linear dependencies are resolved (its ``F_p`` row reduction is
#: quadratic in memory and cubic in time).
MAX_SELECTION_DIAGRAMS = 3000
#: Largest number of S(n) basis partitions enumerated.
MAX_PARTITIONS = 200_000


def diagram_family(group) -> tuple[str, Tensor | None] | None:
    """``(family, form)`` of a group with a diagram basis, or ``None``.

    ``family`` is one of ``"S"``, ``"O"``, ``"SO"``, ``"Sp"`` (see the module table); ``form`` the
    invariant bilinear form ``B`` (float64 ``(n, n)``), ``None`` for S(n).
    """
    kind = type(group)
    if kind is S:
        return "S", None
    if kind is O:
        return "O", torch.eye(group.d, dtype=torch.float64)
    if kind is SO:
        return "SO", torch.eye(group.d, dtype=torch.float64)
    if kind is Sp:
        return "Sp", group.invariant_form
    if kind is Lorentz:
        return "O", group.invariant_form
    if kind is SO13p:
        return "SO", group.invariant_form
    return None


def tensor_slots(rep: Rep) -> tuple[bool, ...] | None:
    """Per tensor factor of ``rep``: ``True`` for ``V``, ``False`` for ``V*``; ``None`` unless ``rep``
    is a product of ``V(G)`` and ``V(G).dual()`` factors (``Scalar`` is the empty product)."""
    if rep.is_scalar and rep.size == 1:
        return ()
    factors = rep.factors if isinstance(rep, TensorRep) else [rep]
    out = []
    for f in factors:
        if isinstance(f, Vector):
            out.append(True)
        elif isinstance(f, DualRep) and isinstance(f.rep, Vector):
            out.append(False)
        else:
            return None
    return tuple(out)


def spanning_count(family: str, m: int, n: int) -> int:
    """Number of spanning diagrams on ``m`` vertices (S(n): partitions with at most ``n`` blocks)."""
    if family == "S":
        return count_set_partitions(m, n)
    count = matching_count(m)
    if family == "SO" and n <= m:
        count += math.comb(m, n) * matching_count(m - n)
    return count


def _plan(rep_in: Rep, rep_out: Rep):
    """``(family, form, n, k, l, upper slots, basis diagrams)`` or ``None`` when not applicable."""
    group = rep_in.group if rep_in.group is not None else rep_out.group
    family = diagram_family(group) if group is not None else None
    slots_out, slots_in = tensor_slots(rep_out), tensor_slots(rep_in)
    if family is None or slots_out is None or slots_in is None:
        return None
    name, form = family
    n = group.d
    k, l = len(slots_in), len(slots_out)
    m = k + l
    count = spanning_count(name, m, n)
    # upper slots: output V and input V*; lower: output V* and input V
    upper = tuple(slots_out) + tuple(not s for s in slots_in)
    if name == "S":
        if count > MAX_PARTITIONS or count * n ** m > MAX_DIAGRAM_ENTRIES:
            return None
        return name, form, n, k, l, upper, None
    if not all_independent(name, k, l, n) and count > MAX_SELECTION_DIAGRAMS:
        return None
    if count * n ** m > MAX_DIAGRAM_ENTRIES and all_independent(name, k, l, n):
        return None
    diagrams = diagram_basis(name, k, l, n)
    if len(diagrams) * n ** m > MAX_DIAGRAM_ENTRIES:
        return None
    return name, form, n, k, l, upper, diagrams


def selection_size(rep_in: Rep, rep_out: Rep) -> int:
    """How many spanning diagrams [`diagram_solution`][] reduces to a basis: ``0`` when they are
    independent (or for S(n), whose orbit basis needs no reduction, or when diagrams do not apply)."""
    group = rep_in.group if rep_in.group is not None else rep_out.group
    family = diagram_family(group) if group is not None else None
    slots_out, slots_in = tensor_slots(rep_out), tensor_slots(rep_in)
    if family is None or family[0] == "S" or slots_out is None or slots_in is None:
        return 0
    k, l, n = len(slots_in), len(slots_out), group.d
    return 0 if all_independent(family[0], k, l, n) else spanning_count(family[0], k + l, n)


def applies(rep_in: Rep, rep_out: Rep) -> bool:
    """Whether [`diagram_solution`][] handles ``Hom(rep_in, rep_out)`` (cheap: no tensor is built)."""
    return _plan(rep_in, rep_out) is not None


def diagram_solution(rep_in: Rep, rep_out: Rep) -> Tensor | None:
    """Orthonormal basis ``(r, rep_out.size, rep_in.size)`` float64 of the equivariant maps, from
    diagrams; ``None`` when the group or reps are not covered or the problem is too large."""
    plan = _plan(rep_in, rep_out)
    if plan is None:
        return None
    name, form, n, k, l, upper, diagrams = plan
    if name == "S":
        basis = _orbit_basis(n, k + l)
    elif not diagrams:
        return torch.zeros(0, rep_out.size, rep_in.size, dtype=torch.float64)
    else:
        basis = _orthonormal_rows(torch.stack([_diagram_tensor(d, n, form, upper).reshape(-1)
                                               for d in diagrams]))
        if basis is None:
            return None
    return basis.reshape(-1, rep_out.size, rep_in.size)


def _orbit_basis(n: int, m: int) -> Tensor:
    """The S(n) orbit basis on ``m`` slots, rows normalised: ``(num_partitions, n^m)`` float64.

    Row ``π`` is 1 exactly where the equality pattern of the multi-index is ``π`` (Pearce-Crump
    2022, orbit basis ``X_π``), so the rows have disjoint supports.
    """
    parts = set_partitions(m, n)
    index = {}
    for i, p in enumerate(parts):
        labels = [0] * m
        for b, block in enumerate(p):
            for v in block:
                labels[v] = b
        index[tuple(labels)] = i
    N = n ** m
    if m == 0:
        return torch.ones(1, 1, dtype=torch.float64)
    digits = torch.stack(torch.meshgrid(*[torch.arange(n)] * m, indexing="ij"), -1).reshape(N, m)
    # restricted growth string of each multi-index: label of the first slot with the same value
    same = digits[:, :, None] == digits[:, None, :]  # (N, m, m)
    first = same.float().argmax(-1)  # first slot j with digit[j] == digit[i]
    is_new = first == torch.arange(m)
    labels = torch.cumsum(is_new.long(), dim=1) - 1
    rgs = torch.gather(labels, 1, first)
    lookup = torch.tensor([index[tuple(r)] for r in rgs.tolist()], dtype=torch.long)
    out = torch.zeros(len(parts), N, dtype=torch.float64)
    out[lookup, torch.arange(N)] = 1.0
    return out / out.sum(1, keepdim=True).sqrt()


def _diagram_tensor(d, n: int, form: Tensor, upper: tuple[bool, ...]) -> Tensor:
    """The ``(n,) * m`` tensor of a Brauer / Levi-Civita diagram with the pairing of the slots."""
    B, B_inv = form, torch.linalg.inv(form)
    eye = torch.eye(n, dtype=torch.float64)
    letters = string.ascii_letters
    operands, subscripts = [], []
    for u, v in d.blocks:
        operands.append(B_inv if upper[u] and upper[v] else B if not (upper[u] or upper[v]) else eye)
        subscripts.append(letters[u] + letters[v])
    if d.free:
        # epsilon with lower indices is invariant (det g = 1); an upper slot raises its index with B^-1
        eps = levi_civita(n)
        for axis, v in enumerate(d.free):
            if upper[v]:
                eps = torch.movedim(torch.tensordot(B_inv, eps, dims=([1], [axis])), 0, axis)
        operands.append(eps)
        subscripts.append("".join(letters[v] for v in d.free))
    out = "".join(letters[v] for v in range(d.size))
    if not operands:
        return torch.ones((), dtype=torch.float64)
    return torch.einsum(",".join(subscripts) + "->" + out, *operands)


def _orthonormal_rows(D: Tensor) -> Tensor | None:
    """Orthonormal rows spanning the rows of ``D (r, N)`` (QR); ``None`` if they are dependent."""
    Q, R = torch.linalg.qr(D.T)
    diag = torch.diagonal(R).abs()
    if bool((diag <= 1e-9 * diag.max()).any()):
        return None  # the F_p selection was (improbably) wrong: let the general solver decide
    return Q.T.contiguous()
