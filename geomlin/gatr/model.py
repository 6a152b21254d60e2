"""The Geometric Algebra Transformer (Brehmer et al., NeurIPS 2023), Pin(3,0,1)- and E(3)-equivariant.

``GATr`` maps multivector channels ``(..., items, in_mv, 16)`` and optional scalar channels
``(..., items, in_s)`` to ``(..., items, out_mv, 16)`` and ``(..., items, out_s)``:
an [`EquiLinear`][] in, ``num_blocks`` [`GATrBlock`][],
an [`EquiLinear`][] out (the reference's ``gatr.nets.GATr``).

Batches come in two layouts, both with attention memory linear in the number of items:

* padded: ``mv (batch, items, channels, 16)`` with ``mask (batch, items)`` (True = real item);
* flat (PyG): ``mv (items, channels, 16)`` with ``batch (items,)`` giving each item's set
  (grouped by size into fused attention calls, [`geomlin.gatr.attention`][]).

On accelerators no forward pass synchronises with the host. A flat batch's set sizes are settled
once per batch at the data boundary, by a [`BatchLayout`][geomlin.batching.BatchLayout] passed as
``batch=``: ``batch_layout(batch=batch)`` while the batch vector is still on the CPU (free), moved
with ``.to(device)``, or ``batch_layout(batch=batch, num_graphs=..., max_items=...)`` on the device
(upper bounds, planned there without reading the batch). A batch vector on an accelerator without
a plan is refused, since planning it would read it back on every call.

**Join reference and what is guaranteed**

The bilinear layers use the equivariant join ``<ref>_{e123} (x v y)``. By default the
reference is the mean of each set's input multivectors (``join_reference="data"``), which
transforms with the set: the model is then exactly Pin(3,0,1)-equivariant, reflections
included, and on point clouds the join is active (a point's ``e123`` weight is 1).
Extracted points ([`extract_point`][geomlin.algebra.pga.extract_point]) therefore follow every E(3)
motion exactly when the input is moved by the motion's versor (``pga.sandwich``, or
``pga.embed_point`` of the moved coordinates times ``det R``: a reflected PGA point has weight
``-1``). Re-embedding reflected coordinates with weight ``+1`` feeds a differently oriented
input; with the join active no GATr (the reference's included) maps the two orientations to
the same points, so that is equivariant only up to a small error (measured in the tests), and
exact for proper motions.

``join_reference`` may also be a tensor broadcastable to ``(..., items, channels, 16)``:
exact Pin(3,0,1) equivariance holds when it is transformed with the input (only its ``e123``
component is used, so a pseudoscalar part is ignored); a constant one, such as
``"canonical"`` (``e123 + e0123``, the reference's option), is invariant under SE(3) only,
which makes the model SE(3)-equivariant and reflections flip its join term.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from geomlin.algebra import pga
from geomlin.batching import FLAT_METHODS, BatchLayout, batch_layout
from geomlin.gatr import join_references
from geomlin.gatr.layers import EXAMPLE_ITEMS, EquiLinear, GATrBlock, check_reference
from geomlin.validation import (
    check_batch_vector,
    check_choice,
    check_finite,
    check_mask,
    check_nonnegative_int,
    check_positive_int,
    check_tensor,
)

#: Values of ``join_reference`` besides a tensor.
JOIN_REFERENCES = ("data", "canonical")


class GATr(nn.Module):
    """Geometric Algebra Transformer.

    Parameters
    ----------
    in_mv_channels, out_mv_channels, hidden_mv_channels : int
        multivector channels.
    in_s_channels, out_s_channels, hidden_s_channels : int
        scalar channels (0 for none).
    num_blocks : int
        number of [`GATrBlock`][].
    num_heads : int
        attention heads; ``head_mv_channels`` / ``head_s_channels`` per head
        (default ``max(2 hidden_mv / num_heads, 1)`` and ``max(2 hidden_s / num_heads, 4)``, the
        reference's).
    dropout : float
        grade dropout (multivectors) and dropout (scalars) in the blocks.
    use_distance : bool
        distance-aware attention features.
    multi_query : bool
        one key/value head shared by all query heads (the reference's default).
    attention_method : str
        how flat (``batch=``) batch vectors are grouped: ``"auto"``, ``"bucketed"``,
        ``"chunked"``, ``"masked"`` (see [`geomlin.gatr.attention`][]; ``"padded"`` needs
        bounds, so it comes planned, ``batch=batch_layout(...)``).
    checkpoint : bool
        recompute each block in the backward pass (less memory, more time).

    Notes
    -----
    The architecture, initialisation and conventions are the reference GATr's (v1.4); a
    reference ``state_dict`` loads with
    [`geomlin.gatr.reference.load_reference_state_dict`][].
    """

    def __init__(self, in_mv_channels: int, out_mv_channels: int, hidden_mv_channels: int,
                 in_s_channels: int = 0, out_s_channels: int = 0, hidden_s_channels: int = 0,
                 num_blocks: int = 4, num_heads: int = 4, head_mv_channels: int | None = None,
                 head_s_channels: int | None = None, dropout: float = 0.0, use_distance: bool = True,
                 multi_query: bool = True, attention_method: str = "auto", checkpoint: bool = False):
        super().__init__()
        self.in_mv = check_positive_int(in_mv_channels, "in_mv_channels")
        self.out_mv = check_positive_int(out_mv_channels, "out_mv_channels")
        hidden_mv = check_positive_int(hidden_mv_channels, "hidden_mv_channels")
        self.in_s = check_nonnegative_int(in_s_channels, "in_s_channels")
        self.out_s = check_nonnegative_int(out_s_channels, "out_s_channels")
        self.hidden_s = check_nonnegative_int(hidden_s_channels, "hidden_s_channels")
        num_blocks = check_positive_int(num_blocks, "num_blocks")
        if (self.in_s or self.out_s) and not self.hidden_s:
            raise ValueError(f"scalar inputs or outputs (in_s_channels={self.in_s}, out_s_channels={self.out_s}) "
                             "need hidden_s_channels > 0")
        self.attention_method = check_choice(attention_method, "attention_method", FLAT_METHODS)
        self.linear_in = EquiLinear(self.in_mv, hidden_mv, self.in_s, self.hidden_s)
        self.blocks = nn.ModuleList([
            GATrBlock(hidden_mv, self.hidden_s, num_heads, head_mv_channels, head_s_channels,
                      dropout=dropout, use_distance=use_distance, multi_query=multi_query, checkpoint=checkpoint)
            for _ in range(num_blocks)])
        self.linear_out = EquiLinear(hidden_mv, self.out_mv, self.hidden_s, self.out_s)
        self.type_in = self.linear_in.type_in
        self.type_out = self.linear_out.type_out

    def example_inputs(self, generator: torch.Generator | None = None, dtype: torch.dtype = torch.float64):
        """``(mv (2, 5, in_mv, 16), scalars)`` with a padding mask (the second set has 3 items)."""
        mv = torch.randn(*EXAMPLE_ITEMS, self.in_mv, pga.DIM, generator=generator, dtype=dtype)
        s = torch.randn(*EXAMPLE_ITEMS, self.in_s, generator=generator, dtype=dtype) if self.in_s else None
        mask = torch.tensor([[True] * EXAMPLE_ITEMS[1], [True] * 3 + [False] * (EXAMPLE_ITEMS[1] - 3)])
        return (mv, s), {"mask": mask}

    def _validate(self, mv: Tensor, scalars: Tensor | None, mask: Tensor | None, batch: Tensor | None,
                  join_reference) -> None:
        pga.check_mv(mv, "GATr input mv")
        if mv.ndim < 3 or mv.shape[-2] != self.in_mv:
            raise ValueError(f"GATr expects mv of shape (..., items, {self.in_mv}, 16), got {tuple(mv.shape)}")
        if mv.shape[-3] == 0:
            raise ValueError(f"GATr got a set with no items (mv of shape {tuple(mv.shape)}); attention needs "
                             "at least one item per set")
        if self.in_s:
            if scalars is None:
                raise ValueError(f"GATr was built with in_s_channels={self.in_s} but got scalars=None")
            check_tensor(scalars, "scalars")
            if scalars.shape != mv.shape[:-2] + (self.in_s,):
                raise ValueError(f"GATr expects scalars of shape {tuple(mv.shape[:-2]) + (self.in_s,)} "
                                 f"(matching mv {tuple(mv.shape)}), got {tuple(scalars.shape)}")
        elif scalars is not None and scalars.shape[-1] != 0:
            raise ValueError(f"GATr was built with in_s_channels=0 but got scalars of shape {tuple(scalars.shape)}")
        check_finite(mv, "GATr input mv")
        if scalars is not None:
            check_finite(scalars, "GATr input scalars")
        if mask is not None:
            check_mask(mask, "mask", shape=mv.shape[:-2])
        if batch is not None:
            if mv.ndim != 3:
                raise ValueError(f"with a batch vector mv must be flat (items, channels, 16), got {tuple(mv.shape)}")
            check_batch_vector(batch, "batch", mv.shape[0])
        if isinstance(join_reference, str):
            check_choice(join_reference, "join_reference", JOIN_REFERENCES)
        elif join_reference is not None:
            check_reference(join_reference, "join_reference")

    def forward(self, mv: Tensor, scalars: Tensor | None = None, mask: Tensor | None = None,
                batch: Tensor | BatchLayout | None = None, join_reference: Tensor | str | None = None
                ) -> tuple[Tensor, Tensor | None]:
        """Run the transformer.

        Parameters
        ----------
        mv : Tensor of shape (..., items, in_mv_channels, 16)
            float.
        scalars : Tensor of shape (..., items, in_s_channels), optional
            scalar channels (``None`` when ``in_s_channels`` is 0).
        mask : Tensor of shape (..., items), optional
            bool, True = real item (padded layout). Float masks are refused.
        batch : Tensor of shape (items,) or BatchLayout, optional
            flat layout, ``mv (items, channels, 16)``: the integer set of every item, sorted, on
            the CPU; or the [`BatchLayout`][geomlin.batching.BatchLayout] planned from it at the
            data boundary and moved to ``mv``'s device (needed on an accelerator).
        join_reference : Tensor | str | None
            ``None`` / ``"data"`` (the per-set mean of ``mv``), ``"canonical"``
            (``e123 + e0123``, SE(3) only) or a tensor broadcastable against
            ``(..., items, channels, 16)``; see the module docstring.

        Returns
        -------
        tuple[Tensor, Tensor | None]
            ``(mv (..., items, out_mv_channels, 16), scalars (..., items, out_s_channels) or None)``.
        """
        planned = isinstance(batch, BatchLayout)
        if planned:
            if mask is not None:
                raise ValueError("give the mask inside the planned layout (batch_layout(mask, batch)), not beside it")
            if batch.device is not None and batch.device != mv.device:
                raise ValueError(f"the layout is on {batch.device} but mv is on {mv.device}; move it with "
                                 "layout.to(device)")
            mask, vector = batch.mask, (batch.batch if batch.is_flat else None)
        else:
            vector = batch
        self._validate(mv, scalars, mask, vector, join_reference)
        if not planned and vector is not None and vector.device.type != "cpu":
            raise ValueError(
                f"GATr got a flat batch vector on {vector.device} without a plan; planning it here would make "
                "the host wait for the device on every call. Plan it once per batch at the data boundary: "
                "batch=batch_layout(batch=batch).to(device) while the batch vector is on the CPU, or "
                "batch=batch_layout(batch=batch, num_graphs=..., max_items=...) on the device (upper bounds)")
        if not planned:
            batch = batch_layout(mask, vector, method=self.attention_method,
                                 num_items=None if vector is None else mv.shape[0])
        if join_reference is None or isinstance(join_reference, str) and join_reference == "data":
            join_reference = join_references.join_reference(mv, batch=batch)
        elif isinstance(join_reference, str):
            join_reference = join_references.canonical_reference(mv.dtype, mv.device)
        h_mv, h_s = self.linear_in(mv, scalars)
        # under autocast the residual stream stays in the input's precision (the blocks add to it)
        h_mv, h_s = h_mv.to(mv.dtype), (None if h_s is None else h_s.to(mv.dtype))
        for block in self.blocks:
            h_mv, h_s = block(h_mv, h_s, join_reference, batch)
        return self.linear_out(h_mv, h_s)

