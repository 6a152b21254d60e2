"""SphereGauntProduct: the channel-wise product with weights, against the formula, and its declared types."""

import torch

from geomlin.gaunt import SphereGauntProduct, gaunt_tensor_product
from geomlin.reps import SphereCoefficients
from geomlin.testing import assert_equivariant
from tests.randomized import randomized


def _deg(L):
    return torch.repeat_interleave(torch.arange(L + 1), 2 * torch.arange(L + 1) + 1)


def test_gaunt_tensor_product_module_matches_formula():
    m = randomized(SphereGauntProduct(2, 3, 4, channels=5)).double()
    x1 = torch.randn(7, 5, 9, dtype=torch.float64)
    x2 = torch.randn(7, 5, 16, dtype=torch.float64)
    ref = gaunt_tensor_product(x1 * m.weight1[:, _deg(2)], x2 * m.weight2[:, _deg(3)], 4, method="direct")
    torch.testing.assert_close(m(x1, x2), ref * m.weight_out[:, _deg(4)], atol=1e-12, rtol=0)
    shared = torch.randn(7, 1, 16, dtype=torch.float64)  # one function for every channel
    ref = gaunt_tensor_product(x1 * m.weight1[:, _deg(2)], shared * m.weight2[:, _deg(3)], 4, method="direct")
    torch.testing.assert_close(m(x1, shared), ref * m.weight_out[:, _deg(4)], atol=1e-12, rtol=0)


def test_gaunt_tensor_product_declares_sphere_types():
    m = SphereGauntProduct(3, 2, 4, channels=3)
    assert m.type_in == (SphereCoefficients(3, 3), SphereCoefficients(2, 3))
    assert m.type_out == SphereCoefficients(4, 3)
    assert_equivariant(randomized(m).double())
