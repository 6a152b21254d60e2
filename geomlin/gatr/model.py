"""The Geometric Algebra Transformer (Brehmer et al., NeurIPS 2023), E(3)-equivariant with reflections.

``GATr`` maps multivector channels ``(..., items, in_mv, 16)`` and optional scalar channels
``(..., items, in_s)`` to ``(..., items, out_mv, 16)`` and ``(..., items, out_s)``:
an :class:`~geomlin.gatr.layers.EquiLinear` in, ``num_blocks`` :class:`~geomlin.gatr.layers.GATrBlock`,
an :class:`~geomlin.gatr.layers.EquiLinear` out.

Batches come in two layouts:

* padded: ``mv (batch, items, channels, 16)`` with ``mask (batch, items)`` (True = real item);
* flat (PyG): ``mv (items, channels, 16)`` with ``batch (items,)`` giving each item's set.

The join reference (the multivector whose pseudoscalar makes the join equivariant) is the
mean of the input multivectors of each set, so each set's reference moves with that set;
pass ``join_reference`` to fix it instead.

Points and reflections: the Pin action sends a point ``P`` to ``-P'`` under a reflection,
while ``embed_point`` of the reflected coordinates gives ``+P'``. For inputs without a
pseudoscalar part (point clouds) the data reference has ``<ref>_{e0123} = 0``, the join term
vanishes, and the extracted output points then move exactly with E(3), reflections included
(tested). A reference with a pseudoscalar part (learned or fixed) switches the join on; the
model stays Pin(3,0,1)-equivariant, but extracted coordinates are then only guaranteed to
follow proper motions (SE(3)) when inputs are re-embedded from reflected coordinates.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from geomlin.algebra import pga
from geomlin.gatr import primitives as P
from geomlin.gatr.layers import EquiLinear, GATrBlock


class GATr(nn.Module):
    """Geometric Algebra Transformer.

    Parameters
    ----------
    in_mv_channels, out_mv_channels, hidden_mv_channels: multivector channels.
    in_s_channels, out_s_channels, hidden_s_channels: scalar channels (0 for none).
    num_blocks: number of :class:`GATrBlock`.
    num_heads: attention heads; ``head_mv_channels`` / ``head_s_channels`` per head
        (default ``2 * hidden // num_heads``).
    dropout: grade dropout (multivectors) and dropout (scalars) in the blocks.
    use_distance: distance-aware attention features.
    method: ``"auto"`` (fast primitives) or ``"dense"`` (reference-style einsums).
    """

    def __init__(self, in_mv_channels: int, out_mv_channels: int, hidden_mv_channels: int,
                 in_s_channels: int = 0, out_s_channels: int = 0, hidden_s_channels: int = 0,
                 num_blocks: int = 4, num_heads: int = 4, head_mv_channels: int | None = None,
                 head_s_channels: int | None = None, dropout: float = 0.0, use_distance: bool = True,
                 method: str = "auto"):
        super().__init__()
        if not isinstance(num_blocks, int) or num_blocks < 0:
            raise ValueError(f"num_blocks must be a non-negative int, got {num_blocks!r}")
        if (in_s_channels or out_s_channels) and not hidden_s_channels:
            raise ValueError("scalar inputs or outputs need hidden_s_channels > 0")
        self.in_mv, self.out_mv, self.in_s, self.out_s = in_mv_channels, out_mv_channels, in_s_channels, out_s_channels
        self.hidden_s = hidden_s_channels
        self.linear_in = EquiLinear(in_mv_channels, hidden_mv_channels, in_s_channels, hidden_s_channels, method=method)
        self.blocks = nn.ModuleList([
            GATrBlock(hidden_mv_channels, hidden_s_channels, num_heads, head_mv_channels, head_s_channels,
                      dropout=dropout, use_distance=use_distance, method=method)
            for _ in range(num_blocks)])
        self.linear_out = EquiLinear(hidden_mv_channels, out_mv_channels, hidden_s_channels, out_s_channels,
                                     method=method)

    def _validate(self, mv: Tensor, scalars: Tensor | None, mask: Tensor | None, batch: Tensor | None,
                  join_reference: Tensor | None) -> None:
        pga.check_mv(mv, "GATr input mv")
        if mv.ndim < 3 or mv.shape[-2] != self.in_mv:
            raise ValueError(f"GATr expects mv of shape (..., items, {self.in_mv}, 16), got {tuple(mv.shape)}")
        if self.in_s:
            if scalars is None:
                raise ValueError(f"GATr was built with in_s_channels={self.in_s} but got scalars=None")
            if scalars.shape != mv.shape[:-2] + (self.in_s,):
                raise ValueError(f"GATr expects scalars of shape {tuple(mv.shape[:-2]) + (self.in_s,)} "
                                 f"(matching mv {tuple(mv.shape)}), got {tuple(scalars.shape)}")
        elif scalars is not None and scalars.shape[-1] != 0:
            raise ValueError(f"GATr was built with in_s_channels=0 but got scalars of shape {tuple(scalars.shape)}")
        for name, t in (("mv", mv), ("scalars", scalars)):
            if t is not None and not torch.isfinite(t).all():
                raise ValueError(f"GATr input {name} contains NaN or inf values")
        if mask is not None:
            if mask.dtype != torch.bool:
                raise TypeError(f"mask must be a bool tensor (True = real item), got {mask.dtype}")
            if mask.shape != mv.shape[:-2]:
                raise ValueError(f"mask must have shape {tuple(mv.shape[:-2])} (the items axis of mv "
                                 f"{tuple(mv.shape)}), got {tuple(mask.shape)}")
        if batch is not None:
            if mv.ndim != 3:
                raise ValueError(f"with a batch vector mv must be flat (items, channels, 16), got {tuple(mv.shape)}")
            if batch.dtype != torch.long or batch.shape != mv.shape[:1]:
                raise ValueError(f"batch must be a long tensor of shape ({mv.shape[0]},), got "
                                 f"{batch.dtype} {tuple(batch.shape)}")
            if batch.numel() and batch.min() < 0:
                raise ValueError("batch indices must be non-negative")
        if join_reference is not None:
            pga.check_mv(join_reference, "join_reference")

    def forward(self, mv: Tensor, scalars: Tensor | None = None, mask: Tensor | None = None,
                batch: Tensor | None = None, join_reference: Tensor | None = None
                ) -> tuple[Tensor, Tensor | None]:
        """Run the transformer.

        Parameters
        ----------
        mv: ``(..., items, in_mv_channels, 16)`` float.
        scalars: ``(..., items, in_s_channels)`` or ``None``.
        mask: ``(..., items)`` bool, True = real item (padded layout).
        batch: ``(items,)`` long set index per item (flat layout, ``mv (items, channels, 16)``).
        join_reference: ``(..., 16)`` broadcastable against ``(..., items, channels, 16)``;
            default: the per-set mean of ``mv``.

        Returns
        -------
        ``(mv (..., items, out_mv_channels, 16), scalars (..., items, out_s_channels) or None)``.
        """
        self._validate(mv, scalars, mask, batch, join_reference)
        if join_reference is None:
            join_reference = P.join_reference(mv, mask, batch)
        attn_mask = P.attention_mask(mask, batch)
        h_mv, h_s = self.linear_in(mv, scalars if self.in_s else None)
        for block in self.blocks:
            h_mv, h_s = block(h_mv, h_s, join_reference, attn_mask)
        return self.linear_out(h_mv, h_s)
