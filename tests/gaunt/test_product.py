"""gaunt_tensor_product: Clebsch-Gordan oracle (e3nn wigner_3j), pointwise products, method agreement."""

import math

import pytest
import torch
from e3nn import o3

from geomlin.gaunt import gaunt_tensor_product, sphere_irreps, spherical_harmonics
from geomlin.gaunt.autotune import choose_method
from geomlin.groups import O
from geomlin.testing import assert_equivariant

EXACT = ("grid", "fft", "dense")


def threej_000(l1, l2, l3):
    """Closed form of the Wigner 3j symbol (l1 l2 l3; 0 0 0)."""
    J = l1 + l2 + l3
    if J % 2 or l3 < abs(l1 - l2) or l3 > l1 + l2:
        return 0.0
    g = J // 2
    f = math.factorial
    return ((-1) ** g * math.sqrt(f(J - 2 * l1) * f(J - 2 * l2) * f(J - 2 * l3) / f(J + 1))
            * f(g) / (f(g - l1) * f(g - l2) * f(g - l3)))


def clebsch_gordan_oracle(x1, x2, L1, L2, Lo):
    out = x1.new_zeros(x1.shape[0], (Lo + 1) ** 2)
    for l1 in range(L1 + 1):
        for l2 in range(L2 + 1):
            for l3 in range(abs(l1 - l2), min(l1 + l2, Lo) + 1):
                if (l1 + l2 + l3) % 2:
                    continue
                c = math.sqrt((2 * l1 + 1) * (2 * l2 + 1) * (2 * l3 + 1) / (4 * math.pi)) * abs(threej_000(l1, l2, l3))
                w3j = o3.wigner_3j(l1, l2, l3, dtype=torch.float64)
                out[:, l3 * l3:(l3 + 1) ** 2] += c * torch.einsum(
                    "ijk,bi,bj->bk", w3j, x1[:, l1 * l1:(l1 + 1) ** 2], x2[:, l2 * l2:(l2 + 1) ** 2])
    return out


@pytest.mark.parametrize("L", range(1, 9))
def test_against_wigner_3j_oracle(L):
    L2 = max(1, L - 1)
    Lo = min(L + L2, 10)  # e3nn's wigner_3j tables stop near l = 11
    x1 = torch.randn(3, (L + 1) ** 2, dtype=torch.float64)
    x2 = torch.randn(3, (L2 + 1) ** 2, dtype=torch.float64)
    ref = clebsch_gordan_oracle(x1, x2, L, L2, Lo)
    for method in EXACT + (("direct",) if L <= 4 else ()):
        torch.testing.assert_close(gaunt_tensor_product(x1, x2, Lo, method=method), ref, atol=1e-10, rtol=0)


@pytest.mark.parametrize("L1,L2", [(1, 1), (2, 3), (4, 4), (7, 5)])
@pytest.mark.parametrize("method", EXACT)
def test_pointwise_product_at_random_points(L1, L2, method):
    x1 = torch.randn(2, (L1 + 1) ** 2, dtype=torch.float64)
    x2 = torch.randn(2, (L2 + 1) ** 2, dtype=torch.float64)
    pts = torch.randn(50, 3, dtype=torch.float64)
    x3 = gaunt_tensor_product(x1, x2, method=method)
    Y = spherical_harmonics(L1 + L2, pts)
    f1 = x1 @ Y[:, : (L1 + 1) ** 2].T
    f2 = x2 @ Y[:, : (L2 + 1) ** 2].T
    torch.testing.assert_close(x3 @ Y.T, f1 * f2, atol=1e-10, rtol=0)


def test_methods_agree_at_lmax16():
    x1 = torch.randn(3, 289, dtype=torch.float64)
    x2 = torch.randn(3, 289, dtype=torch.float64)
    ref = gaunt_tensor_product(x1, x2, 16, method="dense")
    for method in ("grid", "fft", "auto"):
        torch.testing.assert_close(gaunt_tensor_product(x1, x2, 16, method=method), ref, atol=1e-10, rtol=0)


@pytest.mark.parametrize("method", EXACT + ("direct",))
def test_symmetry_and_unit(method):
    x = torch.randn(4, 16, dtype=torch.float64)
    y = torch.randn(4, 16, dtype=torch.float64)
    torch.testing.assert_close(gaunt_tensor_product(x, y, method=method), gaunt_tensor_product(y, x, method=method),
                               atol=1e-12, rtol=0)
    e00 = torch.ones(1, 1, dtype=torch.float64)
    torch.testing.assert_close(gaunt_tensor_product(x, e00, method=method), x / math.sqrt(4 * math.pi),
                               atol=1e-13, rtol=0)


@pytest.mark.parametrize("method", EXACT + ("direct",))
def test_gradcheck(method):
    x1 = torch.randn(2, 9, dtype=torch.float64, requires_grad=True)
    x2 = torch.randn(2, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: gaunt_tensor_product(a, b, 2, method=method), (x1, x2))


def test_broadcasting_and_truncation():
    x1 = torch.randn(5, 1, 3, 9, dtype=torch.float64)
    x2 = torch.randn(4, 1, 16, dtype=torch.float64)
    out = gaunt_tensor_product(x1, x2, 3)
    assert out.shape == (5, 4, 3, 16)
    ref = gaunt_tensor_product(x1[2, 0, 1], x2[3, 0], 3, method="direct")
    torch.testing.assert_close(out[2, 3, 1], ref, atol=1e-12, rtol=0)
    padded = gaunt_tensor_product(x1[0, 0], x2[0], 8)  # above L1 + L2 = 5: zeros
    assert padded.shape == (3, 81) and padded[:, 36:].abs().max() == 0
    torch.testing.assert_close(padded[:, :36], gaunt_tensor_product(x1[0, 0], x2[0]), atol=1e-12, rtol=0)


def test_float32_close_to_float64():
    x1 = torch.randn(8, 49, dtype=torch.float64)
    x2 = torch.randn(8, 49, dtype=torch.float64)
    ref = gaunt_tensor_product(x1, x2, 6)
    for method in EXACT:
        out = gaunt_tensor_product(x1.float(), x2.float(), 6, method=method)
        assert out.dtype == torch.float32
        torch.testing.assert_close(out.double(), ref, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("L", [2, 6])
def test_equivariance_o3(L):
    x1 = torch.randn(3, (L + 1) ** 2, dtype=torch.float64)
    x2 = torch.randn(3, (L + 1) ** 2, dtype=torch.float64)
    irreps = sphere_irreps(L, 1)
    assert_equivariant(lambda a, b: gaunt_tensor_product(a, b, L), O(3), (irreps, irreps), irreps,
                       inputs=(x1, x2))


def test_auto_resolves_to_a_real_method():
    for L in range(20):
        assert choose_method(L, L, L, "cpu", torch.float32) in ("direct", "dense", "grid", "fft")


def test_bad_inputs():
    x = torch.randn(2, 9)
    with pytest.raises(ValueError, match=r"\(L\+1\)\*\*2"):
        gaunt_tensor_product(torch.randn(2, 10), x)
    with pytest.raises(ValueError, match="lmax_out must be >= 0"):
        gaunt_tensor_product(x, x, -1)
    with pytest.raises(TypeError, match="floating"):
        gaunt_tensor_product(torch.ones(2, 9, dtype=torch.long), x)
    with pytest.raises(TypeError, match="same dtype"):
        gaunt_tensor_product(x, x.double())
    with pytest.raises(ValueError, match="method must be one of"):
        gaunt_tensor_product(x, x, method="magic")
    with pytest.raises(ValueError, match="do not broadcast"):
        gaunt_tensor_product(torch.randn(3, 9), torch.randn(2, 9))
    with pytest.raises(TypeError, match="lmax_out must be an int"):
        gaunt_tensor_product(x, x, 2.5)


@pytest.mark.parametrize("method", ("grid", "fft"))
def test_gradgradcheck_of_adjoint_backward(method):
    x1 = torch.randn(2, 4, dtype=torch.float64, requires_grad=True)
    x2 = torch.randn(2, 9, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradgradcheck(lambda a, b: gaunt_tensor_product(a, b, 3, method=method), (x1, x2))
