"""The basis of G(3,0,1): blade order, named components, the component groups of embedded objects,
the multivector check.

Basis order (the reference GATr's, so checkpoints and intuitions transfer)::

    index  0  1   2   3   4   5    6    7    8    9    10   11    12    13    14    15
    blade  1  e0  e1  e2  e3  e01  e02  e03  e12  e13  e23  e012  e013  e023  e123  e0123

``e0`` squares to 0, ``e1, e2, e3`` to 1.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor

from geomlin.algebra.clifford import CliffordAlgebra
from geomlin.validation import check_tensor

#: G(3,0,1) with ``e0`` the degenerate direction (basis vectors labelled e0..e3).
PGA = CliffordAlgebra((0.0, 1.0, 1.0, 1.0), first_index=0)
#: Components of a multivector.
DIM = 16

SCALAR = 0
E0, E1, E2, E3 = 1, 2, 3, 4
E01, E02, E03, E12, E13, E23 = 5, 6, 7, 8, 9, 10
E012, E013, E023, E123 = 11, 12, 13, 14
E0123 = 15
PSEUDOSCALAR = E0123

#: Blade names in storage order.
BLADE_NAMES = PGA.blade_names
#: Components of each grade 0..4.
GRADE_SLICES = PGA.grade_slices
#: Components without an e0 factor: the ones the (degenerate) inner product sees.
NONDEGENERATE = (SCALAR, E1, E2, E3, E12, E13, E23, E123)
#: Components with an e0 factor, in the order of [`NONDEGENERATE`][] (``e0 * blade``).
DEGENERATE = (E0, E01, E02, E03, E012, E013, E023, E0123)

#: The point's ``(x, y, z)`` are ``(-e023, +e013, -e012) / e123`` (the reference GATr's embedding).
POINT_COMPONENTS = (E023, E013, E012)
POINT_SIGNS = (-1.0, 1.0, -1.0)
#: The plane's normal ``(n1, n2, n3)`` on ``(e1, e2, e3)``; its offset is the ``e0`` component.
PLANE_NORMAL = (E1, E2, E3)
#: A translator's ``e0i`` components.
TRANSLATION_COMPONENTS = (E01, E02, E03)
#: A rotor of the quaternion ``(w, x, y, z)`` is ``w + sx x e23 + sy y e13 + sz z e12`` with these signs.
ROTOR_COMPONENTS = (E23, E13, E12)
ROTOR_SIGNS = (-1.0, 1.0, -1.0)
#: ``(e23, e13, e12)`` of a line hold ``(direction_x, -direction_y, direction_z)`` up to the
#: orientation set by the join.
LINE_DIRECTION_COMPONENTS = (E23, E13, E12)

assert BLADE_NAMES == ("1", "e0", "e1", "e2", "e3", "e01", "e02", "e03", "e12", "e13", "e23",
                       "e012", "e013", "e023", "e123", "e0123")


def check_mv(x: Tensor, name: str = "x") -> Tensor:
    """Validate a G(3,0,1) multivector ``(..., 16)`` of floating dtype; returns it."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.ndim == 0 or x.shape[-1] != DIM:
        raise ValueError(f"{name} must have last dimension 16 (a G(3,0,1) multivector), "
                         f"got shape {tuple(x.shape)}")
    return check_tensor(x, name, dtype="float")


@functools.cache
def _runs(components: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    """Maximal runs of consecutive increasing indices of ``components`` as ``(start, stop)`` pairs."""
    runs: list[list[int]] = []
    for c in components:
        if runs and runs[-1][1] == c:
            runs[-1][1] = c + 1
        else:
            runs.append([c, c + 1])
    return tuple((a, b) for a, b in runs)


def select_components(x: Tensor, components: tuple[int, ...], dim: int = -1) -> Tensor:
    """The entries ``components`` (a tuple of indices such as [`NONDEGENERATE`][]) of ``x`` along
    ``dim``, in that order: ``(..., 16, ...) -> (..., len(components), ...)``.

    Taken as slices of the runs of consecutive indices (one view for a single run, one copy
    otherwise), so no index tensor is built or uploaded to ``x``'s device.
    """
    pieces = [x.narrow(dim, a, b - a) for a, b in _runs(tuple(components))]
    return pieces[0] if len(pieces) == 1 else torch.cat(pieces, dim)

