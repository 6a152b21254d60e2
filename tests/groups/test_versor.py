"""Versor groups: Pin(3,0,1) samples valid versors of both parities acting as a group; Clifford groups and
O(p,q,r) sample elements of the right kind; their generators satisfy the defining equations."""

import pytest
import torch

from geomlin.algebra import CliffordAlgebra, pga
from geomlin.groups import CliffordGroup, Pin301, PseudoOrthogonalGroup, versor_group
from geomlin.reps import Multivectors
from tests.groups.generated import assert_generators_generate

DT = torch.float64


def test_samples_are_invertible_versors_of_both_parities():
    g = Pin301().sample(64, generator=torch.Generator().manual_seed(0))
    assert g.shape == (64, 16) and g.dtype == DT
    parity = pga.PGA.parity(g)
    assert parity.any() and (~parity).any()
    # versors: v ~v is a non-zero scalar; planes are unit so |<v ~v>_0| = 1
    vv = pga.geometric_product(g, pga.reverse(g))
    torch.testing.assert_close(vv[:, 0].abs(), torch.ones(64, dtype=DT))
    assert vv[:, 1:].abs().max() < 1e-10
    # translations occur: some versor moves the origin
    origin = pga.embed_point(torch.zeros(3, dtype=DT))
    moved = torch.stack([pga.extract_point(pga.sandwich(g[i], origin)) for i in range(64)])
    assert moved.norm(dim=-1).max() > 0.5


def test_action_is_a_homomorphism_on_channel_layouts():
    g = Pin301().sample(2, generator=torch.Generator().manual_seed(1))
    x = torch.randn(3, 4, 2, 16, dtype=DT)  # (batch, items, channels, 16)
    both = pga.geometric_product(g[0], g[1])
    act = Multivectors(pga.PGA, 2).act
    torch.testing.assert_close(act(g[0], act(g[1], x)), act(both, x))
    torch.testing.assert_close(act(g[0], x), pga.sandwich(g[0], x))  # the G(3,0,1) sandwich formula


def test_parity_option_and_errors():
    assert not pga.PGA.parity(Pin301(parity="even").sample(10)).any()
    assert pga.PGA.parity(Pin301(parity="odd").sample(10)).all()
    with pytest.raises(ValueError, match="max_planes"):
        Pin301(max_planes=5)
    with pytest.raises(ValueError, match="n must be >= 1"):
        Pin301().sample(0)


def test_clifford_group_parity_and_subgroups():
    alg = CliffordAlgebra((1, 1, 1))
    even = CliffordGroup(alg, parity="even").sample(8, generator=torch.Generator().manual_seed(0))
    assert not alg.parity(even).any()
    assert alg.parity(CliffordGroup(alg, parity="odd").sample(8)).all()
    assert CliffordGroup(alg, parity="even").is_subgroup_of(CliffordGroup(alg))
    assert not CliffordGroup(alg).is_subgroup_of(CliffordGroup(alg, parity="even"))
    assert CliffordGroup(alg).is_subgroup_of(PseudoOrthogonalGroup(alg))
    assert Pin301().is_subgroup_of(PseudoOrthogonalGroup(pga.PGA))
    assert not PseudoOrthogonalGroup(pga.PGA).is_subgroup_of(Pin301())
    assert not Pin301().is_subgroup_of(PseudoOrthogonalGroup(alg))


@pytest.mark.parametrize("metric", [(1, 1, 1, 1, 1), (1, 1, 1, -1), (0, 1, 1, 1), (0, 0, 1, -1)])
def test_pseudo_orthogonal_samples(metric):
    alg = CliffordAlgebra(metric)
    A = PseudoOrthogonalGroup(alg).sample(40, generator=torch.Generator().manual_seed(1))
    G = torch.diag(torch.tensor(alg.metric, dtype=DT))
    torch.testing.assert_close(A.transpose(1, 2) @ G @ A, G.expand_as(A), rtol=1e-11, atol=1e-11)
    reg = [i for i, m in enumerate(alg.metric) if m != 0]
    det_reg = torch.linalg.det(A[:, reg][:, :, reg])
    torch.testing.assert_close(det_reg.abs(), torch.ones(40, dtype=DT))
    assert (det_reg > 0).any() and (det_reg < 0).any()  # proper and improper
    null = [i for i, m in enumerate(alg.metric) if m == 0]
    if null:  # the radical is scaled (lambda != 1) and mixed into the other images (translations)
        det_null = torch.linalg.det(A[:, null][:, :, null]).abs()
        assert ((det_null - 1).abs() > 0.05).float().mean() > 0.8
        assert A[:, null][:, :, reg].abs().max() > 0.5
    even = PseudoOrthogonalGroup(alg, parity="even").sample(10)
    assert (torch.linalg.det(even[:, reg][:, :, reg]) > 0).all()


def test_pseudo_orthogonal_errors():
    with pytest.raises(ValueError, match="scale_range"):
        PseudoOrthogonalGroup((0, 1, 1), scale_range=(2.0, 1.0))
    with pytest.raises(ValueError, match="parity"):
        PseudoOrthogonalGroup((0, 0), parity="even")
    with pytest.raises(ValueError, match="min_square"):
        PseudoOrthogonalGroup((1, 1), min_square=2.0)
    assert PseudoOrthogonalGroup((0, 0)).sample(3).shape == (3, 2, 2)


def test_the_versor_group_of_an_algebra():
    assert versor_group(pga.PGA) == Pin301() and versor_group((1, 1, 1)) == CliffordGroup((1, 1, 1))
    assert Multivectors(CliffordAlgebra((1, -1)), 3).group == CliffordGroup((1, -1))


def _on_vectors(alg, versor):
    """The matrix of ``x -> v x^ v^-1`` on the vectors, column by column (the twisted sandwich of CliffordAlgebra)."""
    basis = alg.embed_vector(torch.eye(alg.n, dtype=DT))
    return torch.stack([alg.sandwich(versor, e)[alg.grade_slices[1]] for e in basis], dim=1)


@pytest.mark.parametrize("group", [Pin301(), Pin301(parity="even"), CliffordGroup((1, 1, 1)),
                                   CliffordGroup((1, -1, -1), parity="even"), CliffordGroup((0, 1, 1, 1)),
                                   PseudoOrthogonalGroup((0, 1, 1, 1)), PseudoOrthogonalGroup((1, -1, 0, 0)),
                                   PseudoOrthogonalGroup((1, 1, -1), parity="even")], ids=str)
def test_generators_preserve_the_quadratic_form_and_span_the_algebra(group):
    """Every generator keeps ``G = diag(metric)``: ``X^T G + G X = 0`` and ``h^T G h = G``; the Lie
    algebra has the textbook dimension (O(p,q,r): (p+q)(p+q-1)/2 + r(p+q) + r^2; versors: the bivectors
    acting non-trivially)."""
    metric = group.algebra.metric
    G = torch.diag(torch.tensor(metric, dtype=DT))
    A, H = group.lie_algebra, group.discrete_generators
    torch.testing.assert_close(A.transpose(1, 2) @ G + G @ A, torch.zeros_like(A))
    torch.testing.assert_close(H.transpose(1, 2) @ G @ H, G.expand_as(H))
    p_q = sum(m != 0 for m in metric)
    r = len(metric) - p_q
    if isinstance(group, PseudoOrthogonalGroup):
        dim = p_q * (p_q - 1) // 2 + r * p_q + r * r
    else:  # bivectors e_i e_j with at most one null factor
        dim = p_q * (p_q - 1) // 2 + r * p_q
    assert torch.linalg.matrix_rank(A.flatten(1)) == A.shape[0] == dim


@pytest.mark.parametrize("group", [Pin301(), Pin301(parity="even"), CliffordGroup((1, 1, 1)),
                                   CliffordGroup((1, -1), parity="even"), PseudoOrthogonalGroup((0, 1, 1, 1)),
                                   PseudoOrthogonalGroup((1, 1, -1))], ids=str)
def test_the_generators_generate_the_sampled_group(group):
    """Versors act on the vectors by the twisted sandwich; matrices are themselves."""
    g = group.sample(24, generator=torch.Generator().manual_seed(2))
    mats = g if g.ndim == 3 else torch.stack([_on_vectors(group.algebra, v) for v in g])
    assert_generators_generate(group.lie_algebra, group.discrete_generators, mats)
