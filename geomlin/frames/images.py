"""Image canonicalization for the rotation group C4 and the dihedral group D4.

Group elements ``(k, m)`` (``k`` quarter turns, ``m`` flips) act on images
``(..., H, W)`` as ``rot90^k(flip^m(x))``; as 2x2 matrices they are ``Rot(k pi/2) diag(1, -1)^m``,
the elements of [`geomlin.groups.C`][geomlin.groups.classical.C] ``(4)`` /
[`geomlin.groups.D`][geomlin.groups.classical.D] ``(4)``, numbered by the element index
``i = m * 4 + k`` of [`geomlin.groups.square_grid`][] (index 0 is the identity).

The canonicalizer is a rotated-filter group convolution network
([`geomlin.frames.group_conv`][]): a lifting convolution, regular group convolutions, spatial mean
pooling and one logit per group element. For square images, odd kernels and symmetric
padding, 90-degree rotations and flips are exact pixel permutations, so the logits are
exactly permuted, ``logits(h x)[g] = logits(x)[h^{-1} g]``, and the whole canonicalized
model is exactly invariant / equivariant. Other orders ``n`` would need interpolated
rotations and are only approximately equivariant; they are not offered here.

The predicted element is one-hot (argmax of the logits) with a straight-through
gradient (the softmax's), so gradients reach the canonicalizer (Kaba et al. 2023, Sec. 4.1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from geomlin.frames.canonicalization import Canonicalizer
from geomlin.frames.group_conv import EXAMPLE_SIZE, GroupConv2d, LiftingConv2d
from geomlin.groups.square_grid import (
    IDENTITY_INDEX,
    as_grid_group,
    element_matrices,
    grid_order,
    inverse_table,
    regular_index,
)
from geomlin.reps.feature_type import FeatureType
from geomlin.reps.images import Images, RegularFeatures, act_on_image
from geomlin.reps.types import Vectors
from geomlin.validation import check_float, check_positive_int, check_tensor


@dataclass(frozen=True)
class DiscreteElements:
    """Predicted C4/D4 elements of a batch.

    Attributes
    ----------
    index : Tensor of shape (B,)
        int64 element indices (argmax of ``logits``).
    weights : Tensor of shape (B, |G|)
        one-hot values with the softmax's gradient (straight-through).
    logits : Tensor of shape (B, |G|)
        raw scores (used by the prior loss).
    """

    index: Tensor
    weights: Tensor
    logits: Tensor


class ImageCanonicalizer(Canonicalizer):
    """Group-convolutional canonicalizer for C4 / D4 images ``(B, C, H, W)`` (square ``H = W``).

    Parameters
    ----------
    group : SymmetryGroup or str
        ``C(4)`` / ``D(4)`` or its name (``"C4"``, ``"D4"``).
    in_channels : int
        image channels.
    hidden_channels : int
        channels per group element of the hidden layers.
    num_blocks : int
        number of group convolutions after the lifting layer.
    kernel_size : int
        odd filter size.
    temperature : float
        softmax temperature of the straight-through gradient.

    Notes
    -----
    ``forward`` returns [`DiscreteElements`][]; ``canonicalize(x, g)`` is
    ``sum_a w_a (a^{-1} . x)`` with the straight-through one-hot weights ``w`` (exactly
    ``g^{-1} . x`` in value). ``invert`` acts on outputs of the feature types
    [`Scalars`][geomlin.reps.types.Scalars] (any invariant type),
    [`RegularFeatures`][geomlin.reps.images.RegularFeatures] (``(B, ..., |G|)``, or a grid
    ``(B, ..., |G|, H, W)``), ``Vectors(2)`` (``(B, ..., 2)``, the 2x2 matrix) and
    [`Images`][geomlin.reps.images.Images] (``(B, ..., H, W)`` dense predictions).

    ``forward(x, as_tensors=True)`` returns ``(weights, logits)``, both ``(B, |G|)`` in the regular
    representation (declared ``type_out``): ``logits(h x)[:, a] = logits(x)[:, h^{-1} a]``.
    """

    def __init__(self, group="C4", in_channels: int = 1, hidden_channels: int = 8, num_blocks: int = 2,
                 kernel_size: int = 5, temperature: float = 1.0):
        super().__init__()
        self.group = as_grid_group(group)
        self.temperature = check_float(temperature, "temperature", minimum=0.0, strict_minimum=True)
        hidden = check_positive_int(hidden_channels, "hidden_channels")
        num_blocks = check_positive_int(num_blocks, "num_blocks")
        self.lift = LiftingConv2d(self.group, in_channels, hidden, kernel_size)
        self.convs = nn.ModuleList(GroupConv2d(self.group, hidden, hidden, kernel_size) for _ in range(num_blocks))
        self.head = nn.Parameter(torch.randn(hidden) / math.sqrt(hidden))
        self.register_buffer("matrices", element_matrices(self.group), persistent=False)
        self.register_buffer("regular_index", regular_index(self.group), persistent=False)
        # Python ints, so canonicalize() picks each element's action without reading a tensor
        self._inverse = tuple(int(i) for i in inverse_table(self.group))
        self.type_in = self.lift.type_in
        self.type_out = (RegularFeatures(self.group), RegularFeatures(self.group))

    @property
    def order(self) -> int:
        """``|G|``: 4 for C4, 8 for D4."""
        return grid_order(self.group)

    def bind_type(self, t: FeatureType) -> FeatureType:
        """Invariant types, ``Vectors(2)``, [`Images`][geomlin.reps.images.Images] and
        [`RegularFeatures`][geomlin.reps.images.RegularFeatures] under the canonicalizer's group."""
        if t.is_invariant:
            return t
        if isinstance(t, Vectors) and t.d == 2:
            return Vectors(2, t.channels, self.group)
        if isinstance(t, Images):
            return Images(self.group, t.channels, t.side)
        if isinstance(t, RegularFeatures):
            return RegularFeatures(self.group, t.channels, t.side, t.grid)
        raise TypeError(f"image canonicalization has Scalars (invariant types), Vectors(2), Images and "
                         f"RegularFeatures features, got {t!r}")

    def example_inputs(self, generator=None, dtype=torch.float64):
        """Three ``EXAMPLE_SIZE``-pixel square images; ``as_tensors=True``."""
        x = torch.randn(3, self.lift.weight.shape[1], EXAMPLE_SIZE, EXAMPLE_SIZE, generator=generator, dtype=dtype)
        return (x,), {"as_tensors": True}

    def logits(self, x: Tensor) -> Tensor:
        """``(B, C, H, W)`` -> ``(B, |G|)``; ``logits(h x)[:, a] = logits(x)[:, h^{-1} a]``."""
        check_tensor(x, "images")
        if x.ndim != 4 or x.shape[-1] != x.shape[-2]:
            raise ValueError(f"images must be (B, C, H, W) with H = W (exact 90-degree rotations), "
                             f"got shape {tuple(x.shape)}")
        if x.shape[1] != self.lift.weight.shape[1]:
            raise ValueError(f"expected {self.lift.weight.shape[1]} image channels, got {x.shape[1]}")
        check_tensor(x, "images", finite=True)
        h = F.silu(self.lift(x))
        for conv in self.convs:
            h = F.silu(conv(h))
        pooled = h.mean((-1, -2))  # (B, C, G)
        return torch.einsum("c,bcg->bg", self.head.to(x.dtype), pooled)

    def forward(self, x: Tensor, as_tensors: bool = False):
        """[`DiscreteElements`][] of images ``x (B, C, H, W)`` (or ``(weights, logits)`` with ``as_tensors``)."""
        logits = self.logits(x)
        index = logits.argmax(-1)
        hard = F.one_hot(index, self.order).to(logits.dtype)
        soft = torch.softmax(logits / self.temperature, dim=-1)
        # hard + (soft - soft) is exactly one-hot in value, with the softmax's gradient.
        g = DiscreteElements(index, hard + (soft - soft.detach()), logits)
        return (g.weights, g.logits) if as_tensors else g

    def canonicalize(self, x: Tensor, g: DiscreteElements, type: FeatureType | None = None, **_) -> Tensor:
        """``g^{-1} . x`` for images ``(B, ..., H, W)`` (``type`` ``None`` or ``Images``); invariant types
        unchanged."""
        type = self.type_in if type is None else type
        if type.is_invariant:
            return x
        if not isinstance(type, Images):
            raise TypeError(f"image canonicalization canonicalizes Images and invariant inputs, got {type!r}")
        stack = torch.stack([act_on_image(x, self._inverse[a], self.group) for a in range(self.order)], 1)
        return _weighted(stack, g.weights)

    def invert(self, y: Tensor, g: DiscreteElements, type: FeatureType, **_) -> Tensor:
        """``g . y`` for ``y`` of an invariant type, ``RegularFeatures``, ``Vectors(2)`` or ``Images``."""
        G = self.order
        if type.is_invariant:
            return y
        if isinstance(type, RegularFeatures):
            axis = y.ndim - (3 if type.grid else 1)
            if y.ndim < 2 or y.shape[axis] != G:
                raise ValueError(f"{type!r} outputs must have {G} entries on axis {axis - y.ndim}, got shape "
                                 f"{tuple(y.shape)}")
            # every a . y: the group axis permuted by a^{-1} (and the grid moved by a)
            stack = torch.stack([self._regular(y, a, axis, type.grid) for a in range(G)], 1)
        elif isinstance(type, Vectors):
            if y.shape[-1] != 2:
                raise ValueError(f"vector outputs of images must have last dimension 2, got {tuple(y.shape)}")
            stack = torch.einsum("aij,b...j->ba...i", self.matrices.to(y.dtype), y)
        elif isinstance(type, Images):
            stack = torch.stack([act_on_image(y, a, self.group) for a in range(G)], 1)
        else:
            raise TypeError(f"image canonicalization inverts invariant types, RegularFeatures, Vectors(2) and "
                             f"Images outputs, got {type!r}")
        return _weighted(stack, g.weights)

    def _regular(self, y: Tensor, a: int, axis: int, grid: bool) -> Tensor:
        """Element ``a`` acting on ``y`` in the regular representation (group axis ``axis``)."""
        out = y.index_select(axis, self.regular_index[a])
        return act_on_image(out, a, self.group) if grid else out

    def prior_loss(self, g: DiscreteElements) -> Tensor:
        """Cross-entropy of the logits to the identity element (Mondal et al. 2023, Sec. 3.2); scalar."""
        target = torch.full_like(g.index, IDENTITY_INDEX)
        return F.cross_entropy(g.logits / self.temperature, target)

    def identity_metric(self, g: DiscreteElements) -> Tensor:
        """Fraction of predictions equal to the identity element."""
        return (g.index == IDENTITY_INDEX).to(g.logits.dtype).mean()


def _weighted(stack: Tensor, weights: Tensor) -> Tensor:
    """``sum_a weights[:, a] stack[:, a]``; ``stack (B, |G|, ...)``, ``weights (B, |G|)``."""
    w = weights.to(stack.dtype).reshape(*weights.shape, *([1] * (stack.ndim - 2)))
    return (stack * w).sum(1)
