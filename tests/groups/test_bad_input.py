"""Bad input to geomlin.groups: the rotation helpers (NaN never becomes a finite distance, reflections are
not silently encoded, batch mismatches name both arguments) and groups given by generators (generators of
no finite or compact group, and low-precision generators that cannot resolve their group, are refused in
one line by a public exception from geomlin's own code)."""

import math
import traceback

import pytest
import torch

from geomlin.groups import (
    SO,
    Group,
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


def _rotation(angle: float, dtype=torch.float32) -> torch.Tensor:
    return torch.tensor([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]], dtype=dtype)


#: Two involutions whose product is -(a shear): every generator has order 2, the group they generate is unbounded.
FLIP = torch.diag(torch.tensor([1.0, -1.0], dtype=torch.float64))
SKEW_FLIP = torch.tensor([[-1.0, 0.0], [2.0, 1.0]], dtype=torch.float64)
SHEAR = torch.tensor([[1.0, 1.0], [0.0, 1.0]], dtype=torch.float64)
#: The enumeration limit in these tests (the library's MAX_ENUMERATED_ORDER is 50000: seconds per case).
SMALL_LIMIT = 2000

GENERATOR_CASES = [
    ("diag(2, 1): infinite order", lambda: Group(discrete_generators=torch.diag(torch.tensor([2.0, 1.0]))[None]),
     "discrete_generators[0] has infinite order: its determinant is 2"),
    ("diag(2, 1) as int lists", lambda: Group(discrete_generators=[[[2, 0], [0, 1]]]), "infinite order"),
    ("diag(2, 1/2): det 1, powers grow",
     lambda: Group(discrete_generators=torch.diag(torch.tensor([2.0, 0.5], dtype=torch.float64))[None]),
     "its powers grow without bound"),
    ("a shear: det 1, powers grow linearly", lambda: Group(discrete_generators=[[[1, 1], [0, 1]]]),
     "its powers grow without bound"),
    ("an infinite-order element among finite ones",
     lambda: Group(discrete_generators=torch.stack([FLIP, 3 * torch.eye(2, dtype=torch.float64)])),
     "discrete_generators[1] has infinite order"),
    ("diag(1.5, 1/1.5) in float32: unbounded at float32's tolerance",
     lambda: Group(discrete_generators=torch.diag(torch.tensor([1.5, 1 / 1.5]))[None]), "the group is unbounded"),
    ("a rounded rotation in float64 (taken as exact)",
     lambda: Group(discrete_generators=torch.tensor([[[0.5, -0.866], [0.866, 0.5]]], dtype=torch.float64)),
     "pass them as float32"),
    ("float32 C(5000): finer than float32 resolves", lambda: Group(discrete_generators=_rotation(2 * math.pi / 5000)[None]),
     "pass float64 generators"),
    ("two involutions whose product is a shear", lambda: Group(discrete_generators=torch.stack([FLIP, SKEW_FLIP])),
     "discrete_generators preserve no inner product (the one symmetric form they preserve is not definite)"),
    ("SL(2, Z) from two elements of finite order", lambda: Group(discrete_generators=[[[0, -1], [1, 0]], [[0, -1], [1, 1]]]),
     "discrete_generators preserve no inner product (they preserve no symmetric form)"),
    ("elements of a group with an unbounded block",
     lambda: Group(discrete_generators=torch.stack([torch.block_diag(FLIP, FLIP),
                                                    torch.block_diag(SKEW_FLIP, _rotation(1.0, torch.float64))]),
                   name="Mixed").elements(), f"Mixed cannot be enumerated: it has more than {SMALL_LIMIT} elements"),
    ("elements of an infinite compact group",
     lambda: Group(discrete_generators=_rotation(1.0, torch.float64)[None], name="Irrational").elements(),
     f"Irrational cannot be enumerated: it has more than {SMALL_LIMIT} elements"),
    ("a continuous group is not enumerated", lambda: SO(2).elements(), "has a Lie algebra and cannot be enumerated"),
    ("a rotation is no element of a sheared C3",
     lambda: Group(discrete_generators=(SHEAR @ _rotation(2 * math.pi / 3, torch.float64) @ SHEAR.inverse())[None])
     .check_element(_rotation(2 * math.pi / 3, torch.float64)), "must be form-preserving (g^T B g = B)"),
]


@pytest.mark.parametrize("name,call,phrase", GENERATOR_CASES, ids=[c[0] for c in GENERATOR_CASES])
def test_generators_of_no_finite_group_are_refused(name, call, phrase, monkeypatch):
    monkeypatch.setattr("geomlin.groups.base.MAX_ENUMERATED_ORDER", SMALL_LIMIT)
    with pytest.raises(ValueError) as info:
        call()
    assert type(info.value) is ValueError  # a public exception, not a private subclass
    message = str(info.value)
    assert phrase in message, f"{message!r} lacks {phrase!r}"
    assert "\n" not in message
    assert "/geomlin/" in traceback.extract_tb(info.tb)[-1].filename
