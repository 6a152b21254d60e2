"""Shared test helpers: the group action on tensors with k trailing R^n axes."""

import torch

from geomlin.linear.diagrams.families import geomlin_group


def tensor_action(k: int, skip_last: int = 0):
    """``action(g, x)``: apply ``g`` to each of the ``k`` axes ending ``skip_last`` axes before the end."""

    def act(g, x):
        g = g.to(x.dtype)
        for i in range(k):
            axis = x.ndim - skip_last - k + i
            x = torch.movedim(torch.movedim(x, axis, -1) @ g.T, -1, axis)
        return x

    return act


def group_for(name: str, n: int):
    """The geomlin group (S(n), O(n), SO(n), Sp(n/2)) the diagrams of ``name`` commute with."""
    return geomlin_group(name, n)


def rho(g: torch.Tensor, k: int) -> torch.Tensor:
    """``g ⊗ .. ⊗ g`` (k factors, row-major), ``(n^k, n^k)``; ``(1, 1)`` for k = 0."""
    out = torch.ones(1, 1, dtype=g.dtype)
    for _ in range(k):
        out = torch.kron(out, g)
    return out
