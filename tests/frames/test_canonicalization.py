"""Learned canonicalization of point clouds: exactness (geomlin.testing), gradients, prior."""

import pytest
import torch

from geomlin.frames import (
    Canonicalization,
    PointCloudCanonicalizer,
    gram_schmidt_orthogonal,
    gram_schmidt_rotation,
)
from geomlin.groups import E3, SE3, SO, Euclidean, O
from geomlin.reps import Frames, Images, Positions, Scalars, Vectors
from geomlin.testing import assert_equivariant, equivariance_error
from tests.frames.prior_training import train_on_prior

GROUPS = [("SO3", SO(3)), ("O3", O(3)), ("SE3", SE3()), ("E3", E3())]
OUT_DIM = {Scalars(): 4, Vectors(3): 3, Positions(3): 3}


@pytest.mark.parametrize("special", [True, False])
def test_gram_schmidt_rotation_is_equivariant(special):
    group = SO(3) if special else O(3)
    v = torch.randn(5, 3, 3, dtype=torch.float64)

    def frame(a, b, c):
        return gram_schmidt_rotation(a, b, None if special else c)

    assert_equivariant(frame, group, (Vectors(3),) * 3, Frames(3), inputs=(v[:, 0], v[:, 1], v[:, 2]))
    R = frame(v[:, 0], v[:, 1], v[:, 2])
    assert torch.allclose(R.transpose(-1, -2) @ R, torch.eye(3, dtype=torch.float64).expand(5, 3, 3), atol=1e-12)
    if special:
        assert torch.allclose(torch.linalg.det(R), torch.ones(5, dtype=torch.float64), atol=1e-12)
    # Oracle: QR (Gram-Schmidt) of [v1, v2, .] gives the same first two columns.
    Q = gram_schmidt_orthogonal(v, special=True)
    assert torch.allclose(Q[..., :2], R[..., :2], atol=1e-12)


@pytest.mark.parametrize("output", [Scalars(), Vectors(3), Positions(3)], ids=repr)
@pytest.mark.parametrize("name,group", GROUPS)
def test_canonicalized_model_is_exact(name, group, output, point_mlp, clouds):
    pos, mask, _, _ = clouds()
    backbone = point_mlp(out_dim=OUT_DIM[output])
    model = Canonicalization(PointCloudCanonicalizer(name).double(), backbone, output)
    assert_equivariant(model, group, Positions(3), output, inputs=(pos,), kwargs={"mask": mask})
    assert equivariance_error(backbone, group, Positions(3), output, inputs=(pos,), kwargs={"mask": mask}) > 1e-3


def test_rotation_canonicalizer_is_not_reflection_invariant(point_mlp, clouds):
    pos, mask, _, _ = clouds()
    model = Canonicalization(PointCloudCanonicalizer("SO3").double(), point_mlp(out_dim=2), Scalars())
    assert equivariance_error(model, O(3), Positions(3), Scalars(), inputs=(pos,), kwargs={"mask": mask}) > 1e-6


def test_flat_batches_per_point_outputs_and_vector_inputs(point_mlp, clouds):
    _, _, flat, batch = clouds()
    vel = torch.randn_like(flat)
    model = Canonicalization(PointCloudCanonicalizer("E3").double(), point_mlp(extra_dim=3, out_dim=3, level="point"),
                             Positions(3), inputs=(Vectors(3),))
    assert_equivariant(model, E3(), (Positions(3), Vectors(3)), Positions(3), inputs=(flat, vel), kwargs={"batch": batch})


def test_elements_are_orthogonal_and_o3_uses_both_orientations(clouds):
    pos, mask, _, _ = clouds(B=16)
    can = PointCloudCanonicalizer("O3").double()
    g = can(pos, mask=mask)
    eye = torch.eye(3, dtype=torch.float64)
    assert torch.allclose(g.R.transpose(-1, -2) @ g.R, eye.expand_as(g.R), atol=1e-12)
    det = torch.linalg.det(g.R)
    assert torch.allclose(det.abs(), torch.ones_like(det), atol=1e-12)
    flipped = can(-pos, mask=mask)  # the inversion -I has det -1: orientation flips
    assert torch.allclose(torch.linalg.det(flipped.R), -det, atol=1e-12)
    g_so = PointCloudCanonicalizer("SE3").double()(pos, mask=mask)
    assert torch.allclose(torch.linalg.det(g_so.R), torch.ones_like(det), atol=1e-12)


def test_other_dimensions_use_qr(point_mlp, clouds):
    pos, mask, _, _ = clouds(d=2)
    model = Canonicalization(PointCloudCanonicalizer("SE(2)").double(), point_mlp(in_dim=2, out_dim=2), Vectors(2))
    assert_equivariant(model, Euclidean(2, reflections=False), Positions(2), Vectors(2), inputs=(pos,),
                       kwargs={"mask": mask})


@pytest.mark.parametrize("name", ["SO3", "O3"])
def test_gradients_reach_canonicalizer_and_backbone(name, point_mlp, clouds):
    pos, mask, _, _ = clouds()
    model = Canonicalization(PointCloudCanonicalizer(name).double(), point_mlp(out_dim=2), Scalars())
    y, g = model(pos, mask=mask, return_elements=True)
    (y.square().sum() + model.prior_loss(g)).backward()
    for part in (model.canonicalizer, model.backbone):
        grads = [p.grad for p in part.parameters()]
        assert all(gr is not None and torch.isfinite(gr).all() for gr in grads)
        assert sum(gr.abs().sum() for gr in grads) > 0


def test_frozen_backbone_still_trains_the_canonicalizer(point_mlp, clouds):
    pos, mask, _, _ = clouds()
    model = Canonicalization(PointCloudCanonicalizer("SO3").double(), point_mlp(out_dim=2), Scalars(),
                             freeze_backbone=True)
    model(pos, mask=mask).square().sum().backward()
    assert all(p.grad is None for p in model.backbone.parameters())
    assert sum(p.grad.abs().sum() for p in model.canonicalizer.parameters()) > 0


@pytest.mark.parametrize("name", ["SO3", "O3"])
def test_prior_loss_drives_upright_data_to_the_identity(name):
    """Mondal et al.'s prior: on upright data (noisy copies of one pose) the predicted
    pose moves to the identity when training on the prior alone."""
    gen = torch.Generator().manual_seed(0)
    template = torch.randn(1, 16, 3, generator=gen, dtype=torch.float64) * torch.tensor([2.0, 1.0, 0.5],
                                                                                        dtype=torch.float64)
    pos = template + 0.05 * torch.randn(8, 16, 3, generator=gen, dtype=torch.float64)
    can = PointCloudCanonicalizer(name, hidden_channels=8).double()
    losses = train_on_prior(can, pos, 60)
    assert losses[-1] < 0.1 * losses[0], losses[::10]
    assert min(losses[-10:]) < min(losses[:10])
    if name == "SO3":
        assert can.identity_metric(can(pos)) == 1


def test_prior_and_metric_values():
    """Oracle: for a rotation by angle t, |R - I|_F^2 = 8 sin^2(t / 2) (Mondal et al.'s prior written
    through the angle), and the identity metric counts the angles below 10 degrees."""
    import math

    from geomlin.groups import RigidTransform

    can = PointCloudCanonicalizer("SO3")
    angles = torch.tensor([0.0, 5.0, 9.9, 10.1, 90.0, 180.0], dtype=torch.float64) * math.pi / 180
    axis = torch.tensor([2.0, -1.0, 2.0], dtype=torch.float64) / 3
    K = torch.tensor([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]], dtype=torch.float64)
    R = torch.linalg.matrix_exp(angles[:, None, None] * K)
    g = RigidTransform(R, torch.zeros(6, 3, dtype=torch.float64))
    assert torch.allclose(can.prior_loss(g), (8 * torch.sin(angles / 2) ** 2).mean(), atol=1e-12)
    assert can.identity_metric(g).item() == pytest.approx(3 / 6)
    eye = RigidTransform(torch.eye(3).expand(4, 3, 3), torch.zeros(4, 3))
    assert can.prior_loss(eye) == 0 and can.identity_metric(eye) == 1


def test_bad_input(clouds):
    pos, mask, _, _ = clouds()
    can = PointCloudCanonicalizer("SO3").double()
    with pytest.raises(ValueError, match="last dimension 3"):
        can(pos[..., :2])
    with pytest.raises(ValueError, match="mask must have shape"):
        can(pos, mask=mask[:, :3])
    with pytest.raises(ValueError, match="NaN"):
        can(pos.masked_fill(~mask[..., None], float("nan")), mask=mask)
    g = can(pos, mask=mask)
    with pytest.raises(TypeError, match="Scalars .*Vectors and Positions, got Images"):
        can.invert(pos, g, Images("C4", 1))
    with pytest.raises(TypeError, match=r"not strings: for 'invariant' pass geomlin.reps.Scalars\(\)"):
        Canonicalization(can, torch.nn.Linear(3, 3), "invariant")
    with pytest.raises(TypeError, match="Canonicalizer"):
        Canonicalization(torch.nn.Linear(3, 3), torch.nn.Linear(3, 3))


def test_the_contract_is_abstract():
    from geomlin.frames import Canonicalizer

    with pytest.raises(TypeError, match="abstract"):
        Canonicalizer()


# --------------------------------------------------- Procrustes, attention pooling, moment frames
@pytest.mark.parametrize("name,group", GROUPS)
def test_procrustes_canonicalizer_is_exact(name, group, point_mlp, clouds):
    pos, mask, _, _ = clouds()
    can = PointCloudCanonicalizer(name, orthogonalization="procrustes", pooling="attention", moment_frame=True)
    model = Canonicalization(can.double(), point_mlp(out_dim=3), Vectors(3))
    assert_equivariant(model, group, Positions(3), Vectors(3), inputs=(pos,), kwargs={"mask": mask})
    g = can(pos, mask=mask)
    det = torch.linalg.det(g.R)
    assert (g.R.transpose(-1, -2) @ g.R - torch.eye(3, dtype=torch.float64)).abs().max() < 1e-12
    if name in ("SO3", "SE3"):
        assert (det - 1).abs().max() < 1e-12
    else:  # the polar factor follows the orientation of the predicted vectors: both signs occur
        flipped = can(-pos, mask=mask)
        assert torch.allclose(torch.linalg.det(flipped.R), -det, atol=1e-12)


def test_procrustes_treats_the_vectors_symmetrically(clouds):
    """Oracle: the polar factor of M P for a permutation P is polar(M) P, so permuting the predicted
    vectors permutes the columns of R; Gram-Schmidt privileges the first vector and does not."""
    from geomlin.groups import special_procrustes

    pos, mask, _, _ = clouds()
    can = PointCloudCanonicalizer("O3", orthogonalization="procrustes").double()
    x = pos - pos.mean(1, keepdim=True)
    v = can.net(x, mask=mask)  # (B, 3, 3) predicted vectors as rows
    P = torch.eye(3, dtype=torch.float64)[[2, 0, 1]]
    R = special_procrustes(v.transpose(-1, -2), special=False)
    assert torch.allclose(special_procrustes(v.transpose(-1, -2) @ P, special=False), R @ P, atol=1e-12)
    gs = gram_schmidt_orthogonal(v, special=False)
    assert not torch.allclose(gram_schmidt_orthogonal(P.T @ v, special=False), gs @ P, atol=1e-3)


@pytest.mark.parametrize("name", ["SO3", "O3"])
def test_prior_reaches_the_identity_with_procrustes_and_the_moment_frame(name):
    """The canonicalization prior alone (Mondal et al.) moves the predicted pose of noisy copies of one
    upright shape to the identity, with the Procrustes map and the moment frame as extra input."""
    gen = torch.Generator().manual_seed(0)
    template = torch.randn(1, 16, 3, generator=gen, dtype=torch.float64) * torch.tensor([2.0, 1.0, 0.5],
                                                                                        dtype=torch.float64)
    pos = template + 0.05 * torch.randn(8, 16, 3, generator=gen, dtype=torch.float64)
    torch.manual_seed(0)
    can = PointCloudCanonicalizer(name, 8, orthogonalization="procrustes", moment_frame=True).double()
    losses = train_on_prior(can, pos, 60)
    assert losses[-1] < 0.1 * losses[0], losses[::10]
    assert can.identity_metric(can(pos)) == 1
