"""Feature types of square images under C4 and D4, acted on by exact pixel permutations.

=============================  ================================================  ==========================
type                           layout                                            acted on by
=============================  ================================================  ==========================
``Images(group, C, side)``     ``(..., C, side, side)``                          ``rot90^k(flip^m(x))``
``RegularFeatures(group, C)``  ``(..., C, |G|)`` or ``(..., C, |G|, side, side)``  group axis permuted (+ grid)
=============================  ================================================  ==========================

The element ``Rot(k pi/2) diag(1, -1)^m`` of ``C(4)`` / ``D(4)`` has the element index
``m * 4 + k`` ([`geomlin.groups.square_grid`][]). The actions find the index of a ``2x2`` matrix on
its device and select the transformed copy there, so they run on accelerators without a host read.

>>> from geomlin.groups import D
>>> from geomlin.reps.images import Images
>>> Images(D(4), 3, 9).shape
(3, 9, 9)
"""

from __future__ import annotations

import torch
from torch import Tensor

from geomlin.groups.square_grid import as_grid_group, element, element_index, grid_order, regular_index
from geomlin.reps.feature_type import EXAMPLE_BATCH, FeatureType, channel_suffix, check_channels
from geomlin.validation import check_index, check_positive_int, check_tensor


def act_on_grid(x: Tensor, k: int, m: int) -> Tensor:
    """``rot90^k(flip^m(x))`` on the last two axes of ``x (..., H, W)``: the pixel permutation of
    ``Rot(k pi / 2) diag(1, -1)^m`` (``flip`` reverses the last axis)."""
    if m:
        x = torch.flip(x, (-1,))
    return torch.rot90(x, k, (-2, -1)) if k else x


def act_on_image(x: Tensor, index, group) -> Tensor:
    """Element ``index`` of C4 / D4 acting on images ``(..., H, W)``: ``rot90^k(flip^m(x))``.

    ``index`` is a Python int, or a 0-dim int64 tensor on ``x``'s device: then every element's image
    is formed and the one at ``index`` is selected, so the host never reads the index. An index
    outside ``[0, |G|)`` raises ``ValueError`` (deferred on accelerators).
    """
    group = as_grid_group(group)
    check_tensor(x, "x", min_ndim=2, dtype="any", what="(..., H, W) images")
    if isinstance(index, Tensor):
        if index.numel() != 1:
            raise ValueError(f"index must be one element index (a 0-dim tensor), got shape {tuple(index.shape)}")
        order = grid_order(group)
        # deferred and clamped on accelerators: the selection never reads out of bounds
        index = check_index(index.reshape(1).to(x.device), "index", order, f"elements of {group}")
        stack = torch.stack([act_on_grid(x, *element(group, i)) for i in range(order)])
        return stack.index_select(0, index).squeeze(0)
    return act_on_grid(x, *element(group, index))


class Images(FeatureType):
    """Square images ``(..., channels, side, side)`` under C4 or D4, acting by exact pixel permutations.

    The element ``Rot(k pi / 2) diag(1, -1)^m`` acts as ``rot90^k(flip^m(x))`` on the last two axes
    (see [`act_on_grid`][]).

    Parameters
    ----------
    group : Group or str
        ``C(4)`` / ``D(4)`` or a name such as ``"C4"`` / ``"D4"``.
    channels : int or None
        size of the channel axis before the grid; ``None`` for no channel axis.
    side : int, optional
        the side of the square grid (default: any).
    """

    def __init__(self, group, channels: int | None, side: int | None = None):
        self.group = as_grid_group(group)
        self.order = grid_order(self.group)
        self.channels = check_channels(channels)
        self.side = None if side is None else check_positive_int(side, "side")

    @property
    def shape(self) -> tuple:
        """``(channels, side, side)``; ``None`` sides (any square image) match any size in ``check``."""
        return (self.channels, self.side, self.side)

    def random(self, lead=(EXAMPLE_BATCH,), generator=None, dtype=torch.float64) -> Tensor:
        if self.side is None or self.channels is None:
            raise ValueError(f"{self!r} has no fixed image shape; give the module an example_inputs() or pass inputs=")
        return super().random(lead, generator, dtype)

    def check(self, x, name: str = "x") -> Tensor:
        check_tensor(x, name, shape=(Ellipsis, *self.shape), what=repr(self))
        if x.shape[-1] != x.shape[-2]:
            raise ValueError(f"{name} must hold square images (H = W, exact 90-degree rotations), got shape "
                             f"{tuple(x.shape)}")
        return x

    def act(self, g, x: Tensor) -> Tensor:
        return act_on_image(x, element_index(g, self.group), self.group)

    def layout_key(self) -> tuple:
        return ("Images", self.channels, self.side)

    def __repr__(self) -> str:
        size = "H x W" if self.side is None else f"{self.side} x {self.side}"
        channels = "C" if self.channels is None else self.channels
        return f"Images({channels} x {size}) under {self.group!r}"


class RegularFeatures(FeatureType):
    """Functions on C4 / D4: ``(..., [channels,] |G|, [side, side])`` in the regular representation.

    ``(g . y)[..., a, :, :] = g . y[..., g^{-1} a, :, :]``: the group axis is permuted and, with a
    grid (``side`` given, or ``grid=True`` for any side), the trailing square grid is acted on as by
    [`Images`][] (the features of a group convolution); without a grid the layout is
    ``(..., [channels,] |G|)`` (one logit per element). Element index ``a = m * 4 + k`` for
    ``Rot(k pi / 2) diag(1, -1)^m``.

    Parameters
    ----------
    group : Group or str
        ``C(4)`` / ``D(4)`` or a name such as ``"C4"`` / ``"D4"``.
    channels : int, optional
        size of the channel axis before the group axis; ``None`` for no channel axis.
    side : int, optional
        side of the trailing square grid (implies ``grid``).
    grid : bool, optional
        whether a trailing square grid follows the group axis (default: when ``side`` is given).
    """

    def __init__(self, group, channels: int | None = None, side: int | None = None, grid: bool | None = None):
        self.group = as_grid_group(group)
        self.order = grid_order(self.group)
        self.channels = check_channels(channels)
        self.side = None if side is None else check_positive_int(side, "side")
        #: Whether a square grid follows the group axis (``True`` when ``side`` is given; ``grid=True``
        #: without ``side`` declares a grid of any side).
        self.grid = (self.side is not None) if grid is None else bool(grid)

    @property
    def shape(self) -> tuple:
        head = () if self.channels is None else (self.channels,)
        tail = (self.side, self.side) if self.grid else ()
        return head + (self.order,) + tail

    def random(self, lead=(EXAMPLE_BATCH,), generator=None, dtype=torch.float64) -> Tensor:
        if self.grid and self.side is None:
            raise ValueError(f"{self!r} has no fixed grid size; give the module an example_inputs() or pass inputs=")
        return super().random(lead, generator, dtype)

    def act(self, g, x: Tensor) -> Tensor:
        index = element_index(g, self.group).reshape(1).to(x.device)
        perm = regular_index(self.group, x.device).index_select(0, index).squeeze(0)  # p[a] = index(g^-1 a)
        out = torch.index_select(x, x.ndim - (3 if self.grid else 1), perm)
        return act_on_image(out, index.squeeze(0), self.group) if self.grid else out

    def layout_key(self) -> tuple:
        return ("RegularFeatures", self.order, self.channels, self.grid, self.side)

    def __repr__(self) -> str:
        grid = "" if not self.grid else (" on H x W" if self.side is None else f" on {self.side} x {self.side}")
        return f"RegularFeatures({self.group!r}{channel_suffix(self.channels)}{grid})"
