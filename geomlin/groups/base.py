"""Matrix groups defined by their generators.

A group ``G`` acting on ``R^d`` is described, as in EMLP (Finzi et al. 2021,
"A Practical Method for Constructing Equivariant MLPs for Arbitrary Matrix
Groups", Sec. 4), by

* ``lie_algebra``: ``(k, d, d)`` infinitesimal generators ``A_i`` of the
  identity component (``exp(t A_i)`` lies in ``G``), and
* ``discrete_generators``: ``(m, d, d)`` group elements ``h_j`` that, together
  with the identity component, generate the whole group.

A linear map is equivariant to ``G`` iff it commutes with every ``A_i`` (in the
Lie algebra representation) and every ``h_j``, which is what
:func:`geomlin.linear.equivariant_basis` solves.
"""

from __future__ import annotations

import hashlib
import math

import torch
from torch import Tensor

#: Finite groups with at most this many elements are enumerated once so that
#: :meth:`Group.sample` is exactly uniform; larger ones use long random words.
MAX_ENUMERATED_ORDER = 50_000
#: Length of the random generator words used for large finite groups.
RANDOM_WORD_LENGTH = 64
#: Standard deviation of the Lie algebra coefficients used to sample
#: non-compact groups (keeps entries of ``exp(A)`` moderate for float64 tests).
NONCOMPACT_SAMPLE_SCALE = 0.5
#: Tolerance used to decide whether two float64 group elements are equal.
ELEMENT_DECIMALS = 8


def _as_generator_tensor(x, name: str, d: int | None) -> Tensor:
    """Validate generators and return them as a ``(k, d, d)`` float64 tensor."""
    if x is None:
        if d is None:
            raise ValueError(f"{name} is None and the dimension d is unknown")
        return torch.zeros(0, d, d, dtype=torch.float64)
    t = torch.as_tensor(x)
    if not (t.is_floating_point() or t.dtype in (torch.int32, torch.int64)):
        raise TypeError(f"{name} must be a real float or int tensor, got dtype {t.dtype}")
    t = t.to(torch.float64)
    if t.ndim == 2:
        t = t.unsqueeze(0)
    if t.ndim != 3 or t.shape[-1] != t.shape[-2]:
        raise ValueError(
            f"{name} must have shape (k, d, d) with square (d, d) matrices, got shape {tuple(t.shape)}"
        )
    if d is not None and t.shape[0] > 0 and t.shape[-1] != d:
        raise ValueError(f"{name} act on R^{t.shape[-1]} but the group acts on R^{d}")
    if not torch.isfinite(t).all():
        raise ValueError(f"{name} contain NaN or inf entries")
    return t


class Group:
    """A matrix group given by Lie algebra and discrete generators.

    Parameters
    ----------
    lie_algebra:
        ``(k, d, d)`` generators of the Lie algebra (``k`` may be 0).
    discrete_generators:
        ``(m, d, d)`` discrete generators (``m`` may be 0).
    name:
        Readable name used by ``repr`` and error messages.
    d:
        Dimension of the defining representation; inferred from the
        generators when omitted.

    A user-defined group is either ``Group(lie_algebra=..., discrete_generators=...,
    name=...)`` or a subclass that passes its generators to ``super().__init__``.
    Elements are float64 ``(d, d)`` matrices acting on column vectors.
    """

    def __init__(self, lie_algebra=None, discrete_generators=None, name: str | None = None,
                 d: int | None = None):
        if lie_algebra is None and discrete_generators is None and d is None:
            raise ValueError("a Group needs lie_algebra, discrete_generators or d")
        if d is None:
            src = lie_algebra if lie_algebra is not None else discrete_generators
            t = torch.as_tensor(src)
            if t.ndim < 2:
                raise ValueError(f"generators must have shape (k, d, d), got shape {tuple(t.shape)}")
            d = int(t.shape[-1])
        self.d = int(d)
        self.lie_algebra = _as_generator_tensor(lie_algebra, "lie_algebra", self.d)
        self.discrete_generators = _as_generator_tensor(discrete_generators, "discrete_generators", self.d)
        self.name = name or type(self).__name__
        self._elements: Tensor | None = None

    # ------------------------------------------------------------------ identity
    def key(self) -> tuple:
        """A hashable key identifying the group (used for caching and equality).

        Built from the generators' bytes once; generators are treated as immutable.
        """
        cached = self.__dict__.get("_key")
        if cached is None:
            h = hashlib.sha1()
            h.update(self.lie_algebra.contiguous().numpy().tobytes())
            h.update(b"|")
            h.update(self.discrete_generators.contiguous().numpy().tobytes())
            cached = (type(self).__name__, self.d, h.hexdigest())
            self._key = cached
        return cached

    def __eq__(self, other) -> bool:
        return isinstance(other, Group) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())

    def __repr__(self) -> str:
        return self.name

    # --------------------------------------------------------------- properties
    @property
    def is_finite(self) -> bool:
        """True when the group has no continuous part (``k == 0``)."""
        return self.lie_algebra.shape[0] == 0

    @property
    def is_orthogonal(self) -> bool:
        """True when every generator preserves the Euclidean inner product."""
        A = self.lie_algebra
        H = self.discrete_generators
        eye = torch.eye(self.d, dtype=torch.float64)
        lie_ok = torch.allclose(A, -A.transpose(-1, -2), atol=1e-10)
        disc_ok = torch.allclose(H @ H.transpose(-1, -2), eye.expand_as(H), atol=1e-10)
        return bool(lie_ok and disc_ok)

    @property
    def is_compact(self) -> bool:
        """True for groups whose sampling is Haar-uniform (orthogonal groups)."""
        return self.is_orthogonal

    # ----------------------------------------------------------------- sampling
    def sample(self, n: int = 1, generator: torch.Generator | None = None,
               dtype: torch.dtype = torch.float64) -> Tensor:
        """Draw ``n`` random group elements.

        Returns
        -------
        Tensor of shape ``(n, d, d)`` and the requested dtype.

        Finite groups: exactly uniform when the order is at most
        ``MAX_ENUMERATED_ORDER`` (the group is enumerated once), otherwise a
        long random word in the generators. Groups with a Lie algebra: the
        exponential of a random algebra element times a random word in the
        discrete generators. Subclasses with a known Haar measure override this.
        """
        n = _check_count(n)
        if self.is_finite:
            out = self._sample_finite(n, generator)
        else:
            scale = math.pi if self.is_compact else NONCOMPACT_SAMPLE_SCALE
            k = self.lie_algebra.shape[0]
            coeffs = torch.randn(n, k, generator=generator, dtype=torch.float64) * scale
            out = torch.linalg.matrix_exp(torch.einsum("nk,kij->nij", coeffs, self.lie_algebra))
            out = self._random_discrete_words(n, generator) @ out
        return out.to(dtype)

    def elements(self) -> Tensor:
        """All elements of a finite group, ``(order, d, d)`` float64.

        Raises ``ValueError`` for groups with a Lie algebra or more than
        ``MAX_ENUMERATED_ORDER`` elements.
        """
        if not self.is_finite:
            raise ValueError(f"{self} has a Lie algebra and cannot be enumerated")
        if self._elements is None:
            self._elements = _enumerate_closure(self.discrete_generators, self.d)
        return self._elements

    def _sample_finite(self, n: int, generator) -> Tensor:
        try:
            elems = self.elements()
        except _TooLarge:
            return self._random_discrete_words(n, generator, RANDOM_WORD_LENGTH)
        idx = torch.randint(len(elems), (n,), generator=generator)
        return elems[idx]

    def _random_discrete_words(self, n: int, generator, length: int | None = None) -> Tensor:
        H = self.discrete_generators
        eye = torch.eye(self.d, dtype=torch.float64).expand(n, self.d, self.d).clone()
        m = H.shape[0]
        if m == 0:
            return eye
        if length is None:
            # a short word: every discrete generator appears with probability 1/2,
            # enough to reach every connected component of the groups we ship
            length = 2 * m
        out = eye
        for _ in range(length):
            idx = torch.randint(m + 1, (n,), generator=generator)
            choice = torch.cat([H, torch.eye(self.d, dtype=torch.float64)[None]], 0)[idx]
            out = choice @ out
        return out


class _TooLarge(ValueError):
    pass


def _check_count(n) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"the number of samples must be a non-negative int, got {n!r}")
    return n


def _enumerate_closure(gens: Tensor, d: int) -> Tensor:
    """Breadth-first closure of a finite generating set, ``(order, d, d)``."""
    eye = torch.eye(d, dtype=torch.float64)

    def key(m: Tensor) -> bytes:
        return torch.round(m * 10**ELEMENT_DECIMALS).to(torch.int64).numpy().tobytes()

    seen = {key(eye): eye}
    frontier = [eye]
    while frontier:
        new = []
        for g in frontier:
            for h in gens:
                p = h @ g
                k = key(p)
                if k not in seen:
                    seen[k] = p
                    new.append(p)
                    if len(seen) > MAX_ENUMERATED_ORDER:
                        raise _TooLarge(
                            f"the group has more than {MAX_ENUMERATED_ORDER} elements"
                        )
        frontier = new
    return torch.stack(list(seen.values()))


def haar_orthogonal(n: int, d: int, generator=None, special: bool = False) -> Tensor:
    """Haar-uniform samples of O(d) (or SO(d) when ``special``), ``(n, d, d)`` float64.

    QR of a Gaussian matrix with the signs of ``diag(R)`` absorbed into ``Q``
    (Mezzadri 2007, "How to generate random matrices from the classical compact
    groups", Sec. 5). For SO(d) the first column is flipped when ``det = -1``,
    which maps the Haar measure of O(d)'s other coset onto SO(d)'s.
    """
    z = torch.randn(n, d, d, generator=generator, dtype=torch.float64)
    q, r = torch.linalg.qr(z)
    signs = torch.sign(torch.diagonal(r, dim1=-2, dim2=-1))
    signs[signs == 0] = 1.0
    q = q * signs[..., None, :]
    if special:
        det = torch.linalg.det(q)
        q[..., :, 0] = q[..., :, 0] * det[..., None]
    return q


