"""GLGENN: CGENN layers with weights shared by quaternion type, equivariant to O(p,q,r) acting by
outermorphisms (similarities of G(3,0,1) included); GATr's join is not."""

import math

import pytest
import torch

from geomlin.algebra import CliffordAlgebra, pga
from geomlin.clifford import CGENNBlock, GeometricProductLayer, MVLayerNorm, MVLinear, MVSiLU
from geomlin.groups import CliffordGroup, Pin301, PseudoOrthogonalGroup
from geomlin.testing import assert_equivariant, equivariance_error
from tests.randomized import randomized

DT = torch.float64
METRICS = [(1, 1, 1, 1, 1), (1, 1, 1, -1), (0, 1, 1, 1)]
LAYERS = {
    "MVLinear": lambda alg, s: MVLinear(alg, 3, 2, subspaces=s),
    "GeometricProductLayer": lambda alg, s: GeometricProductLayer(alg, 3, 2, subspaces=s),
    "MVSiLU": lambda alg, s: MVSiLU(alg, 3, subspaces=s),
    "MVLayerNorm": lambda alg, s: MVLayerNorm(alg, 3, subspaces=s),
    "CGENNBlock": lambda alg, s: CGENNBlock(alg, 3, subspaces=s),
}




def tie_to_grades(quaternion, grade, alg):
    """Copy a quaternion-type layer's weights into a grade layer, repeating each type's weight for
    its grades (and each type path's weight for its grade paths)."""
    slot = torch.arange(alg.n + 1) % 4
    q_params, g_params = dict(quaternion.named_parameters()), dict(grade.named_parameters())
    with torch.no_grad():
        for name, p in g_params.items():
            q = q_params[name]
            if name.endswith("path_weights"):
                qmask = alg.product_paths("geometric", "quaternion")
                dense = torch.zeros(q.shape[0], 4, 4, 4, dtype=q.dtype)
                dense[:, qmask] = q
                i, j, k = alg.product_paths("geometric", "grade").nonzero(as_tuple=True)
                p.copy_(dense[:, slot[i], slot[j], slot[k]])
            elif p.shape == q.shape:
                p.copy_(q)
            else:  # (..., n + 1) per grade <- (..., 4) per type
                p.copy_(q[..., slot])


@pytest.mark.parametrize("metric", METRICS)
@pytest.mark.parametrize("subspaces", ["grade", "quaternion"])
@pytest.mark.parametrize("name", sorted(LAYERS))
def test_equivariant_under_outermorphisms_and_the_clifford_group(metric, subspaces, name):
    alg = CliffordAlgebra(metric)
    layer = randomized(LAYERS[name](alg, subspaces), 0.5, torch.float64)
    x = torch.randn(4, 3, alg.dim, dtype=DT)
    group = PseudoOrthogonalGroup(alg)
    assert_equivariant(layer, group=group, inputs=x, num_samples=6, generator=torch.Generator().manual_seed(0))
    assert_equivariant(layer, group=CliffordGroup(alg), inputs=x, num_samples=4)


def test_outermorphism_samples_scale_the_radical():
    """The degenerate case above really tests lambda != 1 (similarities, not only motions)."""
    g = PseudoOrthogonalGroup((0, 1, 1, 1)).sample(6, generator=torch.Generator().manual_seed(0))
    assert ((g[:, 0, 0].abs() - 1).abs() > 0.02).all()


@pytest.mark.parametrize("metric", [(1, 1, 1, 1, 1), (0, 1, 1, 1), (1, -1, -1, -1, 1, 1)])
@pytest.mark.parametrize("name", sorted(LAYERS))
def test_quaternion_layers_are_grade_layers_with_tied_weights(metric, name):
    alg = CliffordAlgebra(metric)
    quaternion = randomized(LAYERS[name](alg, "quaternion"), 0.5, torch.float64)
    grade = LAYERS[name](alg, "grade").double()
    tie_to_grades(quaternion, grade, alg)
    x = torch.randn(5, 3, alg.dim, dtype=DT)
    # the same sums in another order: equal to float64 rounding, not bit for bit
    torch.testing.assert_close(quaternion(x), grade(x), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_small_algebras_have_one_type_per_grade(name):
    alg = CliffordAlgebra((1, -1, 1))
    quaternion, grade = LAYERS[name](alg, "quaternion"), LAYERS[name](alg, "grade")
    assert [p.shape for p in quaternion.parameters()] == [p.shape for p in grade.parameters()]
    grade.load_state_dict(quaternion.state_dict())
    x = torch.randn(2, 3, 8)
    assert torch.equal(quaternion(x), grade(x))


@pytest.mark.parametrize("n,grade_paths", [(5, 56), (6, 84), pytest.param(8, 165, marks=pytest.mark.slow)])
def test_parameter_counts(n, grade_paths):
    alg = CliffordAlgebra((1.0,) * n)
    c_in, c_out = 3, 2
    assert MVLinear(alg, c_in, c_out, bias=False, subspaces="quaternion").weight.numel() == 4 * c_in * c_out
    assert MVLinear(alg, c_in, c_out, bias=False).weight.numel() == (n + 1) * c_in * c_out
    q = GeometricProductLayer(alg, c_in, c_out, subspaces="quaternion")
    g = GeometricProductLayer(alg, c_in, c_out)
    assert q.path_weights.shape == (c_in, 32) and g.path_weights.shape == (c_in, grade_paths)
    total = sum(p.numel() for p in g.parameters()) - sum(p.numel() for p in q.parameters())
    # three linear sublayers lose (n + 1 - 4) weights per channel pair, the operand normalisation
    # (n + 1 - 4) per channel, the paths grade_paths - 32 per channel
    assert total == (n + 1 - 4) * (c_in * c_in + 2 * c_in * c_out + c_in) + c_in * (grade_paths - 32)


def test_gatr_join_is_not_equivariant_to_similarities():
    """GATr's equivariant join (GATr eq. 4: the join times the pseudoscalar of a reference) is
    Pin(3,0,1)-equivariant but not O(3,0,1)-equivariant: the regressive product and the pseudoscalar
    pick up det(A), which is not +-1 for a similarity."""
    from geomlin.gatr.primitives import equivariant_join, join, join_reference

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(4, 2, 16, generator=gen, dtype=DT)
    y = torch.randn(4, 2, 16, generator=gen, dtype=DT)

    def fn(a, b):
        return equivariant_join(a, b, join_reference(torch.cat([a, b], -2)))

    mv = pga.PGA
    act = mv.act
    assert_equivariant(fn, Pin301(), [act, act], act, inputs=(x, y), num_samples=6)
    similarity = PseudoOrthogonalGroup(mv)
    assert equivariance_error(fn, similarity, [act, act], act, inputs=(x, y), num_samples=6) > 1e-2
    assert equivariance_error(join, similarity, [act, act], act, inputs=(x, y), num_samples=6) > 1e-2
    # the CGENN / GLGENN product is equivariant to both
    layer = randomized(GeometricProductLayer(mv, 2, 2, subspaces="quaternion"), 0.5, torch.float64)
    assert_equivariant(layer, group=similarity, inputs=x, num_samples=6)
    assert math.isfinite(equivariance_error(layer, Pin301(), act, act, inputs=x))
