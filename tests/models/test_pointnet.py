"""PointNet: layouts agree, permutation invariance, masking, validation."""

import pytest
import torch

from geomlin.models import PointNet


def test_padded_and_flat_layouts_agree():
    net = PointNet(4).double()
    pos = torch.randn(3, 10, 3, dtype=torch.float64)
    flat = pos.reshape(-1, 3)
    batch = torch.arange(3).repeat_interleave(10)
    torch.testing.assert_close(net(pos), net(flat, batch=batch), rtol=1e-12, atol=1e-12)


def test_permutation_invariance():
    net = PointNet(4).double()
    pos = torch.randn(2, 17, 3, dtype=torch.float64)
    perm = torch.randperm(17)
    torch.testing.assert_close(net(pos), net(pos[:, perm]), rtol=1e-12, atol=1e-12)


def test_mask_ignores_padding():
    net = PointNet(4).double()
    pos = torch.randn(1, 8, 3, dtype=torch.float64)
    padded = torch.cat([pos, 100 * torch.randn(1, 5, 3, dtype=torch.float64)], dim=1)
    mask = torch.zeros(1, 13, dtype=torch.bool)
    mask[:, :8] = True
    torch.testing.assert_close(net(pos), net(padded, mask=mask), rtol=1e-12, atol=1e-12)


def test_features_and_biases():
    net = PointNet(2, feature_dim=5).double()
    assert all(lin.bias is not None for lin in net.modules() if isinstance(lin, torch.nn.Linear))
    out = net(torch.zeros(2, 6, 3, dtype=torch.float64), features=torch.zeros(2, 6, 5, dtype=torch.float64))
    assert out.shape == (2, 2) and out.abs().sum() > 0  # biases make f(0) != 0


def test_not_rotation_invariant():
    # the point of the baseline: a rotation changes its output
    net = PointNet(3).double()
    pos = torch.randn(2, 32, 3, dtype=torch.float64)
    R = torch.linalg.qr(torch.randn(3, 3, dtype=torch.float64))[0]
    assert (net(pos) - net(pos @ R.T)).abs().max() > 1e-6


@pytest.mark.parametrize("bad, msg", [
    (lambda: torch.randn(2, 10, 4), "last dimension 3"),
    (lambda: torch.randn(10, 3), "flat"),
    (lambda: torch.ones(2, 10, 3, dtype=torch.int64), "floating-point"),
])
def test_bad_input(bad, msg):
    with pytest.raises((ValueError, TypeError), match=msg):
        PointNet(3)(bad())


# ------------------------------------------------------------------ VNPointNetClassifier
def test_vn_classifier_is_e3_and_permutation_invariant_and_masks_padding():
    from geomlin.groups import E3
    from geomlin.models import VNPointNetClassifier
    from geomlin.reps import Positions, Scalars
    from geomlin.testing import assert_equivariant, equivariance_error

    torch.manual_seed(0)
    net = VNPointNetClassifier(4, hidden_channels=4, num_blocks=1).double()
    assert_equivariant(net)  # declared: E(3), reflections and translations included
    pos = torch.randn(2, 16, 3, dtype=torch.float64) * torch.tensor([1.5, 1.0, 0.5], dtype=torch.float64)
    perm = torch.randperm(16)
    torch.testing.assert_close(net(pos), net(pos[:, perm]), rtol=1e-12, atol=1e-12)
    padded = torch.cat([pos, 50 * torch.randn(2, 4, 3, dtype=torch.float64)], dim=1)
    mask = torch.arange(20)[None] < 16
    torch.testing.assert_close(net(pos), net(padded, mask=mask.expand(2, 20)), rtol=1e-10, atol=1e-10)
    # the checker can fail: a PointNet on the same inputs is not invariant
    assert equivariance_error(PointNet(4).double(), E3(), Positions(3), Scalars(), inputs=(pos,)) > 1e-3


def test_vn_classifier_invariants_are_the_gram_matrix():
    """Oracle: the invariants are the inner products of the point's vectors, written out for the
    first point: <x, x> / mean |x|^2 and <x, C x> / mean |x|^2."""
    from geomlin.models import VNPointNetClassifier

    net = VNPointNetClassifier(3, num_blocks=0).double()
    pos = torch.randn(1, 10, 3, dtype=torch.float64)
    inv = net.invariants(pos)
    x = pos[0] - pos[0].mean(0)
    r2 = (x * x).sum(-1).mean()
    C = x.T @ x / 10
    C = C / torch.trace(C)
    assert inv.shape == (1, 10, 28)
    assert torch.allclose(inv[0, 0, 0], x[0] @ x[0] / r2)
    assert torch.allclose(inv[0, 0, 1], x[0] @ (C @ x[0]) / r2)


@pytest.mark.parametrize("make,exc,msg", [
    (lambda m: m(torch.randn(2, 10, 2)), ValueError, "last dimension 3"),
    (lambda m: m(torch.randn(2, 10, 3), mask=torch.ones(2, 10)), TypeError, "torch.bool"),
    (lambda m: m(torch.full((2, 10, 3), float("nan"))), ValueError, "NaN"),
])
def test_vn_classifier_bad_input(make, exc, msg):
    from geomlin.models import VNPointNetClassifier

    with pytest.raises(exc, match=msg):
        make(VNPointNetClassifier(3))
    with pytest.raises(ValueError, match="hidden_channels"):
        VNPointNetClassifier(3, hidden_channels=0)
