"""Averaging over the two orientations of embedded points makes coordinate-level GATr models exact
under reflections (geomlin.gatr.orientations)."""

import pytest
import torch

from geomlin.algebra import pga
from geomlin.gatr.orientations import both_orientations, mean_over_orientations, repeat_for_orientations
from geomlin.groups import E3
from geomlin.testing import assert_equivariant, equivariance_error
from geomlin.train.tasks.nbody import GATrDynamics
from geomlin.train.tasks.pointcloud import GATrClassifier

F64 = torch.float64


def _reflection(seed):
    g = torch.Generator().manual_seed(seed)
    n = torch.randn(3, generator=g, dtype=F64)
    n = n / n.norm()
    R = torch.eye(3, dtype=F64) - 2 * torch.outer(n, n)
    return R, torch.randn(3, generator=g, dtype=F64)


def test_re_embedding_after_a_reflection_is_the_involution_of_the_versor_action():
    # written out: a plane reflection's versor sends embed(x) to -embed(Rx + t); the involution
    # (sign (-1)^grade) undoes the sign on points and leaves translations (even) alone
    R, t = _reflection(0)
    u = pga.embed_rigid_motion(R, t)
    x, v = torch.randn(7, 3, dtype=F64), torch.randn(7, 3, dtype=F64)
    moved = pga.sandwich(u, pga.embed_point(x))
    assert torch.allclose(moved, -pga.embed_point(x @ R.T + t), atol=1e-12)
    assert torch.allclose(pga.grade_involution(moved), pga.embed_point(x @ R.T + t), atol=1e-12)
    trans = pga.sandwich(u, pga.embed_translation(v))
    assert torch.allclose(trans, pga.embed_translation(v @ R.T), atol=1e-12)


def test_the_involution_commutes_with_the_pin_action():
    mv = torch.randn(5, 16, dtype=F64)
    for seed in range(4):
        R, t = _reflection(seed)
        R = R if seed % 2 else -R  # odd (reflection) and even (rotation) versors
        u = pga.embed_rigid_motion(R, t)
        lhs = pga.grade_involution(pga.sandwich(u, mv))
        rhs = pga.sandwich(u, pga.grade_involution(mv))
        assert torch.allclose(lhs, rhs, atol=1e-12)


@pytest.mark.parametrize("make", [
    lambda avg: GATrDynamics(hidden_mv_channels=4, hidden_s_channels=4, num_blocks=3, num_heads=2,
                             average_orientations=avg),
    lambda avg: GATrClassifier(4, hidden_mv_channels=4, hidden_s_channels=4, num_blocks=3, num_heads=2,
                               average_orientations=avg),
])
def test_averaging_makes_reflections_exact(make):
    torch.manual_seed(3)
    averaged = make(True).double().eval()
    single = make(False).double().eval()
    single.load_state_dict(averaged.state_dict())
    # reflections included (E(3) samples half of its elements with det -1)
    report = assert_equivariant(averaged, group=E3(), num_samples=8, generator=torch.Generator().manual_seed(0))
    # without averaging the gap is real (the join's e123 factor sees the orientation), far above rounding
    gap = equivariance_error(single, group=E3(), num_samples=8, generator=torch.Generator().manual_seed(0))
    assert gap > 100 * max(report.max_error, 1e-16), (gap, report.max_error)


def test_helpers_check_their_inputs():
    with pytest.raises(ValueError, match="16"):
        both_orientations(torch.randn(2, 3, 15))
    with pytest.raises(ValueError, match="even leading dimension"):
        mean_over_orientations(torch.randn(3, 4))
    with pytest.raises(TypeError, match="average_orientations must be a bool"):
        GATrDynamics(hidden_mv_channels=2, hidden_s_channels=2, num_blocks=1, num_heads=1, average_orientations="no")
    with pytest.raises(TypeError, match="average_orientations must be a bool"):
        GATrClassifier(3, average_orientations=1)
    assert repeat_for_orientations(None) is None
    assert repeat_for_orientations(torch.ones(2, 3)).shape == (4, 3)
