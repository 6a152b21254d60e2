"""PCA frames for O(d), SO(d), E(d) and SE(d) (Puny et al. 2022, "Frame Averaging for
Invariant and Equivariant Network Design", Sec. 3.2).

For a point cloud ``X`` (``n`` points in ``R^d``) let ``c`` be its centroid (zero for
the linear groups O(d)/SO(d)) and ``C = 1/n sum_i (x_i - c)(x_i - c)^T`` its covariance
with eigenvectors ``V = [v_1 ... v_d]`` sorted by decreasing eigenvalue. The frame is
the set of rigid motions

    F(X) = {(V S, c) : S = diag(s), s in {-1, +1}^d}            (O(d), E(d); 2^d elements)
    F(X) = {(V S, c) : det(V S) = +1}                          (SO(d), SE(d); 2^(d-1))

A frame element ``(Q, c)`` maps canonical coordinates to the world, ``x = Q z + c``;
its inverse gives the canonical coordinates ``z = Q^T (x - c)``. Because every sign
combination is listed, ``F(g X) = g F(X)`` holds exactly as a *set* whenever the
eigenvalues are simple, whatever signs the eigensolver happens to return.

**Degenerate spectra**

When two eigenvalues coincide (a regular tetrahedron or any shape with a rotational
symmetry of order > 2, points on a line, a single point), the eigenvectors are only
defined up to a rotation inside the eigenspace and the frame is no longer
equivariant (nor continuous). Dym et al. 2024 ("Equivariant Frames and the
Impossibility of Continuous Canonicalization") show that no continuous
canonicalization exists for these groups at all, so this is a limit of the method,
not of the implementation. Such inputs are detected from the relative eigenvalue gap
``(lambda_i - lambda_{i+1}) / lambda_1 < gap_tol`` and handled by ``on_degenerate``:

* ``"raise"``: [`DegenerateFrameError`][] (a ``ValueError``) naming the items;
* ``"warn"``: a ``UserWarning``; the eigensolver's arbitrary basis is used (finite,
  but not equivariant for those items);
* ``"sample"``: each frame element gets an independent Haar-random element of the
  ambiguous subgroup (``O(k)`` on every ``k``-fold eigenspace), so the frame is
  equivariant in distribution (exact only in expectation);
* ``"moments"``: inside every (near-)degenerate eigenspace the axes are chosen from
  third and fourth moments of the cloud ([`moment_axes`][]): the direction ``u``
  maximising ``h(u) = mean_i (u.y_i)^3 + (u.y_i)^4`` (``y`` the standardised
  coordinates in the eigenspace) among the directions of the points themselves,
  refined by a shifted power iteration, then the same in the orthogonal complement.
  Every step is equivariant, so the frame stays exactly equivariant as a set; a cube,
  an octahedron, a tetrahedron or a square pyramid gets its axes from its faces or
  vertices instead of from sampling noise. Shapes with a continuous symmetry (a
  cylinder) keep an arbitrary in-plane axis, which is harmless: rotating them about
  that axis does not change them. With this policy a larger ``gap_tol`` (e.g. 0.1) is
  useful: it also replaces the principal axes of *nearly* isotropic clouds, whose
  eigenvectors are exactly equivariant but swing with the sampling noise;
* ``"ignore"``: like ``"warn"`` without the warning.

A planar cloud in 3D is *not* degenerate by itself (its normal is the simple
eigenvalue 0); it is degenerate only when its in-plane spread is isotropic
(e.g. a regular polygon).

**Accelerators and mixed precision**

Nothing here makes the host wait for the device: the eigenvectors come from the sync-free
Jacobi solver [`geomlin.linalg.symmetric_eigh`][]
(``torch.linalg.eigh`` reads an error code back on CUDA), every policy is computed for all items and selected per item with
``torch.where``, and on an accelerator ``"raise"`` and ``"warn"`` are checks without the item numbers,
which would need a read ([`geomlin.validation.check_condition`][]; deferred inside a
[`deferred_checks`][geomlin.validation.deferred_checks] scope).
On the CPU a policy's extra work is skipped when no item needs it. Flat batches read
``batch.max()`` unless ``num_graphs`` is given, and ``on_degenerate="moments"`` pads them to the
largest cloud (one read of its size); padded batches read nothing. Moments and
eigenvectors are computed with autocast off (covariances in at least float32, the
eigenproblem in float64), so the frames are as accurate under ``torch.autocast`` as without.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import torch
from torch import Tensor

from geomlin.groups import SO, Euclidean, O, SymmetryGroup, as_group
from geomlin.linalg import symmetric_eigh
from geomlin.precision import full_precision, working_dtype
from geomlin.validation import (
    check_batch_vector,
    check_choice,
    check_condition,
    check_finite,
    check_float,
    check_generator,
    check_index,
    check_mask,
    check_nonnegative_int,
    check_tensor,
)

#: Default threshold on the relative eigenvalue gap below which a spectrum is degenerate.
DEFAULT_GAP_TOL = 1e-3
#: Policies for degenerate spectra.
DEGENERATE_POLICIES = ("raise", "warn", "sample", "moments", "ignore")
#: How the signs of the axes are handled: every pattern (Puny et al.) or one, fixed by third moments.
SIGN_POLICIES = ("all", "skewness")
#: Largest dimension for which the 2^d sign frames are enumerated.
MAX_FRAME_DIM = 10
#: A largest eigenvalue below ``(ZERO_SPREAD_EPS * eps)^2 * mean |x|^2`` means all points
#: coincide: rounding alone moves ``x - c`` by about ``eps |x|``.
ZERO_SPREAD_EPS = 1e2
#: Candidate directions for [`moment_axes`][] must have at least this norm (relative to the RMS radius).
MOMENT_MIN_CANDIDATE = 1e-3
#: [`moment_axes`][] scores the directions of the points farthest from the centre only (corners,
#: tips: where the maxima of the moments lie); the refinement then moves off the sampled points.
MOMENT_CANDIDATES = 24
#: Shifted power-iteration steps that refine a moment axis, and the shift (keeps the iteration ascending).
MOMENT_REFINE_STEPS, MOMENT_SHIFT = 4, 4.0


class DegenerateFrameError(ValueError):
    """Raised by ``on_degenerate="raise"`` when a PCA spectrum has repeated eigenvalues."""


def frame_group(group, name: str = "group") -> SymmetryGroup:
    """The group of a PCA frame: ``O(d)``, ``SO(d)``, ``E(d)`` or ``SE(d)`` with ``1 <= d <= MAX_FRAME_DIM``.

    ``group`` is a geomlin group or a name [`geomlin.groups.as_group`][geomlin.groups.names.as_group]
    parses (``"E3"``, ``"SO(3)"``); returns the group.
    """
    G = as_group(group, name)
    if not isinstance(G, (O, SO, Euclidean)):
        raise TypeError(f"{name} must be O(d), SO(d), E(d) or SE(d) for PCA frames, got {G}")
    if not 1 <= G.d <= MAX_FRAME_DIM:
        raise ValueError(f"PCA frames support dimensions 1..{MAX_FRAME_DIM} "
                         f"(2^d frame elements), got d={G.d}")
    return G


def is_special(group) -> bool:
    """True for SO(d) / SE(d): frames are rotations (det +1) only."""
    return isinstance(group, SO) or (isinstance(group, Euclidean) and not group.reflections)


def num_frames(group) -> int:
    """``|F|``: ``2^d`` with reflections, ``2^(d-1)`` without."""
    return 2 ** (group.d - 1) if is_special(group) else 2 ** group.d


def example_clouds(d: int, generator: torch.Generator | None = None, dtype=torch.float64,
                   num_clouds: int = 3, num_points: int = 10) -> tuple[Tensor, Tensor]:
    """Random padded clouds ``(num_clouds, num_points, d)`` with a clear covariance spectrum (axes
    scaled 1.5 .. 0.5) and a bool mask ``(num_clouds, num_points)`` of varying sizes: valid inputs for
    equivariance checks of frame-based modules (``example_inputs``)."""
    pos = torch.randn(num_clouds, num_points, d, generator=generator, dtype=dtype)
    pos = pos * torch.linspace(1.5, 0.5, d, dtype=dtype)
    counts = torch.tensor([num_points - (i % 3) * 2 for i in range(num_clouds)])
    mask = torch.arange(num_points)[None] < counts[:, None]
    return pos, mask


def sign_patterns(d: int, special: bool, dtype=torch.float64, device=None) -> Tensor:
    """The diagonal sign matrices of the frame as ``(F, d)`` vectors of +-1.

    All ``2^d`` patterns in ``itertools.product((1, -1), repeat=d)`` order, or the ``2^(d-1)`` of
    them with product +1 when ``special``. Row 0 is all ones (the eigensolver's own basis). Built
    on ``device`` from integer arithmetic (no table is uploaded).
    """
    rows = torch.arange(2 ** (d - 1) if special else 2 ** d, device=device)
    if special:
        # the rows of the full table with an even number of -1 are 2 r + parity(r)
        parity = ((rows[:, None] >> torch.arange(d - 1, device=device)) & 1).sum(-1) % 2
        rows = 2 * rows + parity
    bits = (rows[:, None] >> torch.arange(d - 1, -1, -1, device=device)) & 1  # column 0 = leading bit
    return (1 - 2 * bits).to(dtype)


class PCAFrames(NamedTuple):
    """Result of [`pca_frames`][].

    Attributes
    ----------
    frames : Tensor of shape (B, F, d, d)
        orthogonal matrices ``Q``; columns are the signed principal axes.
    centroid : Tensor of shape (B, d)
        centroids ``c`` (zero for O(d)/SO(d)).
    gaps : Tensor of shape (B, d - 1)
        relative eigenvalue gaps ``(lambda_i - lambda_{i+1}) / lambda_1``.
    eigenvalues : Tensor of shape (B, d)
        covariance eigenvalues, decreasing.
    degenerate : Tensor of shape (B,)
        bool, True where some gap is below ``gap_tol``.
    """

    frames: Tensor
    centroid: Tensor
    gaps: Tensor
    eigenvalues: Tensor
    degenerate: Tensor


def check_positions(pos: Tensor, d: int, mask: Tensor | None, batch: Tensor | None) -> Tensor | None:
    """Validate a padded ``(B, N, d)`` (+ ``mask (B, N)`` bool) or flat ``(N, d)`` (+ ``batch (N,)``) cloud batch.

    Returns ``batch`` as checked (on an accelerator clamped to be non-negative, its test deferred).
    """
    check_tensor(pos, "pos", what=f"points in R^{d}")
    if pos.ndim == 0 or pos.shape[-1] != d:
        raise ValueError(f"pos must have last dimension {d} (points in R^{d}), got shape {tuple(pos.shape)}")
    if batch is not None:
        if mask is not None:
            raise ValueError("pass either mask (padded batch) or batch (flat batch), not both")
        if pos.ndim != 2:
            raise ValueError(f"with a batch vector pos must be flat (N, {d}), got shape {tuple(pos.shape)}")
        batch = check_batch_vector(batch, "batch", pos.shape[0])
    elif pos.ndim != 3:
        raise ValueError(f"pos must be a padded batch (B, N, {d}) or flat (N, {d}) with a batch vector, "
                         f"got shape {tuple(pos.shape)}")
    elif mask is not None:
        check_mask(mask, "mask")
        if mask.shape != pos.shape[:2]:
            raise ValueError(f"mask must have shape {tuple(pos.shape[:2])} (B, N) to match pos "
                             f"{tuple(pos.shape)}, got {tuple(mask.shape)}")
    check_finite(pos, "pos")  # padding too: NaN * 0 is NaN in the masked sums
    return batch


def num_graphs_of(batch: Tensor, num_graphs: int | None = None) -> int:
    """Number of graphs of a flat batch: ``num_graphs`` or ``batch.max() + 1``.

    Without ``num_graphs`` the largest index is read (a host synchronisation on an accelerator); on
    an accelerator the range of ``batch`` against a given ``num_graphs`` is checked by
    ``flat_graphs`` (deferred, and clamped).
    """
    if num_graphs is not None:
        num_graphs = check_nonnegative_int(num_graphs, "num_graphs")
        if batch.device.type == "cpu" and batch.numel() and int(batch.max()) >= num_graphs:
            raise ValueError(f"batch has index {int(batch.max())} but num_graphs={num_graphs}")
        return int(num_graphs)
    return int(batch.max()) + 1 if batch.numel() else 0


def flat_graphs(batch: Tensor, num_graphs: int | None) -> tuple[int, Tensor]:
    """``(B, batch)`` of a flat batch; on an accelerator ``batch`` is range-checked (deferred) and clamped."""
    B = num_graphs_of(batch, num_graphs)
    if batch.device.type != "cpu" and num_graphs is not None:
        batch = check_index(batch, "batch", B, "graphs (num_graphs)")
    return B, batch


def point_moments(pos: Tensor, translation: bool, mask: Tensor | None = None,
                  batch: Tensor | None = None, num_graphs: int | None = None):
    """Centroid, covariance and point counts of padded or flat point clouds.

    Computed with autocast off in at least float32 ([`working_dtype`][geomlin.precision.working_dtype]):
    a covariance in bfloat16 would lose the frame.

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
        if batch is not None:
            B, batch = flat_graphs(batch, num_graphs)
            counts = p.new_zeros(B).index_add_(0, batch, torch.ones_like(p[:, 0]))
            _require_points(counts)
            sums = p.new_zeros(B, d).index_add(0, batch, p)
            centroid = sums / counts.clamp_min(1)[:, None] if translation else p.new_zeros(B, d)
            x = p - centroid[batch]
            outer = x[:, :, None] * x[:, None, :]
            cov = p.new_zeros(B, d, d).index_add(0, batch, outer) / counts.clamp_min(1)[:, None, None]
            sq = p.new_zeros(B).index_add(0, batch, (p * p).sum(-1)) / counts.clamp_min(1)
            return centroid.to(pos.dtype), cov, counts, sq
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


def _work_needed(flag: Tensor) -> bool:
    """Whether a per-item policy must be computed: always on an accelerator (then selected with
    ``torch.where``, so the host never reads ``flag``) and inside a compiled graph (which cannot
    branch on a value), on the CPU in eager mode only when some item needs it."""
    return flag.device.type != "cpu" or torch.compiler.is_compiling() or bool(flag.any())


def _cluster_masks(gap_bad: Tensor) -> tuple[Tensor, Tensor]:
    """Eigen-indices joined by degenerate gaps (``(B, d-1)`` bool) into clusters:
    ``same (B, d, d)`` (indices ``i, j`` in one cluster) and ``shared (B, d)`` (index in a cluster of
    two or more, i.e. in a degenerate eigenspace)."""
    starts = torch.cat([torch.zeros_like(gap_bad[:, :1]), ~gap_bad], dim=-1)
    cluster = starts.to(torch.int64).cumsum(-1)  # (B, d) cluster id of every index
    same = cluster[:, :, None] == cluster[:, None, :]
    return same, same.sum(-1) > 1


def _sample_ambiguous(V: Tensor, signs: Tensor, gap_bad: Tensor, special: bool,
                      generator: torch.Generator | None) -> Tensor:
    """Frames ``V H_f`` with ``H_f`` block-diagonal: the signs ``S_f`` on simple
    eigenvalues and an independent Haar ``O(k)`` element on every ``k``-fold eigenspace.

    ``V (B, d, d)`` float64, ``signs (F, d)``, ``gap_bad (B, d-1)`` bool -> ``(B, F, d, d)``, for
    every item (items without a degenerate gap get ``V S_f``). Haar blocks: QR of a Gaussian with the
    signs of ``diag(R)`` absorbed (Mezzadri 2007, Sec. 5); a block-diagonal Gaussian has a
    block-diagonal ``Q``. Drawn on ``V``'s device.
    """
    B, d = V.shape[0], V.shape[-1]
    F = signs.shape[0]
    same, shared = _cluster_masks(gap_bad)
    blocks = (same & shared[:, :, None])[:, None]  # (B, 1, d, d): entries of degenerate blocks
    z = torch.randn(B, F, d, d, generator=generator, dtype=V.dtype, device=V.device)
    q, r = torch.linalg.qr(z * blocks.to(z.dtype))
    q = q * torch.where(torch.diagonal(r, dim1=-2, dim2=-1) < 0, -1.0, 1.0).to(q.dtype)[..., None, :]
    H = torch.where(blocks, q, torch.diag_embed(signs.to(V.dtype)).expand(B, F, d, d))
    Q = V[:, None] @ H
    if special:
        # Negating one column of a degenerate block stays inside the ambiguous subgroup
        # (and keeps it Haar distributed); it moves the frame into SO(d).
        first = torch.nn.functional.one_hot(shared.to(torch.int64).argmax(-1), d).bool()  # (B, d)
        flip = (torch.linalg.det(Q) < 0)[..., None] & first[:, None, :]  # (B, F, d)
        Q = Q * torch.where(flip, -1.0, 1.0).to(Q.dtype)[..., None, :]
    return Q


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


def _padded(pos: Tensor, mask: Tensor | None, batch: Tensor | None, B: int) -> tuple[Tensor, Tensor]:
    """``(B, N, d)`` positions and ``(B, N)`` weights of a padded or flat batch.

    A flat batch (sorted, as validated) is scattered into ``N`` = its largest cloud, whose size is
    read from the device (the one host read of a flat batch with moment frames).
    """
    if batch is None:
        w = torch.ones(pos.shape[:2], dtype=pos.dtype, device=pos.device) if mask is None else mask.to(pos.dtype)
        return pos, w
    counts = torch.zeros(B, dtype=torch.int64, device=pos.device).index_add_(0, batch, torch.ones_like(batch))
    offsets = torch.cumsum(counts, 0) - counts
    slot = torch.arange(batch.shape[0], device=pos.device) - offsets[batch]
    n_max = int(counts.max()) if counts.numel() else 0
    out = pos.new_zeros(B, n_max, pos.shape[-1])
    w = pos.new_zeros(B, n_max)
    out[batch, slot] = pos
    w[batch, slot] = 1.0
    return out, w


def _moment_frames(V: Tensor, gap_bad: Tensor, pos: Tensor, centroid: Tensor,
                   mask: Tensor | None, batch: Tensor | None) -> Tensor:
    """``V`` with the axes of every degenerate eigenspace replaced by [`moment_axes`][].

    Every contiguous block ``[lo, lo + k)`` of eigen-indices (``k >= 2``) that is a whole cluster of
    some item is solved for all items at once (one [`moment_axes`][] call per size ``k``) and
    selected per item, so the host never reads which items are degenerate.
    """
    B, d = V.shape[0], V.shape[-1]
    padded, w = _padded(pos.detach().to(torch.float64), mask, batch, B)
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


def _skewness_signed(V: Tensor, pos: Tensor, centroid: Tensor, mask: Tensor | None, batch: Tensor | None,
                     special: bool) -> Tensor:
    """``V (B, d, d)`` with column ``j`` negated where the third moment of the cloud along it is negative.

    With ``special`` the last column is instead signed so that ``det V = +1``.
    """
    B = V.shape[0]
    x = pos.detach().to(torch.float64)
    if batch is None:
        w = torch.ones(x.shape[:2], dtype=x.dtype, device=x.device) if mask is None else mask.to(x.dtype)
        y = (x - centroid.detach().to(torch.float64)[:, None]) @ V.detach()  # (B, N, d)
        third = (w[..., None] * y ** 3).sum(1)  # (B, d)
    else:
        y = ((x - centroid.detach().to(torch.float64)[batch])[:, None, :] @ V.detach()[batch]).squeeze(1)
        third = y.new_zeros(B, V.shape[-1]).index_add_(0, batch, y ** 3)
    s = torch.where(third < 0, -1.0, 1.0).to(V.dtype)
    if special:
        s = torch.cat([s[:, :-1], torch.ones_like(s[:, -1:])], dim=-1)
        last = torch.where(torch.linalg.det(V.detach() * s[:, None, :]) < 0, -1.0, 1.0).to(V.dtype)
        s = torch.cat([s[:, :-1], last[:, None]], dim=-1)
    return V * s[:, None, :]


def _report_degenerate(degenerate: Tensor, policy: str, gap_tol: float) -> None:
    """``"raise"``: [`DegenerateFrameError`][]; ``"warn"``: a ``UserWarning`` (deferred on accelerators)."""
    if policy not in ("raise", "warn"):
        return
    what = ("have a degenerate covariance spectrum (relative eigenvalue gap < "
            f"{gap_tol:g}")
    if policy == "raise":
        tail = ("; repeated eigenvalues from a symmetric, collinear or single-point cloud); their PCA frame is "
                "not unique. Use on_degenerate='moments', 'sample' or 'warn' to proceed.")
    else:
        tail = "); their PCA frames are arbitrary and the result is not equivariant for them"
    if degenerate.device.type != "cpu" or torch.compiler.is_compiling():
        # deferred on accelerators; skipped while torch.compile traces (values are unreadable there)
        check_condition(~degenerate, f"some point clouds {what}{tail}",
                        error=DegenerateFrameError if policy == "raise" else UserWarning)
        return
    if not degenerate.any():
        return
    items = degenerate.nonzero().flatten().tolist()
    message = f"{len(items)} point cloud(s) {items[:10]} {what}{tail}"
    if policy == "raise":
        raise DegenerateFrameError(message)
    warnings.warn(message, UserWarning, stacklevel=3)


def pca_frames(pos: Tensor, group="E3", mask: Tensor | None = None, batch: Tensor | None = None, *,
               num_graphs: int | None = None, on_degenerate: str = "warn",
               gap_tol: float = DEFAULT_GAP_TOL, signs: str = "all",
               generator: torch.Generator | None = None) -> PCAFrames:
    """PCA frames of a batch of point clouds (Puny et al. 2022, Sec. 3.2; see the module docstring).

    Parameters
    ----------
    pos : Tensor of shape (B, N, d)
        padded batch (with optional ``mask (B, N)`` bool, True = real
        point), or ``(N_total, d)`` flat PyG-style batch with ``batch (N_total,)`` int64.
    group : SymmetryGroup or str
        ``O(d)``, ``SO(d)``, ``E(d)`` or ``SE(d)`` (``E3()``, ``SO(3)``), or its name (``"E3"``,
        ``"SO(3)"``); see [`frame_group`][].
    num_graphs : int | None
        number of clouds of a flat batch (default ``batch.max() + 1``).
    on_degenerate : str
        ``"raise" | "warn" | "sample" | "moments" | "ignore"`` (see the module docstring).
    gap_tol : float
        relative eigenvalue gap below which a spectrum counts as degenerate.
    signs : str
        ``"all"`` (default): every sign pattern of the axes, ``2^d`` (O/E) or ``2^(d-1)``
        (SO/SE) frame elements; ``"skewness"``: one element, each axis signed so that the
        cloud's third moment along it is positive (for SO/SE the last axis completes a
        rotation). Exactly equivariant wherever no third moment vanishes; a centrosymmetric
        cloud (zero skewness) gets noise-decided signs. ``|F| = 1`` makes frame averaging a
        deterministic canonicalization: ``|F|`` times cheaper, and training sees one pose per shape.
    generator : torch.Generator | None
        random generator for ``on_degenerate="sample"``, on ``pos``'s device.

    Returns
    -------
    PCAFrames
        [`PCAFrames`][] with frames ``(B, F, d, d)``, centroid ``(B, d)``, gaps ``(B, d-1)``,
        eigenvalues ``(B, d)`` and degenerate ``(B,)``; float tensors in ``pos``'s dtype (float16 and
        bfloat16 clouds are computed in float32, and their eigenvalues stay float32, since squared
        lengths overflow float16).
        ``F = 2^d`` (O/E) or ``2^(d-1)`` (SO/SE). Never NaN or inf for finite input.
        Differentiable in ``pos`` except on degenerate items (their frames are detached,
        since eigenvector derivatives are unbounded there).
    """
    G = frame_group(group)
    check_choice(on_degenerate, "on_degenerate", DEGENERATE_POLICIES)
    check_float(gap_tol, "gap_tol", minimum=0.0)
    check_choice(signs, "signs", SIGN_POLICIES)
    if signs == "skewness" and on_degenerate == "sample":
        raise ValueError("signs='skewness' picks one frame element; on_degenerate='sample' needs the full "
                         "sign orbit (use on_degenerate='moments' with one element)")
    batch = check_positions(pos, G.d, mask, batch)
    check_generator(generator, "generator", pos.device)
    if pos.dtype in (torch.float16, torch.bfloat16):
        # half precision overflows second moments at |x| ~ 256 and has no eigensolver: float32 inside
        out = pca_frames(pos.to(torch.float32), G, mask, batch, num_graphs=num_graphs, on_degenerate=on_degenerate,
                         gap_tol=gap_tol, signs=signs, generator=generator)
        return out._replace(frames=out.frames.to(pos.dtype), centroid=out.centroid.to(pos.dtype),
                            gaps=out.gaps.to(pos.dtype))
    d, special = G.d, is_special(G)
    if batch is not None:
        num_graphs, batch = flat_graphs(batch, num_graphs)
    centroid, cov, _, sq = point_moments(pos, isinstance(G, Euclidean), mask, batch, num_graphs)

    # Differentiable eigenvectors; degenerate items are detached below (eigenvector derivatives
    # contain 1 / (lambda_i - lambda_j), unbounded there).
    evals, evecs = symmetric_eigh(cov.to(torch.float64))
    evals = evals.detach().flip(-1)  # decreasing
    evecs = evecs.flip(-1)
    top = evals[:, 0]
    eps = torch.finfo(pos.dtype).eps
    floor = (ZERO_SPREAD_EPS * eps) ** 2 * sq.detach().to(torch.float64)
    spread = top > floor.clamp_min(torch.finfo(torch.float64).tiny)
    gaps = (evals[:, :-1] - evals[:, 1:]) / torch.where(spread, top, torch.ones_like(top))[:, None]
    gaps = torch.where(spread[:, None], gaps, torch.zeros_like(gaps))
    gap_bad = gaps < gap_tol
    degenerate = gap_bad.any(-1)
    _report_degenerate(degenerate, on_degenerate, gap_tol)
    V = torch.where(degenerate[:, None, None], evecs.detach(), evecs)

    if on_degenerate == "moments" and _work_needed(degenerate):
        V = _moment_frames(V, gap_bad, pos, centroid, mask, batch)
    if signs == "skewness":
        V = _skewness_signed(V, pos, centroid, mask, batch, special)
        return PCAFrames(V[:, None].to(pos.dtype), centroid, gaps.to(pos.dtype), evals.to(pos.dtype), degenerate)
    patterns = sign_patterns(d, special, device=pos.device)
    if special:
        # Make det V = +1 so that V S is in SO(d) exactly for the det +1 patterns S.
        last = torch.where(torch.linalg.det(V.detach()) < 0, -1.0, 1.0).to(V.dtype)
        V = torch.cat([V[:, :, :-1], V[:, :, -1:] * last[:, None, None]], dim=-1)
    frames = V[:, None, :, :] * patterns[None, :, None, :]  # (B, F, d, d): columns scaled by S_f

    if on_degenerate == "sample" and _work_needed(degenerate):
        sampled = _sample_ambiguous(V.detach(), patterns, gap_bad, special, generator)
        frames = torch.where(degenerate[:, None, None, None], sampled, frames)

    return PCAFrames(frames.to(pos.dtype), centroid, gaps.to(pos.dtype), evals.to(pos.dtype), degenerate)
