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

Degenerate spectra
    When two eigenvalues coincide (a regular tetrahedron or any shape with a rotational
    symmetry of order > 2, points on a line, a single point), the eigenvectors are only
    defined up to a rotation inside the eigenspace and the frame is no longer
    equivariant (nor continuous). Dym et al. 2024 ("Equivariant Frames and the
    Impossibility of Continuous Canonicalization") show that no continuous
    canonicalization exists for these groups at all, so this is a limit of the method,
    not of the implementation. Such inputs are detected from the relative eigenvalue gap
    ``(lambda_i - lambda_{i+1}) / lambda_1 < gap_tol`` and handled by ``on_degenerate``:

    * ``"raise"``: :class:`DegenerateFrameError` (a ``ValueError``) naming the items;
    * ``"warn"``: a ``UserWarning``; the eigensolver's arbitrary basis is used (finite,
      but not equivariant for those items);
    * ``"sample"``: each frame element gets an independent Haar-random element of the
      ambiguous subgroup (``O(k)`` on every ``k``-fold eigenspace), so the frame is
      equivariant in distribution (exact only in expectation);
    * ``"moments"``: inside every (near-)degenerate eigenspace the axes are chosen from
      third and fourth moments of the cloud (:func:`moment_axes`): the direction ``u``
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
"""

from __future__ import annotations

import itertools
import re
import warnings
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor

from geomlin.validation import (
    check_batch_vector,
    check_choice,
    check_finite,
    check_float,
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
#: Candidate directions for :func:`moment_axes` must have at least this norm (relative to the RMS radius).
MOMENT_MIN_CANDIDATE = 1e-3
#: :func:`moment_axes` scores the directions of the points farthest from the centre only (corners,
#: tips: where the maxima of the moments lie); the refinement then moves off the sampled points.
MOMENT_CANDIDATES = 24
#: Shifted power-iteration steps that refine a moment axis, and the shift (keeps the iteration ascending).
MOMENT_REFINE_STEPS, MOMENT_SHIFT = 4, 4.0


class DegenerateFrameError(ValueError):
    """Raised by ``on_degenerate="raise"`` when a PCA spectrum has repeated eigenvalues."""


@dataclass(frozen=True)
class FrameGroup:
    """The group a PCA frame is built for.

    Attributes
    ----------
    d: dimension of the point space.
    special: True for SO(d) / SE(d) (det +1 frames only).
    translation: True for E(d) / SE(d) (frames are centred at the centroid).
    """

    d: int
    special: bool
    translation: bool

    @property
    def name(self) -> str:
        base = ("S" if self.special else "") + ("E" if self.translation else "O")
        return f"{base}({self.d})"

    @property
    def num_frames(self) -> int:
        """``|F|``: ``2^d`` with reflections, ``2^(d-1)`` without."""
        return 2 ** (self.d - 1) if self.special else 2 ** self.d

    def sampler(self):
        """The geomlin group of this frame group: ``SO(d)``, ``O(d)`` or an E(d) / SE(d) sampler
        (what declared feature types and :mod:`geomlin.testing` use)."""
        from geomlin.groups import SO, Euclidean, O

        if self.translation:
            return Euclidean(self.d, reflections=not self.special)
        return SO(self.d) if self.special else O(self.d)


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


_GROUP_PATTERN = re.compile(r"^(SO|O|SE|E)\(?(\d+)\)?$")


def as_frame_group(group) -> FrameGroup:
    """Parse ``group`` into a :class:`FrameGroup`.

    Accepts the strings ``"O3"``, ``"SO3"``, ``"E3"``, ``"SE3"`` and ``"O(n)"``,
    ``"SO(n)"``, ``"E(n)"``, ``"SE(n)"`` for any ``n >= 1``; a
    :class:`geomlin.groups.Euclidean` sampler (``E3()``, ``SE3()``); a
    :class:`geomlin.groups.O` or :class:`geomlin.groups.SO`; or a :class:`FrameGroup`.
    """
    from geomlin.groups import SO, Euclidean, O

    if isinstance(group, FrameGroup):
        fg = group
    elif isinstance(group, Euclidean):
        fg = FrameGroup(group.d, special=not group.reflections, translation=True)
    elif isinstance(group, SO):
        fg = FrameGroup(group.d, special=True, translation=False)
    elif isinstance(group, O):
        fg = FrameGroup(group.d, special=False, translation=False)
    elif isinstance(group, str):
        m = _GROUP_PATTERN.match(group.strip().upper())
        if m is None:
            raise ValueError(f"unknown frame group {group!r}; expected 'O3', 'SO3', 'E3', 'SE3' or "
                             "'O(n)', 'SO(n)', 'E(n)', 'SE(n)'")
        kind, d = m.group(1), int(m.group(2))
        fg = FrameGroup(d, special=kind in ("SO", "SE"), translation=kind in ("E", "SE"))
    else:
        raise TypeError(f"group must be a string like 'E3', a geomlin O/SO group or an Euclidean "
                        f"sampler, got {type(group).__name__}")
    if not 1 <= fg.d <= MAX_FRAME_DIM:
        raise ValueError(f"PCA frames support dimensions 1..{MAX_FRAME_DIM} "
                         f"(2^d frame elements), got d={fg.d}")
    return fg


def sign_patterns(d: int, special: bool, dtype=torch.float64, device=None) -> Tensor:
    """The diagonal sign matrices of the frame as ``(F, d)`` vectors of +-1.

    All ``2^d`` patterns, or the ``2^(d-1)`` with product +1 when ``special``.
    Row 0 is all ones (the eigensolver's own basis).
    """
    rows = [s for s in itertools.product((1.0, -1.0), repeat=d)]
    if special:
        rows = [s for s in rows if _prod(s) > 0]
    return torch.tensor(rows, dtype=dtype, device=device)


def _prod(values) -> float:
    out = 1.0
    for v in values:
        out *= v
    return out


class PCAFrames(NamedTuple):
    """Result of :func:`pca_frames`.

    Attributes
    ----------
    frames: ``(B, F, d, d)`` orthogonal matrices ``Q``; columns are the signed principal axes.
    centroid: ``(B, d)`` centroids ``c`` (zero for O(d)/SO(d)).
    gaps: ``(B, d - 1)`` relative eigenvalue gaps ``(lambda_i - lambda_{i+1}) / lambda_1``.
    eigenvalues: ``(B, d)`` covariance eigenvalues, decreasing.
    degenerate: ``(B,)`` bool, True where some gap is below ``gap_tol``.
    """

    frames: Tensor
    centroid: Tensor
    gaps: Tensor
    eigenvalues: Tensor
    degenerate: Tensor


def _check_positions(pos: Tensor, d: int, mask: Tensor | None, batch: Tensor | None) -> None:
    """Validate a padded ``(B, N, d)`` (+ ``mask (B, N)`` bool) or flat ``(N, d)`` (+ ``batch (N,)``) cloud batch."""
    check_tensor(pos, "pos", what=f"points in R^{d}")
    if pos.ndim == 0 or pos.shape[-1] != d:
        raise ValueError(f"pos must have last dimension {d} (points in R^{d}), got shape {tuple(pos.shape)}")
    if batch is not None:
        if mask is not None:
            raise ValueError("pass either mask (padded batch) or batch (flat batch), not both")
        if pos.ndim != 2:
            raise ValueError(f"with a batch vector pos must be flat (N, {d}), got shape {tuple(pos.shape)}")
        check_batch_vector(batch, "batch", pos.shape[0])
    elif pos.ndim != 3:
        raise ValueError(f"pos must be a padded batch (B, N, {d}) or flat (N, {d}) with a batch vector, "
                         f"got shape {tuple(pos.shape)}")
    elif mask is not None:
        check_mask(mask, "mask")
        if mask.shape != pos.shape[:2]:
            raise ValueError(f"mask must have shape {tuple(pos.shape[:2])} (B, N) to match pos "
                             f"{tuple(pos.shape)}, got {tuple(mask.shape)}")
    check_finite(pos, "pos")  # padding too: NaN * 0 is NaN in the masked sums


def num_graphs_of(batch: Tensor, num_graphs: int | None = None) -> int:
    """Number of graphs of a flat batch: ``num_graphs`` or ``batch.max() + 1``."""
    if num_graphs is not None:
        num_graphs = check_nonnegative_int(num_graphs, "num_graphs")
        if batch.numel() and int(batch.max()) >= num_graphs:
            raise ValueError(f"batch has index {int(batch.max())} but num_graphs={num_graphs}")
        return int(num_graphs)
    return int(batch.max()) + 1 if batch.numel() else 0


def point_moments(pos: Tensor, translation: bool, mask: Tensor | None = None,
                  batch: Tensor | None = None, num_graphs: int | None = None):
    """Centroid, covariance and point counts of padded or flat point clouds.

    Returns
    -------
    centroid ``(B, d)``, covariance ``(B, d, d)``, counts ``(B,)`` (same dtype as ``pos``),
    and the mean squared norm ``(B,)`` of the points (a scale for degeneracy tests).
    """
    d = pos.shape[-1]
    if batch is not None:
        B = num_graphs_of(batch, num_graphs)
        counts = torch.zeros(B, dtype=pos.dtype, device=pos.device).index_add_(
            0, batch, torch.ones_like(pos[:, 0]))
        _require_points(counts)
        sums = pos.new_zeros(B, d).index_add(0, batch, pos)
        centroid = sums / counts[:, None] if translation else pos.new_zeros(B, d)
        x = pos - centroid[batch]
        outer = x[:, :, None] * x[:, None, :]
        cov = pos.new_zeros(B, d, d).index_add(0, batch, outer) / counts[:, None, None]
        sq = pos.new_zeros(B).index_add(0, batch, (pos * pos).sum(-1)) / counts
        return centroid, cov, counts, sq
    if mask is None:
        w = torch.ones(pos.shape[:2], dtype=pos.dtype, device=pos.device)
    else:
        w = mask.to(pos.dtype)
    counts = w.sum(1)
    _require_points(counts)
    if translation:
        centroid = (pos * w[..., None]).sum(1) / counts[:, None]
    else:
        centroid = pos.new_zeros(pos.shape[0], d)
    x = (pos - centroid[:, None]) * w[..., None]
    cov = x.transpose(1, 2) @ x / counts[:, None, None]
    sq = ((pos * pos).sum(-1) * w).sum(1) / counts
    return centroid, cov, counts, sq


def _require_points(counts: Tensor) -> None:
    empty = (counts < 1).nonzero().flatten()
    if empty.numel():
        raise ValueError(f"point clouds {empty.tolist()[:10]} have no points (a frame needs at least one "
                         "point; check the mask or batch vector)")


def _clusters(degenerate_gap: Tensor) -> list[list[int]]:
    """Group eigen-indices 0..d-1 into runs joined by degenerate gaps (``(d-1,)`` bool)."""
    groups = [[0]]
    for i, joined in enumerate(degenerate_gap.tolist()):
        if joined:
            groups[-1].append(i + 1)
        else:
            groups.append([i + 1])
    return groups


def _sample_ambiguous(V: Tensor, signs: Tensor, gap_bad: Tensor, special: bool,
                      generator: torch.Generator | None) -> Tensor:
    """Frames ``V H_f`` with ``H_f`` block-diagonal: the signs ``S_f`` on simple
    eigenvalues and an independent Haar ``O(k)`` element on every ``k``-fold eigenspace.

    ``V (d, d)`` float64, ``signs (F, d)``, ``gap_bad (d-1,)`` bool -> ``(F, d, d)``.
    """
    from geomlin.groups import haar_orthogonal

    F = signs.shape[0]
    H = torch.diag_embed(signs).clone()
    for block in _clusters(gap_bad):
        if len(block) < 2:
            continue
        lo, hi = block[0], block[-1] + 1
        H[:, lo:hi, lo:hi] = haar_orthogonal(F, hi - lo, generator).to(H)
    Q = V @ H
    if special:
        # Negating one column of a degenerate block stays inside the ambiguous subgroup
        # (and keeps it Haar distributed); it moves the frame into SO(d).
        first_block = next(b for b in _clusters(gap_bad) if len(b) > 1)
        flip = torch.linalg.det(Q) < 0
        Q[flip, :, first_block[0]] = -Q[flip, :, first_block[0]]
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
    y: ``(B, N, k)`` float64 centred coordinates (inside one eigenspace of the covariance).
    weight: ``(B, N)`` non-negative point weights (0 = padding).

    Returns
    -------
    ``(B, k, k)`` orthogonal, columns ``u_1, ..., u_k``: ``u_1`` maximises
    ``h(u) = sum_i w_i h(u.y_i, 0)`` (:func:`_moment_score`; ``y`` scaled to unit RMS radius)
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
    top = far.topk(min(MOMENT_CANDIDATES, N), dim=-1).indices  # (B, M)
    y_top = torch.gather(y, 1, top[..., None].expand(-1, -1, k))
    w_top = torch.gather(weight, 1, top)
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
    """``(B, N, d)`` positions and ``(B, N)`` weights of a padded or flat batch."""
    if batch is None:
        w = torch.ones(pos.shape[:2], dtype=pos.dtype, device=pos.device) if mask is None else mask.to(pos.dtype)
        return pos, w
    order = torch.argsort(batch, stable=True)
    b_sorted = batch[order]
    counts = torch.bincount(batch, minlength=B)
    offsets = torch.cumsum(counts, 0) - counts
    slot = torch.arange(batch.shape[0], device=pos.device) - offsets[b_sorted]
    n_max = int(counts.max()) if counts.numel() else 0
    out = pos.new_zeros(B, n_max, pos.shape[-1])
    w = pos.new_zeros(B, n_max)
    out[b_sorted, slot] = pos[order]
    w[b_sorted, slot] = 1.0
    return out, w


def _moment_frames(V: Tensor, gap_bad: Tensor, items: Tensor, pos: Tensor, centroid: Tensor,
                   mask: Tensor | None, batch: Tensor | None) -> Tensor:
    """``V`` with the axes of every degenerate eigenspace of ``items`` replaced by :func:`moment_axes`."""
    V = V.clone()
    padded, w = _padded(pos.detach().to(torch.float64), mask, batch, V.shape[0])
    x = padded - centroid.detach().to(torch.float64)[:, None]
    for pattern in torch.unique(gap_bad[items].to(torch.int64), dim=0):
        sel = items[(gap_bad[items].to(torch.int64) == pattern).all(-1)]
        for block in _clusters(pattern.bool()):
            if len(block) < 2:
                continue
            lo, hi = block[0], block[-1] + 1
            E = V[sel, :, lo:hi]  # (b, d, k)
            U = moment_axes(x[sel] @ E, w[sel])
            V[sel, :, lo:hi] = E @ U
    return V


def _skewness_signed(V: Tensor, pos: Tensor, centroid: Tensor, mask: Tensor | None, batch: Tensor | None,
                     special: bool) -> Tensor:
    """``V (B, d, d)`` with column ``j`` negated where the third moment of the cloud along it is negative.

    With ``special`` the last column is instead signed so that ``det V = +1``.
    """
    padded, w = _padded(pos.detach().to(torch.float64), mask, batch, V.shape[0])
    y = (padded - centroid.detach().to(torch.float64)[:, None]) @ V.detach()  # (B, N, d)
    third = (w[..., None] * y ** 3).sum(1)  # (B, d)
    s = torch.where(third < 0, -1.0, 1.0).to(V.dtype)
    if special:
        s[:, -1] = 1.0
        s[:, -1] = torch.where(torch.linalg.det(V.detach() * s[:, None, :]) < 0, -1.0, 1.0).to(V.dtype)
    return V * s[:, None, :]


def pca_frames(pos: Tensor, group="E3", mask: Tensor | None = None, batch: Tensor | None = None, *,
               num_graphs: int | None = None, on_degenerate: str = "warn",
               gap_tol: float = DEFAULT_GAP_TOL, signs: str = "all",
               generator: torch.Generator | None = None) -> PCAFrames:
    """PCA frames of a batch of point clouds (Puny et al. 2022, Sec. 3.2; see the module docstring).

    Parameters
    ----------
    pos: ``(B, N, d)`` padded batch (with optional ``mask (B, N)`` bool, True = real
        point), or ``(N_total, d)`` flat PyG-style batch with ``batch (N_total,)`` int64.
    group: ``"O3" | "SO3" | "E3" | "SE3"``, ``"O(n)" | "SO(n)" | "E(n)" | "SE(n)"``, a
        geomlin ``O(n)``/``SO(n)`` or an ``E3()``/``SE3()`` sampler.
    num_graphs: number of clouds of a flat batch (default ``batch.max() + 1``).
    on_degenerate: ``"raise" | "warn" | "sample" | "moments" | "ignore"`` (see the module docstring).
    gap_tol: relative eigenvalue gap below which a spectrum counts as degenerate.
    signs: ``"all"`` (default): every sign pattern of the axes, ``2^d`` (O/E) or ``2^(d-1)``
        (SO/SE) frame elements; ``"skewness"``: one element, each axis signed so that the
        cloud's third moment along it is positive (for SO/SE the last axis completes a
        rotation). Exactly equivariant wherever no third moment vanishes; a centrosymmetric
        cloud (zero skewness) gets noise-decided signs. ``|F| = 1`` makes frame averaging a
        deterministic canonicalization: ``|F|`` times cheaper, and training sees one pose per shape.
    generator: random generator for ``on_degenerate="sample"``.

    Returns
    -------
    :class:`PCAFrames` with frames ``(B, F, d, d)``, centroid ``(B, d)``, gaps ``(B, d-1)``,
    eigenvalues ``(B, d)`` and degenerate ``(B,)``; float tensors in ``pos``'s dtype.
    ``F = 2^d`` (O/E) or ``2^(d-1)`` (SO/SE). Never NaN or inf for finite input.
    Differentiable in ``pos`` except on degenerate items (their frames are detached,
    since eigenvector derivatives are unbounded there).
    """
    fg = as_frame_group(group)
    check_choice(on_degenerate, "on_degenerate", DEGENERATE_POLICIES)
    check_float(gap_tol, "gap_tol", minimum=0.0)
    check_choice(signs, "signs", SIGN_POLICIES)
    if signs == "skewness" and on_degenerate == "sample":
        raise ValueError("signs='skewness' picks one frame element; on_degenerate='sample' needs the full "
                         "sign orbit (use on_degenerate='moments' with one element)")
    _check_positions(pos, fg.d, mask, batch)
    d = fg.d
    centroid, cov, _, sq = point_moments(pos, fg.translation, mask, batch, num_graphs)
    B = cov.shape[0]
    cov64 = cov.to(torch.float64)

    with torch.no_grad():
        evals, evecs = torch.linalg.eigh(cov64.detach())
    evals = evals.flip(-1)  # decreasing
    evecs = evecs.flip(-1)
    top = evals[:, 0]
    eps = torch.finfo(pos.dtype).eps
    floor = (ZERO_SPREAD_EPS * eps) ** 2 * sq.detach().to(torch.float64)
    spread = top > floor.clamp_min(torch.finfo(torch.float64).tiny)
    gaps = (evals[:, :-1] - evals[:, 1:]) / torch.where(spread, top, torch.ones_like(top))[:, None]
    gaps = torch.where(spread[:, None], gaps, torch.zeros_like(gaps))
    gap_bad = gaps < gap_tol
    degenerate = gap_bad.any(-1)

    if degenerate.any():
        items = degenerate.nonzero().flatten().tolist()
        if on_degenerate == "raise":
            raise DegenerateFrameError(
                f"{len(items)} point cloud(s) {items[:10]} have a degenerate covariance spectrum "
                f"(relative eigenvalue gap < {gap_tol:g}: repeated eigenvalues from a symmetric, collinear "
                "or single-point cloud); their PCA frame is not unique. Use on_degenerate='moments', "
                "'sample' or 'warn' to proceed.")
        if on_degenerate == "warn":  # "moments", "sample" and "ignore" are silent
            warnings.warn(f"{len(items)} point cloud(s) {items[:10]} have a degenerate covariance spectrum "
                          f"(relative eigenvalue gap < {gap_tol:g}); their PCA frames are arbitrary and the "
                          "result is not equivariant for them", UserWarning, stacklevel=2)

    V = evecs
    if cov.requires_grad and not bool(degenerate.all()):
        # Differentiable eigenvectors on the well-separated items only: eigenvector
        # derivatives contain 1 / (lambda_i - lambda_j), unbounded on degenerate ones.
        safe = torch.diag_embed(torch.arange(d, 0, -1, dtype=torch.float64, device=cov.device))
        cov_safe = torch.where(degenerate[:, None, None], safe, cov64)
        _, V_grad = torch.linalg.eigh(cov_safe)
        V_grad = V_grad.flip(-1)
        # The differentiable solve may return other signs than the no-grad one: align them.
        align = torch.sign((V_grad * evecs).sum(-2, keepdim=True))
        align = torch.where(align == 0, torch.ones_like(align), align)
        V = torch.where(degenerate[:, None, None], evecs, V_grad * align)

    if on_degenerate == "moments" and degenerate.any():
        V = _moment_frames(V, gap_bad, degenerate.nonzero().flatten(), pos, centroid, mask, batch)
    if signs == "skewness":
        V = _skewness_signed(V, pos, centroid, mask, batch, fg.special)
        return PCAFrames(V[:, None].to(pos.dtype), centroid, gaps.to(pos.dtype), evals.to(pos.dtype), degenerate)
    signs = sign_patterns(d, fg.special, device=pos.device)
    if fg.special:
        # Make det V = +1 so that V S is in SO(d) exactly for the det +1 patterns S.
        neg = torch.linalg.det(V.detach()) < 0
        last = torch.ones(B, d, dtype=torch.float64, device=pos.device)
        last[neg, -1] = -1.0
        V = V * last[:, None, :]
    frames = V[:, None, :, :] * signs[None, :, None, :]  # (B, F, d, d): columns scaled by S_f

    if on_degenerate == "sample" and degenerate.any():
        frames = frames.clone()
        for b in degenerate.nonzero().flatten().tolist():
            frames[b] = _sample_ambiguous(V[b].detach(), signs, gap_bad[b], fg.special, generator)

    return PCAFrames(frames.to(pos.dtype), centroid, gaps.to(pos.dtype), evals.to(pos.dtype), degenerate)
