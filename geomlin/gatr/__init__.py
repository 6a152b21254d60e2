"""GATr, the Geometric Algebra Transformer (Brehmer et al., NeurIPS 2023), Pin(3,0,1)-equivariant.

Floors: [`planes`][] (the one implementation of every map, on the component-major layout) ->
[`layers`][] (modules calling the kernels and each other's forwards) -> [`model`][] ([`GATr`][]).
[`primitives`][] are the same maps as pure functions on ``(..., 16)`` tensors (the reference's
``gatr.primitives``; a module for users, which no module of the library imports: ``from
geomlin.gatr import primitives``); [`join_references`][] are the join's references;
[`attention`][] runs fused attention over the sets of a batch's layout
([`geomlin.batching.BatchLayout`][]);
[`orientations`][] makes models on coordinates exact under reflections; [`reference`][] loads the
reference implementation's weights.
Pin(3,0,1), the group GATr is equivariant to, is sampled by
[`geomlin.groups.Pin301`][geomlin.groups.versor.Pin301] (re-exported here). Layers for any Clifford
algebra (CGENN) live in [`geomlin.clifford`][].

>>> import torch
>>> from geomlin.algebra import pga
>>> from geomlin.gatr import GATr
>>> model = GATr(1, 1, 8, num_blocks=1, num_heads=2)
>>> points = pga.embed_point(torch.randn(2, 10, 3))[..., None, :]   # (batch, items, 1, 16)
>>> mv, s = model(points)
>>> pga.extract_point(mv[..., 0, :]).shape
torch.Size([2, 10, 3])
"""

from geomlin.gatr import attention, orientations, planes, reference
from geomlin.gatr.layers import (
    EquiLayerNorm,
    EquiLinear,
    GATrBlock,
    GeometricAttention,
    GeometricBilinear,
    GeometricMLP,
)
from geomlin.gatr.model import GATr
from geomlin.groups.versor import Pin301

__all__ = [
    "EquiLayerNorm",
    "EquiLinear",
    "GATr",
    "GATrBlock",
    "GeometricAttention",
    "GeometricBilinear",
    "GeometricMLP",
    "Pin301",
    "attention",
    "orientations",
    "planes",
    "reference",
]

