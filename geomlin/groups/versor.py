"""The groups acting on multivectors of a Clifford algebra.

* [`CliffordGroup`][] — products of random invertible vectors of any [`CliffordAlgebra`][];
* [`Pin301`][] — Pin(3,0,1), the double cover of E(3): products of 1..4 reflections in planes;
* [`PseudoOrthogonalGroup`][] — the full orthogonal group O(p,q,r) of the quadratic form as
  ``(n, n)`` matrices, acting by outermorphisms. For non-degenerate metrics it acts like the
  Clifford group; for degenerate ones it is larger: in G(3,0,1) it holds the similarities
  ``p -> lambda R p + t``, which no versor realises (GLGENN, Filimoshina and Shirokov 2025).

Versors act by the twisted sandwich ``v x^ v^-1`` ([`CliffordAlgebra.sandwich`][]), so odd
versors act as reflections on every grade; matrices by [`CliffordAlgebra.outermorphism`][].
[`CliffordAlgebra.act`][] takes either; it is the action of the
[`geomlin.reps.Multivectors`][geomlin.reps.types.Multivectors] feature type, whose default group is
[`versor_group`][] of its algebra.

All three follow the [`SymmetryGroup`][] protocol: their generators act on the ``n`` basis vectors
of the algebra (a versor ``v`` as the matrix of ``x -> v x^ v^-1`` on vectors), and their names
(``"Pin(3,0,1)"``, ``"Spin(3,0,1)"``, ``"CliffordGroup(1,1,1)"``, ``"CliffordGroup+(1,1,1)"`` for the
even part, ``"PseudoOrthogonalGroup(0,1,1,1)"``) are parsed back by
[`geomlin.groups.as_group`][geomlin.groups.names.as_group]. ``parity="odd"`` samples the odd coset of the
same group.

>>> from geomlin.algebra import pga
>>> from geomlin.groups import Pin301
>>> from geomlin.reps import Multivectors
>>> g = Pin301().sample(3)              # (3, 16) versors
>>> x = torch.randn(5, 2, 16)           # (items, channels, 16)
>>> Multivectors(pga.PGA, 2).act(g[0], x).shape
torch.Size([5, 2, 16])
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from geomlin.algebra import pga
from geomlin.algebra.clifford import CliffordAlgebra
from geomlin.groups.base import SymmetryGroup, haar_orthogonal
from geomlin.validation import check_choice, check_float, check_int, check_positive_float, check_positive_int

#: Parity options of the samplers: both, products of an even number of reflections, or an odd one.
PARITIES = (None, "even", "odd")
#: The metric of G(3,0,1), whose versor group is [`Pin301`][].
PGA_METRIC = (0.0, 1.0, 1.0, 1.0)


def as_algebra(algebra) -> CliffordAlgebra:
    """A [`CliffordAlgebra`][], or one built from a metric such as ``(1, 1, 1)``."""
    if isinstance(algebra, CliffordAlgebra):
        return algebra
    return CliffordAlgebra(algebra)


def versor_group(algebra) -> SymmetryGroup:
    """The group of versors acting on ``algebra``'s multivectors: [`Pin301`][] for G(3,0,1),
    [`CliffordGroup`][] otherwise."""
    algebra = as_algebra(algebra)
    return Pin301() if algebra.metric == PGA_METRIC else CliffordGroup(algebra)


def metric_name(metric) -> str:
    """``"0,1,1,1"`` for the metric ``(0.0, 1.0, 1.0, 1.0)`` (the arguments of the group names)."""
    return ",".join(str(int(m)) for m in metric)


def _check_dtype(dtype) -> torch.dtype:
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    return dtype


def _counts(max_count: int, parity: str | None) -> list[int]:
    """The numbers of reflections ``1..max_count`` allowed by ``parity``."""
    return [k for k in range(1, max_count + 1) if parity is None or (k % 2 == 0) == (parity == "even")]


def _on_vectors(algebra: CliffordAlgebra, f) -> Tensor:
    """The ``(n, n)`` matrix of a linear map ``f`` of multivectors restricted to the vectors (column
    ``k`` is the grade-1 part of ``f(e_k)``); ``f`` maps ``(n, dim)`` to ``(n, dim)``."""
    basis = algebra.embed_vector(torch.eye(algebra.n, dtype=torch.float64))
    return f(basis)[:, algebra.grade_slices[1]].T


def _versor_generators(algebra: CliffordAlgebra, even: bool) -> tuple[Tensor, Tensor]:
    """Generators of the versor group of ``algebra`` acting on its vectors.

    Lie algebra: ``x -> B x - x B`` for the basis bivectors ``B = e_i e_j`` (those acting
    non-trivially); discrete: the reflections ``x -> -e x e^-1`` in the first basis vector squaring
    to ``+1`` and the first squaring to ``-1`` (their product when ``even``).
    """
    n = algebra.n
    blades = algebra.embed_vector(torch.eye(n, dtype=torch.float64))
    lie = []
    for i in range(n):
        for j in range(i + 1, n):
            B = algebra.geometric_product(blades[i], blades[j])
            X = _on_vectors(algebra, lambda x, B=B: algebra.geometric_product(B, x) - algebra.geometric_product(x, B))
            if X.abs().amax() > 0:
                lie.append(X)
    firsts = [algebra.metric.index(sign) for sign in (1.0, -1.0) if sign in algebra.metric]
    reflections = [_on_vectors(algebra, lambda x, e=blades[i]: algebra.sandwich(e, x)) for i in firsts]
    if even:
        reflections = [reflections[0] @ reflections[1]] if len(reflections) == 2 else []
    empty = torch.zeros(0, n, n, dtype=torch.float64)
    return (torch.stack(lie) if lie else empty), (torch.stack(reflections) if reflections else empty)


class AlgebraGroup(SymmetryGroup):
    """A group acting on the multivectors of ``self.algebra``, whose generators act on its vectors."""

    algebra: CliffordAlgebra
    parity: str | None

    def generators(self) -> tuple[Tensor, Tensor]:
        """``(lie_algebra (k, n, n), discrete_generators (h, n, n))`` on the ``n`` basis vectors, float64."""
        raise NotImplementedError

    @property
    def lie_algebra(self) -> Tensor:
        return self.generators()[0]

    @property
    def discrete_generators(self) -> Tensor:
        return self.generators()[1]


class CliffordGroup(AlgebraGroup):
    """The Clifford group of ``algebra``: products of invertible vectors, acting by the twisted sandwich.

    ``sample(n)`` returns ``(n, dim)`` products of 1..``max_vectors`` random vectors whose
    squares satisfy ``|v^2| >= min_square`` (so the versors are well conditioned).
    ``parity="even"`` keeps products of an even number of vectors (the special Clifford group,
    rotations, named ``"CliffordGroup+(...)"``), ``"odd"`` samples the odd coset. Feature type:
    [`geomlin.reps.Multivectors`][geomlin.reps.types.Multivectors].
    """

    def __init__(self, algebra, max_vectors: int = 4, min_square: float = 0.3, parity: str | None = None):
        self.algebra = as_algebra(algebra)
        if self.algebra.metric.count(0.0) == self.algebra.n:
            raise ValueError("a fully degenerate metric has no invertible vectors")
        self.max_vectors = check_positive_int(max_vectors, "max_vectors")
        self.min_square = check_positive_float(min_square, "min_square")
        if self.min_square > 1.0:
            raise ValueError(f"min_square must be <= 1 (vectors are standard normal), got {self.min_square}")
        self.parity = check_choice(parity, "parity", PARITIES)
        if not _counts(self.max_vectors, self.parity):
            raise ValueError(f"parity={parity!r} needs max_vectors >= 2, got {self.max_vectors}")
        self.name = f"CliffordGroup{'+' if self.parity == 'even' else ''}({metric_name(self.algebra.metric)})"

    def key(self) -> tuple:
        return ("CliffordGroup", self.algebra.metric, self.parity == "even")

    def generators(self) -> tuple[Tensor, Tensor]:
        """The basis bivectors acting on the vectors by commutators; reflections in basis vectors of each
        non-zero square (their product if even)."""
        return _versor_generators(self.algebra, self.parity == "even")

    def is_subgroup_of(self, other) -> bool:
        """The (special) Clifford group lies in the Clifford group and in O(p,q,r) of its metric."""
        if isinstance(other, (CliffordGroup, PseudoOrthogonalGroup)):
            return other.algebra == self.algebra and (other.parity != "even" or self.parity == "even")
        return False

    def sample(self, n: int = 1, generator: torch.Generator | None = None, dtype=torch.float64) -> Tensor:
        """``n`` random versors ``(n, dim)``."""
        n = check_positive_int(n, "n")
        _check_dtype(dtype)
        alg = self.algebra
        metric = torch.tensor(alg.metric, dtype=torch.float64)
        counts = _counts(self.max_vectors, self.parity)
        out = []
        for _ in range(n):
            k = counts[int(torch.randint(len(counts), (1,), generator=generator))]
            v = None
            while k:
                c = torch.randn(alg.n, generator=generator, dtype=torch.float64)
                if abs(float((metric * c * c).sum())) < self.min_square:
                    continue
                vec = alg.embed_vector(c)
                v = vec if v is None else alg.geometric_product(v, vec)
                k -= 1
            out.append(v)
        return torch.stack(out).to(dtype)


class Pin301(AlgebraGroup):
    """Pin(3,0,1) (or Spin(3,0,1) with ``parity="even"``), the versors of G(3,0,1), the double cover of E(3).

    Every element of Pin(3,0,1) is a product of at most four reflections in planes; ``sample``
    draws ``k`` planes with ``k`` uniform in ``1..max_planes``, random unit normals and random
    offsets, so translations, rotations, screw motions, reflections and roto-reflections all occur.

    Parameters
    ----------
    max_planes : int
        largest number of plane reflections multiplied together (1..4).
    offset_scale : float
        standard deviation of the plane offsets (controls translations).
    parity : str | None
        ``None`` for both, ``"even"`` (motions: Spin(3,0,1)) or ``"odd"`` (samples the improper
        motions of Pin(3,0,1)).

    Notes
    -----
    The sampling options are not part of the group's identity: ``Pin301(max_planes=2) == Pin301()``.
    """

    def __init__(self, max_planes: int = 4, offset_scale: float = 1.0, parity: str | None = None):
        max_planes = check_int(max_planes, "max_planes", minimum=1, maximum=4)
        check_choice(parity, "parity", PARITIES)
        if parity == "even" and max_planes < 2:
            raise ValueError("even versors need max_planes >= 2")
        self.max_planes = max_planes
        self.offset_scale = check_float(offset_scale, "offset_scale", minimum=0.0)
        self.parity = parity
        self.algebra = pga.PGA
        self.name = "Spin(3,0,1)" if parity == "even" else "Pin(3,0,1)"

    def key(self) -> tuple:
        """Spin(3,0,1) (``parity="even"``) or Pin(3,0,1); the sampling options are not part of it."""
        return ("Pin(3,0,1)", self.parity == "even")

    def generators(self) -> tuple[Tensor, Tensor]:
        """The six bivectors of G(3,0,1) (rotations and translations) on the vectors, ``(6, 4, 4)``; the
        reflection in the plane ``e1``, ``(1, 4, 4)`` (none for Spin(3,0,1))."""
        return _versor_generators(self.algebra, self.parity == "even")

    def is_subgroup_of(self, other) -> bool:
        """Spin(3,0,1) lies in Pin(3,0,1); both lie in O(3,0,1) ([`PseudoOrthogonalGroup`][] of
        G(3,0,1), which also holds the similarities) and in the Clifford group of G(3,0,1)."""
        if isinstance(other, Pin301):
            return other.parity != "even" or self.parity == "even"
        if isinstance(other, (PseudoOrthogonalGroup, CliffordGroup)):
            return other.algebra.metric == PGA_METRIC and (other.parity != "even" or self.parity == "even")
        return False

    def sample(self, n: int = 1, generator: torch.Generator | None = None,
               dtype: torch.dtype = torch.float64) -> Tensor:
        """``n`` random versors ``(n, 16)``, each a product of 1..max_planes unit planes."""
        n = check_positive_int(n, "n")
        _check_dtype(dtype)
        choices = _counts(self.max_planes, self.parity)
        pick = torch.randint(len(choices), (n,), generator=generator)
        out = torch.zeros(n, pga.DIM, dtype=torch.float64)
        for s in range(n):
            k = choices[pick[s].item()]
            v = None
            for _ in range(k):
                normal = torch.randn(3, generator=generator, dtype=torch.float64)
                normal = normal / normal.norm()
                offset = torch.randn(1, generator=generator, dtype=torch.float64) * self.offset_scale
                plane = torch.zeros(pga.DIM, dtype=torch.float64)
                plane[list(pga.PLANE_NORMAL)] = normal
                plane[pga.E0] = offset[0]
                v = plane if v is None else pga.geometric_product(v, plane)
            out[s] = v
        return out.to(dtype)


def _pseudo_orthogonal_generators(metric: tuple, even: bool) -> tuple[Tensor, Tensor]:
    """Generators of O(p,q,r) of ``diag(metric)`` on ``R^n``: ``X^T G + G X = 0``.

    With ``Z`` the null and ``N`` the other indices, ``X[Z, :]`` is free, ``X[N, Z] = 0`` and
    ``G_N X[N, N]`` is antisymmetric: basis ``E_ab`` (``a`` in ``Z``) and ``G_aa E_ab - G_bb E_ba``
    (``a < b`` in ``N``). Discrete: the reflections in the first positive and first negative basis
    vector (their product when ``even``) and the sign flip of the first null one.
    """
    n = len(metric)
    null = [i for i in range(n) if metric[i] == 0.0]
    reg = [i for i in range(n) if metric[i] != 0.0]

    def unit(a: int, b: int) -> Tensor:
        e = torch.zeros(n, n, dtype=torch.float64)
        e[a, b] = 1.0
        return e

    lie = [unit(a, b) for a in null for b in range(n)]
    lie += [metric[a] * unit(a, b) - metric[b] * unit(b, a) for i, a in enumerate(reg) for b in reg[i + 1:]]

    def flip(i: int) -> Tensor:
        f = torch.eye(n, dtype=torch.float64)
        f[i, i] = -1.0
        return f

    reflections = [flip(metric.index(sign)) for sign in (1.0, -1.0) if sign in metric]
    if even:
        reflections = [reflections[0] @ reflections[1]] if len(reflections) == 2 else []
    disc = reflections + ([flip(null[0])] if null else [])
    empty = torch.zeros(0, n, n, dtype=torch.float64)
    return (torch.stack(lie) if lie else empty), (torch.stack(disc) if disc else empty)


class PseudoOrthogonalGroup(AlgebraGroup):
    """O(p,q,r), the linear maps ``A`` of the vector space with ``A^T G A = G``
    (``G = diag(metric)``), acting on multivectors as outermorphisms ([`CliffordAlgebra.act`][]).

    Order the basis vectors as the null ones ``Z`` (radical, ``e_i^2 = 0``) and the rest ``N``.
    Every element has the block form ``A = [[L, B], [0, R]]``: ``R`` in O(p,q) acts on ``N``,
    ``L`` is any invertible map of the radical and ``B`` adds radical parts to the images of
    ``N`` (``A e_Z`` must stay in the radical; nothing else is constrained). ``sample`` draws

    * ``R``: a product of ``1..max_reflections`` reflections ``x -> x - 2 (u.x / u.u) u`` in
      random vectors with ``|u.u| >= min_square |u|^2`` (Cartan-Dieudonne: these generate O(p,q),
      rotations, boosts and improper elements included); ``parity`` keeps even or odd counts;
    * ``L = U diag(s) V`` with Haar-random orthogonal ``U, V`` and ``s`` log-uniform in
      ``scale_range`` (``lambda != 1``: in G(3,0,1) a similarity ``p -> lambda R p + t``),
      random signs included;
    * ``B`` with standard deviation ``translation_scale`` (translations in G(3,0,1)).

    Elements are ``(n, n)`` matrices, acted on multivectors by [`CliffordAlgebra.act`][] (the
    action of [`geomlin.reps.Multivectors`][geomlin.reps.types.Multivectors] under this group). Every
    grade-preserving algebra automorphism commuting with reversion preserves grades and the
    quadratic forms ``<x_k ~x_k>_0``, so CGENN / GLGENN layers are equivariant to this group;
    operations that use the complement or the pseudoscalar (GATr's join) are not.
    Named ``"PseudoOrthogonalGroup(0,1,1,1)"`` (the metric), ``"PseudoOrthogonalGroup+(...)"`` for
    ``parity="even"``.

    >>> G = PseudoOrthogonalGroup((0, 1, 1, 1))
    >>> G.sample(2).shape
    torch.Size([2, 4, 4])
    """

    def __init__(self, algebra, max_reflections: int | None = None, min_square: float = 0.5,
                 scale_range: tuple[float, float] = (0.5, 2.0), translation_scale: float = 1.0,
                 parity: str | None = None):
        self.algebra = as_algebra(algebra)
        n_reg = self.algebra.n - self.algebra.metric.count(0.0)
        default = max(n_reg, 1)
        self.max_reflections = default if max_reflections is None else check_positive_int(
            max_reflections, "max_reflections")
        self.min_square = check_positive_float(min_square, "min_square")
        if self.min_square > 1.0:
            raise ValueError(f"min_square must be <= 1 (it bounds |u.u| / |u|^2), got {self.min_square}")
        if not isinstance(scale_range, (tuple, list)) or len(scale_range) != 2:
            raise TypeError(f"scale_range must be a pair (low, high), got {scale_range!r}")
        lo = check_positive_float(scale_range[0], "scale_range[0]")
        hi = check_positive_float(scale_range[1], "scale_range[1]")
        if lo > hi:
            raise ValueError(f"scale_range must have low <= high, got {scale_range!r}")
        self.scale_range = (lo, hi)
        self.translation_scale = check_float(translation_scale, "translation_scale", minimum=0.0)
        self.parity = check_choice(parity, "parity", PARITIES)
        if n_reg == 0 and self.parity is not None:
            raise ValueError("a fully degenerate metric has no reflections; use parity=None")
        if n_reg and not _counts(self.max_reflections, self.parity):
            raise ValueError(f"parity={parity!r} needs max_reflections >= 2, got {self.max_reflections}")
        self.name = (f"PseudoOrthogonalGroup{'+' if self.parity == 'even' else ''}"
                     f"({metric_name(self.algebra.metric)})")

    def key(self) -> tuple:
        return ("PseudoOrthogonalGroup", self.algebra.metric, self.parity == "even")

    def generators(self) -> tuple[Tensor, Tensor]:
        """A basis of ``{X : X^T G + G X = 0}``; reflections in basis vectors (their product if even) and a
        null sign flip."""
        return _pseudo_orthogonal_generators(self.algebra.metric, self.parity == "even")

    def is_subgroup_of(self, other) -> bool:
        """Each lies in itself; the even part (``parity="even"``) in the whole group."""
        return isinstance(other, PseudoOrthogonalGroup) and other.algebra == self.algebra and (
            other.parity != "even" or self.parity == "even")

    def sample(self, n: int = 1, generator: torch.Generator | None = None,
               dtype: torch.dtype = torch.float64) -> Tensor:
        """``n`` random elements ``(n, dim_v, dim_v)`` with ``dim_v = algebra.n``."""
        n = check_positive_int(n, "n")
        _check_dtype(dtype)
        metric = torch.tensor(self.algebra.metric, dtype=torch.float64)
        null = (metric == 0).nonzero().flatten()
        reg = (metric != 0).nonzero().flatten()
        G = metric[reg]
        counts = _counts(self.max_reflections, self.parity) if len(reg) else [0]
        log_lo, log_hi = math.log(self.scale_range[0]), math.log(self.scale_range[1])
        out = torch.zeros(n, self.algebra.n, self.algebra.n, dtype=torch.float64)
        for s in range(n):
            R = torch.eye(len(reg), dtype=torch.float64)
            k = counts[int(torch.randint(len(counts), (1,), generator=generator))]
            for _ in range(k):
                while True:
                    u = torch.randn(len(reg), generator=generator, dtype=torch.float64)
                    uu = float((G * u * u).sum())
                    if abs(uu) >= self.min_square * float((u * u).sum()):
                        break
                # reflection in the hyperplane orthogonal to u: x -> x - 2 (u.x / u.u) u
                R = (torch.eye(len(reg), dtype=torch.float64) - 2.0 * torch.outer(u, G * u) / uu) @ R
            A = torch.zeros(self.algebra.n, self.algebra.n, dtype=torch.float64)
            A[reg[:, None], reg[None, :]] = R
            if len(null):
                scales = torch.exp(log_lo + (log_hi - log_lo) * torch.rand(len(null), generator=generator,
                                                                        dtype=torch.float64))
                U, V = (haar_orthogonal(1, len(null), generator)[0] for _ in range(2))
                L = U @ torch.diag(scales) @ V
                A[null[:, None], null[None, :]] = L
                if len(reg):
                    B = torch.randn(len(null), len(reg), generator=generator, dtype=torch.float64)
                    A[null[:, None], reg[None, :]] = B * self.translation_scale
            out[s] = A
        return out.to(dtype)
