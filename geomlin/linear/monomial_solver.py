"""Equivariant maps between tensor reps, solved on the basis of multi-indices.

A map ``W`` in ``Hom(rep_in, rep_out)`` between products of ``V`` and ``V*`` is a tensor with one
*slot* per factor (``m = k + l`` slots, ``N = d^m`` entries), the slots acted on by ``g`` (an output
``V``, an input ``V*``: *upper*) or by ``g^{-T}`` (*lower*), as in
[`geomlin.linear.diagram_solver`][]. Generators that act *monomially* on this basis of
multi-indices ``e_t = e_{t_1} (x) ... (x) e_{t_m}`` are solved without any linear algebra:

* a **diagonal Lie algebra generator** ``H = diag(h)`` (the torus of GL(n), SL(n), Sp(m)) acts on
  ``e_t`` by the weight ``sum_k s_k h_{t_k}`` (``s_k = +1`` on upper slots, ``-1`` on lower ones),
  so an invariant tensor lives on the multi-indices of weight zero;
* a **signed permutation** ``h`` (``h e_j = c_j e_{pi(j)}``, ``c_j = +-1``: permutation groups,
  ``C(4)``, ``D(4)``, reflections, parity) maps ``e_t`` to ``+-e_{h(t)}`` (on a lower slot too:
  ``h^{-T} = h``), so an invariant tensor is constant up to these signs on each orbit of
  multi-indices under the generated group, and vanishes on an orbit that reaches ``-e_t`` from
  ``e_t`` or that touches a multi-index of nonzero weight.

What survives is an orthonormal set ``U`` of *orbit vectors* ``u_O = sum_{t in O} sign_t e_t /
sqrt|O|`` with disjoint supports (Burnside: for a finite group of signed permutations they are
exactly the invariants, the classical orbit basis). The remaining generators (non-diagonal Lie
algebra elements, such as the root vectors ``E_ij`` of SL(n)) give constraints ``drho(X) U c = 0``
on the coefficients ``c``; ``drho(X) U`` is built sparsely (``drho(X)`` changes one slot of a
multi-index at a time) and the null space of the small Gram matrix ``sum_X (drho(X) U)^T
(drho(X) U)`` (one ``eigh``, as in [`geomlin.linear.solver`][]) gives the basis ``U c``.

Orbits are the connected components of the graph on ``2 N`` signed multi-indices ``(t, +-)``
with an edge from each node to its image under each generator, found by minimum-label
propagation with pointer jumping (all vectorised; no Python loop over multi-indices).

SL(3) on ``T(5, 2)`` (2,187 unknowns) keeps the 240 multi-indices of weight zero; Z(4) on
``T(6)`` has 1,024 orbits of 4,096 multi-indices and needs no solve at all.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
from torch import Tensor

from geomlin.linear.diagram_solver import tensor_slots
from geomlin.reps.base import Rep, common_group
from geomlin.tables import device_cache
from geomlin.validation import check_memory

#: Largest number of multi-indices ``N = d^m`` handled (the orbit search holds a few ``2 N`` int64 arrays).
MAX_MONOMIAL_INDICES = 2 ** 22
#: A generator entry within this of an integer counts as that integer (``cos(pi / 2)`` is ``6e-17``).
ENTRY_ATOL = 1e-12
#: A weight below ``WEIGHT_RTOL * max(1, m max|h|)`` is zero.
WEIGHT_RTOL = 1e-9
#: Eigenvalues of the reduced Gram matrix below ``NULLSPACE_RTOL * max(1, largest)`` span the solution.
NULLSPACE_RTOL = 1e-9
#: Reduced constraint matrices with at most this many entries are multiplied densely.
DENSE_GRAM_ENTRIES = 2 ** 25
#: Plans kept in memory (each holds a few ``N``-sized index arrays).
PLAN_CACHE_SIZE = 8


@dataclass(frozen=True)
class MonomialPlan:
    """The combinatorial part of a solve: orbit vectors and the generators left for the Gram step.

    Attributes
    ----------
    d, upper
        dimension of ``V`` and, per slot, whether it is acted on by ``g`` (else ``g^{-T}``).
    index : Tensor
        ``(n,)`` int64 multi-indices (row-major over the slots) on which the orbit vectors live.
    orbit : Tensor
        ``(n,)`` int64 orbit number of each (``0 .. num_orbits - 1``, ordered by smallest index).
    coefficient : Tensor
        ``(n,)`` float64 entry ``sign / sqrt|orbit|`` of the orbit vector at that multi-index.
    num_orbits : int
        number of orbit vectors (the dimension before the remaining constraints).
    remaining : Tensor
        ``(r, d, d)`` float64 Lie algebra generators that are not diagonal.
    """

    d: int
    upper: tuple[bool, ...]
    index: Tensor
    orbit: Tensor
    coefficient: Tensor
    num_orbits: int
    remaining: Tensor

    @property
    def size(self) -> int:
        """Number of multi-indices ``N = d^m``."""
        return self.d ** len(self.upper)


def signed_permutation(M: Tensor) -> tuple[Tensor, Tensor] | None:
    """``(pi, c)`` with ``M e_j = c_j e_{pi(j)}`` when ``M (d, d)`` is a signed permutation matrix, else ``None``.

    Entries within [`ENTRY_ATOL`][] of ``0`` / ``+-1`` count as those values.
    """
    R = M.round()
    if (M - R).abs().max() > ENTRY_ATOL or R.abs().max() > 1:
        return None
    nonzero = R != 0
    if not (bool((nonzero.sum(0) == 1).all()) and bool((nonzero.sum(1) == 1).all())):
        return None
    pi = nonzero.to(torch.int64).argmax(0)
    return pi, R[pi, torch.arange(M.shape[0])]


def _diagonal(A: Tensor) -> Tensor | None:
    """The diagonal of ``A`` if ``A`` is diagonal (to [`ENTRY_ATOL`][] relative), else ``None``."""
    off = A - torch.diag(torch.diagonal(A))
    return torch.diagonal(A).clone() if off.abs().max() <= ENTRY_ATOL * max(1.0, float(A.abs().max())) else None


def _slots(rep_in: Rep, rep_out: Rep) -> tuple[bool, ...] | None:
    slots_out, slots_in = tensor_slots(rep_out), tensor_slots(rep_in)
    if slots_out is None or slots_in is None:
        return None
    return tuple(slots_out) + tuple(not s for s in slots_in)


def applies(rep_in: Rep, rep_out: Rep) -> bool:
    """Whether [`monomial_plan`][] can handle ``Hom(rep_in, rep_out)`` (cheap: nothing is solved).

    Needs products of ``V`` and ``V*`` of one group, every discrete generator a signed permutation,
    at least one generator that acts monomially (a signed permutation or a diagonal Lie algebra
    element: otherwise nothing is gained), and at most [`MAX_MONOMIAL_INDICES`][] multi-indices.
    """
    group = common_group([rep_in, rep_out])
    upper = _slots(rep_in, rep_out)
    if group is None or upper is None or not upper or group.d ** len(upper) > MAX_MONOMIAL_INDICES:
        return False
    if any(signed_permutation(h) is None for h in group.discrete_generators):
        return False
    return group.discrete_generators.shape[0] > 0 or any(_diagonal(A) is not None for A in group.lie_algebra)


def monomial_plan(rep_in: Rep, rep_out: Rep) -> MonomialPlan:
    """The orbit vectors of ``Hom(rep_in, rep_out)`` (see the module docstring); cached per pair of reps.

    Raises ``ValueError`` unless [`applies`][].
    """
    if not applies(rep_in, rep_out):
        raise ValueError(f"the monomial solver does not apply to Hom({rep_in!r}, {rep_out!r}): it needs "
                         "products of V and V* of a group whose discrete generators are signed permutations, "
                         f"with at most {MAX_MONOMIAL_INDICES} multi-indices")
    return device_cache(("linear:monomial-plan", rep_in.key(), rep_out.key()),
                        lambda: _build_plan(common_group([rep_in, rep_out]), _slots(rep_in, rep_out)), keep=PLAN_CACHE_SIZE)



def _slot_sum(values: list[Tensor]) -> Tensor:
    """``out[t] = sum_k values[k][t_k]`` over all multi-indices ``t``, flattened row-major: ``(d^m,)``."""
    out = values[0].clone()
    for v in values[1:]:
        out = (out[:, None] + v).reshape(-1)
    return out


def _slot_product(values: list[Tensor]) -> Tensor:
    """``out[t] = prod_k values[k][t_k]``, flattened row-major: ``(d^m,)``."""
    out = values[0].clone()
    for v in values[1:]:
        out = (out[:, None] * v).reshape(-1)
    return out


def _build_plan(group, upper: tuple[bool, ...]) -> MonomialPlan:
    d, m = group.d, len(upper)
    N = d ** m
    strides = [d ** (m - 1 - k) for k in range(m)]
    alive = torch.ones(N, dtype=torch.bool)
    remaining = []
    for A in group.lie_algebra:
        h = _diagonal(A)
        if h is None:
            remaining.append(A)
            continue
        weight = _slot_sum([h if u else -h for u in upper])
        alive &= weight.abs() <= WEIGHT_RTOL * max(1.0, m * float(h.abs().max()))
    maps = []
    for g in group.discrete_generators:
        pi, c = signed_permutation(g)
        image = _slot_sum([pi * s for s in strides])
        sign = _slot_product([c] * m)
        maps.append((image, sign))
    label = _components(maps, N)
    plus, minus = label[:N], label[N:]
    dead = ~alive | (plus == minus)  # off the weight-zero set, or e_t ~ -e_t
    pair = torch.minimum(plus, minus)
    dead_pair = torch.zeros(2 * N, dtype=torch.bool)
    dead_pair[pair[dead]] = True
    keep = ~dead_pair[pair]
    index = torch.arange(N)[keep]
    pair = pair[keep]
    sign = torch.where(plus[keep] < minus[keep], 1.0, -1.0).to(torch.float64)
    unique, orbit = torch.unique(pair, return_inverse=True)  # sorted: orbits ordered by smallest index
    sizes = torch.bincount(orbit, minlength=len(unique)).to(torch.float64)
    coefficient = sign / sizes[orbit].sqrt()
    rem = torch.stack(remaining) if remaining else torch.zeros(0, d, d, dtype=torch.float64)
    return MonomialPlan(d, tuple(upper), index, orbit, coefficient, len(unique), rem)


def _components(maps: list[tuple[Tensor, Tensor]], N: int) -> Tensor:
    """Smallest node of the component of each of the ``2 N`` signed multi-indices.

    Node ``t`` is ``+e_t``, node ``N + t`` is ``-e_t``; each map ``(image, sign)`` sends ``+-e_t`` to
    ``+-sign_t e_{image_t}``. Minimum-label propagation along every edge in both directions, then
    pointer jumping (``label = label[label]``) until nothing changes.
    """
    label = torch.arange(2 * N)
    if not maps:
        return label
    edges = []
    for image, sign in maps:
        flip = (sign < 0).to(torch.int64) * N
        forward = torch.cat([image + flip, image + (N - flip)])  # (t, +) -> (image, sign), (t, -) -> (image, -sign)
        backward = torch.empty_like(forward)
        backward[forward] = torch.arange(2 * N)
        edges.append((forward, backward))
    while True:
        before = label
        for forward, backward in edges:
            label = torch.minimum(label, torch.minimum(label[forward], label[backward]))
        while True:
            jumped = label[label]
            if torch.equal(jumped, label):
                break
            label = jumped
        if torch.equal(label, before):
            return label


def nullspace_monomial(rep_in: Rep, rep_out: Rep) -> Tensor:
    """Orthonormal basis ``(r, rep_out.size, rep_in.size)`` float64 of ``Hom_G(rep_in, rep_out)``.

    Orbit vectors of [`monomial_plan`][], then (if any Lie algebra generator is not diagonal) the
    null space of the reduced Gram matrix. Raises ``ValueError`` when the solver does not apply.
    """
    plan = monomial_plan(rep_in, rep_out)
    n_out, n_in = rep_out.size, rep_in.size
    coefficients = None
    if plan.remaining.shape[0] and plan.num_orbits:
        gram = _reduced_gram(plan)
        evals, evecs = torch.linalg.eigh(gram)
        tol = NULLSPACE_RTOL * max(1.0, float(evals[-1].abs()))
        coefficients = evecs[:, evals <= tol]  # (num_orbits, r)
    r = plan.num_orbits if coefficients is None else coefficients.shape[1]
    check_memory(8 * r * plan.size, f"the basis of Hom({rep_in!r}, {rep_out!r}) ({r} maps of {plan.size} entries)")
    if coefficients is None:
        out = torch.zeros(r, plan.size, dtype=torch.float64)
        out[plan.orbit, plan.index] = plan.coefficient
    else:
        out = torch.zeros(plan.size, r, dtype=torch.float64)
        out[plan.index] = coefficients[plan.orbit] * plan.coefficient[:, None]
        out = out.T.contiguous()
    return out.reshape(r, n_out, n_in)


def _reduced_gram(plan: MonomialPlan) -> Tensor:
    """``sum_X (drho(X) U)^T (drho(X) U)`` over the remaining generators, ``(num_orbits, num_orbits)``.

    ``drho(X) e_t = sum_k sum_a X_k[a, t_k] e_{t with slot k set to a}`` (``X_k = X`` on an upper
    slot, ``-X^T`` on a lower one), assembled as a sparse matrix with one row per (generator,
    multi-index) it reaches.
    """
    d, m, N = plan.d, len(plan.upper), plan.size
    rows, cols, vals = [], [], []
    for gi, X in enumerate(plan.remaining):
        for k, up in enumerate(plan.upper):
            Xk = X if up else -X.T
            stride = d ** (m - 1 - k)
            width = int((Xk != 0).sum(0).max())
            if width == 0:
                continue
            # per column b: the rows a with Xk[a, b] != 0, padded with zero values
            order = torch.argsort((Xk == 0).to(torch.int8), dim=0, stable=True)[:width]  # (width, d)
            value = torch.gather(Xk, 0, order)
            digit = (plan.index // stride) % d
            target = plan.index[:, None] + (order.T[digit] - digit[:, None]) * stride  # (n, width)
            rows.append((target + gi * N).reshape(-1))
            cols.append(plan.orbit[:, None].expand(-1, width).reshape(-1))
            vals.append((value.T[digit] * plan.coefficient[:, None]).reshape(-1))
    if not rows:
        return torch.zeros(plan.num_orbits, plan.num_orbits, dtype=torch.float64)
    rows, cols, vals = torch.cat(rows), torch.cat(cols), torch.cat(vals)
    unique_rows, row = torch.unique(rows, return_inverse=True)
    M = torch.sparse_coo_tensor(torch.stack([row, cols]), vals, (len(unique_rows), plan.num_orbits),
                                check_invariants=True).coalesce()
    if len(unique_rows) * plan.num_orbits <= DENSE_GRAM_ENTRIES:
        dense = M.to_dense()
        return dense.T @ dense
    with warnings.catch_warnings():  # "sparse CSR support is in beta", raised by the product itself
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse.mm(M.t().coalesce(), M).to_dense()
