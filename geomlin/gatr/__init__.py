"""GATr, the E(3)-equivariant Geometric Algebra Transformer, and Clifford-group equivariant layers.

Layers: :mod:`~geomlin.gatr.primitives` (pure functions on ``(..., 16)``) ->
:mod:`~geomlin.gatr.layers` (modules) -> :mod:`~geomlin.gatr.model` (:class:`GATr`).
:mod:`~geomlin.gatr.cgenn` serves any metric; :mod:`~geomlin.gatr.group` samples Pin(3,0,1).

>>> import torch
>>> from geomlin.algebra import pga
>>> from geomlin.gatr import GATr
>>> model = GATr(1, 1, 8, num_blocks=1, num_heads=2)
>>> points = pga.embed_point(torch.randn(2, 10, 3))[..., None, :]   # (batch, items, 1, 16)
>>> mv, s = model(points)
>>> pga.extract_point(mv[..., 0, :]).shape
torch.Size([2, 10, 3])
"""

from geomlin.gatr import cgenn, primitives
from geomlin.gatr.cgenn import CGENNBlock, CliffordGroup, GeometricProductLayer, MVLayerNorm, MVLinear, MVSiLU
from geomlin.gatr.group import Pin301, pin_action
from geomlin.gatr.layers import (
    EquiLayerNorm,
    EquiLinear,
    GATrBlock,
    GeometricAttention,
    GeometricBilinear,
    GeometricMLP,
)
from geomlin.gatr.model import GATr

__all__ = [
    "CGENNBlock",
    "CliffordGroup",
    "EquiLayerNorm",
    "EquiLinear",
    "GATr",
    "GATrBlock",
    "GeometricAttention",
    "GeometricBilinear",
    "GeometricMLP",
    "GeometricProductLayer",
    "MVLayerNorm",
    "MVLinear",
    "MVSiLU",
    "Pin301",
    "cgenn",
    "pin_action",
    "primitives",
]
