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
