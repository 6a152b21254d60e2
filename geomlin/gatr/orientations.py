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
[`orientation_batch`][] numbers its sets ``num_sets .. 2 num_sets - 1`` so that the two copies of a
set never attend to each other and per-set results average with [`mean_over_orientations`][].

>>> import torch
>>> from geomlin.algebra import pga
>>> mv = pga.embed_point(torch.randn(4, 10, 3))[..., None, :]          # (B, items, 1, 16)
>>> both = both_orientations(mv)                                        # (2B, items, 1, 16)
>>> mean_over_orientations(both[..., 0, 13:14]).abs().max().item()      # e023 cancels
0.0
"""

from __future__ import annotations

import torch
from torch import Tensor

from geomlin.algebra import pga
from geomlin.validation import check_batch_vector, check_positive_int, check_tensor


def both_orientations(x: Tensor) -> Tensor:
    """``x (B, ..., 16) -> (2B, ..., 16)``: the batch followed by its grade involution."""
    pga.check_mv(x)
    if x.ndim < 2:
        raise ValueError(f"x must have a leading batch dimension (B, ..., 16), got shape {tuple(x.shape)}")
    return torch.cat([x, pga.grade_involution(x)], dim=0)


def repeat_for_orientations(t: Tensor | None) -> Tensor | None:
    """Inputs that the involution leaves alone (scalars, masks) ``(B, ...) -> (2B, ...)``.

    Not for a flat layout's batch vector: the copy must be other sets, see [`orientation_batch`][].
    """
    return None if t is None else torch.cat([t, t], dim=0)


def orientation_batch(batch: Tensor, num_sets: int | None = None) -> Tensor:
    """The batch vector of [`both_orientations`][] of flat items: ``batch (items,) -> (2 items,)``,
    ``[batch, batch + num_sets]``.

    The involuted copy of set ``s`` is set ``num_sets + s``: attention stays within each copy, and
    per-set results ``(2 num_sets, ...)`` average with [`mean_over_orientations`][].

    Parameters
    ----------
    batch : Tensor of shape (items,)
        the set of each item, sorted (PyG's ``Batch.batch``).
    num_sets : int, optional
        the number of sets (PyG's ``Batch.num_graphs``; any bound above ``batch.max()``). Needed for
        a batch vector on an accelerator (it would be read back otherwise); on the CPU it defaults to
        ``batch[-1] + 1``.

    Returns
    -------
    Tensor of shape (2 items,)
        the batch vector of both orientations, sorted.
    """
    check_tensor(batch, "batch", ndim=1, dtype="int")
    if num_sets is None:
        if batch.device.type != "cpu":
            raise ValueError(f"orientation_batch of a batch vector on {batch.device} needs num_sets (PyG's "
                             "Batch.num_graphs): counting the sets would read the batch back from the device")
        num_sets = int(batch[-1]) + 1 if batch.numel() else 0
    else:
        num_sets = check_positive_int(num_sets, "num_sets")
    batch = check_batch_vector(batch, "batch", batch.shape[0], num_graphs=num_sets if batch.numel() else None)
    return torch.cat([batch, batch + num_sets])


def mean_over_orientations(y: Tensor) -> Tensor:
    """``y (2B, ...) -> (B, ...)``: the mean of the two halves made by [`both_orientations`][]."""
    if y.ndim < 1 or y.shape[0] % 2:
        raise ValueError(f"y must have an even leading dimension (2B, ...), got shape {tuple(y.shape)}")
    half = y.shape[0] // 2
    return 0.5 * (y[:half] + y[half:])
