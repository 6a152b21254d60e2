"""Radial bases and cutoff envelopes of pair distances, shared by the message-passing layers.

* [`gaussian_rbf`][]: Gaussians with centres evenly spaced on ``[0, cutoff]`` (EGNN's pair
  features, [`geomlin.models.egnn`][]);
* [`bessel_basis`][]: ``sqrt(2 / c) sin(n pi r / c) / r`` (Klicpera, Gross, Guennemann, ICLR 2020,
  "Directional Message Passing for Molecular Graphs", Eq. 7), the radial basis of the Gaunt
  convolutions ([`geomlin.gaunt.conv`][]);
* [`polynomial_cutoff`][]: the smooth envelope of the same paper (Eq. 8), 1 at ``r = 0`` and 0 with
  ``p`` vanishing derivatives at the cutoff, used by the Gaunt convolutions and PONITA's kernels.

Pure functions of ``r (...)``, computed on its device and in its dtype.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

#: Distances below this (in the units of the positions) count as coincident points: the Bessel
#: basis (which divides by ``r``) is evaluated at this distance instead.
COINCIDENT = 1e-9
#: Exponent ``p`` of [`polynomial_cutoff`][] (DimeNet's default).
CUTOFF_EXPONENT = 6


def gaussian_rbf(dist: Tensor, num: int, cutoff: float) -> Tensor:
    """Gaussian radial basis ``(..., num)`` of ``dist (...)`` with centres evenly spaced on ``[0, cutoff]``
    and width the spacing of the centres."""
    centres = torch.linspace(0.0, cutoff, num, dtype=dist.dtype, device=dist.device)
    width = cutoff / max(num - 1, 1)
    return torch.exp(-0.5 * ((dist[..., None] - centres) / width) ** 2)


def bessel_basis(r: Tensor, num: int, cutoff: float) -> Tensor:
    """``sqrt(2 / c) sin(n pi r / c) / r`` for ``n = 1..num``: ``(E,) -> (E, num)`` (``r`` clamped to
    [`COINCIDENT`][] from below)."""
    n = torch.arange(1, num + 1, device=r.device, dtype=r.dtype)
    r = r.clamp_min(COINCIDENT)[:, None]
    return math.sqrt(2.0 / cutoff) * torch.sin(n * math.pi * r / cutoff) / r


def polynomial_cutoff(r: Tensor, cutoff: float, p: int = CUTOFF_EXPONENT) -> Tensor:
    """Smooth envelope, 1 at ``r = 0``, 0 with ``p`` vanishing derivatives at ``r = cutoff``: ``(...) -> (...)``."""
    x = (r / cutoff).clamp(max=1.0)
    env = (1.0 - (p + 1.0) * (p + 2.0) / 2.0 * x ** p + p * (p + 2.0) * x ** (p + 1)
           - p * (p + 1.0) / 2.0 * x ** (p + 2))
    return env * (r < cutoff).to(r.dtype)
