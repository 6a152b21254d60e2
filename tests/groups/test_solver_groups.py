"""The groups added for EMLP's test matrix: Z(n), GL(n), realified U(n) / SU(n), the Rubik's cube group.

Oracles: group laws written out (powers of the shift, ``realify`` a homomorphism, ``J`` commuting),
a Haar moment of the unitary group (``E |tr g|^2 = 1``, Diaconis-Shahshahani), and classical facts
about the Rubik's cube (a quarter turn moves 20 stickers; ``R U`` has order 105 and the commutator
``R U R^-1 U^-1`` order 6).
"""

import math

import pytest
import torch

from geomlin.groups import GL, SU, RubiksCube, U, Z, as_group, complexify, realify


def _eye(d):
    return torch.eye(d, dtype=torch.float64)


def test_z_is_the_cyclic_shift_of_coordinates():
    G = Z(5)
    shift = G.discrete_generators[0]
    assert torch.equal(shift @ _eye(5)[:, 0], _eye(5)[:, 1])  # e_0 -> e_1
    assert len(G.elements()) == 5
    powers = torch.stack([torch.linalg.matrix_power(shift, k) for k in range(5)])
    G.check_element(powers)
    swap = _eye(5)[[1, 0, 2, 3, 4]]  # a permutation, but no shift
    with pytest.raises(ValueError, match="cyclic shift"):
        G.check_element(swap)


def test_gl_reaches_both_signs_of_the_determinant():
    G = GL(3)
    assert G.lie_algebra.shape[0] == 9
    assert float(torch.linalg.det(G.discrete_generators[0])) == -1.0
    G.check_element(torch.randn(4, 3, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0)))
    with pytest.raises(ValueError, match="singular"):
        G.check_element(torch.zeros(3, 3, dtype=torch.float64))


def test_realify_is_a_homomorphism_and_complexify_inverts_it():
    gen = torch.Generator().manual_seed(0)
    a, b = (torch.complex(torch.randn(3, 3, generator=gen, dtype=torch.float64),
                          torch.randn(3, 3, generator=gen, dtype=torch.float64)) for _ in range(2))
    assert torch.allclose(realify(a @ b), realify(a) @ realify(b), atol=1e-12)
    assert torch.equal(complexify(realify(a)), a)
    z = torch.complex(torch.randn(3, generator=gen, dtype=torch.float64), torch.randn(3, generator=gen, dtype=torch.float64))
    x = torch.cat([z.real, z.imag])  # z = x + iy -> (x, y)
    w = a @ z
    assert torch.allclose(realify(a) @ x, torch.cat([w.real, w.imag]), atol=1e-12)


@pytest.mark.parametrize("G,dim", [(U(1), 1), (U(2), 4), (U(3), 9), (SU(2), 3), (SU(3), 8)], ids=repr)
def test_unitary_groups_realified(G, dim):
    n = G.n
    assert G.d == 2 * n and G.lie_algebra.shape[0] == dim and G.is_compact
    A = G.lie_algebra
    assert torch.allclose(A, -A.transpose(-1, -2))  # skew-Hermitian realifies to antisymmetric
    J = G.complex_structure
    assert torch.allclose(A @ J, J @ A)
    g = G.sample(50, generator=torch.Generator().manual_seed(1))
    G.check_element(g)
    G.check_element(torch.linalg.matrix_exp(0.7 * A.sum(0)))
    if isinstance(G, SU):
        det = torch.linalg.det(complexify(g))
        assert torch.allclose(det, torch.ones_like(det), atol=1e-12)
        assert torch.allclose(torch.diagonal(complexify(A), dim1=-2, dim2=-1).sum(-1), torch.zeros(dim, dtype=torch.complex128))


def test_unitary_membership_refusals():
    conj = torch.diag(torch.tensor([1.0, 1.0, -1.0, -1.0], dtype=torch.float64))  # complex conjugation: antilinear
    with pytest.raises(ValueError, match="complex structure"):
        U(2).check_element(conj)
    phase = realify(torch.diag(torch.tensor([1j, 1.0 + 0j], dtype=torch.complex128)))  # in U(2), det i
    U(2).check_element(phase)
    with pytest.raises(ValueError, match="complex determinant"):
        SU(2).check_element(phase)
    assert SU(2).is_subgroup_of(U(2)) and not SU(2).is_subgroup_of(U(3))


@pytest.mark.parametrize("G", [U(2), U(3), SU(3)], ids=repr)
def test_unitary_sampling_is_haar(G):
    # Haar moment: E |tr g|^2 = 1 on U(n) and on SU(n) for n >= 2 (the defining rep is irreducible)
    g = complexify(G.sample(20000, generator=torch.Generator().manual_seed(2)))
    moment = (torch.diagonal(g, dim1=-2, dim2=-1).sum(-1).abs() ** 2).mean()
    assert abs(float(moment) - 1.0) < 0.05


def _order(perm: torch.Tensor) -> int:
    identity = torch.arange(len(perm))
    p, k = perm.clone(), 1
    while not torch.equal(p, identity):
        p, k = perm[p], k + 1
    return k


def test_rubiks_cube_facts():
    G = RubiksCube()
    turns = G.discrete_generators
    assert turns.shape == (6, 48, 48)
    perms = turns.argmax(1)  # sticker j -> perms[:, j]
    for perm in perms:
        assert int((perm != torch.arange(48)).sum()) == 20  # 8 on the face, 12 around it
        assert _order(perm) == 4
    # two adjacent faces (normals +x and +y): R U has order 105, the commutator order 6
    R, Uturn = perms[0], perms[2]
    assert _order(Uturn[R]) == 105
    R_inv, U_inv = torch.argsort(R), torch.argsort(Uturn)
    assert _order(U_inv[R_inv[Uturn[R]]]) == 6
    # opposite faces commute
    assert torch.equal(perms[1][perms[0]], perms[0][perms[1]])
    g = G.sample(8, generator=torch.Generator().manual_seed(3))
    G.check_element(g)
    corner, edge = int(G._corner.int().argmax()), int((~G._corner).int().argmax())
    swap = torch.arange(48)
    swap[corner], swap[edge] = edge, corner
    with pytest.raises(ValueError, match="corner"):
        G.check_element(_eye(48)[:, swap])  # a permutation matrix, but it swaps a corner and an edge sticker
    with pytest.raises(ValueError, match="too many to enumerate"):
        G.elements()


@pytest.mark.parametrize("name", ["Z(4)", "GL(3)", "U(2)", "SU(3)", "RubiksCube"])
def test_names_round_trip(name):
    G = as_group(name)
    assert repr(G) == name and as_group(repr(G)) == G
    assert math.isfinite(float(G.sample(2).sum()))


@pytest.mark.parametrize("factory,name", [(Z, "Z(n): n"), (GL, "GL(n): n"), (U, "U(n): n"), (SU, "SU(n): n")])
def test_bad_dimensions_are_refused_by_name(factory, name):
    with pytest.raises(ValueError, match=name.replace("(", r"\(").replace(")", r"\)")):
        factory(0)
    with pytest.raises(TypeError):
        factory(2.5)


def test_wrong_shapes_are_refused():
    with pytest.raises(ValueError, match=r"\(\.\.\., 4, 4\)"):
        U(2).check_element(torch.eye(3, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"\(\.\.\., 48, 48\)"):
        RubiksCube().check_element(torch.eye(54, dtype=torch.float64))


def _corner_edge_swap():
    G = RubiksCube()
    corner, edge = int(G._corner.int().argmax()), int((~G._corner).int().argmax())
    swap = torch.arange(48)
    swap[corner], swap[edge] = edge, corner
    return _eye(48)[:, swap]


DEFERRED = [
    (Z(3), lambda: Z(3).discrete_generators[0], lambda: _eye(3)[[1, 0, 2]], "cyclic shift"),
    (U(2), lambda: U(2).sample(2, generator=torch.Generator().manual_seed(0)),
     lambda: torch.diag(torch.tensor([1.0, 1.0, -1.0, -1.0], dtype=torch.float64)), "complex structure"),
    (SU(2), lambda: SU(2).sample(2, generator=torch.Generator().manual_seed(0)),
     lambda: realify(torch.diag(torch.tensor([1j, 1.0 + 0j], dtype=torch.complex128))), "complex determinant"),
    (RubiksCube(), lambda: RubiksCube().discrete_generators, _corner_edge_swap, "corner"),
]


@pytest.mark.parametrize("G, good, bad, phrase", DEFERRED, ids=lambda x: repr(x) if hasattr(x, "lie_algebra") else "")
def test_membership_checks_are_deferred_on_accelerators(G, good, bad, phrase):
    """On the simulated accelerator (tests/device/simulated.py): no host sync, the tables uploaded once
    per device and dtype, and the CPU's message when the deferred checks are read (at once outside a
    deferred-checks scope)."""
    from tests.device.checks import assert_membership_deferred

    assert_membership_deferred(G, good(), bad(), phrase)
