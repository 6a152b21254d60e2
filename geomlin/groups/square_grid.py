"""C4 and D4 as the symmetries of the square pixel grid: element indices and their group law.

The elements of [`C`][geomlin.groups.classical.C] ``(4)`` and [`D`][geomlin.groups.classical.D] ``(4)``
are the ``2x2`` matrices ``Rot(k pi/2) diag(1, -1)^m`` (``k`` quarter turns, ``m`` flips; ``m = 0``
for C4). Images and group convolutions number them by the index ``i = m * 4 + k``; index 0 is the
identity. On the pixel grid ``(k, m)`` acts as ``rot90^k(flip^m(x))``
([`geomlin.reps.images.act_on_grid`][]).

Everything here is computed on the requested device from integer arithmetic: no table is
uploaded and nothing is read back, so the image actions run on accelerators without a host
synchronisation.
"""

from __future__ import annotations

from functools import cache

import torch
from torch import Tensor

from geomlin.groups.classical import C, D
from geomlin.groups.names import as_group
from geomlin.precision import working_dtype
from geomlin.validation import check_condition, check_int, check_tensor

#: Quarter turns in a full turn: the rotations of C4 / D4.
QUARTER_TURNS = 4
#: Index of the identity element.
IDENTITY_INDEX = 0
#: Largest entry-wise distance of a matrix from a C4/D4 element that still counts as that element.
ELEMENT_TOL = 1e-6


def as_grid_group(group, name: str = "group") -> C | D:
    """``C(4)`` or ``D(4)`` from a group or a name [`geomlin.groups.as_group`][geomlin.groups.names.as_group]
    parses (``"C4"``, ``"D(4)"``); other groups are refused (their rotations are not pixel permutations)."""
    out = as_group(group, name)
    if not isinstance(out, (C, D)) or out.k != QUARTER_TURNS:
        raise ValueError(f"{name} must be C(4) or D(4): square pixel grids are exact under 90-degree rotations "
                         f"and flips only, got {out}. Other orders need interpolated rotations, which are not exact.")
    return out


def grid_order(group) -> int:
    """``|G|``: 4 for C4, 8 for D4."""
    return 2 * QUARTER_TURNS if isinstance(as_grid_group(group), D) else QUARTER_TURNS


def element(group, i: int) -> tuple[int, int]:
    """``(k, m)`` of element index ``i`` in ``[0, |G|)``."""
    order = grid_order(group)
    i = check_int(i, "index")
    if not 0 <= i < order:
        raise ValueError(f"index must be an element index of {as_grid_group(group)} in [0, {order}), got {i}")
    return i % QUARTER_TURNS, i // QUARTER_TURNS


def _element_parts(group, device=None) -> tuple[Tensor, Tensor]:
    """``(k, m)`` of every element index, ``(|G|,)`` int64 each."""
    i = torch.arange(grid_order(group), device=device)
    return i % QUARTER_TURNS, i // QUARTER_TURNS


def element_matrices(group, device=None, dtype=torch.float64) -> Tensor:
    """``(|G|, 2, 2)`` matrices ``Rot(k pi/2) diag(1, -1)^m`` in index order (float64 by default)."""
    k, m = _element_parts(group, device)
    c = (k == 0).to(dtype) - (k == 2).to(dtype)  # cos(k pi / 2)
    s = (k == 1).to(dtype) - (k == 3).to(dtype)  # sin(k pi / 2)
    f = 1 - 2 * m.to(dtype)  # the flip's diagonal entry
    return torch.stack([torch.stack([c, -s * f], -1), torch.stack([s, c * f], -1)], -2)


def regular_index(group, device=None) -> Tensor:
    """``(|G|, |G|)`` int64: entry ``[a, b]`` is the index of ``a^{-1} b`` (``mul[inv[a], b]``).

    The permutation of the regular representation, ``(a . y)[b] = y[a^{-1} b]``, from the group
    law: ``(k, m)^{-1} = (k, 1)`` for flips, ``(-k, 0)`` for rotations, and
    ``(k1, m1) (k2, m2) = (k1 +- k2, m1 + m2)`` (minus after a flip).
    """
    k, m = _element_parts(group, device)
    k_inv = torch.where(m == 1, k, (-k) % QUARTER_TURNS)
    k_prod = (k_inv[:, None] + torch.where(m[:, None] == 1, -k[None, :], k[None, :])) % QUARTER_TURNS
    return ((m[:, None] + m[None, :]) % 2) * QUARTER_TURNS + k_prod


def element_index(g: Tensor, group) -> Tensor:
    """The index of a ``(2, 2)`` C4/D4 matrix (e.g. from ``D(4).sample``) as a 0-dim int64 tensor on
    ``g``'s device. No host read: a matrix farther than ``ELEMENT_TOL`` from every element is refused
    through [`geomlin.validation.check_condition`][] (at once on the CPU, deferred on accelerators)."""
    group = as_grid_group(group)
    check_tensor(g, "g", shape=(2, 2), what=f"an element of {group} (a 2x2 matrix)")
    mats = element_matrices(group, g.device, working_dtype(g.dtype))
    dist = (mats - g.detach().to(mats.dtype)).abs().flatten(1).amax(1)
    check_condition(dist.min() <= ELEMENT_TOL, f"g is not an element of {group} (a 2x2 matrix "
                                               "Rot(k pi/2) diag(1, -1)^m)")
    return dist.argmin()


@cache
def _tables(flips: bool) -> tuple[Tensor, Tensor]:
    """Multiplication table ``mul[a, b] = index(a b)`` and inverses ``inv[a]`` (int64), built once."""
    mats = element_matrices(D(QUARTER_TURNS) if flips else C(QUARTER_TURNS))
    prod = mats[:, None] @ mats[None, :]
    dist = (prod[:, :, None] - mats[None, None]).abs().flatten(3).amax(-1)
    mul = dist.argmin(-1)
    inv = (mul == IDENTITY_INDEX).to(torch.int64).argmax(-1)
    return mul, inv


def multiplication_table(group) -> Tensor:
    """``(|G|, |G|)`` int64: ``mul[a, b]`` is the index of ``a b`` (a fresh CPU tensor)."""
    return _tables(isinstance(as_grid_group(group), D))[0].clone()


def inverse_table(group) -> Tensor:
    """``(|G|,)`` int64: index of ``a^{-1}`` (a fresh CPU tensor)."""
    return _tables(isinstance(as_grid_group(group), D))[1].clone()
