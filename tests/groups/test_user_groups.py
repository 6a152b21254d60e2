"""Groups a user writes down: low-precision generators, generators in a non-orthonormal basis (issue 34).

* A rotation written the natural way (float32, float16, bfloat16, or with entries rounded like
  ``0.866``) generates its cyclic group: the generators are taken to their dtype's tolerance and
  made exact.
* A finite group given in a non-orthonormal basis (C3 conjugated by a shear) and a continuous one
  (SO(2) conjugated by a shear, given by its Lie algebra) get exact equivariant bases.

Oracles: element counts from group theory (C_n has n elements, D_n 2n, the icosahedral rotations 60);
the dimension of ``Hom_G(a, b)`` from the character inner product ``(1/|G|) sum_g chi_a(g^-1) chi_b(g)``
over elements written from their formula (``R(2 pi j / n)``, conjugated by the shear); conjugate groups
have equal dimensions (the sheared SO(2) against SO(2)); equivariance through ``geomlin.testing``.
"""

import math

import numpy as np
import pytest
import torch

from geomlin.groups import SO, Group, O
from geomlin.linear import EquivariantLinear, EquivariantMLP, equivariant_basis
from geomlin.reps import Scalar, V
from geomlin.testing import assert_equivariant

F64 = torch.float64
SHEAR = torch.tensor([[1.0, 1.0], [0.0, 1.0]], dtype=F64)
FLIP = torch.diag(torch.tensor([1.0, -1.0], dtype=F64))
#: ``(tensor power in, tensor power out)`` pairs whose Hom dimensions are compared with the characters.
POWERS = [(1, 1), (2, 0), (1, 2), (2, 2), (3, 1), (0, 3)]


def rotation(angle: float, dtype=F64) -> torch.Tensor:
    return torch.tensor([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]], dtype=dtype)


def character_dimension(elements: torch.Tensor, k_in: int, k_out: int) -> int:
    """``dim Hom_G(V^k_in, V^k_out)`` from the characters ``chi(g) = tr(g)^k`` over all elements."""
    chi = torch.diagonal(elements, dim1=-2, dim2=-1).sum(-1)
    chi_inv = torch.diagonal(torch.linalg.inv(elements), dim1=-2, dim2=-1).sum(-1)
    value = float((chi_inv ** k_in * chi ** k_out).mean())
    assert abs(value - round(value)) < 1e-9
    return round(value)


def assert_dimensions_match(G: Group, elements: torch.Tensor) -> None:
    for k_in, k_out in POWERS:
        got = equivariant_basis(V(G) ** k_in, V(G) ** k_out).shape[0]
        assert got == character_dimension(elements, k_in, k_out), (k_in, k_out)


def cyclic(n: int, conjugate_by: torch.Tensor | None = None) -> torch.Tensor:
    """The ``n`` rotations ``R(2 pi j / n)``, optionally conjugated ``S R S^-1``."""
    R = torch.stack([rotation(2 * math.pi * j / n) for j in range(n)])
    return R if conjugate_by is None else conjugate_by @ R @ torch.linalg.inv(conjugate_by)


C6_WRITTEN = {
    "float32": (lambda: rotation(math.pi / 3, torch.float32)[None], 6),
    "float16": (lambda: rotation(math.pi / 3, torch.float16)[None], 6),
    "bfloat16": (lambda: rotation(math.pi / 3, torch.bfloat16)[None], 6),
    "rounded 0.866 in a list": (lambda: [[[0.5, -0.866], [0.866, 0.5]]], 6),
    "rounded 0.707 in numpy float32": (lambda: np.array([[[0.707, -0.707], [0.707, 0.707]]], dtype=np.float32), 8),
    "rounded 30 degrees": (lambda: torch.tensor([[[0.866, -0.5], [0.5, 0.866]]]), 12),
}


@pytest.mark.parametrize("written", list(C6_WRITTEN), ids=list(C6_WRITTEN))
def test_a_rotation_written_naturally_generates_its_cyclic_group(written):
    make, n = C6_WRITTEN[written]
    G = Group(discrete_generators=make(), name=f"C{n}user")
    assert len(G.elements()) == n and G.is_finite and G.is_orthogonal
    torch.testing.assert_close(G.discrete_generators[0], rotation(2 * math.pi / n), rtol=0, atol=1e-12)
    assert_dimensions_match(G, cyclic(n))
    layer = EquivariantLinear(V(G) ** 2, Scalar + V(G)).double()
    assert_equivariant(layer, G, V(G) ** 2, Scalar + V(G))


def test_dihedral_group_from_float32_generators():
    G = Group(discrete_generators=torch.stack([rotation(math.pi / 3), FLIP]).float(), name="D6user")
    assert len(G.elements()) == 12  # 2n
    elements = torch.cat([cyclic(6), cyclic(6) @ FLIP])
    assert_dimensions_match(G, elements)


def _axis_rotation(axis, angle: float) -> torch.Tensor:
    a = torch.tensor(axis, dtype=F64) / torch.linalg.vector_norm(torch.tensor(axis, dtype=F64))
    K = torch.tensor([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]], dtype=F64)
    return torch.linalg.matrix_exp(angle * K)


def test_icosahedral_rotations_from_float32_generators():
    phi = (1 + math.sqrt(5)) / 2  # a five-fold axis through a vertex (0, 1, phi), a two-fold one along z
    gens = torch.stack([_axis_rotation([0, 1, phi], 2 * math.pi / 5), _axis_rotation([0, 0, 1], math.pi)])
    G = Group(discrete_generators=gens.float(), name="Icosahedral")
    assert len(G.elements()) == 60
    # exact generators of a copy within float32's rounding (any conjugate by a rotation that near 1 is as exact)
    g5, g2 = G.discrete_generators
    eye = torch.eye(3, dtype=F64)
    for word, order in [(g5, 5), (g2, 2), (g5 @ g2, 3)]:  # the presentation <a, b | a^5 = b^2 = (ab)^3 = 1>
        torch.testing.assert_close(torch.linalg.matrix_power(word, order), eye, rtol=0, atol=1e-12)
    torch.testing.assert_close(G.discrete_generators, gens, rtol=0, atol=1e-6)
    # below degree 6 the icosahedral group has the invariants of SO(3) (its first new one has degree 6)
    for k_in, k_out in POWERS:
        assert equivariant_basis(V(G) ** k_in, V(G) ** k_out).shape[0] == \
            equivariant_basis(V(SO(3)) ** k_in, V(SO(3)) ** k_out).shape[0]


def test_a_rounded_reflection_completes_o2():
    """With a Lie algebra, a low-precision discrete generator near orthogonal is made orthogonal (only its
    component matters): SO(2) and the reflection across the 30-degree line, rounded, is O(2) exactly."""
    G = Group(lie_algebra=[[[0, -1], [1, 0]]], discrete_generators=[[[0.5, 0.866], [0.866, -0.5]]], name="O2user")
    assert G.is_orthogonal
    reflection = G.discrete_generators[0]
    torch.testing.assert_close(reflection @ reflection.T, torch.eye(2, dtype=F64), rtol=0, atol=1e-15)
    for k_in, k_out in POWERS:
        assert equivariant_basis(V(G) ** k_in, V(G) ** k_out).shape[0] == \
            equivariant_basis(V(O(2)) ** k_in, V(O(2)) ** k_out).shape[0], (k_in, k_out)
    layer = EquivariantLinear(V(G) ** 2, V(G) ** 2 + Scalar).double()
    assert_equivariant(layer, G, V(G) ** 2, V(G) ** 2 + Scalar)


def _sheared_c3(dtype=F64) -> Group:
    g = SHEAR @ rotation(2 * math.pi / 3) @ torch.linalg.inv(SHEAR)
    return Group(discrete_generators=g[None].to(dtype), name="ShearedC3")


@pytest.mark.parametrize("dtype", [F64, torch.float32], ids=["float64", "float32"])
def test_sheared_c3_is_solved_exactly(dtype):
    G = _sheared_c3(dtype)
    assert len(G.elements()) == 3 and not G.is_orthogonal
    exact = cyclic(3, SHEAR)
    g = G.discrete_generators[0]
    torch.testing.assert_close(torch.linalg.matrix_power(g, 3), torch.eye(2, dtype=F64), rtol=0, atol=1e-12)
    # float32 moves the generator within its rounding, to an exact element of a conjugate copy
    torch.testing.assert_close(g, exact[1], rtol=0, atol=1e-12 if dtype == F64 else 1e-6)
    assert_dimensions_match(G, exact)
    v = V(G)
    for rin, rout in [(v, v), (v ** 2, Scalar + v), (v + Scalar, v ** 2), (v * v.dual(), Scalar + v.dual())]:
        layer = EquivariantLinear(rin, rout).double()
        with torch.no_grad():
            for p in layer.parameters():
                p.normal_()
        assert_equivariant(layer, G, rin, rout)


def test_sheared_c3_invariant_form_and_membership():
    G = _sheared_c3()
    B = G.invariant_form
    assert bool((torch.linalg.eigvalsh(B) > 0).all())  # an inner product
    for g in cyclic(3, SHEAR):
        torch.testing.assert_close(g.T @ B @ g, B, rtol=0, atol=1e-12)
    G.check_element(G.sample(5))
    with pytest.raises(ValueError, match="form-preserving"):
        G.check_element(rotation(2 * math.pi / 3))  # an element of C3, not of its sheared copy


def test_sheared_c3_mlp_is_equivariant():
    G = _sheared_c3()
    model = EquivariantMLP(2 * V(G), Scalar + V(G), hidden_channels=12).double()
    assert_equivariant(model, G, 2 * V(G), Scalar + V(G))


def _sheared_so2() -> Group:
    A = SHEAR @ torch.tensor([[0.0, -1.0], [1.0, 0.0]], dtype=F64) @ torch.linalg.inv(SHEAR)
    return Group(lie_algebra=A[None], name="ShearedSO2")


def test_sheared_so2_has_the_maps_of_so2():
    """A Lie algebra generator that is not antisymmetric: the dense solver's Gram matrix is exact for it."""
    G, H = _sheared_so2(), SO(2)
    assert not G.is_orthogonal
    for k_in, k_out in POWERS:
        assert equivariant_basis(V(G) ** k_in, V(G) ** k_out).shape[0] == \
            equivariant_basis(V(H) ** k_in, V(H) ** k_out).shape[0], (k_in, k_out)
    layer = EquivariantLinear(V(G) ** 2, V(G) ** 2 + Scalar).double()
    assert_equivariant(layer, G, V(G) ** 2, V(G) ** 2 + Scalar)
    model = EquivariantMLP(V(G) + Scalar, Scalar + V(G), hidden_channels=12).double()
    assert_equivariant(model, G, V(G) + Scalar, Scalar + V(G))


def test_sheared_so2_preserves_the_sheared_inner_product():
    """Its one invariant form is S^-T S^-1 (SO(2) preserves the identity), which membership checks use."""
    G = _sheared_so2()
    S_inv = torch.linalg.inv(SHEAR)
    expected = S_inv.T @ S_inv
    B = G.invariant_form
    torch.testing.assert_close(B / B[0, 0], expected / expected[0, 0], rtol=0, atol=1e-12)
    G.check_element(G.sample(4))
    with pytest.raises(ValueError, match="form-preserving"):
        G.check_element(rotation(1.0))  # in SO(2), not in its sheared copy


def test_exact_generators_are_kept_as_given():
    """float64 and integer generators are exact: never moved, enumerated lazily as before."""
    h = rotation(2 * math.pi / 7)
    G = Group(discrete_generators=h[None])
    assert torch.equal(G.discrete_generators[0], h) and len(G.elements()) == 7
    P = Group(discrete_generators=[[[0, 1, 0], [0, 0, 1], [1, 0, 0]]])
    assert len(P.elements()) == 3
