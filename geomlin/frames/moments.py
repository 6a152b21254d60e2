"""Moments of point clouds for PCA frames: centroids and covariances, and axes from higher moments.

[`point_moments`][] computes the centroid and covariance of padded or flat clouds (with autocast off,
in at least float32) from which [`geomlin.frames.pca.pca_frames`][] takes its eigenvectors.
Inside a degenerate eigenspace (repeated eigenvalues) the eigenvectors are arbitrary;
[`moment_axes`][] chooses axes there from third and fourth moments instead, and
[`moment_frames`][] applies it to every degenerate block of a batch at once
(``on_degenerate="moments"``); [`skewness_signed`][] signs the axes by third moments
(``signs="skewness"``). Every step commutes with O(d), so the frames stay exactly equivariant.
"""

from __future__ import annotations

import torch
from torch import Tensor

from geomlin.batching import BatchLayout, to_padded
from geomlin.precision import full_precision, working_dtype
from geomlin.validation import check_condition

#: Candidate directions for [`moment_axes`][] must have at least this norm (relative to the RMS radius).
MOMENT_MIN_CANDIDATE = 1e-3
#: [`moment_axes`][] scores the directions of the points farthest from the centre only (corners,
#: tips: where the maxima of the moments lie); the refinement then moves off the sampled points.
MOMENT_CANDIDATES = 24
#: Shifted power-iteration steps that refine a moment axis, and the shift (keeps the iteration ascending).
MOMENT_REFINE_STEPS, MOMENT_SHIFT = 4, 4.0




def point_moments(pos: Tensor, translation: bool, layout: BatchLayout | None = None):
    """Centroid, covariance and point counts of padded or flat point clouds.

    Computed with autocast off in at least float32 ([`working_dtype`][geomlin.precision.working_dtype]):
    a covariance in bfloat16 would lose the frame.

    Parameters
    ----------
    pos : Tensor
        ``(B, N, d)`` padded (with the layout's mask) or ``(N_total, d)`` flat.
    translation : bool
        centre the clouds (E(d), SE(d)); otherwise the centroid is zero (O(d), SO(d)).
    layout : BatchLayout, optional
        the batch's layout (None: padded, every point real).

    Returns
    -------
    centroid : Tensor of shape (B, d)
        in ``pos``'s dtype.
    covariance : Tensor of shape (B, d, d)
        in the working dtype (``pos``'s, float32 for half precisions), as are the next two.
    counts : Tensor of shape (B,)
        points per cloud.
    mean_square : Tensor of shape (B,)
        the mean squared norm of the points (a scale for degeneracy tests).
    """
    d = pos.shape[-1]
    with full_precision(pos):
        p = pos.to(working_dtype(pos.dtype))
        if layout is not None and layout.is_flat:
            B, batch = layout.num_graphs, layout.batch
            counts = p.new_zeros(B).index_add_(0, batch, torch.ones_like(p[:, 0]))
            _require_points(counts)
            sums = p.new_zeros(B, d).index_add(0, batch, p)
            centroid = sums / counts.clamp_min(1)[:, None] if translation else p.new_zeros(B, d)
            x = p - centroid[batch]
            outer = x[:, :, None] * x[:, None, :]
            cov = p.new_zeros(B, d, d).index_add(0, batch, outer) / counts.clamp_min(1)[:, None, None]
            sq = p.new_zeros(B).index_add(0, batch, (p * p).sum(-1)) / counts.clamp_min(1)
            return centroid.to(pos.dtype), cov, counts, sq
        mask = None if layout is None else layout.mask
        w = torch.ones(p.shape[:2], dtype=p.dtype, device=p.device) if mask is None else mask.to(p.dtype)
        counts = w.sum(1)
        _require_points(counts)
        n = counts.clamp_min(1)  # (an empty cloud fails the check above; this keeps it finite on devices)
        if translation:
            centroid = (p * w[..., None]).sum(1) / n[:, None]
        else:
            centroid = p.new_zeros(p.shape[0], d)
        x = (p - centroid[:, None]) * w[..., None]
        cov = x.transpose(1, 2) @ x / n[:, None, None]
        sq = ((p * p).sum(-1) * w).sum(1) / n
        return centroid.to(pos.dtype), cov, counts, sq


def _require_points(counts: Tensor) -> None:
    if counts.device.type != "cpu" or torch.compiler.is_compiling():
        check_condition(counts >= 1, "some point clouds have no points (a frame needs at least one point; "
                                     "check the mask or batch vector)")
        return
    empty = (counts < 1).nonzero().flatten()
    if empty.numel():
        raise ValueError(f"point clouds {empty.tolist()[:10]} have no points (a frame needs at least one "
                         "point; check the mask or batch vector)")


def _moment_score(p: Tensor, q: Tensor) -> Tensor:
    """``h`` per point from ``p = u.y`` and ``q = a.y`` (``a`` the first axis chosen, 0 before):
    third and fourth moments, so that chiral and centrosymmetric shapes (a tetrahedron, a cube)
    both get distinct directions, and ``p^3 q``, which orients the plane around a three-fold
    axis ``a`` of a centrosymmetric shape (a cube seen along its diagonal)."""
    p2 = p * p
    return p2 * p * (1 + p + q)  # p^3 + p^4 + p^3 q


def _moment_ascent(p: Tensor, q: Tensor) -> Tensor:
    """``dh/dp = 3 p^2 + 4 p^3 + 3 p^2 q``."""
    return p * p * (3 + 4 * p + 3 * q)


def moment_axes(y: Tensor, weight: Tensor) -> Tensor:
    """Orthonormal axes of ``k``-dimensional point sets chosen from their 3rd and 4th moments.

    Parameters
    ----------
    y : Tensor of shape (B, N, k)
        float64 centred coordinates (inside one eigenspace of the covariance).
    weight : Tensor of shape (B, N)
        non-negative point weights (0 = padding).

    Returns
    -------
    Tensor
        ``(B, k, k)`` orthogonal, columns ``u_1, ..., u_k``: ``u_1`` maximises
        ``h(u) = sum_i w_i h(u.y_i, 0)`` (``_moment_score``; ``y`` scaled to unit RMS radius)
        among the directions of the ``MOMENT_CANDIDATES`` points farthest from the centre, refined by ``MOMENT_REFINE_STEPS`` steps of the shifted
        power iteration ``u <- normalise(grad h(u) + MOMENT_SHIFT u)``; ``u_2`` maximises
        ``sum_i w_i h(u.y_i, u_1.y_i)`` the same way in the orthogonal complement of ``u_1``, and so
        on. O(k)-equivariant: ``moment_axes(y Q) = Q^T moment_axes(y)`` up to the signs of the columns
        (ties between points aside). Items without a usable point (all ``y = 0``) get the identity.
    """
    B, N, k = y.shape
    tiny = torch.finfo(y.dtype).tiny
    w = weight / weight.sum(-1, keepdim=True).clamp_min(tiny)
    rms = (w * (y * y).sum(-1)).sum(-1).sqrt()
    has_spread = rms > 0
    y = y / torch.where(has_spread, rms, torch.ones_like(rms))[:, None, None]
    eye = torch.eye(k, dtype=y.dtype, device=y.device).expand(B, k, k)
    rows = torch.arange(B, device=y.device)
    P = eye.clone()  # projector onto the complement of the axes chosen so far
    q = torch.zeros_like(y[..., 0])  # a.y for the first axis a
    axes = []
    # the farthest points (an invariant choice) are the candidate directions
    far = (y * y).sum(-1).masked_fill(weight <= 0, -1.0)
    # Always M = MOMENT_CANDIDATES candidates, so M does not depend on N (a symbolic size under
    # torch.export): slots past the N points rank last and get weight 0, which rules them out below.
    far = torch.cat([far, far.new_full((B, MOMENT_CANDIDATES), -2.0)], dim=-1)
    top = far.topk(MOMENT_CANDIDATES, dim=-1).indices  # (B, M)
    real = top < N
    top = top.clamp(max=N - 1)
    y_top = torch.gather(y, 1, top[..., None].expand(-1, -1, k))
    w_top = torch.where(real, torch.gather(weight, 1, top), torch.zeros_like(top, dtype=weight.dtype))
    for j in range(k - 1):
        cand = y_top @ P  # (B, M, k): P is symmetric
        norm = cand.norm(dim=-1)
        ok = (norm > MOMENT_MIN_CANDIDATE) & (w_top > 0)
        cand = cand / norm.clamp_min(MOMENT_MIN_CANDIDATE)[..., None]
        proj = cand @ y.transpose(-1, -2)  # (B, M, N): c_j . y_i
        score = (_moment_score(proj, q[:, None, :]) * w[:, None, :]).sum(-1)
        score = torch.where(ok, score, torch.full_like(score, -torch.inf))
        u = cand[rows, score.argmax(-1)]
        for _ in range(MOMENT_REFINE_STEPS):
            p = (y @ u[..., None]).squeeze(-1)
            grad = ((w * _moment_ascent(p, q))[..., None] * y).sum(1)
            u = ((grad + MOMENT_SHIFT * u)[:, None, :] @ P).squeeze(1)
            u = u / u.norm(dim=-1, keepdim=True).clamp_min(tiny)
        fallback = (eye[:, j, None, :] @ P).squeeze(1)
        u = torch.where((ok.any(-1) & has_spread)[:, None], u, fallback)
        u = u / u.norm(dim=-1, keepdim=True).clamp_min(tiny)
        axes.append(u)
        if j == 0:
            q = (y @ u[..., None]).squeeze(-1)
        P = P - u[:, :, None] * u[:, None, :]
    # The last axis spans what is left: the column of P with the largest norm.
    col = P.norm(dim=-2).argmax(-1)
    last = P[rows, :, col]
    axes.append(last / last.norm(dim=-1, keepdim=True).clamp_min(tiny))
    U = torch.stack(axes, dim=-1)
    # Remove rounding so that the frame is orthogonal to machine precision (QR keeps the column signs).
    Qr, R = torch.linalg.qr(U)
    diag = torch.diagonal(R, dim1=-2, dim2=-1)
    return Qr * torch.where(diag < 0, -1.0, 1.0).to(Qr.dtype)[..., None, :]


def moment_frames(V: Tensor, gap_bad: Tensor, pos: Tensor, centroid: Tensor, layout: BatchLayout | None) -> Tensor:
    """``V`` with the axes of every degenerate eigenspace replaced by [`moment_axes`][].

    Every contiguous block ``[lo, lo + k)`` of eigen-indices (``k >= 2``) that is a whole cluster of
    some item is solved for all items at once (one [`moment_axes`][] call per size ``k``) and
    selected per item, so the host never reads which items are degenerate. ``V (B, d, d)`` float64
    eigenvectors, ``gap_bad (B, d - 1)`` bool, ``pos`` and ``centroid (B, d)`` as for
    [`point_moments`][]. A flat batch is padded to its largest cloud first
    ([`geomlin.batching.to_padded`][]: one read of the device unless the layout knows its sizes).
    """
    B, d = V.shape[0], V.shape[-1]
    pos = pos.detach().to(torch.float64)
    if layout is not None and layout.is_flat:
        padded, real = to_padded(pos, layout)
        w = real.to(torch.float64)
    else:
        mask = None if layout is None else layout.mask
        padded = pos
        w = torch.ones(pos.shape[:2], dtype=pos.dtype, device=pos.device) if mask is None else mask.to(pos.dtype)
    x = padded - centroid.detach().to(torch.float64)[:, None]
    joined = torch.cat([torch.zeros_like(gap_bad[:, :1]), gap_bad, torch.zeros_like(gap_bad[:, :1])], -1)
    out = V
    for k in range(2, d + 1):
        starts = range(d - k + 1)
        E = torch.cat([V[:, :, lo:lo + k].detach() for lo in starts])  # (L B, d, k)
        U = moment_axes(x.repeat(len(starts), 1, 1) @ E, w.repeat(len(starts), 1))
        axes = (E @ U).reshape(len(starts), B, d, k)
        for i, lo in enumerate(starts):
            # [lo, lo + k) is a cluster: joined inside, separated at both ends (joined[j] = gap j - 1)
            whole = joined[:, lo + 1:lo + k].all(-1) & ~joined[:, lo] & ~joined[:, lo + k]
            block = torch.where(whole[:, None, None], axes[i], out[:, :, lo:lo + k])
            out = torch.cat([out[:, :, :lo], block, out[:, :, lo + k:]], dim=-1)
    return out


def skewness_signed(V: Tensor, pos: Tensor, centroid: Tensor, layout: BatchLayout | None, special: bool) -> Tensor:
    """``V (B, d, d)`` with column ``j`` negated where the third moment of the cloud along it is negative.

    With ``special`` the last column is instead signed so that ``det V = +1``.
    """
    B = V.shape[0]
    x = pos.detach().to(torch.float64)
    if layout is None or not layout.is_flat:
        mask = None if layout is None else layout.mask
        w = torch.ones(x.shape[:2], dtype=x.dtype, device=x.device) if mask is None else mask.to(x.dtype)
        y = (x - centroid.detach().to(torch.float64)[:, None]) @ V.detach()  # (B, N, d)
        third = (w[..., None] * y ** 3).sum(1)  # (B, d)
    else:
        batch = layout.batch
        y = ((x - centroid.detach().to(torch.float64)[batch])[:, None, :] @ V.detach()[batch]).squeeze(1)
        third = y.new_zeros(B, V.shape[-1]).index_add_(0, batch, y ** 3)
    s = torch.where(third < 0, -1.0, 1.0).to(V.dtype)
    if special:
        s = torch.cat([s[:, :-1], torch.ones_like(s[:, -1:])], dim=-1)
        last = torch.where(torch.linalg.det(V.detach() * s[:, None, :]) < 0, -1.0, 1.0).to(V.dtype)
        s = torch.cat([s[:, :-1], last[:, None]], dim=-1)
    return V * s[:, None, :]
