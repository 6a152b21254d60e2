"""Continuous rotation representations for networks that predict rotations.

* the 6D representation of Zhou et al. 2019 ("On the Continuity of Rotation Representations in
  Neural Networks", Sec. 4.2): two 3-vectors, orthonormalised by Gram-Schmidt;
* the nearest (special) orthogonal matrix by SVD, Levinson et al. 2020 ("An Analysis of SVD for
  Deep Rotation Estimation", Eq. 1-2): ``R = U diag(1, ..., 1, det(U V^T)) V^T`` for
  ``M = U S V^T``, with a backward pass that stays finite where the SVD's own does not;
* geodesic and chordal distances between rotations;
* the small-matrix solvers behind them and behind PCA frames: [`symmetric_eigh`][] (cyclic
  Jacobi) and a two-sided (Kogbetliantz) Jacobi SVD.

**Device rules**

``torch.linalg.eigh`` and ``torch.linalg.svd`` read an error code back from the device on
CUDA (a host synchronisation in every call) and have no half-precision kernels. On
accelerators the solvers here are plain tensor arithmetic with a fixed number of sweeps (no
data-dependent branch, no host read); on the CPU, where reading back costs nothing, LAPACK is
faster for these tiny matrices and is used instead (``method="auto"``; ``"jacobi"`` and
``"lapack"`` force one). Both run with autocast switched off in at least float32
([`geomlin.precision.full_precision`][]) and return the same conventions (ascending eigenvalues; ``U, V`` in
SO(d) with signed singular values), so results agree to rounding on every device. Every Jacobi
rotation is in SO(2), so the orthogonal factors are orthogonal to rounding by construction.

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
#: Cyclic Jacobi sweeps that bring a symmetric ``d x d`` matrix to diagonal form (the residual
#: below ``20 d eps``, the worst case over 20000 random, clustered, graded, rank-deficient and
#: covariance matrices per ``d`` in float64 and float32, plus one sweep of margin; ``d = 2`` is
#: exact after one rotation). Convergence is quadratic: the last sweeps only remove rounding.
#: Larger ``d`` use the last entry (enough for ``d = 20`` in the same test).
EIGH_SWEEPS = {1: 0, 2: 1, 3: 5, 4: 6, 5: 7, 6: 8, 7: 8, 8: 8, 9: 9, 10: 10}
#: Solvers of [`symmetric_eigh`][] and [`special_procrustes`][]: ``"auto"`` is LAPACK on the CPU
#: and Jacobi on every other device.
SOLVER_METHODS = ("auto", "jacobi", "lapack")
#: The same for the two-sided Jacobi SVD of a general square matrix (after its QR preconditioning;
#: the test set adds equal, clustered and graded singular values).
SVD_SWEEPS = {1: 0, 2: 1, 3: 6, 4: 6, 5: 7, 6: 7, 7: 8, 8: 8, 9: 8, 10: 8}


def _sweeps(table: dict, d: int) -> int:
    return table.get(d, table[max(table)])


def _jacobi_eigh(A: Tensor) -> tuple[Tensor, Tensor]:
    """Unsorted eigenvalues ``(..., d)`` and eigenvectors ``(..., d, d)`` of symmetric ``A``.

    Cyclic Jacobi (Golub & Van Loan, "Matrix Computations", Alg. 8.5.3) with the rotation
    ``t = tan(theta)`` of Rutishauser's stable form, ``|theta| <= pi/4``; a zero off-diagonal
    entry gives ``t = 0`` exactly, so diagonal input comes back unchanged with ``V = I``. Only the
    lower triangle is read. The entries live in a Python table of ``(...,)`` tensors and the
    eigenvectors as ``d`` column tensors ``(d, ...)``: a rotation touches two rows and columns, and
    costs about twenty elementwise operations on ``(...,)`` tensors whatever the batch size.
    """
    d = A.shape[-1]
    a = [[A[..., max(i, j), min(i, j)] for j in range(d)] for i in range(d)]
    cols = _unit_columns(A)
    zero = torch.zeros_like(a[0][0])
    one = torch.ones_like(zero)
    tiny = torch.finfo(A.dtype).tiny
    for _ in range(_sweeps(EIGH_SWEEPS, d)):
        for p in range(d - 1):
            for q in range(p + 1, d):
                apq = a[p][q]
                diff = a[q][q] - a[p][p]
                # t = 2 a_pq / (diff + sign(diff) hypot(diff, 2 a_pq)); 0 where a_pq = 0
                two = apq + apq
                t = two / (diff + torch.copysign(torch.hypot(diff, two) + tiny, diff))
                c = torch.rsqrt(torch.addcmul(one, t, t))
                s = t * c
                shift = t * apq
                a[p][p] = a[p][p] - shift
                a[q][q] = a[q][q] + shift
                a[p][q] = a[q][p] = zero
                for r in range(d):
                    if r != p and r != q:
                        arp, arq = a[r][p], a[r][q]
                        a[r][p] = a[p][r] = torch.addcmul(c * arp, s, arq, value=-1.0)
                        a[r][q] = a[q][r] = torch.addcmul(s * arp, c, arq)
                vp, vq = cols[p], cols[q]
                cols[p] = torch.addcmul(c * vp, s, vq, value=-1.0)
                cols[q] = torch.addcmul(s * vp, c, vq)
    return torch.stack([a[i][i] for i in range(d)], -1), _matrix_of_columns(cols)


def _unit_columns(A: Tensor) -> list[Tensor]:
    """The columns of the identity as ``d`` tensors ``(d, ...)`` (the vector axis first, so that the
    ``(...,)`` rotation parameters broadcast without a reshape)."""
    d, batch = A.shape[-1], A.shape[:-2]
    eye = torch.eye(d, dtype=A.dtype, device=A.device)
    return [eye[i].reshape(d, *([1] * len(batch))).expand(d, *batch) for i in range(d)]


def _matrix_of_columns(cols: list[Tensor]) -> Tensor:
    """``d`` columns ``(d, ...)`` -> the matrix ``(..., d, d)``."""
    return torch.stack(cols, -1).movedim(0, -2)


class _SymmetricEigh(torch.autograd.Function):
    """Jacobi forward; the backward of ``torch.linalg.eigh`` (Giles 2008, "An extended collection of
    matrix derivative results", Sec. 3.1): ``dA = V (diag(dL) + skew(V^T dV) / E) V^T`` with
    ``E_ij = L_j - L_i``, taken as zero where two eigenvalues coincide (there the eigenvectors have no
    derivative; torch.linalg.eigh returns inf or NaN). The backward is itself differentiable (forces
    trained through frame averaging need second derivatives)."""

    @staticmethod
    def forward(ctx, A: Tensor, method: str) -> tuple[Tensor, Tensor]:
        with full_precision(A):
            lam, V = torch.linalg.eigh(A) if _use_lapack(A, method) else _jacobi_eigh(A)
            lam, order = torch.sort(lam, dim=-1, stable=True)
            # gather with the index expanded to V's shape: take_along_dim's broadcast ties the batch
            # size to d under torch.export when they happen to be equal
            V = torch.gather(V, -1, order[..., None, :].expand(V.shape))
            # one sign convention for both solvers: the largest entry of each eigenvector is positive
            top = torch.gather(V, -2, V.abs().argmax(-2, keepdim=True))
            V = V * torch.where(top < 0, -1.0, 1.0).to(V.dtype)
        ctx.save_for_backward(lam, V)
        return lam, V

    @staticmethod
    def backward(ctx, grad_lam: Tensor | None, grad_V: Tensor | None):
        lam, V = ctx.saved_tensors
        with full_precision(V):
            inner = torch.zeros_like(V)
            if grad_V is not None:
                X = V.transpose(-1, -2) @ grad_V
                gap = lam[..., None, :] - lam[..., :, None]
                apart = gap.abs() > torch.finfo(gap.dtype).tiny
                inv = torch.where(apart, 1.0 / torch.where(apart, gap, torch.ones_like(gap)), torch.zeros_like(gap))
                inner = (X - X.transpose(-1, -2)) * 0.5 * inv
            if grad_lam is not None:
                inner = inner + torch.diag_embed(grad_lam)
            return V @ inner @ V.transpose(-1, -2), None


def _use_lapack(x: Tensor, method: str) -> bool:
    """Whether ``method`` means LAPACK (``torch.linalg``) for a tensor on ``x``'s device."""
    return method == "lapack" or (method == "auto" and x.device.type == "cpu")


def symmetric_eigh(A: Tensor, method: str = "auto") -> tuple[Tensor, Tensor]:
    """Eigenvalues and eigenvectors of real symmetric matrices, without a host synchronisation.

    The sync-free counterpart of ``torch.linalg.eigh`` for the small matrices of geometry
    (covariances of point clouds, ``d <= 10``): a cyclic Jacobi eigensolver with a fixed number of
    sweeps ([`EIGH_SWEEPS`][]), accurate to rounding (the residual ``|A V - V diag(L)|`` and
    ``|V^T V - I|`` are a few ``eps |A|``), differentiable with eigh's backward.

    Parameters
    ----------
    A : Tensor of shape (..., d, d)
        real symmetric (only the lower triangle is read); float64 is computed in
        float64, other dtypes in float32, with autocast off.
    method : str
        ``"auto"`` (LAPACK on the CPU, Jacobi elsewhere), ``"jacobi"`` or ``"lapack"``
        (``torch.linalg.eigh``, a host synchronisation on CUDA).

    Returns
    -------
    tuple[Tensor, Tensor]
        ``L (..., d)`` eigenvalues in ascending order (ties keep their Jacobi order) and
        ``V (..., d, d)`` orthonormal eigenvectors as columns, ``A = V diag(L) V^T``, in ``A``'s dtype.
        Each eigenvector is signed so that its entry of largest magnitude is positive (whichever
        solver ran; ``det V`` is then ``+-1``). Where eigenvalues coincide the eigenvectors are an arbitrary basis
        of the eigenspace and their derivative is taken as zero (detach them there). Derivatives of
        any order.
    """
    check_tensor(A, "A", min_ndim=2)
    if A.shape[-1] != A.shape[-2] or A.shape[-1] < 1:
        raise ValueError(f"A must be square matrices (..., d, d), got shape {tuple(A.shape)}")
    check_choice(method, "method", SOLVER_METHODS)
    work = working_dtype(A.dtype)
    lam, V = _SymmetricEigh.apply(A.to(work), method)
    return lam.to(A.dtype), V.to(A.dtype)


def _jacobi_svd(M: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """``U, s, V`` with ``M = U diag(s) V^T``, ``U, V`` in SO(d) and ``s`` signed (unsorted).

    Two-sided cyclic Jacobi (Kogbetliantz 1955; Brent, Luk & Van Loan 1985): every pivot block
    ``[[a, b], [c, d]]`` is diagonalised by a left rotation ``phi`` and a right rotation ``theta``
    from ``E = a + d``, ``F = a - d``, ``G = c + b``, ``H = c - b``:
    ``phi, theta = (atan2(H, E) +- atan2(G, F)) / 2`` and singular values
    ``(hypot(E, H) +- hypot(F, G)) / 2``. All rotations have determinant +1, so ``det M`` is carried
    by the signs of ``s``; a rank-deficient ``M`` still gets exactly orthogonal ``U`` and ``V``.

    The sweeps run on the triangular factor ``T`` of ``M = Q T`` (Householder QR, ``Q`` made a
    rotation): on a general matrix with clustered singular values the cyclic method converges only
    linearly (``M = 2 Q'`` for a random orthogonal ``Q'`` of size 6 needs more than 15 sweeps),
    on ``T`` quadratically (a cluster of equal singular values makes ``T`` diagonal already).
    """
    d = M.shape[-1]
    Q, T = torch.linalg.qr(M)
    det = torch.linalg.det(Q)[..., None]  # +-1: move it into the last row of T
    Q = torch.cat([Q[..., :-1], Q[..., -1:] * det[..., None]], dim=-1)
    T = torch.cat([T[..., :-1, :], T[..., -1:, :] * det[..., None]], dim=-2)
    a = [[T[..., i, j] for j in range(d)] for i in range(d)]
    U = _unit_columns(M)
    V = list(U)
    zero = torch.zeros_like(a[0][0])
    for _ in range(_sweeps(SVD_SWEEPS, d)):
        for p in range(d - 1):
            for q in range(p + 1, d):
                app, apq, aqp, aqq = a[p][p], a[p][q], a[q][p], a[q][q]
                E, F, G, H = app + aqq, app - aqq, aqp + apq, aqp - apq
                outer, inner = torch.atan2(H, E), torch.atan2(G, F)
                left = torch.lerp(outer, inner, 0.5)  # (outer + inner) / 2
                right = outer - left
                cl, sl, cr, sr = torch.cos(left), torch.sin(left), torch.cos(right), torch.sin(right)
                hq, hr = torch.hypot(E, H), torch.hypot(F, G)
                a[p][p] = torch.lerp(hq, hr, 0.5)
                a[q][q] = a[p][p] - hr
                a[p][q] = a[q][p] = zero
                for r in range(d):
                    if r != p and r != q:
                        # rows p, q from the left: Rot(left)^T; columns p, q from the right: Rot(right)^T
                        ap, aq = a[p][r], a[q][r]
                        a[p][r] = torch.addcmul(cl * ap, sl, aq)
                        a[q][r] = torch.addcmul(cl * aq, sl, ap, value=-1.0)
                        ap, aq = a[r][p], a[r][q]
                        a[r][p] = torch.addcmul(cr * ap, sr, aq, value=-1.0)
                        a[r][q] = torch.addcmul(sr * ap, cr, aq)
                up, uq = U[p], U[q]
                U[p] = torch.addcmul(cl * up, sl, uq)
                U[q] = torch.addcmul(cl * uq, sl, up, value=-1.0)
                vp, vq = V[p], V[q]
                V[p] = torch.addcmul(cr * vp, sr, vq, value=-1.0)
                V[q] = torch.addcmul(sr * vp, cr, vq)
    return Q @ _matrix_of_columns(U), torch.stack([a[i][i] for i in range(d)], -1), _matrix_of_columns(V)


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


def _lapack_svd(M: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """``_jacobi_svd``'s contract from ``torch.linalg.svd``: ``U, V`` in SO(d), ``s`` signed.

    A reflection in ``U`` (or ``V``) moves into the sign of the last (smallest) singular value.
    """
    U, s, Vh = torch.linalg.svd(M)
    V = Vh.transpose(-1, -2)
    det_u = torch.linalg.det(U)[..., None]
    det_v = torch.linalg.det(V)[..., None]
    U = torch.cat([U[..., :-1], U[..., -1:] * det_u[..., None]], dim=-1)
    V = torch.cat([V[..., :-1], V[..., -1:] * det_v[..., None]], dim=-1)
    s = torch.cat([s[..., :-1], s[..., -1:] * det_u * det_v], dim=-1)
    return U, s, V


def _polar_factor(M: Tensor, special: bool, method: str) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """``R``, ``U``, signed singular values ``s`` and ``V`` with ``M = U diag(s) V^T``, ``R = U V^T``.

    From the Jacobi SVD ``M = U0 diag(s0) V^T`` (``U0, V`` rotations, ``s0`` signed): the polar factor
    takes ``U = U0 diag(sign s0)``, ``s = |s0|``. With ``special`` and ``det M < 0`` (an odd number of
    negative ``s0``) the sign of the smallest ``|s0|`` stays negative, so that ``R = U V^T`` is the
    nearest rotation ``U diag(1, ..., 1, -1) V^T`` of Eq. 2 (``s`` keeps that entry negative).
    """
    U, s0, V = _lapack_svd(M) if _use_lapack(M, method) else _jacobi_svd(M)
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
