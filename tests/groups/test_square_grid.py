"""C4 / D4 on the square pixel grid: element indices, matrices and tables against the group law."""

import math

import pytest
import torch

from geomlin.groups import C, D
from geomlin.groups.square_grid import (
    as_grid_group,
    element,
    element_index,
    element_matrices,
    grid_order,
    inverse_table,
    multiplication_table,
    regular_index,
)
from geomlin.reps.images import act_on_image

GROUPS = [("C4", C(4)), ("D4", D(4))]


@pytest.mark.parametrize("name,group", GROUPS)
def test_image_action_is_a_homomorphism_matching_the_matrices(name, group):
    """Oracle: the 2x2 matrices of geomlin.groups.C(4)/D(4) and their products."""
    mats = element_matrices(group)
    mul, inv = multiplication_table(name), inverse_table(name)
    x = torch.randn(1, 1, 5, 5, dtype=torch.float64)
    order = grid_order(name)
    for a in range(order):
        assert torch.allclose(mats[mul[a, inv[a]]], torch.eye(2, dtype=torch.float64))
        for b in range(order):
            assert torch.allclose(mats[a] @ mats[b], mats[mul[a, b]])
            assert torch.equal(act_on_image(act_on_image(x, b, group), a, group), act_on_image(x, int(mul[a, b]), group))
    # Every sampled group element is one of ours, and all of ours are distinct.
    for g in group.sample(20):
        i = int(element_index(g, group))
        assert torch.allclose(mats[i], g, atol=1e-12)
    assert len({tuple(m.flatten().tolist()) for m in mats}) == order
    # A quarter turn really is a 90-degree pixel rotation (not the identity or a flip).
    assert torch.equal(act_on_image(x, 1, group), torch.rot90(x, 1, (-2, -1)))


@pytest.mark.parametrize("name", ["C4", "D4"])
def test_tables_built_from_the_group_law_match_the_matrices(name):
    """Oracle: cos / sin of k pi / 2 and the matrix products. The element matrices and the
    regular-representation permutation (built by integer arithmetic, on any device) agree with
    them; the tables handed out are copies."""
    want = []
    for i in range(grid_order(name)):
        k, m = element(name, i)
        c, s = round(math.cos(k * math.pi / 2)), round(math.sin(k * math.pi / 2))
        want.append(torch.tensor([[c, -s], [s, c]], dtype=torch.float64) @ torch.diag(
            torch.tensor([1.0, -1.0 if m else 1.0], dtype=torch.float64)))
    assert torch.equal(element_matrices(name), torch.stack(want))
    mul, inv = multiplication_table(name), inverse_table(name)
    assert torch.equal(regular_index(name), mul[inv])
    mul[0, 0] = 5  # a caller's edit does not reach the cached table
    assert multiplication_table(name)[0, 0] == 0


def test_only_c4_and_d4_are_grid_groups():
    assert as_grid_group("D(4)") == D(4) and as_grid_group(C(4)) == C(4)
    with pytest.raises(ValueError, match=r"must be C\(4\) or D\(4\).*got C\(8\)"):
        as_grid_group(C(8))
    with pytest.raises(ValueError, match=r"got SO\(2\)"):
        as_grid_group("SO(2)")
    with pytest.raises(ValueError, match="not an element of C"):
        element_index(torch.tensor([[0.6, -0.8], [0.8, 0.6]], dtype=torch.float64), "C4")
