"""C4/D4 image canonicalization: group tables, exact group convolutions, exact canonicalized
models (geomlin.testing with an image-rotation action), gradients and the prior."""

import pytest
import torch
from torch import nn

from geomlin.frames import Canonicalization, ImageCanonicalizer, act_on_image, image_action, regular_action
from geomlin.frames.images import (
    GroupConv2d,
    LiftingConv2d,
    as_image_group,
    element_matrices,
    inverse_table,
    matrix_to_index,
    multiplication_table,
    regular_index,
)
from geomlin.groups import C, D
from geomlin.testing import assert_equivariant, equivariance_error
from tests.frames.prior_training import train_on_prior

GROUPS = [("C4", C(4)), ("D4", D(4))]


def _images(B=3, channels=1, size=9):
    return torch.randn(B, channels, size, size, dtype=torch.float64)


@pytest.mark.parametrize("name,group", GROUPS)
def test_image_action_is_a_homomorphism_matching_the_matrices(name, group):
    """Oracle: the 2x2 matrices of geomlin.groups.C(4)/D(4) and their products."""
    ig = as_image_group(name)
    mats = element_matrices(ig)
    mul, inv = multiplication_table(name), inverse_table(name)
    x = _images(1, 1, 5)
    for a in range(ig.order):
        assert torch.allclose(mats[mul[a, inv[a]]], torch.eye(2, dtype=torch.float64))
        for b in range(ig.order):
            assert torch.allclose(mats[a] @ mats[b], mats[mul[a, b]])
            assert torch.equal(act_on_image(act_on_image(x, b, ig), a, ig), act_on_image(x, int(mul[a, b]), ig))
    # Every sampled group element is one of ours, and all of ours are distinct.
    for g in group.sample(20):
        matrix_to_index(g, ig)
    assert len({tuple(m.flatten().tolist()) for m in mats}) == ig.order
    # A quarter turn really is a 90-degree pixel rotation (not the identity or a flip).
    assert torch.equal(act_on_image(x, 1, ig), torch.rot90(x, 1, (-2, -1)))


@pytest.mark.parametrize("name", ["C4", "D4"])
def test_tables_built_from_the_group_law_match_the_matrices(name):
    """Oracle: cos / sin of k pi / 2 and the matrix products. The element matrices and the
    regular-representation permutation (built by integer arithmetic, on any device) agree with
    them; the tables handed out are copies."""
    import math

    ig = as_image_group(name)
    want = []
    for i in range(ig.order):
        k, m = ig.element(i)
        c, s = round(math.cos(k * math.pi / 2)), round(math.sin(k * math.pi / 2))
        want.append(torch.tensor([[c, -s], [s, c]], dtype=torch.float64) @ torch.diag(
            torch.tensor([1.0, -1.0 if m else 1.0], dtype=torch.float64)))
    assert torch.equal(element_matrices(ig), torch.stack(want))
    mul, inv = multiplication_table(name), inverse_table(name)
    assert torch.equal(regular_index(ig), mul[inv])
    mul[0, 0] = 5  # a caller's edit does not reach the cached table
    assert multiplication_table(name)[0, 0] == 0


@pytest.mark.parametrize("name,group", GROUPS)
def test_group_convolutions_are_exactly_equivariant(name, group):
    lift = LiftingConv2d(name, 2, 3, 3).double()
    conv = GroupConv2d(name, 3, 2, 3).double()
    nn.init.normal_(lift.bias)
    nn.init.normal_(conv.bias)
    G = as_image_group(name).order

    def regular_image(g, y):  # (B, C, |G|, H, W): permute the group axis and rotate the plane
        return act_on_image(_permute(y, g, name), matrix_to_index(g, as_image_group(name)), name)

    x = _images(2, 2, 7)
    assert_equivariant(lift, group, image_action(name), regular_image, inputs=(x,))
    h = torch.randn(2, 3, G, 7, 7, dtype=torch.float64)
    assert_equivariant(conv, group, regular_image, regular_image, inputs=(h,))


def _permute(y, g, name):
    """(g . y)[:, :, a] = y[:, :, g^{-1} a] on the group axis 2."""
    ig = as_image_group(name)
    i = matrix_to_index(g, ig)
    mul, inv = multiplication_table(name), inverse_table(name)
    return y[:, :, mul[inv[i]]]


class _Flat(nn.Module):
    """A plain (non-equivariant) MLP on the flattened image, with biases."""

    def __init__(self, out, size=9, channels=1):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(channels * size * size, 16), nn.SiLU(), nn.Linear(16, out))

    def forward(self, x):
        return self.net(x.flatten(1))


@pytest.mark.parametrize("name,group", GROUPS)
def test_canonicalized_image_models_are_exact(name, group):
    G = as_image_group(name).order
    can = ImageCanonicalizer(name, in_channels=2, hidden_channels=4, num_blocks=1, kernel_size=3).double()
    x = _images(3, 2, 9)
    act = image_action(name)
    cases = [
        ("invariant", _Flat(5, channels=2), "invariant"),
        ("vector", _Flat(2, channels=2), "vector"),
        ("regular", nn.Sequential(_Flat(2 * G, channels=2), nn.Unflatten(1, (G, 2))), regular_action(name)),
        ("image", nn.Conv2d(2, 3, 3, padding=1).double(), act),
    ]
    for kind, backbone, out_action in cases:
        backbone = backbone.double()
        model = Canonicalization(can, backbone, kind)
        assert_equivariant(model, group, act, out_action, inputs=(x,))
        assert equivariance_error(backbone, group, act, out_action, inputs=(x,)) > 1e-3, kind


def test_logits_are_permuted_exactly():
    can = ImageCanonicalizer("D4", hidden_channels=4, num_blocks=2).double()
    assert_equivariant(can.logits, D(4), image_action("D4"), regular_action("D4"), inputs=(_images(),))


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
    model = Canonicalization(can, _Flat(3), "invariant")
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
    with pytest.raises(ValueError, match="C4 and D4 only"):
        ImageCanonicalizer(C(8))
    with pytest.raises(ValueError, match="odd"):
        LiftingConv2d("C4", 1, 1, 4)
    g = can(torch.randn(2, 1, 9, 9))
    with pytest.raises(ValueError, match="regular outputs"):
        can.invert(torch.randn(2, 3), g, "regular")
    with pytest.raises(ValueError, match="position"):
        can.invert(torch.randn(2, 2), g, "position")
