"""Equivariance examples of the module classes in :mod:`geomlin.gatr` (see tests/test_declarations.py).

Every parameter is randomised (biases included: odd functions hide bugs). The GATr examples cover
the padded layout (``example_inputs``: a padding mask), the flat layout (a PyG batch vector with
uneven sets, planned by ``batch_layout``) and a model without scalar channels.
"""

import torch

from geomlin.batching import batch_layout
from geomlin.gatr import (
    EquiLayerNorm,
    EquiLinear,
    GATr,
    GATrBlock,
    GeometricAttention,
    GeometricBilinear,
    GeometricMLP,
)
from tests.randomized import randomized


def _flat_gatr():
    model = randomized(GATr(2, 1, 4, in_s_channels=2, out_s_channels=1, hidden_s_channels=4, num_blocks=2,
                         num_heads=2), 0.4).double()
    batch = torch.tensor([0, 0, 0, 1, 1, 1, 1, 1, 2])
    mv = torch.randn(9, 2, 16, dtype=torch.float64)
    s = torch.randn(9, 2, dtype=torch.float64)
    # planned at the data boundary (on the CPU) and moved with the inputs, as a data loader would
    return model, {"inputs": (mv, s), "kwargs": {"batch": batch_layout(batch=batch)}}


EXAMPLES = {
    EquiLinear: [lambda: randomized(EquiLinear(3, 4, 2, 5), 0.4), lambda: randomized(EquiLinear(2, 3), 0.4)],
    EquiLayerNorm: [lambda: EquiLayerNorm(mv_channels=3, s_channels=2), lambda: EquiLayerNorm(mv_channels=2)],
    GeometricBilinear: [lambda: randomized(GeometricBilinear(3, 4, 2, 2), 0.4)],
    GeometricMLP: [lambda: randomized(GeometricMLP(3, 2), 0.4)],
    GeometricAttention: [lambda: randomized(GeometricAttention(3, 2, 4, 3, num_heads=2), 0.4),
                         lambda: randomized(GeometricAttention(2, 2, 0, 0, num_heads=2, multi_query=False), 0.4)],
    GATrBlock: [lambda: randomized(GATrBlock(4, 3, num_heads=2), 0.4)],
    GATr: [lambda: randomized(GATr(2, 1, 4, in_s_channels=3, out_s_channels=2, hidden_s_channels=4, num_blocks=2,
                                num_heads=2), 0.4),
           lambda: randomized(GATr(1, 2, 4, num_blocks=1, num_heads=1), 0.4),
           _flat_gatr],
}
