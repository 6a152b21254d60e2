"""Equivariance examples of the module classes in :mod:`geomlin.gatr` (see tests/test_declarations.py).

Every parameter is randomised (biases included: odd functions hide bugs). The GATr examples cover
the padded layout (``example_inputs``: a padding mask), the flat layout (a PyG batch vector with
uneven sets, planned by ``set_layout``) and a model without scalar channels.
"""

import torch

from geomlin.gatr import (
    EquiLayerNorm,
    EquiLinear,
    GATr,
    GATrBlock,
    GeometricAttention,
    GeometricBilinear,
    GeometricMLP,
    set_layout,
)


def _random(module: torch.nn.Module) -> torch.nn.Module:
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn_like(p) * 0.4)
    return module


def _flat_gatr():
    model = _random(GATr(2, 1, 4, in_s_channels=2, out_s_channels=1, hidden_s_channels=4, num_blocks=2,
                         num_heads=2)).double()
    batch = torch.tensor([0, 0, 0, 1, 1, 1, 1, 1, 2])
    mv = torch.randn(9, 2, 16, dtype=torch.float64)
    s = torch.randn(9, 2, dtype=torch.float64)
    # planned at the data boundary (on the CPU) and moved with the inputs, as a data loader would
    return model, {"inputs": (mv, s), "kwargs": {"layout": set_layout(batch=batch)}}


EXAMPLES = {
    EquiLinear: [lambda: _random(EquiLinear(3, 4, 2, 5)), lambda: _random(EquiLinear(2, 3))],
    EquiLayerNorm: [lambda: EquiLayerNorm(mv_channels=3, s_channels=2), lambda: EquiLayerNorm(mv_channels=2)],
    GeometricBilinear: [lambda: _random(GeometricBilinear(3, 4, 2, 2))],
    GeometricMLP: [lambda: _random(GeometricMLP(3, 2))],
    GeometricAttention: [lambda: _random(GeometricAttention(3, 2, 4, 3, num_heads=2)),
                         lambda: _random(GeometricAttention(2, 2, 0, 0, num_heads=2, multi_query=False))],
    GATrBlock: [lambda: _random(GATrBlock(4, 3, num_heads=2))],
    GATr: [lambda: _random(GATr(2, 1, 4, in_s_channels=3, out_s_channels=2, hidden_s_channels=4, num_blocks=2,
                                num_heads=2)),
           lambda: _random(GATr(1, 2, 4, num_blocks=1, num_heads=1)),
           _flat_gatr],
}
