"""Pin(3,0,1): the group-like sampler GATr's equivariance tests hand to :mod:`geomlin.testing`.

Every element of Pin(3,0,1) (the double cover of E(3)) is a product of at most four
reflections in planes. :class:`Pin301` samples such products: ``k`` planes with ``k``
uniform in ``1..max_planes``, random unit normals and random offsets, so translations,
rotations, screw motions, reflections and roto-reflections all occur.

>>> from geomlin.gatr.group import Pin301, pin_action
>>> g = Pin301().sample(3)              # (3, 16) versors
>>> x = torch.randn(5, 2, 16)           # (items, channels, 16)
>>> pin_action(g[0], x).shape
torch.Size([5, 2, 16])
"""

from __future__ import annotations

import torch
from torch import Tensor

from geomlin.algebra import pga


class Pin301:
    """Sampler of random Pin(3,0,1) versors, for :func:`geomlin.testing.assert_equivariant`.

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
