"""Iterative solver for large equivariance problems of compact and finite groups.

For a compact group with Haar measure ``mu``, the orthogonal projector onto
the equivariant maps is ``P = E_g[ g . W ]`` with ``g . W = rho_out(g) W rho_in(g)^T``.
Averaging ``K`` independent random elements gives an unbiased estimate of
``P`` whose action on any non-invariant component has expected squared norm
``1 / K``; a block of ``b`` vectors iterated with fresh samples (and
re-orthonormalised) therefore converges geometrically onto the invariant
subspace, which it never damps. A final Rayleigh-Ritz step with the exact
generator constraints keeps only vectors that satisfy them to float64
precision, so the result is exact, not statistical; the block is doubled until
it holds more vectors than the solution space.

The group action is applied factor by factor (``V ** k`` costs ``k d`` per
coordinate instead of ``d ** k``), so the ``(out * in)^2`` Gram matrix of the
dense solver is never formed.
"""

from __future__ import annotations

import torch
from torch import Tensor

from geomlin.reps.base import Rep, SumRep, TensorRep, bind, common_group

#: Random group elements averaged per iteration.
SAMPLES_PER_STEP = 4
#: Iterations between convergence checks, and the most checks before giving up.
STEPS_PER_CHECK = 10
MAX_CHECKS = 20
#: A vector is accepted when its constraint residual is below this (relative to the generators' scale).
RESIDUAL_RTOL = 1e-10
#: A Ritz value that keeps at least this fraction of itself over one check has stalled (is non-invariant).
STALL_RATIO = 0.5
#: Initial block size.
INITIAL_BLOCK = 16


def act(rep: Rep, g: Tensor, x: Tensor, axis: int, transpose: bool = False) -> Tensor:
    """Apply ``rho(g)`` (or ``rho(g)^T``) along ``axis`` of ``x`` (``x.shape[axis] == rep.size``), factor by factor."""
    return _factorwise(rep, x, axis, lambda leaf: leaf._rho(g), transpose, leibniz=False)


def act_algebra(rep: Rep, A: Tensor, x: Tensor, axis: int, transpose: bool = False) -> Tensor:
    """Apply ``drho(A)`` (or ``drho(A)^T``) along ``axis`` of ``x``, factor by factor.

    On a tensor product ``drho(A) = sum_k I (x) .. (x) drho_k(A) (x) .. (x) I`` (the Leibniz rule), so
    ``V ** m`` costs ``m d`` per entry instead of a ``d^m x d^m`` matrix.
    """
    return _factorwise(rep, x, axis, lambda leaf: leaf.drho(A), transpose, leibniz=True)


def _factorwise(rep: Rep, x: Tensor, axis: int, leaf_matrix, transpose: bool, leibniz: bool) -> Tensor:
    axis = axis % x.ndim
    if isinstance(rep, SumRep):
        parts = torch.split(x, [b.size for b in rep.blocks], dim=axis)
        return torch.cat([_factorwise(b, p, axis, leaf_matrix, transpose, leibniz)
                          for b, p in zip(rep.blocks, parts)], dim=axis)
    if isinstance(rep, TensorRep):
        sizes = [f.size for f in rep.factors]
        shape = x.shape
        y = x.reshape(*shape[:axis], *sizes, *shape[axis + 1:])
        if leibniz:
            out = sum(_factorwise(f, y, axis + i, leaf_matrix, transpose, leibniz) for i, f in enumerate(rep.factors))
        else:
            out = y
            for i, f in enumerate(rep.factors):
                out = _factorwise(f, out, axis + i, leaf_matrix, transpose, leibniz)
        return out.reshape(shape)
    if rep.is_scalar:
        return torch.zeros_like(x) if leibniz else x
    M = leaf_matrix(rep).to(x.dtype)  # group elements come from group.sample: no membership check per factor
    if transpose:
        M = M.transpose(-1, -2)
    return torch.movedim(torch.tensordot(M, x, dims=([1], [axis])), 0, axis)


def _act_on_maps(rep_in: Rep, rep_out: Rep, g: Tensor, W: Tensor) -> Tensor:
    """``rho_out(g) W rho_in(g)^T`` for ``W (b, out, in)`` (orthogonal reps)."""
    return act(rep_in, g, act(rep_out, g, W, 1), 2)


def _constraint_residuals(rep_in: Rep, rep_out: Rep, W: Tensor) -> list[Tensor]:
    """Exact generator constraints ``P W - W Q`` for ``W (b, out, in)``, one ``(b, out, in)`` per generator.

    ``W Q`` is ``Q^T`` applied along the input axis; both products run factor by factor.
    """
    group = rep_in.group if rep_in.group is not None else rep_out.group
    out = []
    for A in group.lie_algebra:
        out.append(act_algebra(rep_out, A, W, 1) - act_algebra(rep_in, A, W, 2, transpose=True))
    for h in group.discrete_generators:
        out.append(act(rep_out, h, W, 1) - act(rep_in, h, W, 2, transpose=True))
    return out


def _algebra_norm(rep: Rep, A: Tensor) -> float:
    """An upper bound of the spectral norm of ``drho(A)``: the sum over tensor factors, the largest block of a sum."""
    if isinstance(rep, SumRep):
        return max(_algebra_norm(b, A) for b in rep.blocks)
    if isinstance(rep, TensorRep):
        return sum(_algebra_norm(f, A) for f in rep.factors)
    if rep.is_scalar:
        return 0.0
    return float(torch.linalg.matrix_norm(rep.drho(A), 2))


def _generator_scale(rep_in: Rep, rep_out: Rep) -> float:
    group = rep_in.group if rep_in.group is not None else rep_out.group
    scale = 0.0
    for A in group.lie_algebra:
        scale = max(scale, _algebra_norm(rep_out, A) + _algebra_norm(rep_in, A))
    return max(scale, 2.0)


def check_averaging(group, what: str) -> None:
    """Refuse a group whose action this solver cannot average: ``what`` names the caller in the message.

    Averaging needs Haar samples and an orthogonal action (``group.is_compact``); a finite group given
    by non-orthogonal generators is solved densely instead.
    """
    if group is not None and group.is_compact:
        return
    why = ("only scalars" if group is None else "finite but given by non-orthogonal generators (solve it with "
           "method='dense')" if group.is_finite else "not compact, or its generators are not orthogonal")
    raise ValueError(f"{what} averages the orthogonal action of a compact or finite group; {group} is {why}")


def nullspace_sampled(rep_in: Rep, rep_out: Rep, generator: torch.Generator | None = None) -> Tensor:
    """Orthonormal basis ``(r, out, in)`` of equivariant maps for a compact or finite group.

    Raises ``RuntimeError`` if the iteration does not converge (it reports the residual), and
    ``ValueError`` for a group that is not compact with orthogonal generators (`check_averaging`).
    """
    rep_in, rep_out = bind(rep_in, None, "rep_in"), bind(rep_out, None, "rep_out")
    group = common_group([rep_in, rep_out])
    check_averaging(group, "the sampled solver")
    n_out, n_in = rep_out.size, rep_in.size
    N = n_out * n_in
    if N == 0:  # an empty rep (e3nn's Irreps("")): only the zero map
        return torch.zeros(0, n_out, n_in, dtype=torch.float64)
    gen = generator or torch.Generator().manual_seed(0)
    scale = _generator_scale(rep_in, rep_out)
    block = min(INITIAL_BLOCK, N)
    while True:
        Y = torch.linalg.qr(torch.randn(N, block, dtype=torch.float64, generator=gen))[0]
        previous = None
        for _ in range(MAX_CHECKS):
            for _ in range(STEPS_PER_CHECK):
                W = Y.T.reshape(block, n_out, n_in)
                acc = torch.zeros_like(W)
                for g in group.sample(SAMPLES_PER_STEP, generator=gen):
                    acc += _act_on_maps(rep_in, rep_out, g, W)
                Y = torch.linalg.qr(acc.reshape(block, N).T)[0]
            W = Y.T.reshape(block, n_out, n_in)
            # singular values of the stacked residuals resolve ~1e-16 * ||R|| (the
            # eigenvalues of R^T R would only resolve the square of that)
            R = torch.cat([r.reshape(block, N) for r in _constraint_residuals(rep_in, rep_out, W)], 1)
            _, sing, Vh = torch.linalg.svd(R.T, full_matrices=False)
            sing, V = sing.flip(0), Vh.flip(0).T
            good = sing <= RESIDUAL_RTOL * scale
            count = int(good.sum())
            if count == block:
                break  # every vector is invariant: the block may be too small
            # Converged when the remaining values have stopped falling: contaminated invariant
            # directions shrink ~30x per check, genuinely non-invariant ones do not.
            if previous is not None and count == previous[0]:
                rest, rest_before = sing[~good], previous[1][~good]
                if bool((rest >= STALL_RATIO * rest_before).all()):
                    return (Y @ V[:, good]).T.reshape(count, n_out, n_in)
            previous = (count, sing)
        if block >= N:
            raise RuntimeError(f"the sampled solver did not converge for Hom({rep_in!r}, {rep_out!r})")
        block = min(2 * block, N)
