"""Representations of matrix groups and their algebra.

A representation ``rep`` of a group ``G`` assigns to every element ``g``
(``(d, d)`` matrix) a ``(rep.size, rep.size)`` matrix ``rep.rho(g)``, and to
every Lie algebra element ``A`` the matrix ``rep.drho(A)`` (its derivative at
the identity). New reps are built with the operator algebra of EMLP
(Finzi et al. 2021, Sec. 5):

* ``V(G)`` the defining representation, ``Scalar`` the trivial one,
* ``a + b`` direct sum (block diagonal), ``3 * a`` = ``a + a + a``,
* ``a * b`` tensor product (Kronecker), ``a ** k`` tensor power,
* ``a.dual()`` the contragredient ``rho(g)^{-T}``.

Reps may also be written before their group, as in EMLP: ``V ** 2 + 3 * T(1)`` is a
[`GroupFreeRep`][] and ``rep(G)`` binds it (see
[`geomlin.reps.group_free`][]). ``rep(G)`` on a bound rep checks the group and returns
it.

Reps are immutable and hashable by a canonical key, so bases can be cached.
"""

from __future__ import annotations

from functools import reduce

import torch
from torch import Tensor

from geomlin.groups.base import Group
from geomlin.reps.feature_type import FeatureType, apply_matrix, rotation_part
from geomlin.validation import check_nonnegative_int, check_tensor


def _kron(a: Tensor, b: Tensor) -> Tensor:
    """Batched Kronecker product ``(..., m, m) x (..., n, n) -> (..., mn, mn)``."""
    out = a[..., :, None, :, None] * b[..., None, :, None, :]
    m, n = a.shape[-1], b.shape[-1]
    return out.reshape(*out.shape[:-4], m * n, m * n)


def block_diag(blocks: list[Tensor]) -> Tensor:
    """Batched block diagonal of ``(..., n_i, n_i)`` blocks."""
    lead = torch.broadcast_shapes(*[b.shape[:-2] for b in blocks])
    size = sum(b.shape[-1] for b in blocks)
    out = blocks[0].new_zeros(*lead, size, size)
    i = 0
    for b in blocks:
        n = b.shape[-1]
        out[..., i:i + n, i:i + n] = b
        i += n
    return out


def _check_element(g: Tensor, G: Group | None, what: str = "g") -> Tensor:
    """Shape, dtype and (on the CPU) membership of group elements ``g (..., d, d)``."""
    check_tensor(g, what, min_ndim=2)
    if g.shape[-1] != g.shape[-2]:
        raise ValueError(f"{what} must have shape (..., d, d), got {tuple(g.shape)}")
    if G is not None:
        G.check_element(g, what)
    return g


def check_algebra_element(A: Tensor, G: Group | None, what: str = "Lie algebra elements") -> Tensor:
    check_tensor(A, what, min_ndim=2)
    if A.shape[-1] != A.shape[-2] or (G is not None and A.shape[-1] != G.d):
        want = "(..., d, d)" if G is None else f"(..., {G.d}, {G.d}) for {G}"
        raise ValueError(f"{what} must have shape {want}, got {tuple(A.shape)}")
    return A


class UnboundRep:
    """A representation written before its group ([`GroupFreeRep`][]): ``rep(G)`` binds it.

    Combined with a bound [`Rep`][] by ``+`` / ``*`` it is bound to that rep's group (the bound rep
    hands the operation over to it).
    """

    __slots__ = ()

    def __call__(self, group):
        raise NotImplementedError


class Rep(FeatureType):
    """Base class of representations; see the module docstring for the algebra.

    Subclasses implement ``size``, ``group``, ``rho``, ``drho`` and ``key``. As a
    [`FeatureType`][] a rep occupies the last axis, ``(..., size)``, and ``g``
    acts by ``x @ rho(g)^T`` (the rotation part of a rigid transform for E(d) samplers).
    """

    #: The group this rep belongs to (``None`` for reps of every group, i.e. Scalar).
    group: Group | None = None
    #: Whether ``repr(rep)`` is one term (``V(SO(3))``), which a larger expression needs not bracket.
    single_term_repr: bool = False

    @property
    def size(self) -> int:
        """Dimension of the representation space."""
        raise NotImplementedError

    def rho(self, g: Tensor) -> Tensor:
        """Group action: ``g`` ``(..., d, d)`` -> ``(..., size, size)`` in ``g``'s dtype.

        Checks once that ``g`` holds elements of the group (shape, dtype and, on the CPU,
        membership: [`geomlin.groups.Group.check_element`][geomlin.groups.base.Group.check_element]), then
        evaluates ``_rho``.
        """
        _check_element(g, self.group)
        return self._rho(g)

    def _rho(self, g: Tensor) -> Tensor:
        """``rho`` on elements already known to be in the group (subclasses implement this)."""
        if type(self).rho is Rep.rho:
            raise NotImplementedError(f"{type(self).__name__} implements neither rho nor _rho")
        return self.rho(g)  # a subclass written against the older protocol (rho only)

    def drho(self, A: Tensor) -> Tensor:
        """Lie algebra action: ``A`` ``(..., d, d)`` -> ``(..., size, size)``."""
        raise NotImplementedError

    def key(self) -> tuple:
        """Canonical hashable description (equal reps have equal keys)."""
        raise NotImplementedError

    # ----------------------------------------------------------- as a feature type
    @property
    def shape(self) -> tuple[int, ...]:
        """``(size,)``: a rep occupies the last axis."""
        return (self.size,)

    @property
    def is_invariant(self) -> bool:
        return self.is_scalar

    def act(self, g, x: Tensor) -> Tensor:
        """``x @ rho(g)^T`` on the last axis, ``rho`` evaluated in float64."""
        return apply_matrix(self.rho(rotation_part(g).to(torch.float64)), x)

    # ---------------------------------------------------------------- binding
    def __call__(self, group) -> Rep:
        """``rep(G)``: this rep, after checking that it belongs to ``G`` (EMLP's binding call).

        Reps of no particular group (``Scalar`` and sums of it) fit every group.
        """
        from geomlin.groups.names import as_group

        group = as_group(group, kind=Group)
        if self.group is not None and self.group != group:
            raise ValueError(f"{self!r} is a representation of {self.group}, not of {group}")
        return self

    # ---------------------------------------------------------------- algebra
    def __add__(self, other) -> Rep:
        if isinstance(other, int) and not isinstance(other, bool) and other == 0:
            return self
        if isinstance(other, UnboundRep):
            return NotImplemented  # other.__radd__ binds it to this rep's group
        other = _as_rep(other, "+")
        return SumRep([self, other])

    def __radd__(self, other) -> Rep:
        if isinstance(other, int) and not isinstance(other, bool) and other == 0:
            return self
        return _as_rep(other, "+") + self

    def __mul__(self, other) -> Rep:
        if isinstance(other, int) and not isinstance(other, bool):
            return _multiplicity(other, self)
        if isinstance(other, UnboundRep):
            return NotImplemented  # other.__rmul__ binds it to this rep's group
        other = _as_rep(other, "*")
        return TensorRep([self, other])

    def __rmul__(self, other) -> Rep:
        if isinstance(other, int) and not isinstance(other, bool):
            return _multiplicity(other, self)
        return _as_rep(other, "*") * self

    def __pow__(self, k: int) -> Rep:
        k = check_nonnegative_int(k, "the tensor power")
        if k == 0:
            return Scalar
        return TensorRep([self] * k)

    def dual(self) -> Rep:
        """The dual (contragredient) rep ``rho(g)^{-T}``."""
        return DualRep(self)

    def __eq__(self, other) -> bool:
        return isinstance(other, Rep) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())

    @property
    def blocks(self) -> list[Rep]:
        """Direct-sum summands (itself for a non-sum rep)."""
        return [self]

    @property
    def is_scalar(self) -> bool:
        """True when the rep is trivial (``rho(g) = I``) by construction."""
        return False

    def to_irreps(self):
        """The e3nn ``o3.Irreps`` with the same basis, for O(3)/SO(3) reps that have one."""
        raise NotImplementedError(f"{self!r} has no e3nn Irreps equivalent in the same basis")


def run_length_repr(parts, term, sep: str) -> str:
    """``sep``-joined ``term(part, n)`` of the runs of ``n`` equal consecutive ``parts`` (``2*V + Scalar``)."""
    out, prev, count = [], None, 0
    for r in list(parts) + [None]:
        if prev is not None and r is not None and r == prev:
            count += 1
            continue
        if prev is not None:
            out.append(term(prev, count))
        prev, count = r, 1
    return sep.join(out)


def sum_term(r, n: int) -> str:
    """``3*V`` for a run of three equal summands."""
    return f"{n}*{r!r}" if n > 1 else repr(r)


def power_term(r, n: int, is_sum: bool) -> str:
    """``V**2`` for a run of two equal tensor factors (a sum in parentheses)."""
    s = f"({r!r})" if is_sum else repr(r)
    return f"{s}**{n}" if n > 1 else s


def _as_rep(x, op: str) -> Rep:
    if not isinstance(x, Rep):
        raise TypeError(f"cannot combine a Rep with {type(x).__name__} using {op}")
    return x


def _multiplicity(n: int, rep: Rep) -> Rep:
    if n < 0:
        raise ValueError(f"multiplicities must be non-negative, got {n}")
    if n == 0:
        raise ValueError("a multiplicity of 0 gives the empty representation: leave the term out (an e3nn "
                         "IrrepsRep('') is the empty rep of O(3) / SO(3))")
    return rep if n == 1 else SumRep([rep] * n)


def bind(rep, group=None, name: str = "rep") -> Rep:
    """``rep`` as a bound [`Rep`][]: a group-free rep is bound to ``group``, a bound one checked.

    Parameters
    ----------
    rep : Rep or group-free rep
        the representation.
    group : Group or str, optional
        binds a group-free rep: a geomlin Group or a name such as ``"O(3)"``.
    name : str
        the argument's name in error messages.

    Returns
    -------
    Rep
        the bound representation.

    Raises
    ------
    TypeError
        For anything that is not a representation.
    ValueError
        For a group-free rep without a group, or a rep of another group than ``group``.
    """
    if isinstance(rep, UnboundRep):
        if group is None:
            raise ValueError(f"{name} = {rep!r} is written without a group; pass group=... "
                             f"or bind it first with {name}(G)")
        return rep(group)
    if not isinstance(rep, Rep):
        raise TypeError(f"{name} must be a geomlin Rep (or a group-free rep such as T(1)), got "
                        f"{type(rep).__name__}")
    return rep if group is None else rep(group)


def common_group(reps) -> Group | None:
    """The one group shared by ``reps`` (``None`` if all are scalar); error when they mix groups."""
    group = None
    for r in reps:
        if r.group is None:
            continue
        if group is None:
            group = r.group
        elif r.group != group:
            raise ValueError(f"cannot combine representations of different groups: {group} and {r.group}")
    return group


class ScalarRep(Rep):
    """The trivial 1-dimensional representation, compatible with every group."""

    single_term_repr = True

    @property
    def size(self) -> int:
        return 1

    @property
    def is_scalar(self) -> bool:
        return True

    def _rho(self, g: Tensor) -> Tensor:
        return torch.ones(*g.shape[:-2], 1, 1, dtype=g.dtype, device=g.device)

    def drho(self, A: Tensor) -> Tensor:
        check_algebra_element(A, None)
        return torch.zeros(*A.shape[:-2], 1, 1, dtype=A.dtype, device=A.device)

    def key(self) -> tuple:
        return ("Scalar",)

    def dual(self) -> Rep:
        return self

    def to_irreps(self):
        from e3nn import o3

        return o3.Irreps("0e")

    def __repr__(self) -> str:
        return "Scalar"


#: The trivial representation (a singleton usable with any group).
Scalar = ScalarRep()


class Vector(Rep):
    """The defining representation ``V(G)``: ``rho(g) = g``."""

    single_term_repr = True

    def __init__(self, G: Group):
        from geomlin.groups.names import as_group

        self.group = as_group(G, "V(G): G", kind=Group)

    @property
    def size(self) -> int:
        return self.group.d

    def _rho(self, g: Tensor) -> Tensor:
        return g

    def drho(self, A: Tensor) -> Tensor:
        return check_algebra_element(A, self.group)

    def key(self) -> tuple:
        return ("V", self.group.key())

    def to_irreps(self):
        from geomlin.groups.classical import SO, O

        if isinstance(self.group, (O, SO)) and self.group.d == 3:
            from e3nn import o3

            return o3.Irreps("1o")
        return super().to_irreps()

    def __repr__(self) -> str:
        return f"V[{self.group}]"


class SumRep(Rep):
    """Direct sum ``a + b + ...``; nested sums are flattened, order is kept."""

    def __init__(self, reps):
        flat = []
        for r in reps:
            flat.extend(r.blocks)
        if not flat:
            raise ValueError("a direct sum needs at least one representation")
        self.group = common_group(flat)
        self._blocks = flat

    @property
    def blocks(self) -> list[Rep]:
        return list(self._blocks)

    @property
    def size(self) -> int:
        return sum(r.size for r in self._blocks)

    @property
    def is_scalar(self) -> bool:
        return all(r.is_scalar for r in self._blocks)

    def _rho(self, g: Tensor) -> Tensor:
        return block_diag([r._rho(g) for r in self._blocks])

    def drho(self, A: Tensor) -> Tensor:
        return block_diag([r.drho(A) for r in self._blocks])

    def key(self) -> tuple:
        return ("Sum",) + tuple(r.key() for r in self._blocks)

    def dual(self) -> Rep:
        return SumRep([r.dual() for r in self._blocks])

    def to_irreps(self):
        from e3nn import o3

        out = o3.Irreps("")
        for r in self._blocks:
            out = out + r.to_irreps()
        return out

    def __repr__(self) -> str:
        return run_length_repr(self._blocks, sum_term, " + ")


class TensorRep(Rep):
    """Tensor product ``a * b * ...`` (Kronecker, row-major: the last factor varies fastest).

    Scalar factors are dropped; nested products are flattened.
    """

    def __new__(cls, reps):
        factors = []
        for r in reps:
            factors.extend(r.factors if isinstance(r, TensorRep) else [r])
        factors = [r for r in factors if not isinstance(r, ScalarRep)]
        if not factors:
            return Scalar
        if len(factors) == 1:
            return factors[0]
        self = super().__new__(cls)
        self.group = common_group(factors)
        self.factors = factors
        return self

    def __init__(self, reps):  # all work happens in __new__
        pass

    def __getnewargs__(self):  # copy and pickle rebuild through __new__
        return (self.factors,)

    @property
    def size(self) -> int:
        out = 1
        for r in self.factors:
            out *= r.size
        return out

    @property
    def is_scalar(self) -> bool:
        return all(r.is_scalar for r in self.factors)

    def _rho(self, g: Tensor) -> Tensor:
        return reduce(_kron, [r._rho(g) for r in self.factors])

    def drho(self, A: Tensor) -> Tensor:
        mats = [r.drho(A) for r in self.factors]
        out = mats[0]
        for m in mats[1:]:
            eye_out = torch.eye(out.shape[-1], dtype=A.dtype, device=A.device)
            eye_m = torch.eye(m.shape[-1], dtype=A.dtype, device=A.device)
            out = _kron(out, eye_m.expand_as(m)) + _kron(eye_out.expand_as(out), m)
        return out

    def key(self) -> tuple:
        return ("Tensor",) + tuple(r.key() for r in self.factors)

    def dual(self) -> Rep:
        return TensorRep([r.dual() for r in self.factors])

    def __repr__(self) -> str:
        return run_length_repr(self.factors, lambda r, n: power_term(r, n, isinstance(r, SumRep)), "*")


class DualRep(Rep):
    """Dual representation ``rho(g)^{-T}``, ``drho(A) = -drho(A)^T``.

    For orthogonal groups it equals the original rep in value but keeps its
    own key (the solver does not assume ``V* = V``).
    """

    def __new__(cls, rep: Rep):
        if isinstance(rep, DualRep):
            return rep.rep
        if isinstance(rep, ScalarRep):
            return rep
        self = super().__new__(cls)
        self.rep = rep
        self.group = rep.group
        return self

    def __init__(self, rep: Rep):
        pass

    def __getnewargs__(self):
        return (self.rep,)

    @property
    def size(self) -> int:
        return self.rep.size

    def _rho(self, g: Tensor) -> Tensor:
        return torch.linalg.inv(self.rep._rho(g)).transpose(-1, -2)

    def drho(self, A: Tensor) -> Tensor:
        return -self.rep.drho(A).transpose(-1, -2)

    def key(self) -> tuple:
        return ("Dual", self.rep.key())

    def dual(self) -> Rep:
        return self.rep

    def __repr__(self) -> str:
        inner = repr(self.rep)
        return f"{inner}.dual()" if self.rep.single_term_repr else f"({inner}).dual()"
