"""geomlin.precision: the one autocast rule, and the checks that follow it under autocast.

Oracles: dtypes written out (float64 stays, half precisions compute in float32), and exact rotations
(permutations and sign flips, exact in every dtype) that must pass an orthogonality test in every
precision, next to a shear that must not.
"""

from __future__ import annotations

import pytest
import torch

from geomlin import validation
from geomlin.algebra import CliffordAlgebra, pga
from geomlin.groups import SO
from geomlin.precision import at_least_float32, compute_dtype, full_precision, output_dtype, working_dtype
from geomlin.reps.irreps import wigner_D_from_matrix
from tests.device import simulated as sim

HALF = [torch.bfloat16, torch.float16]


def _rotations(dtype=torch.float32) -> torch.Tensor:
    """Exact rotations (signed permutation matrices, det +1) and a float32 one from a QR factor."""
    perm = torch.tensor([[[0.0, 1, 0], [0, 0, 1], [1, 0, 0]], [[-1.0, 0, 0], [0, -1, 0], [0, 0, 1]]])
    q, _ = torch.linalg.qr(torch.randn(3, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64))
    q = q * torch.linalg.det(q)
    return torch.cat([perm, q[None]]).to(dtype)


def test_the_rule_written_out():
    assert working_dtype(torch.float64) == torch.float64
    assert [working_dtype(d) for d in (torch.float32, *HALF)] == [torch.float32] * 3
    x = torch.ones(2, dtype=torch.bfloat16)
    assert at_least_float32(x).dtype == torch.float32 and output_dtype(x) == torch.bfloat16
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert output_dtype(x) == torch.float32  # the precision it was computed in
        assert compute_dtype(x, "x") == torch.float32
        with full_precision(x):
            assert not torch.is_autocast_enabled("cpu")
            assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.float32
        assert torch.is_autocast_enabled("cpu")
    with pytest.raises(TypeError, match="x must have torch.float32 or torch.float64, got torch.bfloat16"):
        compute_dtype(x, "x")
    with pytest.raises(TypeError, match="got torch.int64"):
        compute_dtype(torch.ones(2, dtype=torch.int64), "x")
    assert output_dtype(torch.ones(1, device="meta")) == torch.float32  # autocast does not know meta


@pytest.mark.parametrize("dtype", HALF, ids=["bf16", "fp16"])
@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_exact_float32_rotations_pass_the_checks_under_autocast(device, dtype):
    """Issue 34: under bf16 autocast the orthogonality test ran R R^T in bfloat16 and refused exact float32
    rotations. Inside a deferred-checks scope on the stand-in the calls record no event; outside one they
    pass at once; a shear is still refused."""
    R, t = _rotations(), torch.tensor([0.5, -1.0, 2.0])
    g3 = CliffordAlgebra((1, 1, 1))
    if device == "sim":
        R, t = sim.to_sim((R, t))
    autocast = torch.autocast(sim.DEVICE_TYPE if device == "sim" else "cpu", dtype=dtype)
    calls = [lambda: validation.check_orthogonal(R, "R", special=True), lambda: pga.matrix_to_quaternion(R),
             lambda: pga.embed_rigid_motion(R, t.expand(3, 3)), lambda: wigner_D_from_matrix("1x1o+1x2e", R),
             lambda: g3.check_orthogonal(R, "R"), lambda: SO(3).check_element(R)]
    with validation.deferred_checks(), sim.watch() as log, autocast:
        for call in calls:
            call()
    # no sync from the checks (the Wigner matrix's matrix_exp reads its norms back on CUDA, as the stand-in records)
    assert not [e for e in log.events if e.kind != "upload" and "_wigner_D" not in e.where], log.report()
    with autocast:
        for call in calls:
            call()
        shear = R + 0.3 * torch.triu(torch.ones_like(R), diagonal=1)
        with pytest.raises(ValueError, match="orthogonal"):
            validation.check_orthogonal(shear, "R")
        with pytest.raises(ValueError, match="quadratic form"):
            g3.check_orthogonal(shear, "R")
        with pytest.raises(ValueError, match="not an element of SO"):
            SO(3).check_element(shear)


def test_half_precision_rotations_are_tested_with_their_own_tolerance():
    for dtype in HALF:
        validation.check_orthogonal(_rotations(dtype), "R", special=True)
        with pytest.raises(ValueError, match="orthogonal"):
            validation.check_orthogonal(_rotations(dtype) * 1.2, "R")
