"""Groups: generators, membership of samples, Haar/uniform sampling, bad input."""

import math

import pytest
import torch

from geomlin.groups import (
    MINKOWSKI_METRIC,
    SL,
    SO,
    C,
    D,
    DirectProduct,
    Group,
    Lorentz,
    O,
    S,
    SO13p,
    Sp,
    Trivial,
    symplectic_form,
)
from tests.groups.generated import assert_generators_generate

N = 200


def _eye(d):
    return torch.eye(d, dtype=torch.float64)


def _is_orthogonal(g):
    return torch.allclose(g @ g.transpose(-1, -2), _eye(g.shape[-1]).expand_as(g), atol=1e-12)


def test_so_and_o_membership_and_components():
    g = SO(4).sample(N)
    assert _is_orthogonal(g) and torch.allclose(torch.linalg.det(g), torch.ones(N, dtype=torch.float64))
    h = O(3).sample(N)
    dets = torch.linalg.det(h)
    assert _is_orthogonal(h)
    assert (dets > 0).any() and (dets < 0).any()  # both components are reached


def test_haar_moments_of_so3():
    # For Haar-random SO(3): E[tr g] = 0 and E[tr(g)^2] = 1 (character orthogonality).
    g = SO(3).sample(20000, generator=torch.Generator().manual_seed(1))
    tr = torch.diagonal(g, dim1=-2, dim2=-1).sum(-1)
    assert abs(tr.mean().item()) < 0.05
    assert abs((tr ** 2).mean().item() - 1.0) < 0.05


def test_symplectic_membership():
    m = 2
    J = symplectic_form(m)
    g = Sp(m).sample(N)
    assert torch.allclose(g.transpose(-1, -2) @ J @ g, J.expand_as(g), atol=1e-9)
    assert Sp(m).lie_algebra.shape[0] == m * (2 * m + 1)


def test_lorentz_membership_and_components():
    eta = MINKOWSKI_METRIC
    g = Lorentz().sample(N, generator=torch.Generator().manual_seed(0))
    assert torch.allclose(g.transpose(-1, -2) @ eta @ g, eta.expand_as(g), atol=1e-9)
    dets = torch.linalg.det(g)
    assert (dets > 0).any() and (dets < 0).any()
    assert (g[:, 0, 0] < 0).any() and (g[:, 0, 0] > 0).any()  # time reversal reached
    p = SO13p().sample(N)
    assert torch.allclose(torch.linalg.det(p), torch.ones(N, dtype=torch.float64), atol=1e-9)
    assert (p[:, 0, 0] >= 1 - 1e-12).all()


def test_sl_determinant_one():
    g = SL(3).sample(N)
    assert torch.allclose(torch.linalg.det(g), torch.ones(N, dtype=torch.float64), atol=1e-9)


def test_permutations_uniform():
    g = S(3).sample(6000, generator=torch.Generator().manual_seed(0))
    assert ((g == 0) | (g == 1)).all() and torch.allclose(g.sum(-1), torch.ones(6000, 3, dtype=torch.float64))
    keys, counts = torch.unique(g.reshape(6000, -1), dim=0, return_counts=True)
    assert len(keys) == 6
    assert (counts - 1000).abs().max() < 150  # ~5 sigma


def test_finite_orders_and_uniform_sampling():
    assert len(C(5).elements()) == 5
    assert len(D(6).elements()) == 12
    assert len(S(4).elements()) == 24
    g = C(4).sample(4000, generator=torch.Generator().manual_seed(0))
    _, counts = torch.unique(torch.round(g.reshape(4000, -1) * 1e6), dim=0, return_counts=True)
    assert len(counts) == 4 and (counts - 1000).abs().max() < 120


def test_cyclic_generator_has_order_k():
    k = 7
    h = C(k).discrete_generators[0]
    assert torch.allclose(torch.linalg.matrix_power(h, k), _eye(2), atol=1e-12)
    assert not torch.allclose(torch.linalg.matrix_power(h, k - 1), _eye(2))


def test_direct_product_is_block_diagonal():
    G = DirectProduct(SO(2), S(3))
    g = G.sample(10)
    assert G.d == 5
    assert torch.all(g[:, :2, 2:] == 0) and torch.all(g[:, 2:, :2] == 0)
    assert G.lie_algebra.shape[0] == 1 and G.discrete_generators.shape[0] == 2


def test_trivial_group_samples_identity():
    assert torch.equal(Trivial(3).sample(2), _eye(3).expand(2, 3, 3))


def test_user_group_from_generators():
    # the rotation group of the cube: 90 degree turns about x and y
    rx = torch.tensor([[1.0, 0, 0], [0, 0, -1], [0, 1, 0]])
    ry = torch.tensor([[0.0, 0, 1], [0, 1, 0], [-1, 0, 0]])
    G = Group(discrete_generators=torch.stack([rx, ry]), name="Cube")
    assert len(G.elements()) == 24 and G.is_orthogonal and G.is_finite
    assert repr(G) == "Cube"
    assert torch.allclose(torch.linalg.det(G.sample(20)), torch.ones(20, dtype=torch.float64))


def test_repr_and_equality():
    assert repr(SO(3)) == "SO(3)" and repr(Sp(2)) == "Sp(2)" and repr(Lorentz()) == "O(1,3)"
    assert SO(3) == SO(3) and SO(3) != O(3) and hash(SO(3)) == hash(SO(3))


def test_sample_dtype_and_generator_reproducible():
    a = O(3).sample(3, generator=torch.Generator().manual_seed(5), dtype=torch.float32)
    b = O(3).sample(3, generator=torch.Generator().manual_seed(5), dtype=torch.float32)
    assert a.dtype == torch.float32 and torch.equal(a, b)


@pytest.mark.parametrize("bad, err", [
    ({"lie_algebra": torch.zeros(2, 3, 4)}, ValueError),          # non-square
    ({"lie_algebra": torch.zeros(3)}, ValueError),                 # wrong rank
    ({"discrete_generators": torch.full((1, 2, 2), math.nan)}, ValueError),
    ({"lie_algebra": torch.zeros(1, 3, 3), "discrete_generators": torch.eye(2)[None]}, ValueError),
    ({"discrete_generators": torch.zeros(1, 2, 2, dtype=torch.complex64)}, TypeError),
    ({}, ValueError),
])
def test_bad_generators(bad, err):
    with pytest.raises(err):
        Group(**bad)


@pytest.mark.parametrize("n, err", [(-1, ValueError), (0, ValueError), (2.5, TypeError), (True, TypeError)])
def test_bad_dimensions(n, err):
    with pytest.raises(err):
        SO(n)
    with pytest.raises(err):
        O(3).sample(n if n != 0 else -3)


def test_singular_discrete_generator_is_refused():
    # a rank-one "generator" would make every word in it singular: not a group
    with pytest.raises(ValueError, match="singular"):
        Group(discrete_generators=torch.tensor([[[1.0, 1.0], [1.0, 1.0]]]), name="bad")


# group elements: (group, a member, a non-member, phrase of the message)
MEMBERSHIP = [
    (O(3), lambda: O(3).sample(2), lambda: torch.eye(3, dtype=torch.float64) * 2, "orthogonal"),
    (SO(3), lambda: SO(3).sample(2), lambda: torch.diag(torch.tensor([1.0, 1.0, -1.0])).double(),
     "determinant"),
    (Lorentz(), lambda: Lorentz().sample(2), lambda: O(4).sample(1)[0], "form-preserving"),
    (SO13p(), lambda: SO13p().sample(2), lambda: torch.diag(torch.tensor([-1.0, -1.0, 1.0, 1.0])).double(),
     "direction of time"),
    (Sp(1), lambda: Sp(1).sample(2), lambda: torch.diag(torch.tensor([2.0, 2.0])).double(), "form-preserving"),
    (S(3), lambda: S(3).sample(2), lambda: SO(3).sample(1)[0], "permutation"),
    (C(4), lambda: C(4).sample(2), lambda: SO(2).sample(1, generator=torch.Generator().manual_seed(3))[0],
     "multiple"),
    (SL(2), lambda: SL(2).sample(2), lambda: torch.eye(2, dtype=torch.float64) * 3, "determinant"),
    (Trivial(2), lambda: torch.eye(2, dtype=torch.float64), lambda: O(2).sample(1)[0], "identity"),
]


@pytest.mark.parametrize("G, good, bad, phrase", MEMBERSHIP, ids=lambda x: repr(x) if isinstance(x, Group) else "")
def test_membership_checks(G, good, bad, phrase):
    assert G.check_element(good()) is not None
    with pytest.raises(ValueError, match=phrase):
        G.check_element(bad())


def test_membership_tolerance_follows_the_dtype():
    g = O(3).sample(4, dtype=torch.float32)
    O(3).check_element(g)  # float32 round-off is not a failure
    with pytest.raises(ValueError, match="orthogonal"):
        O(3).check_element(g.double() * (1 + 1e-4))  # float64 is held to 1e-6


@pytest.mark.parametrize("G", [SO(3), O(2), Sp(1), SL(2), Lorentz(), SO13p(), S(4), C(6), D(4), Trivial(2),
                               DirectProduct(O(2), C(3))], ids=str)
def test_the_generators_generate_the_sampled_group(G):
    assert_generators_generate(G.lie_algebra, G.discrete_generators,
                               G.sample(24, generator=torch.Generator().manual_seed(4)))


@pytest.mark.parametrize("G, good, bad, phrase", MEMBERSHIP, ids=lambda x: repr(x) if isinstance(x, Group) else "")
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_membership_checks_are_deferred_on_accelerators(G, good, bad, phrase, dtype):
    """On the simulated accelerator (tests/device/simulated.py) the same tests run without a host sync (the
    group's invariant form is uploaded once per device and dtype) and raise, with the CPU's message, when
    the deferred checks are read (at once outside a deferred-checks scope)."""
    from tests.device.checks import assert_membership_deferred

    assert_membership_deferred(G, good().to(dtype), bad().to(dtype), phrase)


def test_rotation_angle_of_cyclic_elements_is_checked_in_float32_too():
    near = SO(2).sample(1, generator=torch.Generator().manual_seed(3))[0]  # not a quarter turn
    with pytest.raises(ValueError, match="multiple"):
        C(4).check_element(near.float())
    C(4).check_element(C(4).sample(3).float())
