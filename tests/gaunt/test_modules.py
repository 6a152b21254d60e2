"""Gaunt modules: channel-wise products, the e3nn drop-in, powers, many-body features, layout and parity."""

import pytest
import torch
from e3nn import o3

from geomlin.gaunt import (
    PSEUDO,
    GauntTensorProduct,
    ManyBodyGaunt,
    SphereGauntProduct,
    gaunt_parity_product,
    gaunt_power,
    gaunt_tensor_product,
    irreps_to_sphere,
    sphere_irreps,
    sphere_to_irreps,
    split_parity,
)
from geomlin.groups import O
from geomlin.reps import NATURAL, SphereCoefficients
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


def test_irreps_drop_in_equals_sphere_product_for_natural_irreps():
    """Identity channel mixing and unit weights: the e3nn-layout module is the channel-wise Gaunt product."""
    C = 3
    tp = GauntTensorProduct(sphere_irreps(2, C), sphere_irreps(2, C), sphere_irreps(3, C)).double()
    assert isinstance(tp, GauntTensorProduct) and tp.channels == C
    with torch.no_grad():
        for p in list(tp.mix1) + list(tp.mix2) + list(tp.mix_out):
            p.copy_(torch.eye(C))
    x1, x2 = torch.randn(4, C, 9, dtype=torch.float64), torch.randn(4, C, 9, dtype=torch.float64)
    out = tp(sphere_to_irreps(x1), sphere_to_irreps(x2))
    ref = gaunt_tensor_product(x1, x2, 3, method="direct")
    torch.testing.assert_close(irreps_to_sphere(out, sphere_irreps(3, C)), ref, atol=1e-12, rtol=0)


def test_irreps_drop_in_pseudo_parity_goes_to_pseudo_outputs():
    tp = GauntTensorProduct("0o+1e+2o", "0e+1o+2e", "0e+1o+0o+1e").double()
    with torch.no_grad():
        for p in list(tp.mix1) + list(tp.mix_out):
            p.fill_(1.0)
    assert tp.shared_in2  # multiplicity-1 harmonics: used as they are, shared by the channels
    x1, x2 = torch.randn(3, 9, dtype=torch.float64), torch.randn(3, 9, dtype=torch.float64)
    out = tp(x1, x2)
    ref = gaunt_tensor_product(x1, x2, 1, method="direct")  # pseudo x natural -> pseudo, numerically the product
    assert out[:, :4].abs().max() == 0  # no natural path
    torch.testing.assert_close(out[:, 4:], ref, atol=1e-12, rtol=0)


@pytest.mark.parametrize("shared_weights", [True, False])
def test_irreps_drop_in_is_o3_equivariant_for_any_parities(shared_weights):
    tp = randomized(GauntTensorProduct("3x0e+2x1o+1x1e+2x2e+1x2o", "1x0e+1x1o+1x2e+1x1e", "2x0e+2x0o+3x1o+1x1e+2x2e",
                                       channels=4, shared_weights=shared_weights)).double()
    assert tp.weight_numel == 4 * 3 + 4 * 3
    assert_equivariant(tp)
    x1 = torch.randn(5, tp.irreps_in1.dim, dtype=torch.float64)
    x2 = torch.randn(5, tp.irreps_in2.dim, dtype=torch.float64)
    if not shared_weights:
        with pytest.raises(ValueError, match="weight"):
            tp(x1, x2)
        assert tp(x1, x2, weight=torch.randn(5, tp.weight_numel, dtype=torch.float64)).shape == (5, tp.irreps_out.dim)


def test_irreps_drop_in_swaps_for_e3nn_in_one_line():
    """The e3nn call pattern of a convolution: per-edge weights from a radial MLP, same shapes out."""
    irreps_node, irreps_sh, irreps_out = o3.Irreps("8x0e+4x1o"), o3.Irreps.spherical_harmonics(2), o3.Irreps("8x0e+4x1o")
    for tp in (o3.FullyConnectedTensorProduct(irreps_node, irreps_sh, irreps_out, shared_weights=False),
               GauntTensorProduct(irreps_node, irreps_sh, irreps_out, shared_weights=False)):
        x = irreps_node.randn(10, -1)
        sh = o3.spherical_harmonics(irreps_sh, torch.randn(10, 3), True)
        weight = torch.randn(10, tp.weight_numel)
        assert tp(x, sh, weight).shape == (10, irreps_out.dim)


def test_module_deep_copies_and_pickles_as_the_irreps_form():
    import copy
    import io

    tp = GauntTensorProduct("2x0e+2x1o", "0e+1o", "2x0e")
    clone = copy.deepcopy(tp)
    assert isinstance(clone, GauntTensorProduct) and clone.irreps_out == tp.irreps_out
    buffer = io.BytesIO()
    torch.save(tp, buffer)
    buffer.seek(0)
    assert isinstance(torch.load(buffer, weights_only=False), GauntTensorProduct)


def test_irreps_round_trip_and_layout():
    irreps = o3.Irreps("3x0e+3x1o+3x2e")
    x = irreps.randn(5, -1, dtype=torch.float64)
    y = irreps_to_sphere(x, irreps)
    assert y.shape == (5, 3, 9)
    torch.testing.assert_close(y[:, 1, 1:4], x[:, 3 + 3:3 + 6])  # channel 1 of the 1o block
    torch.testing.assert_close(sphere_to_irreps(y), x)
    missing = irreps_to_sphere(o3.Irreps("2x0e+2x2e").randn(1, -1), "2x0e+2x2e")
    assert missing.shape == (1, 2, 9) and missing[..., 1:4].abs().max() == 0


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


