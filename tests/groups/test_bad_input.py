"""Bad input to geomlin.groups' rotation helpers: NaN never becomes a finite distance, reflections are
not silently encoded, batch mismatches name both arguments."""

import pytest
import torch

from geomlin.groups import (
    SO,
    chordal_distance,
    geodesic_distance,
    matrix_to_rotation_6d,
    rotation_6d_to_matrix,
)
from tests.refusals import assert_refused

NAN = float("nan")
EYE = torch.eye(3, dtype=torch.float64)
MIRROR = torch.diag(torch.tensor([1.0, 1.0, -1.0], dtype=torch.float64))

CASES = [
    ("6D of a NaN matrix", lambda: matrix_to_rotation_6d(torch.full((3, 3), NAN)), ValueError, "R contains NaN"),
    ("6D of a reflection", lambda: matrix_to_rotation_6d(MIRROR), ValueError, "R must be rotations (det +1)"),
    ("6D of a reflection, rows convention", lambda: matrix_to_rotation_6d(MIRROR, "rows"), ValueError,
     "R must be rotations (det +1)"),
    ("6D of a shear", lambda: matrix_to_rotation_6d(EYE + 0.3 * torch.triu(torch.ones(3, 3), 1).double()), ValueError,
     "R must be orthogonal"),
    ("geodesic batch mismatch", lambda: geodesic_distance(EYE.expand(4, 3, 3), EYE.expand(5, 3, 3)), ValueError,
     "batch shapes of R1, R2 must be equal or broadcastable, got R1 (4,), R2 (5,)"),
    ("chordal batch mismatch", lambda: chordal_distance(EYE.expand(4, 3, 3), EYE.expand(5, 3, 3)), ValueError,
     "got R1 (4,), R2 (5,)"),
    ("geodesic of a NaN matrix", lambda: geodesic_distance(torch.full((3, 3), NAN, dtype=torch.float64), EYE),
     ValueError, "R1 contains NaN"),
]


@pytest.mark.parametrize("name,call,error,phrase", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_refused(name, call, error, phrase):
    assert_refused(call, error, phrase)


@pytest.mark.parametrize("where", [(0, 0), (2, 1)])
def test_chordal_distance_of_nan_is_nan_not_zero(where):
    R = torch.eye(3, dtype=torch.float64).repeat(2, 1, 1)
    R[0][where] = NAN
    d = chordal_distance(R, torch.eye(3, dtype=torch.float64))
    assert torch.isnan(d[0])  # a NaN prediction must not get a zero loss
    assert d[1] == 0  # coinciding rotations: exactly zero ...
    R.requires_grad_(True)
    ok = torch.eye(3, dtype=torch.float64, requires_grad=True)
    chordal_distance(ok, torch.eye(3, dtype=torch.float64)).backward()
    assert ok.grad.eq(0).all()  # ... with a zero (not NaN) derivative there


def test_six_d_round_trip_of_rotations_still_holds():
    R = SO(3).sample(8, generator=torch.Generator().manual_seed(0))
    for convention in ("columns", "rows"):
        back = rotation_6d_to_matrix(matrix_to_rotation_6d(R, convention), convention)
        torch.testing.assert_close(back, R, rtol=0, atol=1e-12)
