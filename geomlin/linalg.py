"""Small-matrix linear algebra for accelerators: no host synchronisation, no half-precision kernels needed.

``torch.linalg.eigh`` and ``torch.linalg.svd`` read an error code back from the device on CUDA
(a host synchronisation in every call) and have no half-precision kernels; ``torch.linalg.matrix_exp``
reads its matrices' norms back to pick its degree. The routines here are plain tensor arithmetic
with a fixed amount of work (no data-dependent branch, no host read) for the small matrices of
geometry (covariances of point clouds, ``d <= 10``; rotation estimates; Lie algebra elements):

* [`symmetric_eigh`][]: cyclic Jacobi eigenvalues and eigenvectors, differentiable with eigh's backward;
* [`signed_svd`][]: a two-sided (Kogbetliantz) Jacobi SVD with ``U, V`` in SO(d) and signed
  singular values (behind [`geomlin.groups.rotations.special_procrustes`][]);
* [`scaling_and_squaring`][]: the exponential in any associative algebra (matrices, multivectors).

On the CPU, where reading back costs nothing, LAPACK is faster for these tiny matrices and is used
instead (``method="auto"``; ``"jacobi"`` and ``"lapack"`` force one). Both run by the rule of
[`geomlin.precision`][] (autocast off, at least float32) and return the same conventions (ascending
eigenvalues; ``U, V`` in SO(d) with signed singular values), so results agree to rounding on every
device. Every Jacobi rotation is in SO(2), so the orthogonal factors are orthogonal to rounding by
construction.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from geomlin.precision import full_precision, working_dtype
from geomlin.validation import check_choice, check_tensor

#: Cyclic Jacobi sweeps that bring a symmetric ``d x d`` matrix to diagonal form (the residual
#: below ``20 d eps``, the worst case over 20000 random, clustered, graded, rank-deficient and
#: covariance matrices per ``d`` in float64 and float32, plus one sweep of margin; ``d = 2`` is
#: exact after one rotation). Convergence is quadratic: the last sweeps only remove rounding.
#: Larger ``d`` use the last entry (enough for ``d = 20`` in the same test).
EIGH_SWEEPS = {1: 0, 2: 1, 3: 5, 4: 6, 5: 7, 6: 8, 7: 8, 8: 8, 9: 9, 10: 10}
#: Solvers of [`symmetric_eigh`][] and [`signed_svd`][]: ``"auto"`` is LAPACK on the CPU
#: and Jacobi on every other device.
SOLVER_METHODS = ("auto", "jacobi", "lapack")
#: The same for the two-sided Jacobi SVD of a general square matrix (after its QR preconditioning;
#: the test set adds equal, clustered and graded singular values).
SVD_SWEEPS = {1: 0, 2: 1, 3: 6, 4: 6, 5: 7, 6: 7, 7: 8, 8: 8, 9: 8, 10: 8}
#: [`scaling_and_squaring`][] scales its argument to at most this size before the Taylor series.
EXP_SCALED_SIZE = 0.5
#: Most squarings of [`scaling_and_squaring`][]: sizes up to ``EXP_SCALED_SIZE * 2**MAX_SQUARINGS``
#: (about 5e5) are exact to round-off; on accelerators every call runs this many (masked) squarings,
#: so the count of squarings never has to be read back from the device.
MAX_SQUARINGS = 20


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


def signed_svd(M: Tensor, method: str = "auto") -> tuple[Tensor, Tensor, Tensor]:
    """``U, s, V`` with ``M = U diag(s) V^T``, ``U`` and ``V`` in SO(d) and ``s`` signed (``det M`` is carried
    by the signs of ``s``); the singular values are not sorted.

    Parameters
    ----------
    M : Tensor of shape (..., d, d)
        float32 or float64 square matrices (computed as they are: call it inside
        [`geomlin.precision.full_precision`][] in the [`geomlin.precision.working_dtype`][]).
    method : str
        ``"auto"`` (LAPACK on the CPU, Jacobi elsewhere), ``"jacobi"`` or ``"lapack"``
        (``torch.linalg.svd``, a host synchronisation on CUDA).

    Returns
    -------
    tuple[Tensor, Tensor, Tensor]
        ``U (..., d, d)``, ``s (..., d)``, ``V (..., d, d)``, not differentiable through the Jacobi
        sweeps' convergence (use the analytic derivative of the quantity you need, as
        ``special_procrustes`` does).
    """
    check_tensor(M, "M", min_ndim=2)
    if M.shape[-1] != M.shape[-2] or M.shape[-1] < 1:
        raise ValueError(f"M must be square matrices (..., d, d), got shape {tuple(M.shape)}")
    check_choice(method, "method", SOLVER_METHODS)
    return _lapack_svd(M) if _use_lapack(M, method) else _jacobi_svd(M)


def scaling_and_squaring(x: Tensor, size: Tensor, multiply: Callable[[Tensor, Tensor], Tensor],
                         one: Tensor, terms: int) -> Tensor:
    """``exp(x)`` in an associative algebra by scaling and squaring, without a host synchronisation.

    Each element is scaled by its own ``2^-s``, ``s = ceil(log2(size / EXP_SCALED_SIZE))`` clamped
    to ``[0, MAX_SQUARINGS]``, summed as a Taylor polynomial of ``terms`` terms and squared ``s``
    times (Higham, "The scaling and squaring method for the matrix exponential revisited", 2005).
    The squarings are masked per element, so their count is a Python number: on the CPU the largest
    ``s`` (read for free), elsewhere [`MAX_SQUARINGS`][].

    Parameters
    ----------
    x : Tensor of shape (*batch, *element)
        elements (multivectors ``(..., dim)``, matrices ``(..., m, m)``).
    size : Tensor of shape (*batch, *ones)
        a bound of each element's norm (broadcastable to ``x``), no gradient.
    multiply : Callable[[Tensor, Tensor], Tensor]
        the algebra's product of two ``x``-shaped tensors.
    one : Tensor
        the unit, broadcastable to ``x``.
    terms : int
        number of Taylor terms (``14`` is float64 round-off at ``size <= 1/2``).
    """
    size = size.detach()
    s = torch.ceil(torch.log2(size.clamp_min(torch.finfo(size.dtype).tiny) / EXP_SCALED_SIZE))
    # a NaN size (NaN input) squares the most times: the result stays NaN instead of failing int()
    s = s.nan_to_num(nan=float(MAX_SQUARINGS)).clamp(0, MAX_SQUARINGS)
    y = x * torch.exp2(-s).to(x.dtype)
    out, term = one.expand_as(x), one.expand_as(x)
    for k in range(1, terms + 1):
        term = multiply(term, y) / k
        out = out + term
    readable = s.device.type == "cpu" and not torch.compiler.is_compiling()
    steps = (int(s.max()) if s.numel() else 0) if readable else MAX_SQUARINGS
    for step in range(steps):
        out = torch.where(s > step, multiply(out, out), out)
    return out
