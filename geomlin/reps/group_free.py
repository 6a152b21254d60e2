"""Representations written before their group: EMLP's ``T(p, q)``, bound later by ``rep(G)``.

EMLP (Finzi et al. 2021) lets a model be written once for any group::

    rep_in = 4 * T(0) + 2 * T(1) + T(2)      # no group yet
    rep_in(O(5))                             # 4*Scalar + 2*V[O(5)] + V[O(5)]**2

[`T`][] and ``V`` (the defining representation, ``T(1)``) build a [`GroupFreeRep`][]; sums
(``+``, ``3 * r``), tensor products (``*``, ``**``) and duals (``.dual()``) work as for bound
reps. Calling one with a group binds it to a [`Rep`][]. Combining a group-free
rep with a bound one binds it to the bound one's group (``V(G) + V ** 2 == V(G) + V(G) ** 2``);
combining it with ``Scalar`` keeps it group-free.

``T(p, q)`` is ``V ** p * V.dual() ** q`` (the ``p`` contravariant factors first, as in EMLP).
Unlike EMLP, ``V.dual()`` keeps its own identity for orthogonal groups (it equals ``V`` in value,
and the solver never assumes so).
"""

from __future__ import annotations

from geomlin.groups.base import Group
from geomlin.groups.names import as_group
from geomlin.reps.base import (
    Rep,
    Scalar,
    SumRep,
    TensorRep,
    UnboundRep,
    Vector,
    power_term,
    run_length_repr,
    sum_term,
)
from geomlin.validation import check_nonnegative_int

# Node kinds of the expression tree.
_LEAF, _SUM, _TENSOR, _DUAL = "leaf", "sum", "tensor", "dual"


class GroupFreeRep(UnboundRep):
    """A representation expression without a group; ``rep(G)`` binds it (see the module docstring).

    Not a [`FeatureType`][]: it has no size and no action until it is bound.
    Immutable and hashable by its expression; equal expressions compare equal.
    """

    __slots__ = ("_kind", "_parts")

    def __init__(self, kind: str, parts: tuple):
        self._kind = kind
        self._parts = parts

    # ------------------------------------------------------------------ binding
    def __call__(self, group=None, *, G=None):
        """Bind to ``group`` (a geomlin Group or a name such as ``"O(3)"``) and return a Rep.

        ``G=`` is accepted as well (the keyword of ``V(G)`` before reps could be group-free).
        """
        if (group is None) == (G is None):
            raise TypeError("pass the group to bind to: rep(group)")
        group = as_group(group if G is None else G, kind=Group)
        if self._kind == _LEAF:
            leaf = self._parts[0]
            if leaf == "V":
                return Vector(group)
            if leaf == "Scalar":
                return Scalar
            return leaf(group)  # a bound rep stored as a leaf (checks its group)
        bound = [p(group) for p in self._parts]
        if self._kind == _SUM:
            return SumRep(bound)
        if self._kind == _TENSOR:
            return TensorRep(bound)
        return bound[0].dual()

    # ------------------------------------------------------------------ algebra
    def _combine(self, other, op: str, left: bool):
        """``self op other`` (``left``) or ``other op self`` for ``op`` in ``"+"``, ``"*"``: an int is the
        empty sum (``0 + rep``) or a multiplicity (``3 * rep``); a bound rep of a group binds ``self`` to it."""
        if isinstance(other, int) and not isinstance(other, bool):
            if op == "*":
                return _multiplicity(other, self)
            if other == 0:
                return self
        other = _coerce(other, op)
        if not isinstance(other, GroupFreeRep):  # a bound rep of a group: bind to it
            a, b = (self(other.group), other) if left else (other, self(other.group))
            return a + b if op == "+" else a * b
        parts = [self, other] if left else [other, self]
        return _sum(parts) if op == "+" else _tensor(parts)

    def __add__(self, other):
        return self._combine(other, "+", left=True)

    def __radd__(self, other):
        return self._combine(other, "+", left=False)

    def __mul__(self, other):
        return self._combine(other, "*", left=True)

    def __rmul__(self, other):
        return self._combine(other, "*", left=False)

    def __pow__(self, k):
        k = check_nonnegative_int(k, "the tensor power")
        return _SCALAR if k == 0 else _tensor([self] * k)

    def dual(self) -> GroupFreeRep:
        """The dual (contragredient) representation, ``rho(g)^{-T}`` once bound."""
        if self._kind == _LEAF:
            if self._parts[0] == "Scalar":
                return self
            if self._parts[0] == "V":
                return GroupFreeRep(_DUAL, (self,))
            return GroupFreeRep(_LEAF, (self._parts[0].dual(),))
        if self._kind == _DUAL:
            return self._parts[0]
        if self._kind == _SUM:
            return _sum([p.dual() for p in self._parts])
        return _tensor([p.dual() for p in self._parts])

    # ------------------------------------------------------------------ identity
    @property
    def blocks(self) -> list[GroupFreeRep]:
        """Direct-sum summands (itself for a non-sum)."""
        return list(self._parts) if self._kind == _SUM else [self]

    def key(self) -> tuple:
        """Canonical hashable description of the expression."""
        if self._kind == _LEAF:
            leaf = self._parts[0]
            return ("free", leaf) if isinstance(leaf, str) else ("bound", leaf.key())
        return (self._kind,) + tuple(p.key() for p in self._parts)

    def __eq__(self, other) -> bool:
        return isinstance(other, GroupFreeRep) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())

    def __repr__(self) -> str:
        if self._kind == _LEAF:
            leaf = self._parts[0]
            return leaf if isinstance(leaf, str) else repr(leaf)
        if self._kind == _DUAL:
            inner = repr(self._parts[0])
            return f"{inner}.dual()" if self._parts[0]._kind == _LEAF else f"({inner}).dual()"
        if self._kind == _SUM:
            return run_length_repr(self._parts, sum_term, " + ")
        return run_length_repr(self._parts, lambda r, n: power_term(r, n, r._kind == _SUM), "*")

    def __reduce__(self):
        return (GroupFreeRep, (self._kind, self._parts))


def _coerce(x, op: str):
    """A GroupFreeRep stays; a group-free bound rep (Scalar) becomes a leaf; a rep of a group stays."""
    if isinstance(x, GroupFreeRep):
        return x
    if isinstance(x, Rep):
        if x.group is None:  # Scalar and sums of it fit every group
            blocks = x.blocks
            if all(b.is_scalar and b.size == 1 for b in blocks):
                return _sum([_SCALAR] * len(blocks))
            return GroupFreeRep(_LEAF, (x,))
        return x
    raise TypeError(f"cannot combine a group-free rep with {type(x).__name__} using {op}")


def _sum(parts) -> GroupFreeRep:
    flat = []
    for p in parts:
        flat.extend(p.blocks)
    return flat[0] if len(flat) == 1 else GroupFreeRep(_SUM, tuple(flat))


def _tensor(parts) -> GroupFreeRep:
    flat = []
    for p in parts:
        flat.extend(p._parts if p._kind == _TENSOR else [p])
    flat = [p for p in flat if p != _SCALAR]
    if not flat:
        return _SCALAR
    return flat[0] if len(flat) == 1 else GroupFreeRep(_TENSOR, tuple(flat))


def _multiplicity(n: int, rep: GroupFreeRep) -> GroupFreeRep:
    if n < 1:
        raise ValueError(f"multiplicities must be >= 1 (the empty representation is not used), got {n}")
    return _sum([rep] * n)


_SCALAR = GroupFreeRep(_LEAF, ("Scalar",))
#: The defining representation of whatever group the expression is bound to (EMLP's ``V``):
#: ``V(G)`` is the [`Vector`][] rep of ``G`` on ``R^d``, ``V ** 2 + V`` is bound later by ``rep(G)``.
V = GroupFreeRep(_LEAF, ("V",))


def T(p: int, q: int = 0, group=None):
    """Tensors of type ``(p, q)``: ``V ** p * V.dual() ** q`` (EMLP's ``T``).

    Without ``group`` a [`GroupFreeRep`][] (bind it later with ``rep(G)``); with a group (or
    a name such as ``"O(3)"``) the bound [`Rep`][]. ``T(0)`` is ``Scalar``.
    """
    p = check_nonnegative_int(p, "p")
    q = check_nonnegative_int(q, "q")
    rep = V ** p * V.dual() ** q
    return rep if group is None else rep(group)
