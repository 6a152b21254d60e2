"""Continuous rotation representations for networks that predict rotations.

* the 6D representation of Zhou et al. 2019 ("On the Continuity of Rotation Representations in
  Neural Networks", Sec. 4.2): two 3-vectors, orthonormalised by Gram-Schmidt;
* the nearest (special) orthogonal matrix by SVD, Levinson et al. 2020 ("An Analysis of SVD for
  Deep Rotation Estimation", Eq. 1-2): ``R = U diag(1, ..., 1, det(U V^T)) V^T`` for
  ``M = U S V^T``, with a backward pass that stays finite where the SVD's own does not;
* geodesic and chordal distances between rotations.

**Device rules**

The SVD is [`geomlin.linalg.signed_svd`][]: on accelerators a sync-free Jacobi SVD, on the CPU
LAPACK's (``method``), with the same conventions, so results agree to rounding on every device.
Everything runs by the rule of [`geomlin.precision`][] (autocast off, at least float32).

Equivariance (checked in ``tests/groups/test_rotations.py``): for ``Q`` in SO(3)
``rotation_6d_to_matrix(Q . d6) = Q rotation_6d_to_matrix(d6)`` (both vectors rotated) and
``special_procrustes(Q M) = Q special_procrustes(M)``; the polar factor
``special_procrustes(M, special=False)`` is equivariant for every orthogonal ``Q`` (O(d)), which
is what lets an O(3) canonicalizer avoid a hard orientation sign.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from geomlin.linalg import SOLVER_METHODS, signed_svd
from geomlin.precision import full_precision, working_dtype
from geomlin.validation import (
    check_broadcastable,
    check_choice,
    check_condition,
    check_finite,
    check_orthogonal,
    check_positive_float,
    check_tensor,
)

#: Conventions of the 6D representation: the two vectors are the first two columns of ``R``
#: (Zhou et al.) or its first two rows (pytorch3d's ``rotation_6d_to_matrix``).
SIX_D_CONVENTIONS = ("columns", "rows")
#: Floor on vector norms in Gram-Schmidt, so that a vanishing vector gives a finite (if arbitrary) result.
GRAM_SCHMIDT_EPS = 1e-12
#: Damping of ``1 / (s_i + s_j)`` in the Procrustes backward: ``t / (t^2 + eps^2)`` (as roma's ``gradient_eps``).
PROCRUSTES_GRADIENT_EPS = 1e-5
#: ``|R1 - R2|_F = 2 sqrt(2) sin(angle / 2)`` for 3x3 rotations.
CHORDAL_PER_ANGLE = 2.0 * math.sqrt(2.0)
def _gram_schmidt_columns(a1: Tensor, a2: Tensor, name: str | None = None) -> Tensor:
    """``(..., 3)`` vectors -> ``(..., 3, 3)`` rotation with columns ``b1, b2, b1 x b2``.

    With ``name``, a vanishing ``a1`` or an ``a2`` parallel to it (norms at or below
    ``GRAM_SCHMIDT_EPS``, where the result would not be a rotation) raises ``ValueError`` (deferred on
    accelerators, see [`geomlin.validation.check_condition`][]).
    """
    n1 = a1.norm(dim=-1, keepdim=True)
    b1 = a1 / n1.clamp_min(GRAM_SCHMIDT_EPS)
    u2 = a2 - (b1 * a2).sum(-1, keepdim=True) * b1
    n2 = u2.norm(dim=-1, keepdim=True)
    if name is not None:
        fine = torch.minimum(n1, n2).gt(GRAM_SCHMIDT_EPS).all()
        message = (f"{name}: the two 3-vectors must be non-zero and not parallel (degenerate 6D "
                   "representation: no rotation is defined)")
        check_condition(fine, message)
    b2 = u2 / n2.clamp_min(GRAM_SCHMIDT_EPS)
    return torch.stack([b1, b2, torch.linalg.cross(b1, b2, dim=-1)], dim=-1)


def rotation_6d_to_matrix(d6: Tensor, convention: str = "columns") -> Tensor:
    """The rotation of a 6D representation (Zhou et al. 2019, Eq. 15-16).

    Parameters
    ----------
    d6 : Tensor of shape (..., 6)
        real: two 3-vectors ``a1 = d6[..., :3]``, ``a2 = d6[..., 3:]``.
    convention : str
        ``"columns"`` (default, the paper's): ``b1 = a1/|a1|``,
        ``b2 = (a2 - <b1,a2> b1)/|.|``, ``b3 = b1 x b2`` are the *columns* of ``R``, so
        ``rotation_6d_to_matrix(Q . d6) = Q R`` for ``Q`` in SO(3) (each vector rotated).
        ``"rows"``: the same vectors as the rows (``R^T``), which is pytorch3d's
        ``rotation_6d_to_matrix``; equivariant as ``R Q^T``.

    Returns
    -------
    Tensor
        ``(..., 3, 3)`` in SO(3), same dtype. A vanishing first vector or a second vector parallel to
        it (norms at or below ``GRAM_SCHMIDT_EPS``) defines no rotation and raises ``ValueError``.
    """
    check_tensor(d6, "d6", shape=(..., 6))
    check_finite(d6, "d6")
    check_choice(convention, "convention", SIX_D_CONVENTIONS)
    R = _gram_schmidt_columns(d6[..., :3], d6[..., 3:], name="d6")
    return R if convention == "columns" else R.transpose(-1, -2)


def matrix_to_rotation_6d(R: Tensor, convention: str = "columns") -> Tensor:
    """The 6D representation of rotations ``R (..., 3, 3)`` -> ``(..., 6)``.

    ``"columns"``: the first two columns ``[R[:, 0], R[:, 1]]``; ``"rows"``: the first two rows
    (pytorch3d). ``rotation_6d_to_matrix(matrix_to_rotation_6d(R, c), c) == R`` for every rotation
    (to rounding), in either convention. ``R`` must be finite rotations (det +1) to the tolerance
    of its dtype, else ``ValueError`` (deferred on accelerators).
    """
    check_tensor(R, "R", shape=(..., 3, 3))
    check_choice(convention, "convention", SIX_D_CONVENTIONS)
    with full_precision(R):
        # A reflection (det -1) has a 6D representation, but it decodes to another matrix.
        check_orthogonal(R, "R", special=True)
    if convention == "rows":
        return R[..., :2, :].reshape(*R.shape[:-2], 6)
    return R[..., :, :2].transpose(-1, -2).reshape(*R.shape[:-2], 6)


def _polar_factor(M: Tensor, special: bool, method: str) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """``R``, ``U``, signed singular values ``s`` and ``V`` with ``M = U diag(s) V^T``, ``R = U V^T``.

    From the Jacobi SVD ``M = U0 diag(s0) V^T`` (``U0, V`` rotations, ``s0`` signed): the polar factor
    takes ``U = U0 diag(sign s0)``, ``s = |s0|``. With ``special`` and ``det M < 0`` (an odd number of
    negative ``s0``) the sign of the smallest ``|s0|`` stays negative, so that ``R = U V^T`` is the
    nearest rotation ``U diag(1, ..., 1, -1) V^T`` of Eq. 2 (``s`` keeps that entry negative).
    """
    U, s0, V = signed_svd(M, method)
    sign = torch.where(s0 < 0, -1.0, 1.0).to(s0.dtype)
    if special:
        odd = sign.prod(-1, keepdim=True) < 0
        smallest = torch.nn.functional.one_hot(s0.abs().argmin(-1), s0.shape[-1]).bool()
        sign = torch.where(odd & smallest, -sign, sign)
    U = U * sign[..., None, :]
    return U @ V.transpose(-1, -2), U, s0 * sign, V


class _Procrustes(torch.autograd.Function):
    """``R = U V^T`` with the derivative ``dR = U Omega V^T``, ``Omega_ij = (X_ij - X_ji) / (s_i + s_j)``,
    ``X = U^T dM V`` (the derivative of the orthogonal polar factor; Levinson et al. 2020, App. A).

    Written through ``s_i + s_j`` only, it is finite at exact rotations and at repeated singular values,
    where the SVD's own backward divides by ``s_i - s_j``; a vanishing ``s_i + s_j`` (a
    rank-deficient or ambiguous input) is damped to ``t / (t^2 + eps^2)``.
    """

    @staticmethod
    def forward(ctx, M: Tensor, special: bool, eps: float, method: str) -> Tensor:
        with full_precision(M):
            R, U, s, V = _polar_factor(M, special, method)
        ctx.save_for_backward(U, s, V)
        ctx.eps = eps
        return R

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_R: Tensor):
        U, s, V = ctx.saved_tensors
        with full_precision(U):
            t = s[..., :, None] + s[..., None, :]
            inv = t / (t * t + ctx.eps ** 2)
            G = U.transpose(-1, -2) @ grad_R.to(U.dtype) @ V
            grad_X = (G - G.transpose(-1, -2)) * inv
            return U @ grad_X @ V.transpose(-1, -2), None, None, None


def special_procrustes(M: Tensor, special: bool = True, *, gradient_eps: float = PROCRUSTES_GRADIENT_EPS,
                       method: str = "auto") -> Tensor:
    """The orthogonal matrix nearest to ``M`` in the Frobenius norm (Levinson et al. 2020, Eq. 1-2).

    For ``M = U S V^T`` (SVD): ``special=True`` gives the rotation
    ``R = U diag(1, ..., 1, det(U V^T)) V^T`` (the same as roma's ``special_procrustes``),
    equivariant under rotations, ``R(Q M) = Q R(M)`` for ``Q`` in SO(d); ``special=False`` gives
    the orthogonal polar factor ``U V^T`` of ``M = (U V^T)(V S V^T)``, equivariant under all of
    O(d) (``det`` follows ``det M``).

    On accelerators the SVD is the sync-free two-sided Jacobi SVD of this module (no
    ``torch.linalg.svd``, which reads an error code back from the device on CUDA), accurate to
    rounding; on the CPU LAPACK's (see the module docstring).

    Parameters
    ----------
    M : Tensor of shape (..., d, d)
        real; float64 is computed in float64, other dtypes (bfloat16, float16
        included) in float32, with autocast off.
    special : bool
        rotations (SO(d)) or any orthogonal matrix (O(d)).
    gradient_eps : float
        damping of the backward pass where ``s_i + s_j`` vanishes (see ``_Procrustes``).
    method : str
        ``"auto"`` (LAPACK on the CPU, Jacobi elsewhere), ``"jacobi"`` or ``"lapack"``.

    Returns
    -------
    Tensor
        ``(..., d, d)``, same dtype. The backward pass is finite at exact rotations and repeated
        singular values (e.g. ``M = R`` or ``M = c R``), unlike autograd through ``torch.linalg.svd``.
        Only first derivatives are supported (``once_differentiable``).
    """
    check_tensor(M, "M", min_ndim=2, finite=True)
    if M.shape[-1] != M.shape[-2] or M.shape[-1] < 1:
        raise ValueError(f"M must be square matrices (..., d, d), got shape {tuple(M.shape)}")
    if not isinstance(special, bool):
        raise TypeError(f"special must be a bool, got {type(special).__name__}")
    eps = check_positive_float(gradient_eps, "gradient_eps")
    check_choice(method, "method", SOLVER_METHODS)
    if M.numel() == 0:
        return M.clone()
    return _Procrustes.apply(M.to(working_dtype(M.dtype)), special, eps, method).to(M.dtype)


def chordal_distance(R1: Tensor, R2: Tensor) -> Tensor:
    """``|R1 - R2|_F`` of ``(..., d, d)`` matrices (broadcast) -> ``(...)``.

    Summed in at least float32 (autocast off); returned in the promoted dtype of ``R1`` and ``R2``.
    NaN entries give NaN distances (never a finite number), so a loss built on it shows them.
    """
    check_tensor(R1, "R1", min_ndim=2)
    check_tensor(R2, "R2", min_ndim=2)
    if R1.shape[-2:] != R2.shape[-2:] or R1.shape[-1] != R1.shape[-2]:
        raise ValueError(f"R1 and R2 must be square matrices of one size, got {tuple(R1.shape)} and "
                         f"{tuple(R2.shape)}")
    check_broadcastable(("R1", R1.shape[:-2]), ("R2", R2.shape[:-2]), what="batch shapes")
    dtype = torch.promote_types(R1.dtype, R2.dtype)
    work = working_dtype(dtype)
    with full_precision(R1):
        sq = (R1.to(work) - R2.to(work)).square().sum((-1, -2))
        # sqrt with a zero (not NaN) derivative at coinciding rotations; ``sq != 0`` (not ``> 0``)
        # so that a NaN input stays NaN (a NaN prediction must not get a zero loss).
        dist = torch.where(sq != 0, sq.clamp_min(torch.finfo(sq.dtype).tiny).sqrt(), torch.zeros_like(sq))
    return dist.to(dtype)


def geodesic_distance(R1: Tensor, R2: Tensor) -> Tensor:
    """The rotation angle of ``R1^T R2`` in radians, ``[0, pi]``, for 3x3 rotations ``(..., 3, 3)`` -> ``(...)``.

    Computed as ``2 asin(|R1 - R2|_F / (2 sqrt 2))`` (accurate for small angles, unlike
    ``acos((tr - 1) / 2)``); the derivative is finite at 0 and, below pi, everywhere. Both inputs must
    be rotations to the tolerance of their dtype
    ([`geomlin.validation.check_orthogonal`][], tested with autocast off,
    so float32 rotations pass under ``torch.autocast`` and bfloat16 ones pass with bfloat16's tolerance; deferred on accelerators). Computed in at least float32, returned in
    the promoted dtype of ``R1`` and ``R2``.
    """
    check_tensor(R1, "R1", shape=(..., 3, 3))
    check_tensor(R2, "R2", shape=(..., 3, 3))
    check_broadcastable(("R1", R1.shape[:-2]), ("R2", R2.shape[:-2]), what="batch shapes")
    with full_precision(R1):
        check_orthogonal(R1, "R1", special=True)
        check_orthogonal(R2, "R2", special=True)
        x = (chordal_distance(R1, R2) / CHORDAL_PER_ANGLE).clamp(max=1.0)
        return (2.0 * torch.asin(x.to(working_dtype(x.dtype)))).to(x.dtype)
