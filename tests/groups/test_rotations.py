"""Rotation representations: 6D (Zhou et al. 2019), Procrustes / polar factor (Levinson et al. 2020),
distances. Oracles: roma (dev extra), brute-force search for the nearest rotation, finite differences."""

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
from geomlin.testing import assert_equivariant, equivariance_error
from tests.oracles import require

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
