"""Image canonicalization for the rotation group C4 and the dihedral group D4.

Group elements ``(k, m)`` (``k`` quarter turns, ``m`` flips) act on images
``(..., H, W)`` as ``rot90^k(flip^m(x))`` with ``rot90 = torch.rot90(., 1, (-2, -1))`` and
``flip = torch.flip(., (-1,))``; as 2x2 matrices they are ``Rot(k pi/2) diag(1, -1)^m``
(the elements of [`geomlin.groups.C`][geomlin.groups.classical.C] ``(4)`` /
[`geomlin.groups.D`][geomlin.groups.classical.D] ``(4)``). Element index ``i = m * 4 + k``; index 0 is the
identity.

The canonicalizer is a rotated-filter group convolution network (Cohen & Welling 2016,
"Group Equivariant Convolutional Networks", Eq. 10-11): a lifting convolution with the
filter transformed by every group element, regular group convolutions, spatial mean
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
from functools import cache

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from geomlin.frames.canonicalization import Canonicalizer
from geomlin.groups.rotations import working_dtype
from geomlin.reps.types import Images, RegularFeatures, act_on_grid
from geomlin.validation import (
    check_condition,
    check_float,
    check_index,
    check_int,
    check_positive_int,
    check_tensor,
)

#: Side of the square example images of [`ImageCanonicalizer.example_inputs`][] and the group convolutions.
EXAMPLE_SIZE = 9

#: Image axes rotated by ``torch.rot90`` (rows, columns).
IMAGE_DIMS = (-2, -1)
#: Axis flipped by the reflection.
FLIP_DIM = -1
#: Index of the identity element.
IDENTITY_INDEX = 0
#: Quarter turns in a full turn.
QUARTER_TURNS = 4
#: Largest entry-wise distance of a matrix from a C4/D4 element that still counts as that element.
ELEMENT_TOL = 1e-6


@dataclass(frozen=True)
class ImageGroup:
    """C4 (``flips=False``, 4 elements) or D4 (``flips=True``, 8 elements)."""

    flips: bool

    @property
    def order(self) -> int:
        return 2 * QUARTER_TURNS if self.flips else QUARTER_TURNS

    @property
    def name(self) -> str:
        return "D4" if self.flips else "C4"

    def element(self, i: int) -> tuple[int, int]:
        """``(k, m)`` of element index ``i`` in ``[0, order)``."""
        i = check_int(i, "index")
        if not 0 <= i < self.order:
            raise ValueError(f"index must be an element index of {self.name} in [0, {self.order}), got {i}")
        return i % QUARTER_TURNS, i // QUARTER_TURNS


def as_image_group(group) -> ImageGroup:
    """Parse ``"C4" | "D4"``, ``geomlin.groups.C(4)`` / ``D(4)`` or an [`ImageGroup`][]."""
    from geomlin.groups import C, D

    if isinstance(group, ImageGroup):
        return group
    if isinstance(group, str) and group.strip().upper() in ("C4", "D4"):
        return ImageGroup(flips=group.strip().upper() == "D4")
    if isinstance(group, (C, D)) and group.k == QUARTER_TURNS:
        return ImageGroup(flips=isinstance(group, D))
    raise ValueError(f"image canonicalization is exact for C4 and D4 only (90-degree rotations and flips); "
                     f"got {group!r}. Other orders need interpolated rotations, which are not exact.")


def element_matrices(group: ImageGroup, device=None, dtype=torch.float64) -> Tensor:
    """``(|G|, 2, 2)`` matrices ``Rot(k pi/2) diag(1, -1)^m`` in index order (float64 by default).

    Built on ``device`` from integer arithmetic (no table is uploaded).
    """
    k, m = _element_parts(group, device)
    c = (k == 0).to(dtype) - (k == 2).to(dtype)  # cos(k pi / 2)
    s = (k == 1).to(dtype) - (k == 3).to(dtype)  # sin(k pi / 2)
    f = 1 - 2 * m.to(dtype)  # the flip's diagonal entry
    return torch.stack([torch.stack([c, -s * f], -1), torch.stack([s, c * f], -1)], -2)


def _element_parts(group: ImageGroup, device=None) -> tuple[Tensor, Tensor]:
    """``(k, m)`` of every element index, ``(|G|,)`` int64 each."""
    i = torch.arange(group.order, device=device)
    return i % QUARTER_TURNS, i // QUARTER_TURNS


def regular_index(group: ImageGroup, device=None) -> Tensor:
    """``(|G|, |G|)`` int64: entry ``[a, b]`` is the index of ``a^{-1} b`` (``mul[inv[a], b]``).

    The permutation of the regular representation, ``(a . y)[:, b] = y[:, a^{-1} b]``, computed on
    ``device`` from the group law: ``(k, m)^{-1} = (k, 1)`` for flips, ``(-k, 0)`` for rotations, and
    ``(k1, m1) (k2, m2) = (k1 +- k2, m1 + m2)`` (minus after a flip).
    """
    k, m = _element_parts(group, device)
    k_inv = torch.where(m == 1, k, (-k) % QUARTER_TURNS)
    k_prod = (k_inv[:, None] + torch.where(m[:, None] == 1, -k[None, :], k[None, :])) % QUARTER_TURNS
    return ((m[:, None] + m[None, :]) % 2) * QUARTER_TURNS + k_prod


def _element_index(g: Tensor, group: ImageGroup) -> Tensor:
    """The index of a ``(2, 2)`` C4/D4 matrix as a 0-dim int64 tensor on ``g``'s device (no host
    read; a matrix outside the group is refused through [`geomlin.validation.check_condition`][])."""
    check_tensor(g, "g", shape=(2, 2))
    mats = element_matrices(group, g.device, working_dtype(g.dtype))
    dist = (mats - g.detach().to(mats.dtype)).abs().flatten(1).amax(1)
    check_condition(dist.min() <= ELEMENT_TOL, f"g is not an element of {group.name} (a 2x2 matrix "
                                               "Rot(k pi/2) diag(1, -1)^m)")
    return dist.argmin()


def matrix_to_index(g: Tensor, group: ImageGroup) -> int:
    """Index of a ``(2, 2)`` C4/D4 matrix (e.g. from ``geomlin.groups.D(4).sample``) as a Python int
    (which reads ``g`` on the host; the actions below keep the index on the device)."""
    mats = element_matrices(group)
    dist = (mats - g.detach().to(torch.float64).cpu()).abs().flatten(1).amax(1)
    i = int(dist.argmin())
    if dist[i] > ELEMENT_TOL:
        raise ValueError(f"{g.tolist()} is not an element of {group.name}")
    return i


@cache
def _tables(flips: bool) -> tuple[Tensor, Tensor]:
    """Multiplication table ``mul[a, b] = index(a b)`` and inverses ``inv[a]`` (int64), built once."""
    group = ImageGroup(flips)
    mats = element_matrices(group)
    prod = mats[:, None] @ mats[None, :]
    dist = (prod[:, :, None] - mats[None, None]).abs().flatten(3).amax(-1)
    mul = dist.argmin(-1)
    inv = (mul == IDENTITY_INDEX).to(torch.int64).argmax(-1)
    return mul, inv


def multiplication_table(group) -> Tensor:
    """``(|G|, |G|)`` int64: ``mul[a, b]`` is the index of ``a b`` (a fresh CPU tensor)."""
    return _tables(as_image_group(group).flips)[0].clone()


def inverse_table(group) -> Tensor:
    """``(|G|,)`` int64: index of ``a^{-1}`` (a fresh CPU tensor)."""
    return _tables(as_image_group(group).flips)[1].clone()


def act_on_image(x: Tensor, index, group) -> Tensor:
    """Element ``index`` acting on images ``(..., H, W)``: ``rot90^k(flip^m(x))``
    ([`geomlin.reps.types.act_on_grid`][], the action of the [`Images`][] type).

    ``index`` is a Python int, or a 0-dim int64 tensor on ``x``'s device: then every element's image
    is formed and the one at ``index`` is selected, so the host never reads the index. An index
    outside ``[0, |G|)`` raises ``ValueError`` (deferred on accelerators).
    """
    grp = as_image_group(group)
    check_tensor(x, "x", min_ndim=2, dtype="any", what="(..., H, W) images")
    if isinstance(index, Tensor):
        if index.numel() != 1:
            raise ValueError(f"index must be one element index (a 0-dim tensor), got shape {tuple(index.shape)}")
        # deferred and clamped on accelerators: the selection never reads out of bounds
        index = check_index(index.reshape(1).to(x.device), "index", grp.order, f"elements of {grp.name}")
        stack = torch.stack([act_on_grid(x, *grp.element(i)) for i in range(grp.order)])
        return stack.index_select(0, index).squeeze(0)
    return act_on_grid(x, *grp.element(index))


def image_action(group):
    """An action ``action(g, x)`` for [`geomlin.testing`][]: ``g`` a 2x2 C4/D4 matrix,
    ``x (..., H, W)`` images (``g`` and ``x`` on one device; no host read)."""
    grp = as_image_group(group)
    return lambda g, x: act_on_image(x, _element_index(g, grp), grp)


def regular_action(group):
    """An action on ``(B, |G|, ...)`` tensors in the regular representation:
    ``(g . y)[:, a] = y[:, g^{-1} a]``; ``g`` a 2x2 matrix (on ``y``'s device; no host read)."""
    grp = as_image_group(group)

    def action(g, y):
        perm = regular_index(grp, y.device).index_select(0, _element_index(g, grp).reshape(1).to(y.device))
        return y.index_select(1, perm.squeeze(0))
    return action


def _planar(group: ImageGroup):
    """The geomlin group ``C(4)`` / ``D(4)`` of an [`ImageGroup`][]."""
    from geomlin.groups import C, D

    return D(QUARTER_TURNS) if group.flips else C(QUARTER_TURNS)


def _channels(in_channels, out_channels) -> tuple[int, int]:
    return check_positive_int(in_channels, "in_channels"), check_positive_int(out_channels, "out_channels")


def _odd_kernel(kernel_size) -> int:
    kernel_size = check_positive_int(kernel_size, "kernel_size")
    if kernel_size % 2 != 1:
        raise ValueError(f"kernel_size must be odd for exact equivariance, got {kernel_size}")
    return kernel_size


def _transform_filters(w: Tensor, group: ImageGroup) -> Tensor:
    """``(|G|, ...)`` stack of ``w (..., k, k)`` transformed spatially by every element."""
    return torch.stack([act_on_image(w, i, group) for i in range(group.order)])


class LiftingConv2d(nn.Module):
    """Lifting convolution ``(B, C_in, H, W) -> (B, C_out, |G|, H, W)``:
    ``out[:, c, g] = conv(x, g . w_c)`` ('same' padding, odd kernel)."""

    def __init__(self, group, in_channels: int, out_channels: int, kernel_size: int = 3):
        super().__init__()
        in_channels, out_channels = _channels(in_channels, out_channels)
        kernel_size = _odd_kernel(kernel_size)
        self.group = as_image_group(group)
        self.weight = nn.Parameter(torch.randn(out_channels, in_channels, kernel_size, kernel_size)
                                   / math.sqrt(in_channels * kernel_size ** 2))
        self.bias = nn.Parameter(torch.zeros(out_channels))
        planar = _planar(self.group)
        self.type_in = Images(planar, in_channels)
        self.type_out = RegularFeatures(planar, out_channels, grid=True)

    def example_inputs(self, generator=None, dtype=torch.float64):
        """Two ``EXAMPLE_SIZE``-pixel square images."""
        return (torch.randn(2, self.weight.shape[1], EXAMPLE_SIZE, EXAMPLE_SIZE, generator=generator, dtype=dtype),)

    def forward(self, x: Tensor) -> Tensor:
        """``(B, C_in, H, W)`` square images -> ``(B, C_out, |G|, H, W)``."""
        self.type_in.check(x, "x")
        G = self.group.order
        w = _transform_filters(self.weight, self.group)  # (G, O, I, k, k)
        w = w.transpose(0, 1).reshape(-1, *w.shape[2:])  # (O * G, I, k, k)
        out = F.conv2d(x, w.to(x.dtype), padding=w.shape[-1] // 2)
        out = out.reshape(x.shape[0], -1, G, *out.shape[-2:])
        return out + self.bias.to(x.dtype)[None, :, None, None, None]


class GroupConv2d(nn.Module):
    """Regular group convolution ``(B, C_in, |G|, H, W) -> (B, C_out, |G|, H, W)``:
    ``out[g] = sum_h conv(in[h], g . w[g^{-1} h])`` (Cohen & Welling 2016, Eq. 11)."""

    def __init__(self, group, in_channels: int, out_channels: int, kernel_size: int = 3):
        super().__init__()
        in_channels, out_channels = _channels(in_channels, out_channels)
        kernel_size = _odd_kernel(kernel_size)
        self.group = as_image_group(group)
        G = self.group.order
        self.weight = nn.Parameter(torch.randn(out_channels, in_channels, G, kernel_size, kernel_size)
                                   / math.sqrt(in_channels * G * kernel_size ** 2))
        self.bias = nn.Parameter(torch.zeros(out_channels))
        planar = _planar(self.group)
        self.type_in = RegularFeatures(planar, in_channels, grid=True)
        self.type_out = RegularFeatures(planar, out_channels, grid=True)
        self.register_buffer("regular_index", regular_index(self.group), persistent=False)

    def example_inputs(self, generator=None, dtype=torch.float64):
        """Features of two ``EXAMPLE_SIZE``-pixel images, ``(2, C_in, |G|, 9, 9)``."""
        shape = (2, self.weight.shape[1], self.group.order, EXAMPLE_SIZE, EXAMPLE_SIZE)
        return (torch.randn(*shape, generator=generator, dtype=dtype),)

    def full_weight(self) -> Tensor:
        """``(C_out * |G|, C_in * |G|, k, k)`` filters of one ordinary convolution."""
        G = self.group.order
        gathered = self.weight[:, :, self.regular_index]  # (O, I, G_g, G_h, k, k): [g, h] = w[g^{-1} h]
        rows = []
        for g in range(G):
            rows.append(act_on_image(gathered[:, :, g], g, self.group))
        w = torch.stack(rows, dim=1)  # (O, G_g, I, G_h, k, k)
        O, _, I = w.shape[:3]
        return w.reshape(O * G, I * G, *w.shape[-2:])

    def forward(self, x: Tensor) -> Tensor:
        """``(B, C_in, |G|, H, W)`` -> ``(B, C_out, |G|, H, W)``."""
        self.type_in.check(x, "x")
        if x.ndim != 5 or x.shape[-1] != x.shape[-2]:
            raise ValueError(f"x must be (B, C_in, |G|, H, W) with H = W, got shape {tuple(x.shape)}")
        B, _, G, H, W = x.shape
        w = self.full_weight().to(x.dtype)
        out = F.conv2d(x.reshape(B, -1, H, W), w, padding=w.shape[-1] // 2)
        out = out.reshape(B, -1, G, H, W)
        return out + self.bias.to(x.dtype)[None, :, None, None, None]


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
    group : str or Group
        ``"C4" | "D4"`` or ``geomlin.groups.C(4)`` / ``D(4)``.
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
    ``g^{-1} . x`` in value). ``invert`` supports ``"invariant"``, ``"regular"``
    (``(B, |G|, ...)``), ``"vector"`` (``(B, ..., 2)``, the 2x2 matrix) and ``"image"``
    (``(B, ..., H, W)`` dense predictions).

    ``forward(x, as_tensors=True)`` returns ``(weights, logits)``, both ``(B, |G|)`` in the regular
    representation (declared ``type_out``): ``logits(h x)[:, a] = logits(x)[:, h^{-1} a]``.
    """

    def __init__(self, group="C4", in_channels: int = 1, hidden_channels: int = 8, num_blocks: int = 2,
                 kernel_size: int = 5, temperature: float = 1.0):
        super().__init__()
        self.group = as_image_group(group)
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
        self.type_out = (self.feature_type("regular"), self.feature_type("regular"))

    def feature_type(self, kind: str):
        """``"image"``, ``"regular"`` (``(B, |G|)``), ``"vector"`` (``(..., 2)``) or ``"invariant"``."""
        from geomlin.reps.types import Scalars, Vectors

        planar = _planar(self.group)
        table = {"image": lambda: Images(planar, None), "regular": lambda: RegularFeatures(planar),
                 "vector": lambda: Vectors(2, None, planar), "invariant": Scalars}
        if kind not in table:
            raise ValueError(f"image canonicalization has 'invariant', 'regular', 'vector' or 'image' features, "
                             f"got {kind!r}")
        return table[kind]()

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
        hard = F.one_hot(index, self.group.order).to(logits.dtype)
        soft = torch.softmax(logits / self.temperature, dim=-1)
        # hard + (soft - soft) is exactly one-hot in value, with the softmax's gradient.
        g = DiscreteElements(index, hard + (soft - soft.detach()), logits)
        return (g.weights, g.logits) if as_tensors else g

    def canonicalize(self, x: Tensor, g: DiscreteElements, kind: str | None = "image", **_) -> Tensor:
        """``g^{-1} . x`` for images ``(B, ..., H, W)`` (``kind="image"``), invariants unchanged."""
        kind = kind or "image"
        if kind == "invariant":
            return x
        if kind != "image":
            raise ValueError(f"images canonicalize 'image' or 'invariant' inputs, got {kind!r}")
        stack = torch.stack([act_on_image(x, self._inverse[a], self.group) for a in range(self.group.order)], 1)
        return _weighted(stack, g.weights)

    def invert(self, y: Tensor, g: DiscreteElements, kind: str, **_) -> Tensor:
        """``g . y`` for ``kind`` in ``"invariant" | "regular" | "vector" | "image"``."""
        G = self.group.order
        if kind == "invariant":
            return y
        if kind == "regular":
            if y.ndim < 2 or y.shape[1] != G:
                raise ValueError(f"regular outputs must be (B, {G}, ...), got shape {tuple(y.shape)}")
            stack = y[:, self.regular_index]  # (B, a, b, ...) = y[:, a^{-1} b]: every a . y
        elif kind == "vector":
            if y.shape[-1] != 2:
                raise ValueError(f"vector outputs of images must have last dimension 2, got {tuple(y.shape)}")
            stack = torch.einsum("aij,b...j->ba...i", self.matrices.to(y.dtype), y)
        elif kind == "image":
            stack = torch.stack([act_on_image(y, a, self.group) for a in range(G)], 1)
        else:
            raise ValueError(f"image outputs are 'invariant', 'regular', 'vector' or 'image', got {kind!r}")
        return _weighted(stack, g.weights)

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
