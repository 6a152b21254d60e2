"""Equivariance examples of the module classes in :mod:`geomlin.frames` (see tests/test_declarations.py).

The wrapped backbones are deliberately not equivariant and have biases (``tests/frames/conftest.py``),
so only the frame / canonicalization machinery can make the wrappers pass.
"""

import torch
from torch import nn

from geomlin.batching import batch_layout
from geomlin.frames import (
    Canonicalization,
    Canonicalizer,
    FrameAveraging,
    GroupConv2d,
    ImageCanonicalizer,
    LiftingConv2d,
    PointCloudCanonicalizer,
    VNLeakyReLU,
    VNLinear,
    VNPointNet,
)
from geomlin.frames.pca import example_clouds
from geomlin.reps import Positions, Scalars, Vectors
from tests.frames.conftest import PointMLP


class _FlatImageHead(nn.Module):
    """A plain MLP on flattened 9x9 images (with biases): not equivariant."""

    def __init__(self, out: int, channels: int = 1):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(channels * 81, 16), nn.SiLU(), nn.Linear(16, out))

    def forward(self, x):
        return self.net(x)


def _masked_frame_averaging():
    """Padded clouds of 10, 8 and 6 points with their mask (the backbone takes ``mask=``)."""
    pos, mask = example_clouds(3, torch.Generator().manual_seed(0))
    return FrameAveraging(PointMLP(out_dim=4), "E3", Scalars()), {"inputs": (pos,), "kwargs": {"mask": mask}}


def _flat_frame_averaging():
    """The same clouds flat, with a layout planned on the host (the backbone gets the frames' layout)."""
    pos, mask = example_clouds(3, torch.Generator().manual_seed(1))
    batch = batch_layout(batch=torch.arange(3).repeat_interleave(mask.sum(1)))
    return (FrameAveraging(PointMLP(out_dim=3, level="point"), "SO3", Vectors(3)),
            {"inputs": (pos[mask],), "kwargs": {"batch": batch}})


def _biased(module: nn.Module) -> nn.Module:
    for m in module.modules():
        if getattr(m, "bias", None) is not None and isinstance(m.bias, nn.Parameter):
            nn.init.normal_(m.bias, std=0.3)
    return module


EXAMPLES = {
    FrameAveraging: [
        lambda: FrameAveraging(PointMLP(out_dim=4), "E3", Scalars()),
        lambda: FrameAveraging(PointMLP(out_dim=3, level="point"), "SO3", Vectors(3)),
        lambda: FrameAveraging(PointMLP(out_dim=3), "SE3", Positions(3), on_degenerate="moments", gap_tol=0.2,
                               signs="skewness"),
        lambda: FrameAveraging(PointMLP(extra_dim=3, out_dim=3, level="point"), "O3", Vectors(3), inputs=Vectors(3)),
        _masked_frame_averaging,
        _flat_frame_averaging,
    ],
    Canonicalization: [
        lambda: Canonicalization(PointCloudCanonicalizer("SE3", orthogonalization="procrustes", moment_frame=True),
                                 PointMLP(out_dim=3), Positions(3)),
        lambda: Canonicalization(PointCloudCanonicalizer("O3", pooling="attention"), PointMLP(out_dim=2), Scalars()),
        lambda: Canonicalization(ImageCanonicalizer("D4", hidden_channels=4, num_blocks=1, kernel_size=3),
                                 _FlatImageHead(2), Vectors(2)),
    ],
    PointCloudCanonicalizer: [
        lambda: PointCloudCanonicalizer("SE3"),
        lambda: PointCloudCanonicalizer("E3", orthogonalization="procrustes", pooling="attention"),
        lambda: PointCloudCanonicalizer("SO(2)"),
    ],
    ImageCanonicalizer: [lambda: _biased(ImageCanonicalizer("C4", in_channels=2, hidden_channels=4, num_blocks=1,
                                                            kernel_size=3))],
    LiftingConv2d: [lambda: _biased(LiftingConv2d("D4", 2, 3, 3))],
    GroupConv2d: [lambda: _biased(GroupConv2d("C4", 3, 2, 3))],
    VNLinear: [lambda: VNLinear(4, 5)],
    VNLeakyReLU: [lambda: VNLeakyReLU(5)],
    VNPointNet: [lambda: VNPointNet(3, 8, 1), lambda: VNPointNet(2, 8, 1, pooling="attention", d=2)],
}

NOT_EQUIVARIANT = {
    Canonicalizer: "abstract base class of the canonicalization contract; its subclasses are checked",
}
