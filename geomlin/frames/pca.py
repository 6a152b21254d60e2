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
On the CPU a policy's extra work is skipped when no item needs it. A flat batch is planned once
([`geomlin.batching.batch_layout`][]): a batch vector on an accelerator is read to count its clouds
unless it comes planned (``batch=batch_layout(batch=..., num_graphs=...)``), and
``on_degenerate="moments"`` pads it to the largest cloud (one read of its size unless the plan
knows it); padded batches read nothing. Moments and
eigenvectors are computed with autocast off (covariances in at least float32, the
eigenproblem in float64), so the frames are as accurate under ``torch.autocast`` as without.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import torch
from torch import Tensor

from geomlin.batching import BatchLayout, as_layout
from geomlin.frames.moments import moment_frames, point_moments, skewness_signed
from geomlin.groups import SO, Euclidean, O, SymmetryGroup, as_group
from geomlin.linalg import symmetric_eigh
from geomlin.validation import (
    check_choice,
    check_condition,
    check_finite,
    check_float,
    check_generator,
    check_mask,
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
class DegenerateFrameError(ValueError):
    """Raised by ``on_degenerate="raise"`` when a PCA spectrum has repeated eigenvalues."""


def frame_group(group, name: str = "group") -> SymmetryGroup:
    """The group of a PCA frame: ``O(d)``, ``SO(d)``, ``E(d)`` or ``SE(d)`` with ``1 <= d <= MAX_FRAME_DIM``.

    ``group`` is a geomlin group or a name [`geomlin.groups.as_group`][geomlin.groups.names.as_group]
    parses (``"E3"``, ``"SO(3)"``); returns the group.
    """
    G = _named_group(group, name) if isinstance(group, str) else as_group(group, name)
    if not isinstance(G, (O, SO, Euclidean)):
        raise TypeError(f"{name} must be O(d), SO(d), E(d) or SE(d) for PCA frames, got {G}")
    if not 1 <= G.d <= MAX_FRAME_DIM:
        raise ValueError(f"PCA frames support dimensions 1..{MAX_FRAME_DIM} "
                         f"(2^d frame elements), got d={G.d}")
    return G


@torch.compiler.assume_constant_result
def _named_group(group: str, name: str) -> SymmetryGroup:
    """The group a name denotes. The parser reads tensor values (its checks of the generators), so while
    ``torch.compile`` traces, the group is built once at trace time and kept as a constant of the graph."""
    return as_group(group, name)


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


def check_positions(pos: Tensor, d: int, layout: BatchLayout) -> None:
    """Validate the points of a padded ``(B, N, d)`` (layout mask ``(B, N)``) or flat ``(N_total, d)`` cloud batch."""
    check_tensor(pos, "pos", what=f"points in R^{d}")
    if pos.ndim == 0 or pos.shape[-1] != d:
        raise ValueError(f"pos must have last dimension {d} (points in R^{d}), got shape {tuple(pos.shape)}")
    if layout.is_flat:
        if layout.mask is not None:
            raise ValueError("pass either mask (padded batch) or batch (flat batch), not both")
        if pos.ndim != 2:
            raise ValueError(f"with a batch vector pos must be flat (N, {d}), got shape {tuple(pos.shape)}")
        if layout.batch.shape[0] != pos.shape[0]:
            raise ValueError(f"the layout describes {layout.batch.shape[0]} points but pos has {pos.shape[0]}")
    elif pos.ndim != 3:
        raise ValueError(f"pos must be a padded batch (B, N, {d}) or flat (N, {d}) with a batch vector, "
                         f"got shape {tuple(pos.shape)}")
    elif layout.mask is not None:
        check_mask(layout.mask, "mask")
        if layout.mask.shape != pos.shape[:2]:
            raise ValueError(f"mask must have shape {tuple(pos.shape[:2])} (B, N) to match pos "
                             f"{tuple(pos.shape)}, got {tuple(layout.mask.shape)}")
    check_finite(pos, "pos")  # padding too: NaN * 0 is NaN in the masked sums


def cloud_layout(pos: Tensor, d: int, mask: Tensor | None, batch: Tensor | BatchLayout | None) -> BatchLayout:
    """The checked layout of a public call's point clouds: ``mask=`` (padded) or ``batch=`` (flat:
    a batch vector, planned here, or a [`BatchLayout`][geomlin.batching.BatchLayout])."""
    if batch is not None and mask is not None:
        raise ValueError("pass either mask (padded batch) or batch (flat batch), not both")
    flat = batch is not None and (not isinstance(batch, BatchLayout) or batch.is_flat)
    if flat and isinstance(pos, Tensor) and pos.ndim != 2:
        raise ValueError(f"with a batch vector pos must be flat (N, {d}), got shape {tuple(pos.shape)}")
    layout = as_layout(mask, batch, num_items=pos.shape[0] if flat else None)
    check_positions(pos, d, layout)
    return layout


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


def pca_frames(pos: Tensor, group="E3", mask: Tensor | None = None, batch: Tensor | BatchLayout | None = None, *,
               on_degenerate: str = "warn",
               gap_tol: float = DEFAULT_GAP_TOL, signs: str = "all",
               generator: torch.Generator | None = None) -> PCAFrames:
    """PCA frames of a batch of point clouds (Puny et al. 2022, Sec. 3.2; see the module docstring).

    Parameters
    ----------
    pos : Tensor of shape (B, N, d)
        padded batch (with optional ``mask (B, N)`` bool, True = real
        point), or ``(N_total, d)`` flat PyG-style batch with ``batch``: ``(N_total,)`` int64, or the
        [`BatchLayout`][geomlin.batching.BatchLayout] planned from it (which carries the number of
        clouds, so nothing is read back from an accelerator).
    group : SymmetryGroup or str
        ``O(d)``, ``SO(d)``, ``E(d)`` or ``SE(d)`` (``E3()``, ``SO(3)``), or its name (``"E3"``,
        ``"SO(3)"``); see [`frame_group`][].
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
    layout = cloud_layout(pos, G.d, mask, batch)
    check_generator(generator, "generator", pos.device)
    if pos.dtype in (torch.float16, torch.bfloat16):
        # half precision overflows second moments at |x| ~ 256 and has no eigensolver: float32 inside
        out = pca_frames(pos.to(torch.float32), G, batch=layout, on_degenerate=on_degenerate,
                         gap_tol=gap_tol, signs=signs, generator=generator)
        return out._replace(frames=out.frames.to(pos.dtype), centroid=out.centroid.to(pos.dtype),
                            gaps=out.gaps.to(pos.dtype))
    d, special = G.d, is_special(G)
    centroid, cov, _, sq = point_moments(pos, isinstance(G, Euclidean), layout)

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
        V = moment_frames(V, gap_bad, pos, centroid, layout)
    if signs == "skewness":
        V = skewness_signed(V, pos, centroid, layout, special)
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
