"""FrameAveraging: exact invariance / equivariance (geomlin.testing) with biased, non-odd backbones."""

import pytest
import torch

from geomlin.frames import DegenerateFrameError, FrameAveraging
from geomlin.groups import E3, SE3, SO, Euclidean, O
from geomlin.reps import Frames, Positions, Scalars, Vectors
from geomlin.testing import assert_equivariant, equivariance_error

GROUPS = [("E3", E3()), ("SE3", SE3()), ("O3", O(3)), ("SO3", SO(3))]
OUT_DIM = {Scalars(): 4, Vectors(3): 3, Positions(3): 3}


@pytest.mark.parametrize("output", [Scalars(), Vectors(3), Positions(3)], ids=repr)
@pytest.mark.parametrize("name,group", GROUPS)
@pytest.mark.parametrize("layout", ["padded", "flat"])
def test_frame_averaging_is_exact(name, group, output, layout, point_mlp, clouds):
    pos, mask, flat, batch = clouds()
    backbone = point_mlp(out_dim=OUT_DIM[output])
    fa = FrameAveraging(backbone, name, output)
    if layout == "padded":
        inputs, kwargs = (pos,), {"mask": mask}
    else:
        inputs, kwargs = (flat,), {"batch": batch}
    assert_equivariant(fa, group, Positions(3), output, inputs=inputs, kwargs=kwargs)
    # The checker can fail: the bare backbone is far from equivariant.
    assert equivariance_error(backbone, group, Positions(3), output, inputs=inputs, kwargs=kwargs) > 1e-3


def test_rotation_frames_do_not_give_reflection_invariance(point_mlp, clouds):
    """SO(3) frames are exact under rotations only; under reflections the check must fail."""
    pos, mask, _, _ = clouds()
    fa = FrameAveraging(point_mlp(out_dim=2), "SO3", Scalars())
    assert equivariance_error(fa, O(3), Positions(3), Scalars(), inputs=(pos,), kwargs={"mask": mask}) > 1e-6
    fa_o3 = FrameAveraging(fa.backbone, "O3", Scalars())
    assert_equivariant(fa_o3, O(3), Positions(3), Scalars(), inputs=(pos,), kwargs={"mask": mask})


@pytest.mark.parametrize("layout", ["padded", "flat"])
def test_per_point_outputs_and_vector_inputs(layout, point_mlp, clouds):
    """Per-point position outputs (a denoiser), per-point vector and invariant extra inputs."""
    pos, mask, flat, batch = clouds()
    gen = torch.Generator().manual_seed(3)
    if layout == "padded":
        vel = torch.randn(*pos.shape, generator=gen, dtype=torch.float64)
        charge = torch.randn(*pos.shape[:2], 2, generator=gen, dtype=torch.float64)
        inputs, kwargs = (pos, vel, charge), {"mask": mask}
    else:
        vel = torch.randn(*flat.shape, generator=gen, dtype=torch.float64)
        charge = torch.randn(flat.shape[0], 2, generator=gen, dtype=torch.float64)
        inputs, kwargs = (flat, vel, charge), {"batch": batch}
    backbone = point_mlp(extra_dim=5, out_dim=3, level="point")
    fa = FrameAveraging(backbone, "E3", (Positions(3), Vectors(3)), inputs=(Vectors(3), Scalars()))
    fa_tuple = FrameAveraging(_TwoHeads(backbone), "E3", (Positions(3), Vectors(3)), inputs=(Vectors(3), Scalars()))
    assert_equivariant(fa_tuple, E3(), (Positions(3), Vectors(3), Scalars()), (Positions(3), Vectors(3)),
                       inputs=inputs, kwargs=kwargs)
    # two output kinds for a backbone with one output: refused, not silently truncated
    with pytest.raises(ValueError, match="backbone returned 1 outputs but the output types are"):
        fa(*inputs, **kwargs)
    if layout == "padded":
        # Masked points are not compared meaningfully; real points are.
        y = fa_tuple(*inputs, **kwargs)[0]
        assert y.shape == pos.shape


class _TwoHeads(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, *args, **kwargs):
        y = self.inner(*args, **kwargs)
        return y, torch.tanh(y) + 0.5


def test_flat_batches_with_edge_index(point_mlp, clouds):
    _, _, flat, batch = clouds()
    # A chain graph inside each cloud (edges never cross clouds).
    src = torch.arange(flat.shape[0] - 1)
    keep = batch[src] == batch[src + 1]
    edge_index = torch.stack([src[keep], src[keep] + 1])
    fa = FrameAveraging(point_mlp(out_dim=3, level="point"), "SE3", Vectors(3))
    assert_equivariant(fa, SE3(), Positions(3), Vectors(3), inputs=(flat,),
                       kwargs={"batch": batch, "edge_index": edge_index})


def test_flat_and_padded_layouts_agree(point_mlp, clouds):
    pos, mask, flat, batch = clouds()
    fa = FrameAveraging(point_mlp(out_dim=3), "E3", Positions(3))
    assert torch.allclose(fa(pos, mask=mask), fa(flat, batch=batch), atol=1e-12)


@pytest.mark.parametrize("name,group", [("E(2)", Euclidean(2)), ("O(4)", O(4)), ("SE(2)", Euclidean(2, False))])
def test_other_dimensions(name, group, point_mlp, clouds):
    d = group.d
    pos, mask, _, _ = clouds(d=d)
    fa = FrameAveraging(point_mlp(in_dim=d, out_dim=d), name, Vectors(d))
    assert_equivariant(fa, group, Positions(d), Vectors(d), inputs=(pos,), kwargs={"mask": mask})


def test_stochastic_mode_picks_one_frame_in_training(point_mlp, clouds):
    pos, mask, _, _ = clouds()
    backbone = point_mlp(out_dim=3)
    fa = FrameAveraging(backbone, "E3", Vectors(3), stochastic=True)
    full = fa.eval()(pos, mask=mask)
    per_frame = FrameAveraging(backbone, "E3", Vectors(3))
    Q, c = per_frame.frames(pos, mask)
    z = torch.einsum("bnd,bfde->bfne", pos - c[:, None], Q) * mask[:, None, :, None]
    outs = torch.einsum("bfde,bfe->bfd", Q, backbone(z.flatten(0, 1), mask=mask.repeat_interleave(8, 0))
                        .reshape(3, 8, 3))
    assert torch.allclose(full, outs.mean(1), atol=1e-12)
    fa.train()
    y = fa(pos, mask=mask, generator=torch.Generator().manual_seed(0))
    # Each item's output is exactly one frame's output (equivariant in expectation).
    dist = (outs - y[:, None]).norm(dim=-1).min(1).values
    assert dist.max() < 1e-12
    assert fa.frames(pos, mask)[0].shape[1] == 1


def test_gradients_reach_backbone_and_positions(point_mlp, clouds):
    pos, mask, _, _ = clouds()
    pos = pos.clone().requires_grad_(True)
    fa = FrameAveraging(point_mlp(out_dim=1), "E3", Scalars())
    energy = fa(pos, mask=mask).sum()
    energy.backward()
    assert torch.isfinite(pos.grad).all() and pos.grad[mask].abs().sum() > 0
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in fa.backbone.parameters())


def test_forces_from_frame_averaged_energy_are_equivariant(point_mlp, clouds):
    pos, mask, _, _ = clouds()
    fa = FrameAveraging(point_mlp(out_dim=1), "E3", Scalars())

    def forces(x):
        x = x.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(fa(x, mask=mask).sum(), x)
        return -g

    assert_equivariant(forces, E3(), Positions(3), Vectors(3), inputs=(pos,))


def test_degenerate_policy_in_frame_averaging(point_mlp):
    tetra = torch.tensor([[[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]]], dtype=torch.float64)
    backbone = point_mlp(out_dim=3)
    with pytest.raises(DegenerateFrameError):
        FrameAveraging(backbone, "E3", Vectors(3), on_degenerate="raise")(tetra)
    with pytest.warns(UserWarning):
        assert torch.isfinite(FrameAveraging(backbone, "E3", Vectors(3), on_degenerate="warn")(tetra)).all()
    single = torch.tensor([[[0.5, 0.1, -2.0]]], dtype=torch.float64, requires_grad=True)
    y = FrameAveraging(backbone, "E3", Positions(3), on_degenerate="sample")(single)
    y.sum().backward()
    assert torch.isfinite(y).all() and torch.isfinite(single.grad).all()


def test_float32_inputs_keep_their_dtype(point_mlp, clouds):
    pos, mask, _, _ = clouds()
    fa = FrameAveraging(point_mlp(out_dim=3).float(), "E3", Positions(3))
    assert fa(pos.float(), mask=mask).dtype == torch.float32


def test_bad_input(point_mlp, clouds):
    pos, mask, flat, batch = clouds()
    fa = FrameAveraging(point_mlp(out_dim=3), "E3", Vectors(3))
    with pytest.raises(ValueError, match="last dimension 3"):
        fa(pos[..., :2])
    with pytest.raises(ValueError, match="mask must have shape"):
        fa(pos, mask=mask[:2])
    nan = pos.clone()
    nan[1, 2, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        fa(nan, mask=mask)
    with pytest.raises(ValueError, match="no points"):
        fa(pos, mask=torch.zeros_like(mask))
    with pytest.raises(TypeError, match=r"not strings: for 'vector' pass geomlin.reps.Vectors\(d\)"):
        FrameAveraging(point_mlp(out_dim=3), "E3", "vector")
    with pytest.raises(TypeError, match=r"must be Scalars\(\) .*Vectors\(3\) or Positions\(3\), got Frames"):
        FrameAveraging(point_mlp(out_dim=3), "E3", Frames(3))
    with pytest.raises(TypeError, match=r"inputs of a point cloud in R\^3 must be .*Vectors\(3\), got Positions"):
        FrameAveraging(point_mlp(out_dim=3), "E3", inputs=Positions(3))
    with pytest.raises(TypeError, match=r"must be .*Vectors\(3\) or Positions\(3\), got Vectors\(2\)"):
        FrameAveraging(point_mlp(out_dim=3), "E3", Vectors(2))
    with pytest.raises(ValueError, match="outputs must have last dimension 3"):
        FrameAveraging(point_mlp(out_dim=4), "E3", Vectors(3))(pos, mask=mask)
    with pytest.raises(ValueError, match="expected 1 extra inputs"):
        FrameAveraging(point_mlp(out_dim=3), "E3", Vectors(3), inputs=(Vectors(3),))(pos)
    with pytest.raises(ValueError, match="vector inputs must have last dimension 3"):
        FrameAveraging(point_mlp(out_dim=3, extra_dim=2), "E3", Vectors(3), inputs=(Vectors(3),))(
            pos, pos[..., :2])
    with pytest.raises(ValueError, match="edge_index"):
        fa(pos, edge_index=torch.zeros(2, 1, dtype=torch.long))
    with pytest.raises(TypeError, match="callable"):
        FrameAveraging(3, "E3")
    with pytest.raises(ValueError, match="leading dimension N_total"):
        FrameAveraging(point_mlp(out_dim=3, extra_dim=1), "E3", Vectors(3), inputs=Scalars())(
            flat, torch.ones(2, 1, dtype=torch.float64), batch=batch)


def test_wraps_the_reference_pointnet_on_both_layouts(clouds):
    from geomlin.models import PointNet

    pos, mask, flat, batch = clouds()
    net = PointNet(num_classes=3, point_widths=(16, 16), head_widths=(8,)).double()
    fa = FrameAveraging(net, "E3", Scalars())
    assert_equivariant(fa, E3(), Positions(3), Scalars(), inputs=(pos,), kwargs={"mask": mask})
    assert_equivariant(fa, E3(), Positions(3), Scalars(), inputs=(flat,), kwargs={"batch": batch})
    assert torch.allclose(fa(pos, mask=mask), fa(flat, batch=batch), atol=1e-12)


@pytest.mark.parametrize("layout", ["padded", "flat"])
def test_frames_per_call_chunks_give_the_same_result(layout, point_mlp, clouds):
    pos, mask, flat, batch = clouds()
    backbone = point_mlp(out_dim=3, level="point")
    inputs, kwargs = ((pos,), {"mask": mask}) if layout == "padded" else ((flat,), {"batch": batch})
    ref = FrameAveraging(backbone, "E3", Positions(3), frames_per_call=None)(*inputs, **kwargs)
    for k in ("auto", 1, 3, 8, 100):
        chunked = FrameAveraging(backbone, "E3", Positions(3), frames_per_call=k)
        assert torch.allclose(chunked(*inputs, **kwargs), ref, atol=1e-12)
    assert_equivariant(FrameAveraging(backbone, "E3", Positions(3), frames_per_call=3), E3(), Positions(3),
                       Positions(3), inputs=inputs, kwargs=kwargs)
    with pytest.raises(ValueError, match="frames_per_call"):
        FrameAveraging(backbone, "E3", frames_per_call=0)


def test_a_plain_sequential_backbone_can_be_checked():
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(3, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))  # float32, biases
    model = FrameAveraging(mlp, "E3", output=Scalars())
    args, kwargs = model.example_inputs(dtype=torch.float64)
    assert kwargs == {} and args[0].shape == (3, 10, 3)
    assert_equivariant(model)
    # the raw backbone is not invariant: the check above is not vacuous
    with pytest.raises(AssertionError, match="not equivariant"):
        assert_equivariant(mlp, E3(), Positions(3), Scalars(), inputs=args[0])
    pos, mask = args[0], torch.ones(3, 10, dtype=torch.bool)
    with pytest.raises(TypeError, match="mask"):  # the call's keywords go to the backbone, which takes none
        model(pos, mask=mask)
