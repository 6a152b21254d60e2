"""Vector neuron layers: exact O(3) equivariance (reflections included) on padded and flat batches."""

import pytest
import torch

from geomlin.frames import VNLeakyReLU, VNLinear, VNPointNet
from geomlin.frames.vector_neurons import moment_features
from geomlin.groups import O
from geomlin.reps import Vectors
from geomlin.testing import assert_equivariant


def test_layers_are_o3_equivariant():
    v = torch.randn(4, 5, 6, 3, dtype=torch.float64)  # (B, N, C, 3)
    layer = torch.nn.Sequential(VNLinear(6, 7), VNLeakyReLU(7)).double()
    assert_equivariant(layer, O(3), Vectors(3), Vectors(3), inputs=(v,))


def test_leaky_relu_clips_against_the_learned_direction():
    """Oracle: Deng et al. Eq. 5 evaluated by hand for one channel with direction k = q (no clip)
    and k = -q (full clip to zero)."""
    q = torch.randn(1, 1, 3, dtype=torch.float64)
    relu = VNLeakyReLU(1, negative_slope=0.0).double()
    with torch.no_grad():
        relu.direction.weight.fill_(1.0)
        assert torch.allclose(relu(q), q)
        relu.direction.weight.fill_(-1.0)
        assert relu(q).abs().max() < 1e-12


@pytest.mark.parametrize("layout", ["padded", "flat"])
def test_pointnet_is_o3_equivariant_and_spans_space(layout):
    pos = torch.randn(3, 8, 3, dtype=torch.float64)
    net = VNPointNet(3).double()
    if layout == "padded":
        mask = torch.arange(8)[None] < torch.tensor([8, 6, 5])[:, None]
        inputs, kwargs = (pos,), {"mask": mask}
    else:
        mask = torch.ones(3, 8, dtype=torch.bool)
        inputs, kwargs = (pos.reshape(-1, 3),), {"batch": torch.arange(3).repeat_interleave(8)}
    assert_equivariant(net, O(3), Vectors(3), Vectors(3), inputs=inputs, kwargs=kwargs)
    out = net(*inputs, **kwargs)
    # Centred clouds: the pooled vectors must still be linearly independent (a rank-3 frame).
    centred = pos - pos.mean(1, keepdim=True)
    out_c = net(centred) if layout == "padded" else out
    assert torch.linalg.svdvals(out_c).min() > 1e-6
    assert moment_features(pos).shape == (3, 8, 3, 3)


@pytest.mark.parametrize("layout", ["padded", "flat"])
def test_attention_pooling_and_frame_channels_are_o3_equivariant(layout):
    pos = torch.randn(3, 8, 3, dtype=torch.float64)
    frame = torch.randn(3, 2, 3, dtype=torch.float64)
    net = VNPointNet(3, 8, 1, pooling="attention", frame_channels=2).double()
    if layout == "padded":
        inputs, kwargs = (pos,), {"mask": torch.arange(8)[None] < torch.tensor([8, 6, 5])[:, None]}
    else:
        inputs, kwargs = (pos.reshape(-1, 3),), {"batch": torch.arange(3).repeat_interleave(8)}

    def fn(x, f):
        return net(x, frame=f, **kwargs)

    assert_equivariant(fn, O(3), (Vectors(3), Vectors(3)), Vectors(3), inputs=(*inputs, frame))


def test_attention_pooling_picks_points():
    """Oracle: a softmax over invariant scores is a convex combination of the points' features: with a
    very sharp score it returns the features of the highest-scoring point."""
    from geomlin.batching import batch_layout, pool_softmax

    v = torch.randn(2, 5, 1, 3, dtype=torch.float64)
    scores = torch.tensor([[0.0, 50.0, 1.0, 2.0, 3.0], [9.0, 0.0, 60.0, 1.0, 0.0]], dtype=torch.float64)[..., None]
    out = pool_softmax(scores, v)
    assert torch.allclose(out[:, 0], torch.stack([v[0, 1], v[1, 2]]), atol=1e-12)
    flat = pool_softmax(scores.reshape(10, 1), v.reshape(10, 1, 3), batch_layout(batch=torch.arange(2).repeat_interleave(5)))
    assert torch.allclose(flat, out, atol=1e-12)
