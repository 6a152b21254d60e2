"""The space of equivariant linear maps between two representations.

For a group with Lie algebra generators ``A_i`` and discrete generators ``h_j``,
``W`` maps ``rep_in`` to ``rep_out`` equivariantly iff (Finzi et al. 2021, Eq. 4-5)

    drho_out(A_i) W - W drho_in(A_i) = 0      for every i,
    rho_out(h_j)  W - W rho_in(h_j)  = 0      for every j.

With ``vec`` row-major, ``vec(P W - W Q) = (P (x) I - I (x) Q^T) vec(W) = C vec(W)``, so
the solution space is the null space of the stacked constraints, i.e. the
zero eigenspace of the Gram matrix ``L = sum_i C_i^T C_i``. ``L`` is assembled
from Kronecker identities (no ``N x N`` matrix products):

    C^T C = P^T P (x) I - P^T (x) Q - P (x) Q^T + I (x) Q Q^T.

Problems with more than ``DENSE_MAX_UNKNOWNS`` unknowns of compact or finite
groups go to :func:`geomlin.linear.sampled_solver.nullspace_sampled` (averaging over
random group elements, applied factor by factor, with an exact Rayleigh-Ritz
check), which never forms the Gram matrix.

Direct sums are solved block by block (``Hom(a1 + a2, b) = Hom(a1, b) + Hom(a2, b)``),
each distinct pair of blocks once; results are cached in memory by the reps'
canonical keys and optionally on disk.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from pathlib import Path

import torch
from torch import Tensor

from geomlin.linear.sampled_solver import nullspace_sampled
from geomlin.reps.base import Rep, common_group

#: Eigenvalues of the Gram matrix below ``NULLSPACE_RTOL * max(1, largest)`` span the solution.
NULLSPACE_RTOL = 1e-9
#: Block problems with more unknowns (``out * in``) than this go to the sampled
#: iterative solver when the group is compact or finite (orthogonal generators).
DENSE_MAX_UNKNOWNS = 1024
#: Largest block problem the dense solver accepts (non-compact groups); its Gram
#: matrix takes ``8 N^2`` bytes and ``eigh`` about ``N^3`` flops (4096: ~15 s on 2 cores).
MAX_DENSE_UNKNOWNS = 8192
#: Largest block problem the sampled solver accepts (its iterate holds ``64 N`` floats).
MAX_SAMPLED_UNKNOWNS = 2_000_000

_BLOCK_CACHE: dict[tuple, Tensor] = {}
_FULL_CACHE: dict[tuple, Tensor] = {}


def _check_rep(rep, name: str) -> Rep:
    if not isinstance(rep, Rep):
        raise TypeError(f"{name} must be a geomlin Rep, got {type(rep).__name__}")
    return rep


def _kron(a: Tensor, b: Tensor) -> Tensor:
    return torch.kron(a.contiguous(), b.contiguous())


def constraint_gram(rep_in: Rep, rep_out: Rep) -> Tensor:
    """Gram matrix ``L = sum C_i^T C_i`` of the equivariance constraints, ``(N, N)`` float64, ``N = out * in``."""
    group = common_group([rep_in, rep_out])
    n_in, n_out = rep_in.size, rep_out.size
    N = n_in * n_out
    L = torch.zeros(N, N, dtype=torch.float64)
    if group is None:
        return L
    eye_in = torch.eye(n_in, dtype=torch.float64)
    eye_out = torch.eye(n_out, dtype=torch.float64)
    pairs = []
    for A in group.lie_algebra:
        pairs.append((rep_out.drho(A), rep_in.drho(A).T))
    for h in group.discrete_generators:
        pairs.append((rep_out.rho(h), rep_in.rho(h).T))
    for P, Q in pairs:
        P = P.to(torch.float64)
        Q = Q.to(torch.float64)
        L += _kron(P.T @ P, eye_in)
        L -= _kron(P.T, Q)
        L -= _kron(P, Q.T)
        L += _kron(eye_out, Q @ Q.T)
    return L


def _nullspace_dense(L: Tensor) -> Tensor:
    """Orthonormal null space ``(N, r)`` of a symmetric PSD ``L``."""
    evals, evecs = torch.linalg.eigh(L)
    tol = NULLSPACE_RTOL * max(1.0, float(evals[-1].abs()))
    return evecs[:, evals <= tol]


def _solve_constraints(rep_in: Rep, rep_out: Rep) -> Tensor:
    """Pick the solver: dense for small problems and non-compact groups, sampled otherwise."""
    N = rep_in.size * rep_out.size
    group = common_group([rep_in, rep_out])
    compact = group is not None and group.is_compact
    if N <= DENSE_MAX_UNKNOWNS or (not compact and N <= MAX_DENSE_UNKNOWNS):
        return _nullspace_dense(constraint_gram(rep_in, rep_out)).T
    if compact and N <= MAX_SAMPLED_UNKNOWNS:
        return nullspace_sampled(rep_in, rep_out).reshape(-1, N)
    limit = MAX_SAMPLED_UNKNOWNS if compact else MAX_DENSE_UNKNOWNS
    raise ValueError(
        f"Hom({rep_in!r}, {rep_out!r}) has {N} unknowns, more than the solver's limit of {limit} "
        f"for {'compact' if compact else 'non-compact'} groups; split the reps into smaller direct-sum "
        "blocks, or use geomlin.linear.diagrams for tensor powers of S(n)/O(n)/SO(n)/Sp(n)")


def _solve_pair(rep_in: Rep, rep_out: Rep) -> Tensor:
    """Orthonormal basis ``(r, out, in)`` of Hom_G(rep_in, rep_out) for two non-sum reps."""
    key = (rep_in.key(), rep_out.key())
    hit = _BLOCK_CACHE.get(key)
    if hit is not None:
        return hit
    n_in, n_out = rep_in.size, rep_out.size
    if rep_in.is_scalar and rep_out.is_scalar:
        basis = torch.eye(n_out * n_in, dtype=torch.float64)
    else:
        basis = _solve_constraints(rep_in, rep_out)
    basis = _canonical_sign(basis.reshape(-1, n_out, n_in).contiguous())
    _BLOCK_CACHE[key] = basis
    return basis


def _canonical_sign(basis: Tensor) -> Tensor:
    """Flip each basis element so its largest-magnitude entry is positive (reproducible output)."""
    if basis.shape[0] == 0:
        return basis
    flat = basis.reshape(basis.shape[0], -1)
    idx = flat.abs().argmax(dim=1)
    signs = torch.sign(flat.gather(1, idx[:, None]))
    return basis * signs[:, :, None]


def _disk_path(cache_dir, key) -> Path:
    digest = hashlib.sha1(repr(key).encode()).hexdigest()
    return Path(cache_dir) / f"basis-{digest}.pt"


def _read_cache_file(path: Path) -> dict | None:
    """The stored ``{"key", "basis"}`` dict, or ``None`` for a corrupt file (which is then rewritten)."""
    try:
        stored = torch.load(path, weights_only=True)
    except (OSError, RuntimeError, EOFError, ValueError, pickle.UnpicklingError):
        return None
    return stored if isinstance(stored, dict) and "basis" in stored else None


def equivariant_basis(rep_in: Rep, rep_out: Rep, cache_dir: str | os.PathLike | None = None) -> Tensor:
    """Orthonormal basis of the equivariant linear maps ``rep_in -> rep_out``.

    Parameters
    ----------
    rep_in, rep_out: representations of the same group (``Scalar`` combines with any).
    cache_dir: optional folder for an on-disk cache (written atomically).

    Returns
    -------
    Tensor ``(r, rep_out.size, rep_in.size)``, float64, orthonormal in the
    Frobenius inner product; ``r`` is the dimension of the space. Each basis
    element is supported on one pair of direct-sum blocks.
    """
    _check_rep(rep_in, "rep_in")
    _check_rep(rep_out, "rep_out")
    common_group([rep_in, rep_out])
    key = (rep_in.key(), rep_out.key())
    hit = _FULL_CACHE.get(key)
    if hit is not None:
        return hit.clone()
    path = _disk_path(cache_dir, key) if cache_dir is not None else None
    if path is not None and path.exists():
        stored = _read_cache_file(path)
        if stored is not None and stored.get("key") == repr(key):
            _FULL_CACHE[key] = stored["basis"]
            return stored["basis"].clone()
    pieces = []
    o0 = 0
    for b in rep_out.blocks:
        i0 = 0
        for a in rep_in.blocks:
            block = _solve_pair(a, b)
            if block.shape[0]:
                full = torch.zeros(block.shape[0], rep_out.size, rep_in.size, dtype=torch.float64)
                full[:, o0:o0 + b.size, i0:i0 + a.size] = block
                pieces.append(full)
            i0 += a.size
        o0 += b.size
    basis = torch.cat(pieces) if pieces else torch.zeros(0, rep_out.size, rep_in.size, dtype=torch.float64)
    _FULL_CACHE[key] = basis
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        os.close(fd)
        try:
            torch.save({"key": repr(key), "basis": basis}, tmp)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
    return basis.clone()


def block_basis(rep_in: Rep, rep_out: Rep) -> Tensor:
    """Basis ``(r, out, in)`` for a pair of non-sum blocks (cached, shared by layers)."""
    return _solve_pair(_check_rep(rep_in, "rep_in"), _check_rep(rep_out, "rep_out"))


def clear_cache() -> None:
    """Forget every cached basis (in memory)."""
    _BLOCK_CACHE.clear()
    _FULL_CACHE.clear()
