"""Averaging over the two orientations of embedded points makes coordinate-level GATr models exact
under reflections (geomlin.gatr.orientations), in the padded and in the flat (PyG) layout."""

import pytest
import torch

from geomlin.algebra import pga
from geomlin.batching import batch_layout
from geomlin.gatr import GATr
from geomlin.gatr.orientations import (
    both_orientations,
    mean_over_orientations,
    orientation_layout,
    repeat_for_orientations,
)
from geomlin.groups import E3
from geomlin.models import GATrClassifier, GATrDynamics
from geomlin.testing import assert_equivariant, equivariance_error
from tests.randomized import randomized

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


def test_orientation_layout_makes_the_copies_other_sets():
    batch = torch.tensor([0, 0, 1, 1, 1, 3])
    want = torch.tensor([0, 0, 1, 1, 1, 3, 4, 4, 5, 5, 5, 7])
    for layout in (batch_layout(batch=batch, num_graphs=4), batch_layout(batch=batch, num_graphs=4, max_items=3)):
        both = orientation_layout(layout)
        torch.testing.assert_close(both.batch, want)
        assert both.num_graphs == 8 and both.method == layout.method
    both = orientation_layout(batch_layout(batch=batch))  # counted: sets 0 .. 3
    torch.testing.assert_close(both.batch, want)
    assert both.sizes == (2, 3, 0, 1, 2, 3, 0, 1)
    padded = orientation_layout(batch_layout(torch.tensor([[True, False]])))
    torch.testing.assert_close(padded.mask, torch.tensor([[True, False], [True, False]]))
    with pytest.raises(TypeError, match="BatchLayout"):
        orientation_layout(batch)


def test_flat_orientation_average_equals_the_padded_one_per_set():
    """Oracle: each set averaged over its orientations on its own, in the padded layout."""
    torch.manual_seed(5)
    model = randomized(GATr(1, 1, 4, out_s_channels=2, hidden_s_channels=4, num_blocks=2, num_heads=2), 0.4,
                       torch.float64)
    sizes = [3, 5, 2]
    pos = torch.randn(sum(sizes), 3, dtype=F64)
    batch = torch.repeat_interleave(torch.arange(3), torch.tensor(sizes))
    mv = pga.embed_point(pos)[:, None, :]
    both = orientation_layout(batch_layout(batch=batch))
    out_mv, out_s = model(both_orientations(mv), batch=both)
    points = mean_over_orientations(pga.extract_point(out_mv[:, 0]))
    scalars = mean_over_orientations(out_s)
    start = 0
    for size in sizes:
        one = mv[start:start + size][None]  # (1, size, 1, 16)
        want_mv, want_s = model(both_orientations(one))
        torch.testing.assert_close(points[start:start + size],
                                   mean_over_orientations(pga.extract_point(want_mv[..., 0, :]))[0], rtol=1e-10,
                                   atol=1e-12)
        torch.testing.assert_close(scalars[start:start + size], mean_over_orientations(want_s)[0], rtol=1e-10,
                                   atol=1e-12)
        start += size


def test_the_flat_classifier_is_the_padded_one_on_equal_clouds():
    torch.manual_seed(6)
    model = randomized(GATrClassifier(3, hidden_mv_channels=4, hidden_s_channels=4, num_blocks=2, num_heads=2),
                       0.4, torch.float64)
    pos = torch.randn(4, 7, 3, dtype=F64)
    batch = torch.arange(4).repeat_interleave(7)
    for flat in (batch, batch_layout(batch=batch, num_graphs=4, max_items=7), batch_layout(batch=batch, num_graphs=4)):
        torch.testing.assert_close(model(pos.reshape(-1, 3), batch=flat), model(pos), rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="max_items=7"):  # a flat cloud above the planned bound is refused
        model(torch.randn(8, 3, dtype=F64), batch=batch_layout(batch=torch.zeros(8, dtype=torch.long), num_graphs=1,
                                                               max_items=7))
