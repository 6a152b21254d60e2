"""Rotation representations: 6D (Zhou et al. 2019), Procrustes / polar factor (Levinson et al. 2020),
distances, and the sync-free solvers behind them (Jacobi eigensolver and SVD). Oracles: roma (dev
extra), brute-force search for the nearest rotation, finite differences, torch.linalg.eigh / svd,
the CPU (for the simulated accelerator)."""

import math

import pytest
import torch

from geomlin.groups import (
    SO,
    O,
    chordal_distance,
    geodesic_distance,
    matrix_to_rotation_6d,
    rotation_6d_to_matrix,
    special_procrustes,
)
from geomlin.linalg import symmetric_eigh
from geomlin.testing import assert_equivariant, equivariance_error
from tests.device import simulated as sim  # registers the stand-in before any backward pass starts autograd
from tests.oracles import require
from tests.test_linalg import ROUNDING, general_matrices

EYE = torch.eye(3, dtype=torch.float64)


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


def _left(g, M):
    """``g M`` on ``(..., 3, 3)`` matrices."""
    return g.to(M.dtype) @ M


def _six_d_action(g, d6):
    """Both 3-vectors of a 6D representation rotated."""
    return torch.cat([d6[..., :3] @ g.T, d6[..., 3:] @ g.T], dim=-1)


def test_round_trips_are_exact_in_both_conventions():
    R = SO(3).sample(64, generator=_gen())
    for conv in ("columns", "rows"):
        d6 = matrix_to_rotation_6d(R, conv)
        assert d6.shape == (64, 6)
        assert (rotation_6d_to_matrix(d6, conv) - R).abs().max() < 1e-14
    # the columns convention stores the first two columns, the rows one the first two rows
    assert torch.equal(matrix_to_rotation_6d(R)[:, :3], R[:, :, 0])
    assert torch.equal(matrix_to_rotation_6d(R, "rows")[:, 3:], R[:, 1, :])
    # 6D -> R -> 6D is the Gram-Schmidt normalisation: idempotent, not the identity
    d6 = torch.randn(10, 6, dtype=torch.float64, generator=_gen(1))
    once = matrix_to_rotation_6d(rotation_6d_to_matrix(d6))
    assert (matrix_to_rotation_6d(rotation_6d_to_matrix(once)) - once).abs().max() < 1e-14
    assert (once - d6).abs().max() > 1e-3


def test_six_d_gives_rotations_and_is_so3_equivariant():
    d6 = torch.randn(8, 6, dtype=torch.float64, generator=_gen(2))
    R = rotation_6d_to_matrix(d6)
    assert (R.transpose(-1, -2) @ R - EYE).abs().max() < 1e-14
    assert (torch.linalg.det(R) - 1).abs().max() < 1e-14
    assert_equivariant(rotation_6d_to_matrix, SO(3), _six_d_action, _left, inputs=(d6,))
    # rows: R -> R g^T
    assert_equivariant(lambda x: rotation_6d_to_matrix(x, "rows"), SO(3), _six_d_action,
                       lambda g, M: M @ g.T.to(M.dtype), inputs=(d6,))
    # a reflection cannot be represented: the cross product is a pseudovector
    assert equivariance_error(rotation_6d_to_matrix, O(3), _six_d_action, _left, inputs=(d6,)) > 0.1


def test_procrustes_equivariance_special_so3_polar_o3():
    M = torch.randn(8, 3, 3, dtype=torch.float64, generator=_gen(3))
    assert_equivariant(special_procrustes, SO(3), _left, _left, inputs=(M,))
    polar = lambda x: special_procrustes(x, special=False)
    assert_equivariant(polar, O(3), _left, _left, inputs=(M,))
    # right multiplication too: R(M Q) = R(M) Q
    assert_equivariant(polar, O(3), lambda g, x: x @ g.to(x.dtype), lambda g, x: x @ g.to(x.dtype), inputs=(M,))
    # the rotation variant is NOT reflection-equivariant (its det is always +1)
    assert equivariance_error(special_procrustes, O(3), _left, _left, inputs=(M,)) > 0.1


@pytest.mark.parametrize("special", [True, False])
def test_nearest_rotation_beats_a_brute_force_search(special):
    """Oracle: |M - R|_F <= |M - Q|_F for 4000 random Q and for small perturbations of R."""
    M = torch.randn(6, 3, 3, dtype=torch.float64, generator=_gen(4))
    R = special_procrustes(M, special=special)
    det = torch.linalg.det(R)
    if special:
        assert (det - 1).abs().max() < 1e-12
    else:
        assert torch.equal(torch.sign(det), torch.sign(torch.linalg.det(M)))
    group = SO(3) if special else O(3)
    Q = group.sample(4000, generator=_gen(5))
    if not special:  # compare within the component of R
        Q = Q * torch.sign(torch.linalg.det(Q))[:, None, None]
    best = chordal_distance(M[:, None], R[:, None]).squeeze(1)
    for b in range(M.shape[0]):
        Qb = Q * det[b] if not special else Q
        assert best[b] <= chordal_distance(M[b], Qb).min() + 1e-12
        # local optimality: small rotations of R never get closer
        small = torch.linalg.matrix_exp(1e-3 * _skew(torch.randn(200, 3, dtype=torch.float64, generator=_gen(b))))
        assert best[b] <= chordal_distance(M[b], small @ R[b]).min() + 1e-15


def _skew(w):
    z = torch.zeros_like(w[..., 0])
    return torch.stack([torch.stack([z, -w[..., 2], w[..., 1]], -1), torch.stack([w[..., 2], z, -w[..., 0]], -1),
                        torch.stack([-w[..., 1], w[..., 0], z], -1)], -2)


def test_procrustes_of_a_rotation_is_itself_and_its_gradient_is_finite():
    R = SO(3).sample(5, generator=_gen(6)).requires_grad_(True)
    out = special_procrustes(R)
    assert (out - R).abs().max() < 1e-13
    G = torch.randn(5, 3, 3, dtype=torch.float64, generator=_gen(7))
    (grad,) = torch.autograd.grad((out * G).sum(), R)
    assert torch.isfinite(grad).all()
    # Oracle: at M = R the derivative is the projection onto the tangent space,
    # dR = R skew(R^T dM) (Omega_ij = (X_ij - X_ji) / 2), so grad = R skew(R^T G).
    Rd = R.detach()
    A = Rd.transpose(-1, -2) @ G
    # (the damping t / (t^2 + eps^2) changes 1/2 by eps^2 / 4 relative)
    assert (grad - Rd @ (A - A.transpose(-1, -2)) / 2).abs().max() < 1e-9
    # torch's own SVD backward is not finite there (repeated singular values): why the custom one exists
    U, _, Vh = torch.linalg.svd(R)
    naive = torch.autograd.grad(((U @ Vh) * G).sum(), R)[0]
    assert not torch.isfinite(naive).all()


@pytest.mark.parametrize("special", [True, False])
def test_procrustes_gradient_matches_finite_differences(special):
    M = torch.randn(3, 3, 3, dtype=torch.float64, generator=_gen(8)).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda x: special_procrustes(x, special=special, gradient_eps=1e-12), (M,))
    # repeated singular values away from a rotation: M = U diag(2, 2, 0.5) V^T
    U, V = SO(3).sample(2, generator=_gen(9))
    Mr = (U @ torch.diag(torch.tensor([2.0, 2.0, 0.5], dtype=torch.float64)) @ V.T).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda x: special_procrustes(x, special=special, gradient_eps=1e-12), (Mr,))


def test_distances():
    R1, R2 = SO(3).sample(2, generator=_gen(10))
    angle = torch.tensor([0.0, 1e-8, 0.3, 2.0, math.pi - 1e-6], dtype=torch.float64)
    axis = torch.tensor([0.0, 0.6, 0.8], dtype=torch.float64)
    Rs = torch.linalg.matrix_exp(angle[:, None, None] * _skew(axis))
    got = geodesic_distance(R1.expand(5, 3, 3), R1 @ Rs)
    assert (got - angle).abs().max() < 1e-7
    assert (got[1] - 1e-8).abs() < 1e-15  # accurate for small angles (acos would give 0 or ~1.5e-8)
    assert torch.allclose(chordal_distance(R1, R2), (R1 - R2).norm())
    x = R1.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(geodesic_distance(x, R1), x)
    assert torch.isfinite(g).all()


def test_roma_agrees():
    roma = require("roma")
    M = torch.randn(16, 3, 3, dtype=torch.float64, generator=_gen(11))
    assert (special_procrustes(M) - roma.special_procrustes(M)).abs().max() < 1e-12
    assert (special_procrustes(M, special=False) - roma.procrustes(M)).abs().max() < 1e-12
    # roma orthonormalises the first two columns of a 3x2 matrix: our "columns" convention
    d6 = torch.randn(16, 6, dtype=torch.float64, generator=_gen(12))
    cols = torch.stack([d6[:, :3], d6[:, 3:]], dim=-1)
    assert (rotation_6d_to_matrix(d6) - roma.special_gramschmidt(cols)).abs().max() < 1e-14
    # and the gradients of the Procrustes maps agree where both are defined
    Mg = M.clone().requires_grad_(True)
    G = torch.randn(16, 3, 3, dtype=torch.float64, generator=_gen(13))
    (ours,) = torch.autograd.grad((special_procrustes(Mg) * G).sum(), Mg)
    (theirs,) = torch.autograd.grad((roma.special_procrustes(Mg, method="svd") * G).sum(), Mg)
    assert (ours - theirs).abs().max() < 1e-8
    angle = geodesic_distance(special_procrustes(M), SO(3).sample(16, generator=_gen(14)))
    R2 = SO(3).sample(16, generator=_gen(14))
    assert (geodesic_distance(special_procrustes(M), R2)
            - roma.rotmat_geodesic_distance(special_procrustes(M), R2)).abs().max() < 1e-12
    assert angle.shape == (16,)


@pytest.mark.parametrize("call,exc,phrase", [
    (lambda: rotation_6d_to_matrix(torch.randn(4, 5)), ValueError, "shape (..., 6)"),
    (lambda: rotation_6d_to_matrix(torch.ones(6, dtype=torch.int64)), TypeError, "floating-point"),
    (lambda: rotation_6d_to_matrix(torch.randn(6), "cols"), ValueError, "convention"),
    (lambda: matrix_to_rotation_6d(torch.randn(2, 3, 4)), ValueError, "shape (..., 3, 3)"),
    (lambda: special_procrustes(torch.randn(2, 3, 4)), ValueError, "square"),
    (lambda: special_procrustes(torch.full((3, 3), float("nan"))), ValueError, "NaN"),
    (lambda: special_procrustes(torch.randn(3, 3), special=1), TypeError, "special"),
    (lambda: special_procrustes(torch.randn(3, 3), gradient_eps=0.0), ValueError, "gradient_eps"),
    (lambda: geodesic_distance(torch.eye(2), torch.eye(2)), ValueError, "(..., 3, 3)"),
    (lambda: chordal_distance(torch.eye(3), torch.eye(2)), ValueError, "one size"),
    (lambda: rotation_6d_to_matrix(torch.tensor([1.0, 0, 0, 2, 0, 0])), ValueError, "not parallel"),
    (lambda: rotation_6d_to_matrix(torch.zeros(2, 6)), ValueError, "non-zero"),
    (lambda: rotation_6d_to_matrix(torch.tensor([1.0, 0, 0, float("nan"), 1, 0])), ValueError, "NaN"),
    (lambda: geodesic_distance(2 * torch.eye(3), torch.eye(3)), ValueError, "orthogonal"),
    (lambda: geodesic_distance(torch.eye(3), -torch.eye(3)), ValueError, "rotations (det"),
])
def test_bad_input(call, exc, phrase):
    with pytest.raises(exc, match=phrase.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        call()


# ------------------------------------------------------------------ Procrustes through the SVD
# Oracle: torch.linalg.svd (LAPACK); the cases and the rounding bound are those of tests/test_linalg.py.


def _svd_procrustes(M, special):
    """The oracle: Levinson et al. Eq. 2 through torch.linalg.svd."""
    U, _, Vh = torch.linalg.svd(M)
    if special:
        D = torch.ones(M.shape[:-1], dtype=M.dtype)
        D[..., -1] = torch.sign(torch.linalg.det(U @ Vh))
        return U @ torch.diag_embed(D) @ Vh
    return U @ Vh


@pytest.mark.parametrize("method", ["jacobi", "lapack"])
@pytest.mark.parametrize("d", [1, 2, 3, 4, 6])
def test_procrustes_matches_torch_svd_to_rounding(d, method):
    """The nearest (special) orthogonal matrix is orthogonal to rounding and agrees with the SVD's to
    rounding divided by the conditioning of the problem (1 / (s_i + s_j))."""
    eps = torch.finfo(torch.float64).eps
    eye = torch.eye(d, dtype=torch.float64)
    for kind, M in general_matrices(d).items():
        scale = M.abs().amax((-1, -2)).clamp_min(1e-300)
        tol = ROUNDING * d * eps
        ref = torch.linalg.svdvals(M)
        for special in (True, False):
            R = special_procrustes(M, special=special, method=method)
            assert (R.mT @ R - eye).abs().max() <= tol, kind
            if special:
                assert (torch.linalg.det(R) - 1).abs().max() <= tol, kind
            if kind in ("zero", "rank-deficient") and d > 1:
                continue  # the nearest orthogonal matrix is not unique there
            signed = ref.clone()
            if special:
                signed[..., -1] *= torch.sign(torch.linalg.det(M))
            pair = (signed[..., -1] + signed[..., -2]) if d > 1 else signed[..., 0].abs()
            err = (R - _svd_procrustes(M, special)).abs().amax((-1, -2))
            assert (err <= tol * scale / pair.abs().clamp_min(1e-300)).all(), kind


@pytest.mark.parametrize("method", ["jacobi", "lapack"])
def test_procrustes_in_half_precision_and_under_autocast(method):
    M = torch.randn(16, 3, 3, generator=_gen(30))
    ref = special_procrustes(M.double())
    for dtype, tol in ((torch.bfloat16, 3e-2), (torch.float16, 3e-3)):
        R = special_procrustes(M.to(dtype), method=method)
        assert R.dtype == dtype and ((R.double() - ref).abs() * (1 + 0 * ref)).max() < tol * 10
    with torch.autocast("cpu", dtype=torch.bfloat16):
        R = special_procrustes(M, method=method)
    assert R.dtype == torch.float32 and (R.double() - ref).abs().max() < 1e-4


def test_geodesic_distance_accepts_low_precision_rotations():
    """bfloat16 rotations pass the orthogonality test with bfloat16's tolerance, float32 rotations
    pass it under autocast (whose lowered products would fail float32's)."""
    R1, R2 = SO(3).sample(2, generator=_gen(31))
    want = geodesic_distance(R1, R2)
    for dtype, tol in ((torch.bfloat16, 5e-2), (torch.float16, 5e-3)):
        got = geodesic_distance(R1.to(dtype), R2.to(dtype))
        assert got.dtype == dtype and (got.double() - want).abs() < tol
    for dtype in (torch.bfloat16, torch.float16):
        with torch.autocast("cpu", dtype=dtype):
            got = geodesic_distance(R1.float(), R2.float())
        assert got.dtype == torch.float32 and (got.double() - want).abs() < 1e-5


# ------------------------------------------------------------------ on the simulated accelerator
def test_public_functions_on_the_simulated_device():
    """Every public function of geomlin.groups.rotations, forward and backward, on the stand-in
    accelerator (tests/device/simulated.py): no host sync, no upload, the CPU's numbers; also
    under bfloat16 and float16 autocast."""
    from geomlin import validation

    d6 = torch.randn(8, 6, generator=_gen(40))
    M = torch.randn(8, 3, 3, generator=_gen(41))
    A = M @ M.mT
    R2 = SO(3).sample(8, generator=_gen(42)).float()

    def run(d6, M, A, R2):
        R = rotation_6d_to_matrix(d6)
        P = special_procrustes(M)
        Q = special_procrustes(M, special=False)
        L, V = symmetric_eigh(A)
        out = [R, P, Q, L, V.abs(), matrix_to_rotation_6d(R, "rows"), geodesic_distance(P, R2),
               chordal_distance(R, R2)]
        loss = sum((o.float() ** 2).sum() for o in out[:3]) + (L.float() * V.float()[..., 0].abs()).sum()
        # cos of the geodesic distance: its gradient stays well conditioned at angles near pi
        grads = torch.autograd.grad(loss + out[6].float().cos().sum(), [d6, M, A])
        return out, grads

    inputs = [t.clone().requires_grad_(True) for t in (d6, M, A)] + [R2]
    cpu_out, cpu_grads = run(*inputs)
    dev = [t.detach().to(sim.DEVICE).requires_grad_(t.requires_grad) for t in inputs]
    with validation.deferred_checks(), sim.watch() as log:  # the checks pass at the scope's end
        out, grads = run(*dev)
    assert not log.events, log.report()
    # the device runs the Jacobi solvers, the CPU LAPACK: equal to float32 rounding, amplified by
    # 1 / sin(angle) in the geodesic distance of angles near pi (output 6)
    for k, (a, b) in enumerate(zip(list(out) + list(grads), list(cpu_out) + list(cpu_grads))):
        tol = 2e-3 if k == 6 else 1e-5
        assert a.device == sim.DEVICE and (sim.to_cpu(a) - b).abs().max() <= tol * (1 + b.abs().max())
    for dtype in (torch.bfloat16, torch.float16):
        with validation.deferred_checks(), sim.watch() as log, torch.autocast(sim.DEVICE_TYPE, dtype=dtype):
            out, grads = run(*dev)
        assert not log.events, log.report()
        for a, b in zip(out, cpu_out):
            assert (sim.to_cpu(a).double() - b.double()).abs().max() <= 2e-2 * (1 + b.abs().max())
        for g in grads:
            assert torch.isfinite(sim.to_cpu(g)).all()
    # a bad input on the device inside a scope: no exception at the call, the CPU's refusal at the scope's end
    R2 = R2.to(sim.DEVICE)
    with pytest.raises(ValueError, match="R1 must be finite orthogonal"), validation.deferred_checks():
        with sim.watch() as log:
            geodesic_distance(2 * R2, R2)
        assert not log.events, log.report()
    with pytest.raises(ValueError, match="R1 must be orthogonal"):  # outside a scope: at once
        geodesic_distance(2 * R2, R2)
