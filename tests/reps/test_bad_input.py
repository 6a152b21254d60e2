"""Bad input to geomlin.reps' feature types and the e3nn bridge: a group that does not act on the
declared space is refused; half-precision group elements get their Wigner matrices."""

import pytest
import torch

from geomlin.groups import SO, O
from geomlin.reps.irreps import IrrepsRep
from geomlin.reps.types import Frames, Positions, SphereCoefficients, Vectors
from tests.refusals import assert_refused

CASES = [
    ("Positions(3) under SO(2)", lambda: Positions(3, group=SO(2)), ValueError,
     "Positions(3, group=SO(2)): the group acts on R^2 but the features live in R^3"),
    ("Vectors(2) under O(3)", lambda: Vectors(2, group=O(3)), ValueError, "acts on R^3 but the features live in R^2"),
    ("Frames(3) under SO(4)", lambda: Frames(3, group=SO(4)), ValueError, "Frames(3, group=SO(4))"),
    ("sphere coefficients under SO(2)", lambda: SphereCoefficients(2, group=SO(2)), ValueError,
     "SphereCoefficients(3, group=SO(2))"),
]


@pytest.mark.parametrize("name,call,error,phrase", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_refused(name, call, error, phrase):
    assert_refused(call, error, phrase)


def test_matching_groups_are_accepted():
    assert Positions(2, group=SO(2)).group.d == 2
    assert Vectors(3, 4, group=SO(3)).shape == (4, 3)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_elements_get_wigner_matrices(dtype):
    rep = IrrepsRep("1o + 2e")
    g = O(3).sample(4, generator=torch.Generator().manual_seed(1))
    low = g.to(dtype)
    D = rep.rho(low)
    assert D.dtype == dtype
    # oracle: the float64 Wigner matrices of the unrounded elements, to a few units of the dtype's resolution
    exact = rep.rho(g)
    torch.testing.assert_close(D.to(torch.float64), exact, rtol=0, atol=4 * torch.finfo(dtype).eps)
