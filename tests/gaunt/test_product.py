"""gaunt_tensor_product: Clebsch-Gordan oracle (e3nn wigner_3j), pointwise products, every route against
the direct contraction, shared inputs, autograd."""

import math

import pytest
import torch
from e3nn import o3

from geomlin.gaunt import gaunt_tensor_product, sphere_irreps, spherical_harmonics
from geomlin.gaunt.method_tables import choose_method
from geomlin.gaunt.product import gaunt_rows
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


@pytest.mark.parametrize("L", [1, 3, 6])
def test_direct_against_wigner_3j_oracle(L):
    L2 = max(1, L - 1)
    Lo = min(L + L2, 10)  # e3nn's wigner_3j tables stop near l = 11
    x1 = torch.randn(3, (L + 1) ** 2, dtype=torch.float64)
    x2 = torch.randn(3, (L2 + 1) ** 2, dtype=torch.float64)
    ref = clebsch_gordan_oracle(x1, x2, L, L2, Lo)
    torch.testing.assert_close(gaunt_tensor_product(x1, x2, Lo, method="direct"), ref, atol=1e-10, rtol=0)


@pytest.mark.parametrize("L", range(13))
def test_every_route_matches_direct(L):
    """float64, 1e-12, every degree up to 12 (lmax_in1 = lmax_in2 = lmax_out = L); the Triton kernel is
    checked the same way under the interpreter in test_kernels.py."""
    x1 = torch.randn(3, (L + 1) ** 2, dtype=torch.float64)
    x2 = torch.randn(3, (L + 1) ** 2, dtype=torch.float64)
    ref = gaunt_tensor_product(x1, x2, L, method="direct")
    for method in EXACT:
        torch.testing.assert_close(gaunt_tensor_product(x1, x2, L, method=method), ref, atol=1e-12, rtol=0)


@pytest.mark.parametrize("L1,L2", [(1, 1), (2, 3), (4, 4), (7, 5)])
@pytest.mark.parametrize("method", EXACT)
def test_pointwise_product_at_random_points(L1, L2, method):
    """Independent oracle: the product of the two functions evaluated at random points."""
    x1 = torch.randn(2, (L1 + 1) ** 2, dtype=torch.float64)
    x2 = torch.randn(2, (L2 + 1) ** 2, dtype=torch.float64)
    pts = torch.randn(50, 3, dtype=torch.float64)
    x3 = gaunt_tensor_product(x1, x2, method=method)
    Y = spherical_harmonics(L1 + L2, pts)
    f1 = x1 @ Y[:, : (L1 + 1) ** 2].T
    f2 = x2 @ Y[:, : (L2 + 1) ** 2].T
    torch.testing.assert_close(x3 @ Y.T, f1 * f2, atol=1e-10, rtol=0)


def test_routes_agree_at_lmax16_with_unequal_degrees():
    x1 = torch.randn(3, 289, dtype=torch.float64)
    x2 = torch.randn(3, 49, dtype=torch.float64)
    ref = gaunt_tensor_product(x1, x2, 12, method="dense")
    for method in ("grid", "fft", "auto"):
        torch.testing.assert_close(gaunt_tensor_product(x1, x2, 12, method=method), ref, atol=1e-10, rtol=0)


@pytest.mark.parametrize("method", ("grid", "fft", "dense", "direct"))
def test_shared_and_reduced_channel_patterns(method):
    """x2 with one row per group (shared by the channels) and the channel-summed output used by the
    backward, against the same products with the shared input copied (the direct contraction)."""
    A, C, L1, L2, Lo = 4, 3, 3, 2, 4
    x1 = torch.randn(A * C, 16, dtype=torch.float64)
    x2 = torch.randn(A * C, 9, dtype=torch.float64)
    shared = torch.randn(A, 9, dtype=torch.float64)
    copied = shared.repeat_interleave(C, 0)
    ref = gaunt_rows(x1, copied, L1, L2, Lo, "direct")
    torch.testing.assert_close(gaunt_rows(x1, shared, L1, L2, Lo, method, C, 2), ref, atol=1e-12, rtol=0)
    torch.testing.assert_close(gaunt_rows(shared, x1, L2, L1, Lo, method, C, 1), ref, atol=1e-12, rtol=0)
    summed = gaunt_rows(x1, x2, L1, L2, Lo, "direct").view(A, C, -1).sum(1)
    torch.testing.assert_close(gaunt_rows(x1, x2, L1, L2, Lo, method, C, 0, True), summed, atol=1e-12, rtol=0)


def test_broadcast_channel_axis_is_shared_and_exact():
    x1 = torch.randn(6, 4, 25, dtype=torch.float64, requires_grad=True)
    sh = torch.randn(6, 1, 9, dtype=torch.float64, requires_grad=True)
    out = gaunt_tensor_product(x1, sh, 4, method="grid")
    ref = gaunt_tensor_product(x1, sh.expand(6, 4, 9), 4, method="direct")
    torch.testing.assert_close(out, ref, atol=1e-12, rtol=0)
    g = torch.randn_like(out)
    ga = torch.autograd.grad(out, (x1, sh), g)
    gb = torch.autograd.grad(ref, (x1, sh), g)
    for a, b in zip(ga, gb):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=0)


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
def test_gradcheck_and_gradgradcheck(method):
    x1 = torch.randn(2, 3, 9, dtype=torch.float64, requires_grad=True)
    x2 = torch.randn(2, 1, 4, dtype=torch.float64, requires_grad=True)  # shared: exercises every pattern
    fn = lambda a, b: gaunt_tensor_product(a, b, 3, method=method)
    assert torch.autograd.gradcheck(fn, (x1, x2))
    assert torch.autograd.gradgradcheck(fn, (x1, x2))


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
    empty = gaunt_tensor_product(torch.randn(0, 3, 9), torch.randn(1, 9), 2)
    assert empty.shape == (0, 3, 9)


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
    assert_equivariant(lambda a, b: gaunt_tensor_product(a, b, L, method="grid"), O(3), (irreps, irreps), irreps,
                       inputs=(x1, x2))


def test_auto_resolves_to_a_real_method():
    for L in range(20):
        assert choose_method(L, L, L, "cpu", torch.float32) in ("dense", "grid")


def _grid_product_and_grads(fn, x1, x2):
    x1, x2 = x1.detach().requires_grad_(), x2.detach().requires_grad_()
    out = fn(x1, x2)
    return (out, *torch.autograd.grad((out * out.detach().cos()).sum(), (x1, x2)))


@pytest.mark.parametrize("backend", ["aot_eager", pytest.param("inductor", marks=pytest.mark.slow)])
def test_grid_route_compiles_to_the_eager_numbers(backend):
    """``method="grid"`` inside ``torch.compile(fullgraph=True)`` (one opaque operator forward and
    backward) gives the eager route's product and gradients; oracle: the eager call. A shared
    second input (one row for every channel) takes the fused backward's channel sum."""
    g = torch.Generator().manual_seed(0)
    x1 = torch.randn(4, 3, 9, generator=g)
    for x2 in (torch.randn(4, 3, 16, generator=g), torch.randn(4, 1, 16, generator=g)):
        def fn(a, b):
            return gaunt_tensor_product(a, b, 3, method="grid")

        torch._dynamo.reset()
        compiled = torch.compile(fn, fullgraph=True, backend=backend)
        for got, want in zip(_grid_product_and_grads(compiled, x1, x2), _grid_product_and_grads(fn, x1, x2)):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_gaunt_operator_multiplies_by_its_function():
    """Oracle: the product on the grid route (an independent transform) with the function as its second input."""
    from geomlin.gaunt import gaunt_operator

    f = torch.randn(5, 9, dtype=torch.float64, requires_grad=True)
    y = torch.randn(5, 16, dtype=torch.float64)
    M = gaunt_operator(f, 3, 4)
    assert M.shape == (5, 25, 16)
    ref = gaunt_tensor_product(y, f, 4, method="grid")
    torch.testing.assert_close((M @ y[..., None])[..., 0], ref, atol=1e-12, rtol=0)
    assert torch.autograd.gradcheck(lambda t: gaunt_operator(t, 1, 2), (f[:2, :4].detach().requires_grad_(),))
