"""C4/D4 image canonicalization: exact canonicalized models (geomlin.testing with the image feature
types), gradients and the prior."""

import pytest
import torch
from torch import nn

from geomlin.frames import Canonicalization, ImageCanonicalizer, LiftingConv2d
from geomlin.groups import C, D
from geomlin.groups.square_grid import grid_order
from geomlin.reps import Images, Positions, RegularFeatures, Scalars, Vectors
from geomlin.reps.images import act_on_image
from geomlin.testing import assert_equivariant, equivariance_error
from tests.frames.prior_training import train_on_prior

GROUPS = [("C4", C(4)), ("D4", D(4))]


def _images(B=3, channels=1, size=9):
    return torch.randn(B, channels, size, size, dtype=torch.float64)


class _Flat(nn.Module):
    """A plain (non-equivariant) MLP on the flattened image, with biases."""

    def __init__(self, out, size=9, channels=1):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(channels * size * size, 16), nn.SiLU(), nn.Linear(16, out))

    def forward(self, x):
        return self.net(x.flatten(1))


@pytest.mark.parametrize("name,group", GROUPS)
def test_canonicalized_image_models_are_exact(name, group):
    G = grid_order(name)
    can = ImageCanonicalizer(name, in_channels=2, hidden_channels=4, num_blocks=1, kernel_size=3).double()
    x = _images(3, 2, 9)
    images = Images(group, 2)
    cases = [
        (_Flat(5, channels=2), Scalars(5)),
        (_Flat(2, channels=2), Vectors(2)),
        (nn.Sequential(_Flat(2 * G, channels=2), nn.Unflatten(1, (2, G))), RegularFeatures(group, 2)),
        (nn.Conv2d(2, 3, 3, padding=1).double(), Images(group, 3)),
    ]
    for backbone, out_type in cases:
        backbone = backbone.double()
        model = Canonicalization(can, backbone, out_type)
        assert_equivariant(model, group, images, out_type, inputs=(x,))
        assert equivariance_error(backbone, group, images, out_type, inputs=(x,)) > 1e-3, out_type


def test_logits_are_permuted_exactly():
    can = ImageCanonicalizer("D4", hidden_channels=4, num_blocks=2).double()
    assert_equivariant(can.logits, D(4), Images(D(4), 1), RegularFeatures(D(4)), inputs=(_images(),))


def test_canonical_image_is_invariant_and_prediction_follows_the_input():
    can = ImageCanonicalizer("C4", hidden_channels=4).double()
    x = _images()
    g = can(x)
    xc = can.canonicalize(x, g)
    for k in range(4):
        xr = act_on_image(x, k, "C4")
        gr = can(xr)
        assert torch.equal(gr.index, (g.index + k) % 4)
        assert torch.allclose(can.canonicalize(xr, gr), xc, atol=1e-14)
    assert torch.equal(g.weights.detach(), nn.functional.one_hot(g.index, 4).double())


def test_gradients_reach_canonicalizer_and_backbone():
    can = ImageCanonicalizer("C4", hidden_channels=4, num_blocks=1)
    model = Canonicalization(can, _Flat(3), Scalars(3))
    y, g = model(torch.randn(4, 1, 9, 9), return_elements=True)
    (y.square().sum() + model.prior_loss(g)).backward()
    for part in (can, model.backbone):
        assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in part.parameters())
        assert sum(p.grad.abs().sum() for p in part.parameters()) > 0
    # Without the prior the task gradient alone reaches the canonicalizer (straight-through).
    can.zero_grad()
    model(torch.randn(4, 1, 9, 9)).square().sum().backward()
    assert sum(p.grad.abs().sum() for p in can.parameters()) > 0


def test_prior_loss_drives_upright_images_to_the_identity():
    gen = torch.Generator().manual_seed(0)
    template = torch.randn(1, 1, 9, 9, generator=gen)
    x = template + 0.1 * torch.randn(16, 1, 9, 9, generator=gen)
    can = ImageCanonicalizer("D4", hidden_channels=4, num_blocks=1)
    metric0 = can.identity_metric(can(x)).item()
    losses = train_on_prior(can, x, 40)
    assert losses[-1] < 0.25 * losses[0], losses[::8]
    assert can.identity_metric(can(x)).item() == 1.0 >= metric0


def test_bad_input():
    can = ImageCanonicalizer("C4")
    with pytest.raises(ValueError, match="H = W"):
        can(torch.randn(2, 1, 8, 9))
    with pytest.raises(ValueError, match="channels"):
        can(torch.randn(2, 3, 9, 9))
    with pytest.raises(ValueError, match="NaN"):
        can(torch.full((1, 1, 9, 9), float("nan")))
    with pytest.raises(ValueError, match=r"C\(4\) or D\(4\)"):
        ImageCanonicalizer(C(8))
    with pytest.raises(ValueError, match="odd"):
        LiftingConv2d("C4", 1, 1, 4)
    g = can(torch.randn(2, 1, 9, 9))
    with pytest.raises(ValueError, match="outputs must have 4 entries on axis -1"):
        can.invert(torch.randn(2, 3), g, RegularFeatures(C(4)))
    with pytest.raises(TypeError, match="got Positions"):
        can.invert(torch.randn(2, 2), g, Positions(2))
    with pytest.raises(TypeError, match="got Positions"):
        Canonicalization(can, _Flat(3), Positions(3))
