"""Gaunt powers and ManyBodyGaunt against repeated pairwise products (the direct contraction)."""

import pytest
import torch

from geomlin.gaunt import ManyBodyGaunt, gaunt_power, gaunt_tensor_product
from geomlin.reps import NATURAL, SphereCoefficients
from geomlin.testing import assert_equivariant
from tests.randomized import randomized


def _deg(L):
    return torch.repeat_interleave(torch.arange(L + 1), 2 * torch.arange(L + 1) + 1)


@pytest.mark.parametrize("nu", [1, 2, 3, 4])
def test_gaunt_power_matches_repeated_products(nu):
    x = torch.randn(3, 9, dtype=torch.float64)
    ref = x
    for _ in range(nu - 1):
        ref = gaunt_tensor_product(ref, x, method="direct")
    ref = torch.nn.functional.pad(ref, (0, max(0, 16 - ref.shape[1])))[:, :16]
    for method in ("grid", "dense", "fft"):
        torch.testing.assert_close(gaunt_power(x, nu, 3, method=method), ref, atol=1e-10, rtol=0)


def test_many_body_matches_sum_of_powers_and_is_equivariant():
    m = randomized(ManyBodyGaunt(2, 3, channels=2, correlation=3)).double()
    assert m.type_in == SphereCoefficients(2, 2, NATURAL)
    x = torch.randn(4, 2, 9, dtype=torch.float64)
    a = x * m.weight_in[:, _deg(2)]
    ref = sum(m.weight_nu[:, k, None] * gaunt_power(a, k + 1, 3, method="direct") for k in range(3))
    torch.testing.assert_close(m(x), ref * m.weight_out[:, _deg(3)], atol=1e-10, rtol=0)
    assert_equivariant(m)
    small = randomized(ManyBodyGaunt(1, 1, 1, 2)).double()
    t = torch.randn(2, 1, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(small, (t,))
    assert torch.autograd.gradgradcheck(small, (t,))
