"""Group convolutions on square images for C4 and D4 (Cohen & Welling 2016, "Group Equivariant
Convolutional Networks", Eq. 10-11).

A lifting convolution transforms its filter by every group element, ``out[:, c, g] = conv(x, g . w_c)``;
a regular group convolution mixes the group axis, ``out[g] = sum_h conv(in[h], g . w[g^{-1} h])``.
For square images, odd kernels and symmetric ('same') padding, 90-degree rotations and flips are
exact pixel permutations, so both are exactly equivariant: their outputs are
[`RegularFeatures`][geomlin.reps.images.RegularFeatures] on the grid. Element indices and the group
law are those of [`geomlin.groups.square_grid`][].
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from geomlin.groups.square_grid import as_grid_group, grid_order, regular_index
from geomlin.reps.images import Images, RegularFeatures, act_on_image
from geomlin.validation import check_positive_int

#: Side of the square example images of the group convolutions and the image canonicalizer.
EXAMPLE_SIZE = 9


def _channels(in_channels, out_channels) -> tuple[int, int]:
    return check_positive_int(in_channels, "in_channels"), check_positive_int(out_channels, "out_channels")


def _odd_kernel(kernel_size) -> int:
    kernel_size = check_positive_int(kernel_size, "kernel_size")
    if kernel_size % 2 != 1:
        raise ValueError(f"kernel_size must be odd for exact equivariance, got {kernel_size}")
    return kernel_size


def _transform_filters(w: Tensor, group) -> Tensor:
    """``(|G|, ...)`` stack of ``w (..., k, k)`` transformed spatially by every element."""
    return torch.stack([act_on_image(w, i, group) for i in range(grid_order(group))])


class LiftingConv2d(nn.Module):
    """Lifting convolution ``(B, C_in, H, W) -> (B, C_out, |G|, H, W)``:
    ``out[:, c, g] = conv(x, g . w_c)`` ('same' padding, odd kernel)."""

    def __init__(self, group, in_channels: int, out_channels: int, kernel_size: int = 3):
        super().__init__()
        in_channels, out_channels = _channels(in_channels, out_channels)
        kernel_size = _odd_kernel(kernel_size)
        self.group = as_grid_group(group)
        self.weight = nn.Parameter(torch.randn(out_channels, in_channels, kernel_size, kernel_size)
                                   / math.sqrt(in_channels * kernel_size ** 2))
        self.bias = nn.Parameter(torch.zeros(out_channels))
        self.type_in = Images(self.group, in_channels)
        self.type_out = RegularFeatures(self.group, out_channels, grid=True)

    def example_inputs(self, generator=None, dtype=torch.float64):
        """Two ``EXAMPLE_SIZE``-pixel square images."""
        return (torch.randn(2, self.weight.shape[1], EXAMPLE_SIZE, EXAMPLE_SIZE, generator=generator, dtype=dtype),)

    def forward(self, x: Tensor) -> Tensor:
        """``(B, C_in, H, W)`` square images -> ``(B, C_out, |G|, H, W)``."""
        self.type_in.check(x, "x")
        G = grid_order(self.group)
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
        self.group = as_grid_group(group)
        G = grid_order(self.group)
        self.weight = nn.Parameter(torch.randn(out_channels, in_channels, G, kernel_size, kernel_size)
                                   / math.sqrt(in_channels * G * kernel_size ** 2))
        self.bias = nn.Parameter(torch.zeros(out_channels))
        self.type_in = RegularFeatures(self.group, in_channels, grid=True)
        self.type_out = RegularFeatures(self.group, out_channels, grid=True)
        self.register_buffer("regular_index", regular_index(self.group), persistent=False)

    def example_inputs(self, generator=None, dtype=torch.float64):
        """Features of two ``EXAMPLE_SIZE``-pixel images, ``(2, C_in, |G|, 9, 9)``."""
        shape = (2, self.weight.shape[1], grid_order(self.group), EXAMPLE_SIZE, EXAMPLE_SIZE)
        return (torch.randn(*shape, generator=generator, dtype=dtype),)

    def full_weight(self) -> Tensor:
        """``(C_out * |G|, C_in * |G|, k, k)`` filters of one ordinary convolution."""
        G = grid_order(self.group)
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
