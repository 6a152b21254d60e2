"""Exact reflections on coordinate data: averaging a GATr over the two orientations of its input.

A PGA point is oriented: the versor of a reflection ``u`` sends ``embed_point(x)`` to
``-embed_point(R x + t)`` (weight ``e123 = -1``), while re-embedding the moved coordinates gives
weight ``+1``. With the equivariant join active (``<ref>_{e123} (a v b)``) a GATr maps the two
orientations to slightly different outputs, so a model on coordinates is exactly equivariant
under rotations and translations but only approximately under reflections.

The grade involution ``alpha`` (sign ``(-1)^grade`` per component) closes the gap. On embedded
coordinates (points are odd, translations and scalars even) re-embedding after a reflection is
``alpha(u . x)``, and ``alpha`` commutes with the twisted Pin(3,0,1) action. So for any exactly
Pin(3,0,1)-equivariant ``f`` and any read-out ``h`` that ignores a point's sign
([`extract_point`][geomlin.algebra.pga.extract_point], invariant scalars),

    ``g(x) = (h(f(x)) + h(f(alpha x))) / 2``

satisfies ``g(alpha(u . x)) = g(u . x)``: averaging over ``{1, alpha}`` (frame averaging over a
group of two elements) makes the coordinate-level model exactly E(3)-equivariant, reflections
included, at twice the cost of one pass. Both orientations run as one batch: in the padded layout
``(B, items, ...)`` the involuted copy is rows ``B .. 2B - 1``; in the flat (PyG) layout
``(items, ...)`` with a batch vector it is items ``items .. 2 items - 1``, and
[`orientation_layout`][] numbers its sets ``B .. 2B - 1`` so that the two copies of a set never
attend to each other and per-set results average with [`mean_over_orientations`][].

>>> import torch
>>> from geomlin.algebra import pga
>>> from geomlin.gatr.orientations import both_orientations, mean_over_orientations
>>> mv = pga.embed_point(torch.randn(4, 10, 3))[..., None, :]          # (B, items, 1, 16)
>>> both = both_orientations(mv)                                        # (2B, items, 1, 16)
>>> mean_over_orientations(both[..., 0, 13:14]).abs().max().item()      # e023 cancels
0.0
"""

from __future__ import annotations

import torch
from torch import Tensor

from geomlin.algebra import pga
from geomlin.batching import BatchLayout, batch_layout


def both_orientations(x: Tensor) -> Tensor:
    """``x (B, ..., 16) -> (2B, ..., 16)``: the batch followed by its grade involution."""
    pga.check_mv(x)
    if x.ndim < 2:
        raise ValueError(f"x must have a leading batch dimension (B, ..., 16), got shape {tuple(x.shape)}")
    return torch.cat([x, pga.grade_involution(x)], dim=0)


def repeat_for_orientations(t: Tensor | None) -> Tensor | None:
    """Inputs that the involution leaves alone (scalars, masks) ``(B, ...) -> (2B, ...)``.

    Not for a flat layout's batch vector: the copy must be other sets, see [`orientation_layout`][].
    """
    return None if t is None else torch.cat([t, t], dim=0)


def orientation_layout(layout: BatchLayout) -> BatchLayout:
    """The layout of [`both_orientations`][] of a batch.

    A padded layout's rows repeat (``(B, items) -> (2B, items)``). A flat layout ``(items,)`` of
    ``B`` sets becomes ``(2 items,)`` whose involuted copy of set ``s`` is set ``B + s``: attention
    stays within each copy, and per-set results ``(2B, ...)`` average with
    [`mean_over_orientations`][]. Planned without reading the device: a plan on the CPU is planned
    again there (free), one with a bound ``max_items`` keeps it (``method="padded"``), one planned
    from ``num_graphs`` alone stays without an attention plan.

    Parameters
    ----------
    layout : BatchLayout
        the layout of the batch (see [`geomlin.batching`][]).

    Returns
    -------
    BatchLayout
        the layout of both orientations, sorted.
    """
    if not isinstance(layout, BatchLayout):
        raise TypeError(f"layout must be a BatchLayout (geomlin.batching.batch_layout), got {type(layout).__name__}")
    mask = repeat_for_orientations(layout.mask)
    if not layout.is_flat:
        return batch_layout(mask)
    count = layout.num_graphs
    batch = torch.cat([layout.batch, layout.batch + count])
    if layout.method is not None and layout.method != "padded" and batch.device.type == "cpu":
        return batch_layout(mask, batch, num_graphs=2 * count, method=layout.method)
    if layout.max_items:
        return batch_layout(mask, batch, num_graphs=2 * count, max_items=layout.max_items, method="padded")
    return batch_layout(mask, batch, num_graphs=2 * count)


def mean_over_orientations(y: Tensor) -> Tensor:
    """``y (2B, ...) -> (B, ...)``: the mean of the two halves made by [`both_orientations`][]."""
    if y.ndim < 1 or y.shape[0] % 2:
        raise ValueError(f"y must have an even leading dimension (2B, ...), got shape {tuple(y.shape)}")
    half = y.shape[0] // 2
    return 0.5 * (y[:half] + y[half:])
