"""geomlin.linalg: the sync-free small-matrix solvers against LAPACK, and the exponential by scaling and squaring.

Oracles: torch.linalg.eigh / svd / svdvals / matrix_exp (LAPACK and PyTorch's own Pade). "To rounding"
is ``ROUNDING = 50 d eps`` relative to ``|A|``. The solvers on the simulated accelerator are tested with
their users (tests/groups/test_rotations.py, tests/frames/test_on_device.py).
"""

from __future__ import annotations

import pytest
import torch

from geomlin.linalg import MAX_SQUARINGS, scaling_and_squaring, signed_svd, symmetric_eigh


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


#: "To rounding": ROUNDING * d * eps relative to |A|.
ROUNDING = 50


def orthogonal_matrices(n, d, seed):
    """``n`` random orthogonal ``(d, d)`` matrices (Haar: QR with the signs of R's diagonal), float64."""
    q, r = torch.linalg.qr(torch.randn(n, d, d, dtype=torch.float64, generator=_gen(seed)))
    return q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1))[..., None, :]


def _symmetric_cases(d, seed=0):
    """Random, clustered (gaps 1e-9 and exact), already diagonal (unsorted, with ties), graded,
    negative definite, zero and rank-one symmetric matrices ``(n, d, d)``."""
    g = _gen(seed)
    X = torch.randn(64, d, d, dtype=torch.float64, generator=g)
    Q = orthogonal_matrices(64, d, seed + 1)
    lam = torch.randn(64, d, dtype=torch.float64, generator=g)
    near = lam.clone()
    near[:, 1 % d] = near[:, 0] * (1 + 1e-9)
    tied = lam.clone()
    tied[:, -1] = tied[:, 0]
    graded = (10.0 ** (-3 * torch.arange(d, dtype=torch.float64))).expand(64, d)
    diagonal = torch.diag_embed(torch.randint(-2, 3, (64, d), generator=g).to(torch.float64))
    v = torch.randn(64, d, 1, dtype=torch.float64, generator=g)
    return {"random": X + X.mT, "near-degenerate": Q @ torch.diag_embed(near) @ Q.mT,
            "degenerate": Q @ torch.diag_embed(tied) @ Q.mT, "diagonal": diagonal,
            "graded": Q @ torch.diag_embed(graded) @ Q.mT, "negative": -(X @ X.mT),
            "zero": torch.zeros(4, d, d, dtype=torch.float64), "rank one": v @ v.mT}


@pytest.mark.parametrize("d", [1, 2, 3, 4, 6, 10])
def test_symmetric_eigh_matches_torch_eigh_to_rounding(d):
    """Oracle: torch.linalg.eigh. Eigenvalues and residuals to rounding; eigenvectors of simple
    eigenvalues up to sign, to rounding over the gap; diagonal input is returned exactly."""
    eps = torch.finfo(torch.float64).eps
    eye = torch.eye(d, dtype=torch.float64)
    for kind, A in _symmetric_cases(d).items():
        L, V = symmetric_eigh(A, method="jacobi")  # the accelerators' solver, here on the CPU
        L_ref, V_ref = torch.linalg.eigh(A)
        scale = A.abs().amax((-1, -2), keepdim=True).clamp_min(1e-300)
        tol = ROUNDING * d * eps
        assert ((L - L_ref).abs() / scale[..., 0]).max() <= tol, kind
        assert ((A @ V - V * L[..., None, :]).abs() / scale).max() <= tol, kind
        assert (V.mT @ V - eye).abs().max() <= tol, kind
        assert torch.equal(L, L.sort(-1).values), kind
        # simple eigenvalues: the same eigenvectors up to sign, to rounding / relative gap
        gap = torch.cat([L[..., 1:] - L[..., :-1], torch.full_like(L[..., :1], torch.inf)], -1)
        gap = torch.minimum(gap, torch.cat([torch.full_like(L[..., :1], torch.inf), L[..., 1:] - L[..., :-1]], -1))
        simple = gap / scale[..., 0] > 1e-6
        cos = (V * V_ref).sum(-2).abs()
        err = (1 - cos).abs() * simple
        assert (err <= tol * (scale[..., 0] / gap.clamp_min(1e-300)) ** 2 + tol).all(), kind
        if kind == "diagonal":  # no rotation at all: exact eigenvalues, a permutation as eigenvectors
            assert torch.equal(L, torch.diagonal(A, dim1=-2, dim2=-1).sort(-1).values)
            assert torch.equal(V.abs().sum(-1), torch.ones(64, d, dtype=torch.float64))


@pytest.mark.parametrize("method", ["jacobi", "lapack"])
def test_symmetric_eigh_in_float32_and_half_precision(method):
    A = _symmetric_cases(3)["random"]
    L_ref = torch.linalg.eigvalsh(A)
    for dtype, tol in ((torch.float32, 1e-5), (torch.bfloat16, 2e-2), (torch.float16, 2e-3)):
        L, V = symmetric_eigh(A.to(dtype), method=method)
        assert L.dtype == V.dtype == dtype
        assert ((L.double() - L_ref).abs() / A.abs().amax((-1, -2))[:, None]).max() < tol
    with torch.autocast("cpu", dtype=torch.bfloat16):  # autocast must not lower the rotations
        L, _ = symmetric_eigh(A.float(), method=method)
    assert ((L.double() - L_ref).abs() / A.abs().amax((-1, -2))[:, None]).max() < 1e-5


@pytest.mark.parametrize("method", ["jacobi", "lapack"])
def test_symmetric_eigh_gradients_match_torch_eigh(method):
    """Oracle: autograd through torch.linalg.eigh, for a loss that does not depend on eigenvector
    signs; gradcheck to second order."""
    X = torch.randn(6, 4, 4, dtype=torch.float64, generator=_gen(20))
    A = (X + X.mT).requires_grad_(True)
    B = torch.randn(4, 4, dtype=torch.float64, generator=_gen(21))
    c = torch.randn(4, dtype=torch.float64, generator=_gen(22))

    def loss(fn):
        L, V = fn(A)
        return ((V.mT @ (B + B.T) @ V).diagonal(dim1=-2, dim2=-1) * c).sum() + (L.square() * c).sum()

    (ours,) = torch.autograd.grad(loss(lambda a: symmetric_eigh(a, method=method)), A)
    (theirs,) = torch.autograd.grad(loss(torch.linalg.eigh), A)
    assert (ours - theirs).abs().max() < 1e-10
    sym = lambda a: symmetric_eigh((a + a.mT) / 2, method=method)
    small = torch.randn(2, 3, 3, dtype=torch.float64, generator=_gen(23)).requires_grad_(True)
    assert torch.autograd.gradcheck(sym, (small,))
    assert torch.autograd.gradgradcheck(sym, (small,))
    # repeated eigenvalues: the eigenvector part of the derivative is zero, not NaN
    eye = torch.eye(3, dtype=torch.float64).requires_grad_(True)
    L, V = symmetric_eigh(eye, method=method)
    (g,) = torch.autograd.grad((V * torch.randn(3, 3, dtype=torch.float64)).sum() + L.sum(), eye)
    assert torch.isfinite(g).all() and torch.allclose(g, torch.eye(3, dtype=torch.float64))


def general_matrices(d, seed=0):
    """Random, rank-deficient, repeated singular values, reflections (det < 0, distinct singular
    values), rotations, diagonal (signed), zero ``(n, d, d)`` matrices."""
    g = _gen(seed)
    X = torch.randn(64, d, d, dtype=torch.float64, generator=g)
    U, V = orthogonal_matrices(64, d, seed + 1), orthogonal_matrices(64, d, seed + 2)
    rank = X.clone()
    rank[..., -1] = rank[..., 0]
    spread = torch.linspace(3.0, 1.0, d, dtype=torch.float64).expand(64, d)
    repeated = torch.ones(64, d, dtype=torch.float64) * 2.0
    repeated[:, -1] = 0.5
    reflect = U @ torch.diag_embed(spread) @ V.mT
    flip = torch.linalg.det(reflect) > 0
    reflect[flip] = reflect[flip] @ torch.diag(torch.tensor([1.0] * (d - 1) + [-1.0], dtype=torch.float64))
    rotations = U * torch.sign(torch.linalg.det(U))[:, None, None]
    diagonal = torch.diag_embed(torch.randn(64, d, dtype=torch.float64, generator=g))
    return {"random": X, "rank-deficient": rank, "repeated": U @ torch.diag_embed(repeated) @ V.mT,
            "reflection": reflect, "rotation": rotations, "diagonal": diagonal,
            "zero": torch.zeros(4, d, d, dtype=torch.float64)}


@pytest.mark.parametrize("method", ["jacobi", "lapack"])
@pytest.mark.parametrize("d", [1, 2, 3, 4, 6])
def test_signed_svd_matches_torch_svd_to_rounding(d, method):
    """The Jacobi SVD (and LAPACK's, brought to its conventions) reconstructs M with rotations U, V to
    rounding and its |s| are the singular values."""
    eps = torch.finfo(torch.float64).eps
    eye = torch.eye(d, dtype=torch.float64)
    for kind, M in general_matrices(d).items():
        U, s, V = signed_svd(M, method)
        scale = M.abs().amax((-1, -2)).clamp_min(1e-300)
        tol = ROUNDING * d * eps
        assert ((U @ torch.diag_embed(s) @ V.mT - M).abs().amax((-1, -2)) / scale).max() <= tol, kind
        for W in (U, V):
            assert (W.mT @ W - eye).abs().max() <= tol and (torch.linalg.det(W) - 1).abs().max() <= tol, kind
        ref = torch.linalg.svdvals(M)
        assert ((s.abs().sort(-1, descending=True).values - ref).abs().amax(-1) / scale).max() <= tol, kind
    with pytest.raises(ValueError, match="M must be square matrices"):
        signed_svd(torch.zeros(2, 3), method)
    with pytest.raises(ValueError, match="method must be one of"):
        signed_svd(torch.zeros(2, 2), "qr")


def test_scaling_and_squaring_is_the_matrix_exponential():
    """Oracle: torch.linalg.matrix_exp, at sizes from 1e-3 to 1e4 (0 to 15 squarings per matrix, each its own)."""
    A = torch.randn(5, 4, 4, dtype=torch.float64, generator=_gen(30))
    A = A / torch.linalg.matrix_norm(A)[:, None, None] * torch.tensor([1e-3, 0.5, 3.0, 40.0, 1e4],
                                                                       dtype=torch.float64)[:, None, None]
    A = (A - A.mT) / 2  # rotations: exp stays bounded at any size
    size = A.abs().sum((-1, -2), keepdim=True)
    one = torch.eye(4, dtype=torch.float64)
    got = scaling_and_squaring(A, size, torch.matmul, one, 18)
    torch.testing.assert_close(got, torch.linalg.matrix_exp(A), rtol=1e-9, atol=1e-9)
    assert 0.5 * 2 ** MAX_SQUARINGS > 1e4
