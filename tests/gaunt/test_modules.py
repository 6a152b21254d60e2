"""Gaunt modules: channel-wise products, powers, many-body features, layout and parity helpers."""

import pytest
import torch
from e3nn import o3

from geomlin.gaunt import (
    PSEUDO,
    GauntTensorProduct,
    ManyBodyGaunt,
    gaunt_parity_product,
    gaunt_power,
    gaunt_tensor_product,
    irreps_to_sphere,
    sphere_irreps,
    sphere_to_irreps,
    split_parity,
)
from geomlin.groups import O
from geomlin.testing import assert_equivariant


def _randomize(module):
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn_like(p))
    return module.double()


def test_gaunt_tensor_product_module_matches_formula():
    m = _randomize(GauntTensorProduct(2, 3, 4, channels=5))
    x1 = torch.randn(7, 5, 9, dtype=torch.float64)
    x2 = torch.randn(7, 5, 16, dtype=torch.float64)
    deg = lambda L: torch.repeat_interleave(torch.arange(L + 1), 2 * torch.arange(L + 1) + 1)
    ref = gaunt_tensor_product(x1 * m.weight1[:, deg(2)], x2 * m.weight2[:, deg(3)], 4, method="direct")
    torch.testing.assert_close(m(x1, x2), ref * m.weight_out[:, deg(4)], atol=1e-12, rtol=0)


def test_gaunt_tensor_product_module_equivariant():
    m = _randomize(GauntTensorProduct(3, 2, 4, channels=3))
    x1 = torch.randn(4, 3, 16, dtype=torch.float64)
    x2 = torch.randn(4, 3, 9, dtype=torch.float64)
    assert_equivariant(m, O(3), (sphere_irreps(3, 1), sphere_irreps(2, 1)), sphere_irreps(4, 1), inputs=(x1, x2))


def test_gaunt_tensor_product_module_errors():
    m = GauntTensorProduct(1, 1, 1, channels=4)
    with pytest.raises(ValueError, match="4 channels"):
        m(torch.randn(2, 3, 4), torch.randn(2, 4, 4))
    with pytest.raises(ValueError, match="lmax 1"):
        m(torch.randn(2, 4, 9), torch.randn(2, 4, 4))
    with pytest.raises(ValueError, match="lmax_out must be >= 0"):
        GauntTensorProduct(1, 1, -1, channels=2)


def test_irreps_round_trip_and_layout():
    irreps = o3.Irreps("3x0e+3x1o+3x2e")
    x = irreps.randn(5, -1, dtype=torch.float64)
    y = irreps_to_sphere(x, irreps)
    assert y.shape == (5, 3, 9)
    torch.testing.assert_close(y[:, 1, 1:4], x[:, 3 + 3:3 + 6])  # channel 1 of the 1o block
    torch.testing.assert_close(sphere_to_irreps(y), x)
    missing = irreps_to_sphere(o3.Irreps("2x0e+2x2e").randn(1, -1), "2x0e+2x2e")
    assert missing.shape == (1, 2, 9) and missing[..., 1:4].abs().max() == 0


def test_irreps_to_sphere_refuses_pseudo_and_uneven():
    with pytest.raises(ValueError, match="split_parity"):
        irreps_to_sphere(torch.randn(4), "1x0e+1x1e")
    with pytest.raises(ValueError, match="same multiplicity"):
        irreps_to_sphere(torch.randn(7), "1x0e+2x1o")
    with pytest.raises(ValueError, match="dimension"):
        irreps_to_sphere(torch.randn(5), "1x0e+1x1o")


def test_parity_classes_equivariant():
    irreps = o3.Irreps("2x0e+2x0o+2x1o+2x1e+2x2e+2x2o")
    L = 2
    nat_out, ps_out = sphere_irreps(2 * L, 1), sphere_irreps(2 * L, 1, PSEUDO)

    def fn(a, b):
        return gaunt_parity_product(split_parity(a, irreps), split_parity(b, irreps))

    x1, x2 = irreps.randn(3, -1, dtype=torch.float64), irreps.randn(3, -1, dtype=torch.float64)
    assert_equivariant(fn, O(3), (irreps, irreps), (nat_out, ps_out), inputs=(x1, x2))
    nat, ps = split_parity(x1, irreps)
    assert nat.shape == ps.shape == (3, 2, 9)


@pytest.mark.parametrize("nu", [1, 2, 3, 4])
def test_gaunt_power_matches_repeated_products(nu):
    x = torch.randn(3, 9, dtype=torch.float64)
    ref = x
    for _ in range(nu - 1):
        ref = gaunt_tensor_product(ref, x, method="dense")
    ref = torch.nn.functional.pad(ref, (0, max(0, 16 - ref.shape[1])))[:, :16]
    for method in ("grid", "dense", "fft"):
        torch.testing.assert_close(gaunt_power(x, nu, 3, method=method), ref, atol=1e-10, rtol=0)


def test_gaunt_power_errors():
    with pytest.raises(ValueError, match="nu must be"):
        gaunt_power(torch.randn(2, 4), 0)


def test_many_body_matches_sum_of_powers_and_is_equivariant():
    m = _randomize(ManyBodyGaunt(2, 3, channels=2, correlation=3))
    x = torch.randn(4, 2, 9, dtype=torch.float64)
    deg = lambda L: torch.repeat_interleave(torch.arange(L + 1), 2 * torch.arange(L + 1) + 1)
    a = x * m.weight_in[:, deg(2)]
    ref = sum(m.weight_nu[:, k, None] * gaunt_power(a, k + 1, 3, method="dense") for k in range(3))
    torch.testing.assert_close(m(x), ref * m.weight_out[:, deg(3)], atol=1e-10, rtol=0)
    assert_equivariant(m, O(3), sphere_irreps(2, 1), sphere_irreps(3, 1), inputs=(x,))
    assert torch.autograd.gradcheck(lambda t: ManyBodyGaunt(1, 1, 1, 2).double()(t),
                                    (torch.randn(2, 1, 4, dtype=torch.float64, requires_grad=True),))
