"""Samplers of versor groups, for :mod:`geomlin.testing` and the feature types of :mod:`geomlin.reps`.

* :class:`CliffordGroup` — products of random invertible vectors of any :class:`CliffordAlgebra`;
* :class:`Pin301` — Pin(3,0,1), the double cover of E(3): products of 1..4 reflections in planes.

Both act on multivectors by the twisted sandwich ``v x^ v^-1`` (:meth:`CliffordAlgebra.sandwich`,
:func:`geomlin.algebra.pga.sandwich`), so odd versors act as reflections on every grade.

>>> from geomlin.algebra import Pin301, pin_action
>>> g = Pin301().sample(3)              # (3, 16) versors
>>> x = torch.randn(5, 2, 16)           # (items, channels, 16)
>>> pin_action(g[0], x).shape
torch.Size([5, 2, 16])
"""

from __future__ import annotations

import torch
from torch import Tensor

from geomlin.algebra import pga
from geomlin.algebra.clifford import CliffordAlgebra


def as_algebra(algebra) -> CliffordAlgebra:
    """A :class:`CliffordAlgebra`, or one built from a metric such as ``(1, 1, 1)``."""
    if isinstance(algebra, CliffordAlgebra):
        return algebra
    return CliffordAlgebra(algebra)


class CliffordGroup:
    """Sampler of Clifford-group versors of ``algebra`` for :mod:`geomlin.testing`.

    ``sample(n)`` returns ``(n, dim)`` products of 1..``max_vectors`` random vectors whose
    squares satisfy ``|v^2| >= min_square`` (so the versors are well conditioned).
    Use :meth:`action` as the action callable.
    """

    def __init__(self, algebra, max_vectors: int = 4, min_square: float = 0.3):
        self.algebra = as_algebra(algebra)
        if self.algebra.metric.count(0.0) == self.algebra.n:
            raise ValueError("a fully degenerate metric has no invertible vectors")
        self.max_vectors = max_vectors
        self.min_square = min_square

    def __repr__(self) -> str:
        return f"CliffordGroup{self.algebra.metric}"

    def key(self) -> tuple:
        return ("CliffordGroup", self.algebra.metric)

    def sample(self, n: int = 1, generator: torch.Generator | None = None, dtype=torch.float64) -> Tensor:
        alg = self.algebra
        metric = torch.tensor(alg.metric, dtype=torch.float64)
        out = []
        for _ in range(n):
            k = int(torch.randint(1, self.max_vectors + 1, (1,), generator=generator))
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
    """Sampler of random Pin(3,0,1) versors, for :func:`geomlin.testing.assert_equivariant`.

    Every element of Pin(3,0,1) is a product of at most four reflections in planes; ``sample``
    draws ``k`` planes with ``k`` uniform in ``1..max_planes``, random unit normals and random
    offsets, so translations, rotations, screw motions, reflections and roto-reflections all occur.

    Parameters
    ----------
    max_planes: largest number of plane reflections multiplied together (1..4).
    offset_scale: standard deviation of the plane offsets (controls translations).
    parity: ``None`` for both, ``"even"`` (motions) or ``"odd"`` (improper motions).
    """

    def __init__(self, max_planes: int = 4, offset_scale: float = 1.0, parity: str | None = None):
        if not isinstance(max_planes, int) or not 1 <= max_planes <= 4:
            raise ValueError(f"max_planes must be an int in 1..4, got {max_planes!r}")
        if parity not in (None, "even", "odd"):
            raise ValueError(f"parity must be None, 'even' or 'odd', got {parity!r}")
        if parity == "even" and max_planes < 2:
            raise ValueError("even versors need max_planes >= 2")
        self.max_planes = max_planes
        self.offset_scale = float(offset_scale)
        self.parity = parity

    def __repr__(self) -> str:
        return f"Pin(3,0,1)[<= {self.max_planes} planes{', ' + self.parity if self.parity else ''}]"

    def key(self) -> tuple:
        """Spin(3,0,1) (``parity="even"``) or Pin(3,0,1); the sampling options are not part of it."""
        return ("Pin(3,0,1)", self.parity == "even")

    def is_subgroup_of(self, other) -> bool:
        """Spin(3,0,1) lies in Pin(3,0,1); each lies in itself."""
        return isinstance(other, Pin301) and (other.parity is None or self.parity == "even")

    def sample(self, n: int = 1, generator: torch.Generator | None = None,
               dtype: torch.dtype = torch.float64) -> Tensor:
        """``n`` random versors ``(n, 16)``, each a product of 1..max_planes unit planes."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be a positive int, got {n!r}")
        choices = [k for k in range(1, self.max_planes + 1)
                   if self.parity is None or (k % 2 == 0) == (self.parity == "even")]
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
