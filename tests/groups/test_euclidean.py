"""Euclidean helpers: rigid transforms on positions, vectors and scalars."""

import pytest
import torch

from geomlin.groups import (
    E3,
    SE3,
    Euclidean,
    RigidTransform,
    random_rigid,
    transform_positions,
    transform_scalars,
    transform_vectors,
)
from tests.groups.generated import assert_generators_generate


def test_e3_has_reflections_and_se3_does_not():
    g = E3().sample(100)
    h = SE3().sample(100)
    assert (torch.linalg.det(g.R) < 0).any()
    assert torch.allclose(torch.linalg.det(h.R), torch.ones(100, dtype=torch.float64))


def test_actions_and_inverse():
    g = random_rigid(1)[0]
    pos = torch.randn(7, 3, dtype=torch.float64)
    moved = transform_positions(g, pos)
    assert torch.allclose(moved, pos @ g.R.T + g.t)
    assert torch.allclose(transform_positions(g.inverse(), moved), pos)
    # differences of positions transform as vectors
    assert torch.allclose(moved[1] - moved[0], transform_vectors(g, pos[1] - pos[0]))
    assert transform_scalars(g, pos) is pos


def test_batched_transforms():
    g = random_rigid(4)
    pos = torch.randn(4, 5, 3, dtype=torch.float64)
    out = transform_positions(g, pos)
    for i in range(4):
        assert torch.allclose(out[i], pos[i] @ g.R[i].T + g.t[i])


def test_bad_rigid_transform():
    with pytest.raises(ValueError):
        RigidTransform(torch.eye(3), torch.zeros(2))


@pytest.mark.parametrize("group", [E3(), SE3(), Euclidean(2), Euclidean(2, reflections=False)], ids=str)
def test_generators_on_homogeneous_coordinates_generate_the_sampled_motions(group):
    """``x -> R x + t`` is ``[[R, t], [0, 1]]`` on ``(x, 1)``; the generators reach every sample."""
    g = group.sample(24, generator=torch.Generator().manual_seed(3))
    d = group.d
    mats = torch.zeros(24, d + 1, d + 1, dtype=torch.float64)
    mats[:, :d, :d], mats[:, :d, d], mats[:, d, d] = g.R, g.t, 1.0
    assert group.lie_algebra.shape == (d * (d + 1) // 2, d + 1, d + 1)
    assert_generators_generate(group.lie_algebra, group.discrete_generators, mats)
