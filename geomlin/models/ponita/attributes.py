"""PONITA's pair attributes and the maps between functions on the sphere and vectors: pure functions.

The invariants of pairs of points (points mode) and of pairs of position-orientations
``(p, o)`` in R^3 x S^2 (bundle mode), their polynomial features, and the read-outs of a function
on an orientation grid as a scalar or a vector (Bekkers et al., ICLR 2024, Sec. 3-4).
"""

from __future__ import annotations

import torch
from torch import Tensor

#: Number of pair attributes: points mode, bundle spatial step, bundle spherical step, complete set.
NUM_POINT_ATTRS, NUM_SPATIAL_ATTRS, NUM_FIBER_ATTRS, NUM_COMPLETE_ATTRS = 1, 2, 1, 5


def safe_norm(x: Tensor, dim: int = -1, keepdim: bool = False) -> Tensor:
    """``|x|`` with a zero (not NaN) derivative at ``x = 0`` (self-loops, ``x`` parallel to ``o``)."""
    sq = (x * x).sum(dim, keepdim=keepdim)
    # ``!= 0``, not ``> 0``: a NaN stays NaN
    return torch.where(sq != 0, sq.clamp_min(torch.finfo(sq.dtype).tiny).sqrt(), torch.zeros_like(sq))


def point_attributes(rel: Tensor) -> Tensor:
    """Points mode: ``|x|`` of relative positions ``rel (E, 3)`` -> ``(E, 1)``."""
    return safe_norm(rel, keepdim=True)


def spatial_attributes(rel: Tensor, grid: Tensor) -> Tensor:
    """Bundle mode, spatial step at a fixed orientation: ``(o.x, |x - (o.x) o|)``.

    ``rel (E, 3)``, ``grid (O, 3)`` unit vectors -> ``(E, O, 2)``.
    """
    along = rel @ grid.T  # (E, O)
    perp = rel[:, None, :] - along[..., None] * grid[None]
    return torch.stack([along, safe_norm(perp)], dim=-1)


def fiber_attributes(grid: Tensor) -> Tensor:
    """Bundle mode, spherical step: ``o_a . o_b`` -> ``(O, O, 1)``."""
    return (grid @ grid.T)[..., None]


def bundle_pair_attributes(rel: Tensor, o_i: Tensor, o_j: Tensor, complete: bool = False) -> Tensor:
    """Invariants of pairs ``(p_i, o_i)``, ``(p_j, o_j)`` of R^3 x S^2 with ``rel = p_j - p_i``.

    ``(o_i.x, |x - (o_i.x) o_i|, o_i.o_j)`` and, with ``complete``, also ``x.o_j`` and the triple
    product ``(o_i x x).o_j``; broadcast over the leading axes of ``rel``, ``o_i``, ``o_j`` (``(..., 3)``)
    -> ``(..., 3)`` or ``(..., 5)``. Invariant under every rotation (and translation); the triple
    product changes sign under reflections.
    """
    rel, o_i, o_j = torch.broadcast_tensors(rel, o_i, o_j)
    along = (o_i * rel).sum(-1)
    attrs = [along, safe_norm(rel - along[..., None] * o_i), (o_i * o_j).sum(-1)]
    if complete:
        attrs += [(rel * o_j).sum(-1), (torch.linalg.cross(o_i, rel, dim=-1) * o_j).sum(-1)]
    return torch.stack(attrs, dim=-1)


def complete_attributes(rel: Tensor, grid: Tensor) -> Tensor:
    """All pairs of grid orientations of every edge: ``rel (E, 3)``, ``grid (O, 3)`` ->
    ``(E, O_i, O_j, 5)``, the [`bundle_pair_attributes`][] with ``complete=True``."""
    return bundle_pair_attributes(rel[:, None, None, :], grid[None, :, None, :], grid[None, None, :, :], True)


def polynomial_features(a: Tensor, degree: int) -> Tensor:
    """All monomials of degrees ``1..degree`` of the last axis: ``(..., k)`` -> ``(..., k + k^2 + ... + k^degree)``
    (products over ordered index tuples, as in the reference)."""
    out, term = [a], a
    for _ in range(degree - 1):
        term = (term[..., :, None] * a[..., None, :]).flatten(-2)
        out.append(term)
    return torch.cat(out, dim=-1)


def sphere_to_scalar(f: Tensor) -> Tensor:
    """Mean over the orientations: ``(N, O, C)`` -> ``(N, C)``."""
    return f.mean(dim=-2)


def sphere_to_vector(f: Tensor, grid: Tensor) -> Tensor:
    """``sum_k f(o_k) o_k / O``: ``(N, O, C)``, ``grid (O, 3)`` -> ``(N, C, 3)``."""
    return torch.einsum("noc,od->ncd", f, grid.to(f.dtype)) / grid.shape[0]


def vector_to_sphere(v: Tensor, grid: Tensor) -> Tensor:
    """Lift vectors to functions on the sphere, ``f(o_k) = v . o_k``: ``(N, C, 3)`` -> ``(N, O, C)``."""
    return torch.einsum("ncd,od->noc", v, grid.to(v.dtype))
