"""PONITA's layers: the kernel basis, the depthwise convolutions on points and on R^3 x S^2, the ConvNeXt block."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from geomlin.batching import scatter_messages
from geomlin.models.ponita.attributes import polynomial_features


class KernelBasis(nn.Module):
    """Polynomial features of pair attributes -> MLP -> ``num_basis`` basis functions (the reference's
    ``PolynomialFeatures -> Linear -> GELU -> Linear -> GELU``, with the input width computed, not lazy)."""

    def __init__(self, num_attrs: int, hidden_channels: int, num_basis: int, degree: int):
        super().__init__()
        self.degree = degree
        width = sum(num_attrs ** k for k in range(1, degree + 1))
        self.net = nn.Sequential(nn.Linear(width, hidden_channels), nn.GELU(),
                                 nn.Linear(hidden_channels, num_basis), nn.GELU())

    def forward(self, attrs: Tensor) -> Tensor:
        """``(..., num_attrs)`` -> ``(..., num_basis)``."""
        return self.net(polynomial_features(attrs, self.degree))


class PointConv(nn.Module):
    """Depthwise convolution on points: ``out_i = sum_j k(|x_ij|) * h_j + b`` (``(N, C)`` -> ``(N, C)``)."""

    def __init__(self, channels: int, num_basis: int):
        super().__init__()
        self.kernel = nn.Linear(num_basis, channels, bias=False)
        self.bias = nn.Parameter(torch.zeros(channels))

    def forward(self, h: Tensor, edge_index: Tensor, basis: Tensor) -> Tensor:
        src, dst = edge_index
        return scatter_messages(self._messages, dst, h.shape[0], (h.index_select(0, src), basis)).to(h.dtype) + self.bias

    def _messages(self, h_j: Tensor, basis: Tensor) -> Tensor:
        return self.kernel(basis) * h_j


class FiberBundleConv(nn.Module):
    """Depthwise convolution on R^3 x S^2: ``(N, O, C)`` -> ``(N, O, C)``.

    Separable (default): ``y(p_i, o) = sum_j k_s(o.x, |x_perp|) h(p_j, o)`` (spatial, fixed ``o``),
    then ``out(p_i, o') = 1/O sum_o k_f(o.o') y(p_i, o) + b`` (spherical). Complete: one kernel
    ``out(p_i, o_a) = 1/O sum_j sum_b k(attrs(x, o_a, o_b)) h(p_j, o_b) + b``.
    """

    def __init__(self, channels: int, num_basis: int, complete: bool = False):
        super().__init__()
        self.complete = complete
        self.kernel = nn.Linear(num_basis, channels, bias=False)
        if not complete:
            self.fiber_kernel = nn.Linear(num_basis, channels, bias=False)
        self.bias = nn.Parameter(torch.zeros(channels))

    def forward(self, h: Tensor, edge_index: Tensor, basis: Tensor, fiber_basis: Tensor | None) -> Tensor:
        src, dst = edge_index
        O = h.shape[1]
        y = scatter_messages(self._messages, dst, h.shape[0], (h.index_select(0, src), basis)).to(h.dtype)
        if self.complete:
            return y + self.bias
        return torch.einsum("noc,opc->npc", y, self.fiber_kernel(fiber_basis)) / O + self.bias

    def _messages(self, h_j: Tensor, basis: Tensor) -> Tensor:
        """Per edge: ``1/O sum_b k(attrs(x, o_a, o_b)) h(p_j, o_b)`` (complete, ``basis (E, O_a, O_b, K)``) or
        ``k_s(o.x, |x_perp|) h(p_j, o)`` (separable, ``basis (E, O, K)``)."""
        if self.complete:
            return torch.einsum("eabc,ebc->eac", self.kernel(basis), h_j) / h_j.shape[1]
        return self.kernel(basis) * h_j


class ConvNeXtBlock(nn.Module):
    """``h + scale * MLP(LayerNorm(conv(h)))`` with a ``widening_factor`` times wider GELU MLP."""

    def __init__(self, conv: nn.Module, channels: int, widening_factor: int = 4, layer_scale: float | None = None):
        super().__init__()
        self.conv = conv
        self.norm = nn.LayerNorm(channels)
        self.mlp = nn.Sequential(nn.Linear(channels, widening_factor * channels), nn.GELU(),
                                 nn.Linear(widening_factor * channels, channels))
        self.layer_scale = None if layer_scale is None else nn.Parameter(torch.full((channels,), float(layer_scale)))

    def forward(self, h: Tensor, *conv_args) -> Tensor:
        y = self.mlp(self.norm(self.conv(h, *conv_args)))
        return h + (y if self.layer_scale is None else self.layer_scale * y)
