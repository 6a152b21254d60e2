"""GauntTensorProduct accepts the Irreps specs e3nn accepts (oracle: ``o3.Irreps`` of the same spec)."""

import pytest
import torch
from e3nn import o3

from geomlin.gaunt import GauntTensorProduct
from geomlin.testing import assert_equivariant

SPECS = [
    ("2x0e + 1x1o", "1x1o", "1x0e + 2x1o"),
    ([(2, (0, 1)), (1, (1, -1))], [(1, (1, -1))], [(3, (1, -1))]),
    ([(2, "0e"), (1, "1o")], ((1, "1o"),), "3x1o"),
    ("0x0e + 2x1o", "1x1o", "2x0e + 0x2e"),
    (o3.Irreps("1x0e"), [(1, (1, -1))], o3.Irrep("1o")),
]


@pytest.mark.parametrize("spec", SPECS, ids=str)
def test_every_e3nn_spec_builds_the_drop_in(spec):
    torch.manual_seed(0)
    tp = GauntTensorProduct(*spec).double()
    irreps = [o3.Irreps(s) for s in spec]
    assert [tp.irreps_in1.dim, tp.irreps_in2.dim, tp.irreps_out.dim] == [i.dim for i in irreps]
    x1, x2 = irreps[0].randn(4, -1, dtype=torch.float64), irreps[1].randn(4, -1, dtype=torch.float64)
    assert tp(x1, x2).shape == (4, irreps[2].dim)
    assert_equivariant(tp)


def test_non_irreps_specs_are_refused_by_name():
    with pytest.raises(ValueError, match="irreps_in1 could not be parsed"):
        GauntTensorProduct("2x0q", "1x1o", "1x1o")
    with pytest.raises(TypeError, match="irreps_in2 must be e3nn Irreps"):
        GauntTensorProduct("1x0e", 1.5, "1x1o")


@pytest.mark.parametrize("spec", [("", "1x1o", "2x0e + 1x1o"), ("2x0e", "", "1x0e"), ("1x0e + 1x1o", "1x1o", "")],
                         ids=str)
def test_empty_irreps_give_zero_features_like_e3nn(spec):
    """Oracle: e3nn's FullyConnectedTensorProduct with the same (partly empty) irreps."""
    tp = GauntTensorProduct(*spec).double()
    e3 = o3.FullyConnectedTensorProduct(*spec).double()
    x1 = torch.randn(3, o3.Irreps(spec[0]).dim, dtype=torch.float64)
    x2 = torch.randn(3, o3.Irreps(spec[1]).dim, dtype=torch.float64)
    out, expected = tp(x1, x2), e3(x1, x2)
    assert out.shape == expected.shape == (3, o3.Irreps(spec[2]).dim)
    assert torch.equal(out, torch.zeros_like(out)) and torch.equal(expected, torch.zeros_like(expected))


def test_degrees_are_refused_with_the_sphere_layout_named():
    with pytest.raises(TypeError, match="use SphereGauntProduct"):
        GauntTensorProduct(2, 2, 2, 4)
