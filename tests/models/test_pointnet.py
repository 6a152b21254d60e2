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
