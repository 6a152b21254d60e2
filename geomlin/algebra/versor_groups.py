"""Samplers of the groups acting on multivectors, for [`geomlin.testing`][] and [`geomlin.reps`][].

* [`CliffordGroup`][] — products of random invertible vectors of any [`CliffordAlgebra`][];
* [`Pin301`][] — Pin(3,0,1), the double cover of E(3): products of 1..4 reflections in planes;
* [`PseudoOrthogonalGroup`][] — the full orthogonal group O(p,q,r) of the quadratic form as
  ``(n, n)`` matrices, acting by outermorphisms. For non-degenerate metrics it acts like the
  Clifford group; for degenerate ones it is larger: in G(3,0,1) it holds the similarities
  ``p -> lambda R p + t``, which no versor realises (GLGENN, Filimoshina and Shirokov 2025).

Versors act by the twisted sandwich ``v x^ v^-1`` ([`CliffordAlgebra.sandwich`][],
[`geomlin.algebra.pga.sandwich`][]), so odd versors act as reflections on every
grade; matrices by [`CliffordAlgebra.outermorphism`][]. [`CliffordAlgebra.act`][] takes either.

>>> from geomlin.algebra import Pin301, pin_action
>>> g = Pin301().sample(3)              # (3, 16) versors
>>> x = torch.randn(5, 2, 16)           # (items, channels, 16)
>>> pin_action(g[0], x).shape
torch.Size([5, 2, 16])
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from geomlin.algebra import pga
from geomlin.algebra.clifford import CliffordAlgebra
from geomlin.validation import check_choice, check_float, check_int, check_positive_float, check_positive_int

#: Parity options of the samplers: both, products of an even number of reflections, or an odd one.
PARITIES = (None, "even", "odd")


def as_algebra(algebra) -> CliffordAlgebra:
    """A [`CliffordAlgebra`][], or one built from a metric such as ``(1, 1, 1)``."""
    if isinstance(algebra, CliffordAlgebra):
        return algebra
    return CliffordAlgebra(algebra)


def _check_dtype(dtype) -> torch.dtype:
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    return dtype


def _counts(max_count: int, parity: str | None) -> list[int]:
    """The numbers of reflections ``1..max_count`` allowed by ``parity``."""
    return [k for k in range(1, max_count + 1) if parity is None or (k % 2 == 0) == (parity == "even")]


class CliffordGroup:
    """Sampler of Clifford-group versors of ``algebra`` for [`geomlin.testing`][].

    ``sample(n)`` returns ``(n, dim)`` products of 1..``max_vectors`` random vectors whose
    squares satisfy ``|v^2| >= min_square`` (so the versors are well conditioned).
    ``parity="even"`` keeps products of an even number of vectors (the special Clifford group,
    rotations), ``"odd"`` an odd number. Use [`action`][] as the action callable.
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

    def __repr__(self) -> str:
        return f"CliffordGroup{self.algebra.metric}{'[' + self.parity + ']' if self.parity else ''}"

    def key(self) -> tuple:
        return ("CliffordGroup", self.algebra.metric, self.parity == "even")

    def is_subgroup_of(self, other) -> bool:
        """The (special) Clifford group lies in the Clifford group and in O(p,q,r) of its metric."""
        if isinstance(other, CliffordGroup):
            return other.algebra == self.algebra and (other.parity is None or self.parity == "even")
        return isinstance(other, PseudoOrthogonalGroup) and other.algebra == self.algebra and (
            other.parity is None or self.parity == "even")

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

    def action(self, g: Tensor, x: Tensor) -> Tensor:
        """``rho_g(x)`` on the last axis of ``x (..., dim)``."""
        return self.algebra.sandwich(g, x)


class Pin301:
    """Sampler of random Pin(3,0,1) versors, for [`geomlin.testing.assert_equivariant`][].

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
        ``None`` for both, ``"even"`` (motions) or ``"odd"`` (improper motions).
    """

    def __init__(self, max_planes: int = 4, offset_scale: float = 1.0, parity: str | None = None):
        max_planes = check_int(max_planes, "max_planes", minimum=1, maximum=4)
        check_choice(parity, "parity", PARITIES)
        if parity == "even" and max_planes < 2:
            raise ValueError("even versors need max_planes >= 2")
        self.max_planes = max_planes
        self.offset_scale = check_float(offset_scale, "offset_scale", minimum=0.0)
        self.parity = parity

    def __repr__(self) -> str:
        return f"Pin(3,0,1)[<= {self.max_planes} planes{', ' + self.parity if self.parity else ''}]"

    def key(self) -> tuple:
        """Spin(3,0,1) (``parity="even"``) or Pin(3,0,1); the sampling options are not part of it."""
        return ("Pin(3,0,1)", self.parity == "even")

    def is_subgroup_of(self, other) -> bool:
        """Spin(3,0,1) lies in Pin(3,0,1); both lie in O(3,0,1) ([`PseudoOrthogonalGroup`][] of
        G(3,0,1), which also holds the similarities) and in the Clifford group of G(3,0,1)."""
        if isinstance(other, Pin301):
            return other.parity is None or self.parity == "even"
        if isinstance(other, (PseudoOrthogonalGroup, CliffordGroup)):
            return other.algebra.metric == pga.PGA.metric and (other.parity is None or self.parity == "even")
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


def pin_action(g: Tensor, x: Tensor) -> Tensor:
    """Sandwich action of one versor ``g (16,)`` on multivectors ``x (..., 16)``.

    Works on any layout with the multivector on the last axis, e.g. ``(..., items, channels, 16)``.
    """
    return pga.sandwich(g, x)


def _haar_orthogonal(d: int, generator: torch.Generator | None) -> Tensor:
    """A Haar-random ``(d, d)`` orthogonal matrix (QR of a Gaussian with the sign fix), float64."""
    q, r = torch.linalg.qr(torch.randn(d, d, generator=generator, dtype=torch.float64))
    return q * torch.sign(torch.diagonal(r))


class PseudoOrthogonalGroup:
    """Sampler of O(p,q,r), the linear maps ``A`` of the vector space with ``A^T G A = G``
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

    Elements are ``(n, n)`` matrices; [`action`][] is [`CliffordAlgebra.act`][]. Every
    grade-preserving algebra automorphism commuting with reversion preserves grades and the
    quadratic forms ``<x_k ~x_k>_0``, so CGENN / GLGENN layers are equivariant to this group;
    operations that use the complement or the pseudoscalar (GATr's join) are not.

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

    def __repr__(self) -> str:
        p, q, r = self.algebra.signature
        return f"O({p},{q},{r}){'[' + self.parity + ']' if self.parity else ''} as outermorphisms"

    def key(self) -> tuple:
        return ("PseudoOrthogonalGroup", self.algebra.metric, self.parity == "even")

    def is_subgroup_of(self, other) -> bool:
        """Each lies in itself; the even part (``parity="even"``) in the whole group."""
        return isinstance(other, PseudoOrthogonalGroup) and other.algebra == self.algebra and (
            other.parity is None or self.parity == "even")

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
                L = _haar_orthogonal(len(null), generator) @ torch.diag(scales) @ _haar_orthogonal(len(null), generator)
                A[null[:, None], null[None, :]] = L
                if len(reg):
                    B = torch.randn(len(null), len(reg), generator=generator, dtype=torch.float64)
                    A[null[:, None], reg[None, :]] = B * self.translation_scale
            out[s] = A
        return out.to(dtype)

    def action(self, g: Tensor, x: Tensor) -> Tensor:
        """``g`` acting on the last axis of ``x (..., dim)`` as an outermorphism."""
        return self.algebra.act(g, x)
