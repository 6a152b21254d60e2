"""Every path of the tensor product from the sphere: Gaunt products (l1 + l2 + l3 even) and Poisson brackets (odd).

Oracles: e3nn's Clebsch-Gordan coefficients ``o3.wigner_3j`` (float64) and SymPy's exact Wigner 3j symbols for
the per-path constants

    c(l1, l2, l3) = sqrt((2l1+1)(2l2+1)(2l3+1) / (4 pi)) |(l1 l2 l3; 0 0 0)|                 (even)
    b(l1, l2, l3) = sqrt(l1(l1+1) l2(l2+1) (2l1+1)(2l2+1)(2l3+1) / (4 pi)) |(l1 l2 l3; 1 -1 0)|   (odd)

so ``gaunt_tensor_product`` / ``gaunt_bracket`` restricted to a path equal ``c`` / ``b`` times ``wigner_3j``.
"""

import math

import pytest
import torch
from e3nn import o3
from sympy.physics.wigner import wigner_3j as exact_3j

from geomlin.gaunt import gaunt_bracket, gaunt_tensor_product
from geomlin.gaunt.bracket import derivative_tables
from geomlin.gaunt.paths import path_coefficients, path_constant
from geomlin.testing import assert_equivariant

L = 8


def stated_constant(l1: int, l2: int, l3: int) -> float:
    dims = (2 * l1 + 1) * (2 * l2 + 1) * (2 * l3 + 1) / (4 * math.pi)
    if (l1 + l2 + l3) % 2 == 0:
        return math.sqrt(dims) * abs(float(exact_3j(l1, l2, l3, 0, 0, 0)))
    return math.sqrt(l1 * (l1 + 1) * l2 * (l2 + 1) * dims) * abs(float(exact_3j(l1, l2, l3, 1, -1, 0)))


def _paths(lmax: int):
    return [(l1, l2, l3) for l1 in range(lmax + 1) for l2 in range(lmax + 1)
            for l3 in range(abs(l1 - l2), min(l1 + l2, lmax) + 1)]


def _coupling_tensor(product, method: str) -> torch.Tensor:
    """``T[i, j, k]``: the product of every pair of basis functions up to degree L, ``(D, D, D)``."""
    D = (L + 1) ** 2
    eye = torch.eye(D, dtype=torch.float64)
    return product(eye[:, None, :], eye[None, :, :], L, method=method)


@pytest.fixture(scope="module")
def couplings():
    return {"even": _coupling_tensor(gaunt_tensor_product, "grid"), "odd": _coupling_tensor(gaunt_bracket, "grid")}


def test_every_path_up_to_L8_is_a_stated_constant_times_e3nn_clebsch_gordan(couplings):
    """Both parities, every (l1, l2, l3) with l1, l2, l3 <= 8, on the fast grid route, 1e-10 in float64."""
    checked = {"even": 0, "odd": 0}
    for l1, l2, l3 in _paths(L):
        parity = "odd" if (l1 + l2 + l3) % 2 else "even"
        block = couplings[parity][l1 ** 2:(l1 + 1) ** 2, l2 ** 2:(l2 + 1) ** 2, l3 ** 2:(l3 + 1) ** 2]
        c = stated_constant(l1, l2, l3)
        torch.testing.assert_close(block, c * o3.wigner_3j(l1, l2, l3, dtype=torch.float64), atol=1e-10, rtol=0)
        if parity == "odd" and min(l1, l2) > 0:
            assert c > 0.05, (l1, l2, l3, c)  # never a silent zero: every odd path with l1, l2 >= 1 is reached
        checked[parity] += 1
        # the other product has no such path
        other = couplings["even" if parity == "odd" else "odd"]
        assert other[l1 ** 2:(l1 + 1) ** 2, l2 ** 2:(l2 + 1) ** 2, l3 ** 2:(l3 + 1) ** 2].abs().max() < 1e-12
    assert checked["even"] > 150 and checked["odd"] > 150


def test_path_coefficients_are_e3nn_wigner_3j_and_path_constants_the_stated_ones():
    for l1, l2, l3 in _paths(5):
        if (l1 + l2 + l3) % 2 and 0 in (l1, l2):
            with pytest.raises(ValueError, match="no coupling"):
                path_coefficients(l1, l2, l3)
            continue
        torch.testing.assert_close(path_coefficients(l1, l2, l3), o3.wigner_3j(l1, l2, l3, dtype=torch.float64),
                                   atol=1e-12, rtol=0)
        assert path_constant(l1, l2, l3) == pytest.approx(stated_constant(l1, l2, l3), rel=1e-12)
    assert path_constant(1, 1, 3) == 0.0  # outside the triangle


@pytest.mark.parametrize("method", ["grid", "dense", "direct", "fft"])
def test_bracket_routes_agree_and_two_vectors_give_their_cross_product(method):
    """Oracle: the cross product, ``{a.r, b.r} = r . (a x b)``, in e3nn's Cartesian l = 1 basis (where
    ``Y_1 = s r``, ``s = sqrt(3 / (4 pi))``: ``a.r`` has coefficients ``a / s``)."""
    a, b = torch.randn(5, 3, dtype=torch.float64), torch.randn(5, 3, dtype=torch.float64)
    s = math.sqrt(3 / (4 * math.pi))
    pad = torch.zeros(5, 1, dtype=torch.float64)
    f, g = torch.cat([pad, a / s], 1), torch.cat([pad, b / s], 1)   # f = a . r, g = b . r
    out = gaunt_bracket(f, g, 1, method=method)
    torch.testing.assert_close(out[:, 1:], torch.linalg.cross(a, b) / s, atol=1e-12, rtol=0)
    x1, x2 = torch.randn(4, 16, dtype=torch.float64), torch.randn(4, 9, dtype=torch.float64)
    ref = gaunt_bracket(x1, x2, 4, method="direct")
    torch.testing.assert_close(gaunt_bracket(x1, x2, 4, method=method), ref, atol=1e-12, rtol=0)
    torch.testing.assert_close(gaunt_bracket(x2, x1, 4, method=method), -ref, atol=1e-12, rtol=0)


def test_bracket_is_o3_equivariant_to_a_pseudo_output():
    """Natural inputs (0e + 1o + 2e ...) give a pseudo output (0o + 1e + 2o ...): the checker with reflections."""
    natural = lambda lmax: o3.Irreps([(1, (l, (-1) ** l)) for l in range(lmax + 1)])
    pseudo = o3.Irreps([(1, (l, -(-1) ** l)) for l in range(5)])
    assert_equivariant(lambda a, b: gaunt_bracket(a, b, 4), "O3", (natural(3), natural(2)), pseudo)


def test_bracket_is_twice_differentiable():
    x1 = torch.randn(3, 9, dtype=torch.float64, requires_grad=True)
    x2 = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradgradcheck(lambda a, b: gaunt_bracket(a, b, 2, method="grid"), (x1, x2))


def test_bracket_of_a_constant_is_zero_and_derivative_tables_are_exact():
    assert gaunt_bracket(torch.randn(2, 1), torch.randn(2, 9)).abs().max() == 0
    J, D = derivative_tables(3)
    # the rotation generators are antisymmetric and block diagonal in the degree; they commute like so(3)
    torch.testing.assert_close(J, -J.transpose(1, 2), atol=1e-13, rtol=0)
    torch.testing.assert_close(J[0] @ J[1] - J[1] @ J[0], J[2], atol=1e-12, rtol=0)  # [J_x, J_y] = J_z
    assert D.shape == (3, 16, 9)
