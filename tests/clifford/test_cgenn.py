"""CGENN layers: equivariance under Clifford-group versors for Euclidean, Lorentz and PGA metrics."""

import pytest
import torch

from geomlin.algebra import CliffordAlgebra
from geomlin.clifford.cgenn import (
    CGENNBlock,
    GeometricProductLayer,
    MVLayerNorm,
    MVLinear,
    MVSiLU,
    weighted_geometric_product,
)
from geomlin.groups import CliffordGroup, O
from geomlin.reps import Multivectors, Vectors
from geomlin.testing import assert_equivariant
from tests.randomized import randomized

DT = torch.float64
METRICS = [(1, 1, 1), (1, -1, -1, -1), (0, 1, 1, 1)]




@pytest.mark.parametrize("metric", METRICS)
def test_layers_are_clifford_group_equivariant(metric):
    alg = CliffordAlgebra(metric)
    group = CliffordGroup(alg)
    x = torch.randn(3, 4, alg.dim, dtype=DT)
    for layer in (MVLinear(alg, 4, 3), GeometricProductLayer(alg, 4, 2), MVSiLU(alg, 4), MVLayerNorm(alg, 4),
                  CGENNBlock(alg, 4)):
        mv = Multivectors(alg)
        assert_equivariant(randomized(layer, 0.5, torch.float64), group, mv, mv, inputs=x, num_samples=6)


def test_weighted_product_with_unit_weights_is_the_geometric_product():
    alg = CliffordAlgebra((1, -1, -1, -1))
    x, y = torch.randn(2, 5, 2, 16, dtype=DT)
    w = torch.ones(2, 5, 5, 5, dtype=DT)
    torch.testing.assert_close(weighted_geometric_product(alg, x, y, w), alg.geometric_product(x, y, "dense"))
    # a single path selects <<x>_1 <y>_1>_0, the dot product of the vector parts
    w = torch.zeros(2, 5, 5, 5, dtype=DT)
    w[:, 1, 1, 0] = 1
    got = weighted_geometric_product(alg, x, y, w)
    want = alg.grade_projection(alg.geometric_product(alg.grade_projection(x, 1), alg.grade_projection(y, 1)), 0)
    torch.testing.assert_close(got, want)


def test_o3_vectors_through_the_euclidean_algebra():
    """O(3) acting on embedded vectors equals the versor action: a CGENN model on vectors is O(3)-equivariant."""
    alg = CliffordAlgebra((1, 1, 1))
    block = randomized(CGENNBlock(alg, 2), 0.5, torch.float64)

    def fn(v):  # (batch, 2, 3) vectors -> vector part of the output
        return block(alg.embed_vector(v))[..., alg.grade_slices[1]]
    assert_equivariant(fn, O(3), Vectors(3), Vectors(3), inputs=torch.randn(4, 2, 3, dtype=DT))


def test_errors():
    alg = CliffordAlgebra((1, 1, 1))
    with pytest.raises(ValueError, match=r"\(\.\.\., 4, 8\)"):
        MVLinear(alg, 4, 2)(torch.zeros(3, 3, 8))
    with pytest.raises(ValueError, match="last dimension 8"):
        MVLinear(alg, 4, 2)(torch.zeros(3, 4, 16))
    with pytest.raises(ValueError, match="degenerate"):
        CliffordGroup((0, 0))
