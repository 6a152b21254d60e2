"""Frame averaging: make any point-cloud backbone exactly invariant or equivariant
(Puny et al. 2022, "Frame Averaging for Invariant and Equivariant Network Design", Eq. 3-4).

For a frame ``F(X)`` (here the PCA frames of [`geomlin.frames.pca`][]) and a backbone
``phi``, the frame average is

    <phi>(X) = 1/|F(X)| sum_{g in F(X)} g . phi(g^{-1} . X)

with ``g = (Q, c)``, ``g^{-1} . X = Q^T (X - c)``, and ``g . y`` the action of the output's
feature type: ``y`` ([`Scalars`][geomlin.reps.types.Scalars], any invariant type), ``Q y``
([`Vectors`][geomlin.reps.types.Vectors]) or ``Q y + c`` ([`Positions`][geomlin.reps.types.Positions]). Since ``F(hX) = h F(X)``
as a set, ``<phi>(hX) = h . <phi>(X)`` exactly for every backbone, with or without biases.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from geomlin.batching import BatchLayout, batch_layout
from geomlin.frames.pca import (
    DEFAULT_GAP_TOL,
    DEGENERATE_POLICIES,
    SIGN_POLICIES,
    cloud_layout,
    example_clouds,
    frame_group,
    num_frames,
    pca_frames,
)
from geomlin.reps.declarations import declared_types
from geomlin.reps.feature_type import FeatureType, name_is_not_a_type
from geomlin.reps.types import Positions, Scalars, Vectors
from geomlin.validation import check_bool, check_choice, check_float, check_tensor

#: Frames per backbone call on CPU with ``frames_per_call="auto"`` (measured in bench_frames).
CPU_FRAMES_PER_CALL = 1
#: The default output type of the wrappers: invariant features of any shape.
INVARIANT = Scalars()


def feature_types(value, name: str) -> tuple[FeatureType, ...]:
    """One feature type or a sequence of them, as a tuple (strings refused with the type to use)."""
    items = (value,) if isinstance(value, (FeatureType, str)) else value
    if not isinstance(items, (tuple, list)):
        raise TypeError(f"{name} must be a feature type or a tuple of them, got {type(value).__name__}")
    for t in items:
        if isinstance(t, str):
            raise name_is_not_a_type(t, name)
        if not isinstance(t, FeatureType):
            raise TypeError(f"{name} must be feature types of geomlin.reps, got {type(t).__name__}")
    return tuple(items)


def point_type(t: FeatureType, d: int, group, name: str, positions: bool = True) -> FeatureType:
    """``t``, a feature type of point-cloud inputs or outputs, acted on by ``group``.

    Invariant types stay as they are; [`Vectors`][geomlin.reps.types.Vectors] and (when
    ``positions``) [`Positions`][geomlin.reps.types.Positions] of dimension ``d`` are rebuilt under
    ``group``; anything else is refused.
    """
    if t.is_invariant:
        return t
    if isinstance(t, Vectors) and t.d == d:
        return Vectors(d, t.channels, group)
    if positions and isinstance(t, Positions) and t.d == d:
        return Positions(d, group)
    allowed = f"Scalars() (or another invariant type), Vectors({d})" + (f" or Positions({d})" if positions else "")
    raise TypeError(f"{name} of a point cloud in R^{d} must be {allowed}, got {t!r}")


def backbone_out_types(backbone, count: int) -> tuple:
    """The backbone's declared output types (``None`` each when it declares none)."""
    try:
        _, out = declared_types(backbone)
    except TypeError:
        return (None,) * count
    return out if len(out) == count else (None,) * count


class FrameAveraging(nn.Module):
    """Wrap ``backbone`` so that it becomes exactly E(d)/SE(d)/O(d)/SO(d) invariant or equivariant.

    Parameters
    ----------
    backbone : nn.Module
        any module; called once on all frames folded into the batch dimension (or once per
        chunk of ``frames_per_call`` frames) with the layout keywords of the call:
        ``backbone(pos, *extras)`` (padded ``(B * F, N, d)`` without a mask: any module, an
        ``nn.Sequential`` too), ``backbone(pos, *extras, mask=mask)`` (padded with a mask), or
        ``backbone(pos, *extras, batch=layout)`` (flat ``(F * N_total, d)``, ``layout`` the planned
        [`BatchLayout`][geomlin.batching.BatchLayout] of the ``F B`` clouds, whose ``batch`` is
        PyG's batch vector; plus ``edge_index=`` when given): the models of
        [`geomlin.models`][] take these keywords.
    group : SymmetryGroup or str
        ``E(d)`` (default ``"E3"``), ``SE(d)``, ``O(d)`` or ``SO(d)``, or its name; see
        [`frame_group`][geomlin.frames.pca.frame_group].
    output : FeatureType or tuple of FeatureType
        the feature type of the backbone's output, or a tuple of them for tuple outputs:
        ``Scalars()`` (or any invariant type: averaged), ``Vectors(d)`` (``(..., d)``, rotated back)
        or ``Positions(d)`` (``(..., d)``, rotated and translated back).
    inputs : FeatureType or Sequence[FeatureType]
        the feature types of the extra positional inputs after ``pos``: invariant ones
        (``Scalars()``: passed through, repeated per frame) or ``Vectors(d)`` (``(..., d)``,
        rotated into each frame). Default: all invariant.
    stochastic : bool
        while ``self.training``, use one uniformly random frame element per input
        instead of all ``|F|`` (equivariant in expectation, ``|F|`` times cheaper). In
        eval mode the full frame is always used.
    on_degenerate : str
        ``"raise" | "warn" | "sample" | "moments" | "ignore"`` for degenerate spectra
        (``"moments"``: axes from third and fourth moments, exact; see
        [`geomlin.frames.pca`][]).
    gap_tol : float
        relative eigenvalue gap below which a spectrum is degenerate.
    signs : str
        ``"all"`` (every sign pattern: ``|F| = 2^d`` or ``2^(d-1)``) or ``"skewness"`` (one
        element, axes signed by third moments: ``|F| = 1``); see [`pca_frames`][].
    frames_per_call : int | str | None
        ``None`` calls the backbone once on all ``|F|`` frames folded into
        the batch (the fast path on GPUs); an int ``k`` calls it ``ceil(|F| / k)`` times on
        ``B * k`` inputs (bounds peak memory). ``"auto"`` (default): ``None`` on
        accelerators, ``CPU_FRAMES_PER_CALL`` on CPUs, where a ``|F|`` times larger batch
        falls out of cache and runs slower per input (see ``benchmarks/bench_frames.py``).

    Shapes
    ------
    Padded: ``pos (B, N, d)``, ``mask (B, N)`` bool; extras ``(B, ...)``; the backbone's
    outputs have a leading ``B * F`` axis and come back with a leading ``B``.
    Flat: ``pos (N_total, d)``, ``batch (N_total,)`` int64; extras ``(N_total, ...)``
    (per point) or ``(B, ...)`` (per graph); outputs with leading ``F * B`` (per graph)
    or ``F * N_total`` (per point) come back as ``(B, ...)`` / ``(N_total, ...)``.
    Padded entries of the canonical positions are zero. On accelerators pass a flat batch planned at
    the data boundary (``batch=batch_layout(batch=..., num_graphs=...)``; a batch vector is counted
    by reading it); see [`geomlin.frames.pca`][] for what else runs without host synchronisation.

    Declared types (for [`geomlin.testing.assert_equivariant`][] and
    ``geomlin audit``): ``type_in = (Positions(d), *inputs)``, ``type_out`` the output types, all
    under the frame group; an output declared ``Scalars()`` reuses the backbone's declared
    ``Scalars`` when it has one.
    """

    def __init__(self, backbone: nn.Module, group="E3", output: FeatureType | Sequence[FeatureType] = INVARIANT, *,
                 inputs: FeatureType | Sequence[FeatureType] = (), stochastic: bool = False,
                 on_degenerate: str = "warn",
                 gap_tol: float = DEFAULT_GAP_TOL, signs: str = "all", frames_per_call: int | str | None = "auto"):
        super().__init__()
        if not callable(backbone):
            raise TypeError(f"backbone must be callable, got {type(backbone).__name__}")
        check_choice(on_degenerate, "on_degenerate", DEGENERATE_POLICIES)
        check_choice(signs, "signs", SIGN_POLICIES)
        if signs == "skewness" and on_degenerate == "sample":
            raise ValueError("signs='skewness' picks one frame element; on_degenerate='sample' needs the full "
                             "sign orbit (use on_degenerate='moments' with one element)")
        check_bool(stochastic, "stochastic")
        self.backbone = backbone
        self.group = frame_group(group)
        d = self.group.d
        self.single_output = isinstance(output, FeatureType)
        outputs = feature_types(output, "output")
        if not outputs:
            raise ValueError("output must hold at least one feature type")
        likes = backbone_out_types(backbone, len(outputs))
        self.output_types = tuple(like if t == Scalars() and isinstance(like, Scalars) else
                                  point_type(t, d, self.group, "output") for t, like in zip(outputs, likes))
        self.input_types = tuple(point_type(t, d, self.group, "inputs", positions=False)
                                 for t in feature_types(inputs, "inputs"))
        self.stochastic = stochastic
        self.on_degenerate = on_degenerate
        self.gap_tol = check_float(gap_tol, "gap_tol", minimum=0.0)
        self.signs = signs
        if frames_per_call not in (None, "auto") and (isinstance(frames_per_call, bool)
                                                      or not isinstance(frames_per_call, int) or frames_per_call < 1):
            raise ValueError(f"frames_per_call must be 'auto', None or a positive int, got {frames_per_call!r}")
        self.frames_per_call = frames_per_call
        self.type_in = (Positions(d, self.group), *self.input_types)
        self.type_out = self.output_types[0] if self.single_output else self.output_types

    def example_inputs(self, generator=None, dtype=torch.float64):
        """Three non-degenerate clouds ``(3, 10, d)`` without a mask (so any backbone takes them); extra
        inputs per point (``(3, 10, *shape)`` of each input type, ``(3, 10, 1)`` for an invariant type
        without a shape)."""
        pos, _ = example_clouds(self.group.d, generator, dtype)
        extras = [torch.randn(*pos.shape[:2], *(t.shape or (1,)), generator=generator, dtype=dtype)
                  for t in self.input_types]
        return (pos, *extras), {}

    def extra_repr(self) -> str:
        return (f"group={self.group}, output={self.output_types}, inputs={self.input_types}, "
                f"stochastic={self.stochastic}, on_degenerate={self.on_degenerate!r}")

    @property
    def num_frames(self) -> int:
        """``|F|``, the number of backbone evaluations per input in eval mode."""
        return 1 if self.signs == "skewness" else num_frames(self.group)

    def frames(self, pos: Tensor, mask: Tensor | None = None, batch: Tensor | BatchLayout | None = None,
               generator: torch.Generator | None = None):
        """The frames used by [`forward`][]: ``(B, F', d, d)`` and centroid ``(B, d)``.

        ``F' = 1`` in stochastic training mode, ``|F|`` otherwise.
        """
        fr = pca_frames(pos, self.group, mask, batch, on_degenerate=self.on_degenerate, gap_tol=self.gap_tol,
                        signs=self.signs, generator=generator)
        frames = fr.frames
        if self.stochastic and self.training:
            B, F = frames.shape[:2]
            pick = torch.randint(F, (B,), generator=generator, device=frames.device)
            frames = frames[torch.arange(B, device=frames.device), pick][:, None]
        return frames, fr.centroid

    def forward(self, pos: Tensor, *extras: Tensor, mask: Tensor | None = None,
                batch: Tensor | BatchLayout | None = None, edge_index: Tensor | None = None,
                generator: torch.Generator | None = None):
        """Frame-averaged backbone output(s); see the class docstring for shapes."""
        if self.input_types and len(extras) != len(self.input_types):
            raise ValueError(f"expected {len(self.input_types)} extra inputs {self.input_types}, "
                             f"got {len(extras)}")
        types_in = self.input_types or (Scalars(),) * len(extras)
        d = self.group.d
        for i, (t, x) in enumerate(zip(types_in, extras)):
            check_tensor(x, f"extra input {i}", dtype="any", min_ndim=1)
            if isinstance(t, Vectors) and x.shape[-1:] != (d,):
                raise ValueError(f"vector inputs must have last dimension {d}, got shape {tuple(x.shape)}")
        layout = cloud_layout(pos, d, mask, batch)
        if edge_index is not None and not layout.is_flat:
            raise ValueError("edge_index is only supported with flat batches (pass batch=)")
        Q, c = self.frames(pos, batch=layout, generator=generator)
        if not layout.is_flat:
            return self._forward_padded(pos, extras, types_in, mask, Q, c)
        return self._forward_flat(pos, extras, types_in, layout, edge_index, Q, c)

    # ------------------------------------------------------------------ padded
    def _chunks(self, F: int, device: torch.device):
        per_call = self.frames_per_call
        if per_call == "auto":
            per_call = CPU_FRAMES_PER_CALL if device.type == "cpu" else None
        step = F if per_call is None else min(per_call, F)
        return [(f0, min(f0 + step, F)) for f0 in range(0, F, step)]

    def _forward_padded(self, pos, extras, types_in, mask, Q, c):
        B, F = Q.shape[:2]
        z = torch.einsum("bnd,bfde->bfne", pos - c[:, None], Q)  # Q^T (x - c) per frame
        if mask is not None:
            z = z * mask[:, None, :, None].to(z.dtype)
        args = [z]  # every argument as (B, F, ...)
        for t, x in zip(types_in, extras):
            if x.shape[0] != B:
                raise ValueError(f"extra inputs of a padded batch need leading dimension B={B}, "
                                 f"got shape {tuple(x.shape)}")
            if isinstance(t, Vectors):
                args.append(torch.einsum("bfde,b...d->bf...e", Q, x.to(Q.dtype)))
            else:
                args.append(x[:, None].expand(B, F, *x.shape[1:]))
        pieces = []
        for f0, f1 in self._chunks(F, pos.device):
            Fc = f1 - f0
            kwargs = {} if mask is None else {"mask": mask.repeat_interleave(Fc, dim=0)}
            outs = self._as_outputs(self.backbone(*(a[:, f0:f1].reshape(B * Fc, *a.shape[2:]) for a in args),
                                                  **kwargs))
            for y in outs:
                if y.shape[0] != B * Fc:
                    raise ValueError(f"backbone output must have leading dimension B * |F| = {B * Fc}, "
                                     f"got shape {tuple(y.shape)}")
            pieces.append([y.reshape(B, Fc, *y.shape[1:]) for y in outs])
        results = [self._average(t, torch.cat([p[i] for p in pieces], dim=1), Q, c)
                   for i, t in enumerate(self.output_types)]
        return results[0] if self.single_output else tuple(results)

    def _average(self, t: FeatureType, y: Tensor, Q: Tensor, c: Tensor) -> Tensor:
        """Mean over the frame axis 1 of ``g . y`` for outputs of type ``t``; ``y (B, F, ...)``,
        ``Q (B, F, d, d)``, ``c (B, d)``."""
        if t.is_invariant:
            return y.mean(1)
        d = Q.shape[-1]
        if y.shape[-1] != d:
            raise ValueError(f"{t!r} outputs must have last dimension {d}, got shape {tuple(y.shape)}")
        out = torch.einsum("bfde,bf...e->b...d", Q.to(y.dtype), y) / Q.shape[1]
        if isinstance(t, Positions):
            out = out + c.to(y.dtype).reshape(c.shape[0], *([1] * (out.ndim - 2)), d)
        return out

    # -------------------------------------------------------------------- flat
    def _forward_flat(self, pos, extras, types_in, layout, edge_index, Q, c):
        B, F = Q.shape[:2]
        batch = layout.batch  # (validated and, on accelerators, clamped: the gathers stay in bounds)
        n = pos.shape[0]
        Qn = Q[batch]  # (n, F, d, d)
        args = [torch.einsum("nd,nfde->fne", pos - c[batch], Qn)]  # every argument as (F, m, ...)
        for t, x in zip(types_in, extras):
            if x.shape[0] == n:
                Qx = Qn
            elif x.shape[0] == B:
                Qx = Q
            else:
                raise ValueError(f"extra inputs of a flat batch need leading dimension N_total={n} (per "
                                 f"point) or B={B} (per graph), got shape {tuple(x.shape)}")
            if isinstance(t, Vectors):
                args.append(torch.einsum("mfde,m...d->fm...e", Qx, x.to(Q.dtype)))
            else:
                args.append(x[None].expand(F, *x.shape))
        pieces = []
        for f0, f1 in self._chunks(F, pos.device):
            Fc = f1 - f0
            offsets = torch.arange(Fc, device=batch.device)
            frames_batch = (batch[None] + B * offsets[:, None]).reshape(-1)
            kwargs = {"batch": batch_layout(batch=frames_batch, num_graphs=Fc * B, max_items=layout.max_items or None)}
            if edge_index is not None:
                kwargs["edge_index"] = (edge_index[:, None] + n * offsets[None, :, None]).reshape(2, -1)
            outs = self._as_outputs(self.backbone(*(a[f0:f1].reshape(Fc * a.shape[1], *a.shape[2:])
                                                    for a in args), **kwargs))
            chunk = []
            for y in outs:
                if y.shape[0] not in (Fc * n, Fc * B):
                    raise ValueError(f"backbone output must have leading dimension |F| * B = {Fc * B} (per "
                                     f"graph) or |F| * N_total = {Fc * n} (per point), got shape {tuple(y.shape)}")
                chunk.append(y.reshape(Fc, -1, *y.shape[1:]))  # (Fc, n or B, ...); per point wins ties
            pieces.append(chunk)
        results = []
        for i, t in enumerate(self.output_types):
            y = torch.cat([p[i] for p in pieces], dim=0).transpose(0, 1)  # (n or B, F, ...)
            if y.shape[0] == n:  # per point: frames of each point's graph
                results.append(self._average(t, y, Qn, c[batch]))
            else:
                results.append(self._average(t, y, Q, c))
        return results[0] if self.single_output else tuple(results)

    def _as_outputs(self, out) -> tuple[Tensor, ...]:
        outs = (out,) if isinstance(out, Tensor) else tuple(out)
        if len(outs) != len(self.output_types):
            raise ValueError(f"backbone returned {len(outs)} outputs but the output types are {self.output_types}")
        return outs
