"""Frame averaging: make any point-cloud backbone exactly invariant or equivariant
(Puny et al. 2022, "Frame Averaging for Invariant and Equivariant Network Design", Eq. 3-4).

For a frame ``F(X)`` (here the PCA frames of [`geomlin.frames.pca`][]) and a backbone
``phi``, the frame average is

    <phi>(X) = 1/|F(X)| sum_{g in F(X)} g . phi(g^{-1} . X)

with ``g = (Q, c)``, ``g^{-1} . X = Q^T (X - c)``, and ``g . y`` the output action:
``y`` (invariant), ``Q y`` (vector) or ``Q y + c`` (position). Since ``F(hX) = h F(X)``
as a set, ``<phi>(hX) = h . <phi>(X)`` exactly for every backbone, with or without biases.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from geomlin.frames.pca import (
    DEFAULT_GAP_TOL,
    DEGENERATE_POLICIES,
    SIGN_POLICIES,
    _flat_graphs,
    as_frame_group,
    example_clouds,
    pca_frames,
)
from geomlin.validation import check_bool, check_choice, check_float, check_tensor

#: Output kinds understood by [`FrameAveraging`][].
OUTPUT_KINDS = ("invariant", "vector", "position")
#: Frames per backbone call on CPU with ``frames_per_call="auto"`` (measured in bench_frames).
CPU_FRAMES_PER_CALL = 1
#: Kinds of extra positional inputs.
INPUT_KINDS = ("invariant", "vector")


def _kinds(value, allowed: tuple, what: str) -> tuple[str, ...]:
    if not isinstance(value, (str, tuple, list)):
        name = "output" if what == "output" else "inputs"
        raise TypeError(f"{name} must be a kind name or a tuple of them, got {type(value).__name__}")
    kinds = (value,) if isinstance(value, str) else tuple(value)
    for k in kinds:
        if k not in allowed:
            raise ValueError(f"{what} kinds must be in {allowed}, got {k!r}")
    return kinds


def point_type(kind: str, d: int, group, like=None):
    """The feature type of a point-cloud input or output of ``kind`` under ``group``.

    ``"invariant"`` -> [`Scalars`][geomlin.reps.types.Scalars] (the shape of ``like`` when it is an invariant
    type), ``"vector"`` -> [`Vectors`][geomlin.reps.types.Vectors], ``"position"`` ->
    [`Positions`][geomlin.reps.types.Positions].
    """
    from geomlin.reps.types import Positions, Scalars, Vectors

    if kind == "invariant":
        if like is not None and getattr(like, "is_invariant", False) and isinstance(like, Scalars):
            return like
        return Scalars()
    if kind == "vector":
        return Vectors(d, None, group)
    return Positions(d, group)


def backbone_out_types(backbone, count: int) -> tuple:
    """The backbone's declared output types (``None`` each when it declares none)."""
    from geomlin.reps.feature_type import declared_types

    try:
        _, out = declared_types(backbone)
    except TypeError:
        return (None,) * count
    return out if len(out) == count else (None,) * count


def takes_keyword(fn, name: str) -> bool:
    """Whether ``fn`` (a module's ``forward`` or any callable) accepts the keyword ``name``."""
    try:
        params = inspect.signature(fn.forward if isinstance(fn, nn.Module) else fn).parameters.values()
    except (TypeError, ValueError):  # no signature (a builtin): assume the documented contract
        return True
    return any(p.kind is p.VAR_KEYWORD or (p.name == name and p.kind is not p.POSITIONAL_ONLY) for p in params)


class FrameAveraging(nn.Module):
    """Wrap ``backbone`` so that it becomes exactly E(d)/SE(d)/O(d)/SO(d) invariant or equivariant.

    Parameters
    ----------
    backbone : nn.Module
        any module; called once on all frames folded into the batch dimension (or once per
        chunk of ``frames_per_call`` frames) as
        ``backbone(pos, *extras)`` (padded, no mask; a backbone without a ``mask`` keyword,
        e.g. an ``nn.Sequential``, takes only these), ``backbone(pos, *extras, mask=mask)``
        (padded ``(B * F, N, d)``), or ``backbone(pos, *extras, batch=batch)``
        (flat ``(F * N_total, d)``; plus ``edge_index=`` when given).
    group : str or Group or Euclidean
        ``"E3"`` (default), ``"SE3"``, ``"O3"``, ``"SO3"`` or the ``(n)`` versions; see
        [`as_frame_group`][].
    output : str or tuple of str
        kind of the backbone's output, or a tuple of kinds for tuple outputs:
        ``"invariant"`` (any shape), ``"vector"`` (``(..., d)``, rotated back) or
        ``"position"`` (``(..., d)``, rotated and translated back).
    inputs : Sequence[str] | str
        kinds of the extra positional inputs after ``pos``: ``"invariant"`` (passed
        through, repeated per frame) or ``"vector"`` (``(..., d)``, rotated into each
        frame). Default: all invariant.
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
    Padded entries of the canonical positions are zero. On accelerators pass ``num_graphs`` with a
    flat batch (otherwise ``batch.max()`` is read); see [`geomlin.frames.pca`][] for what
    else runs without host synchronisation.

    Declared types (for [`geomlin.testing.assert_equivariant`][] and
    ``geomlin audit``): ``type_in = (Positions(d), *extras)``, ``type_out`` one type per output kind, all under the
    frame group (``SE3`` -> ``SE3()``, ``O3`` -> ``O(3)``, ...); invariant outputs reuse the
    backbone's declared ``Scalars`` when it has one.
    """

    def __init__(self, backbone: nn.Module, group="E3", output="invariant", *,
                 inputs: Sequence[str] | str = (), stochastic: bool = False, on_degenerate: str = "warn",
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
        self.frame_group = as_frame_group(group)
        self.single_output = isinstance(output, str)
        self.output_kinds = _kinds(output, OUTPUT_KINDS, "output")
        self.input_kinds = _kinds(inputs, INPUT_KINDS, "input")
        self.stochastic = stochastic
        self.on_degenerate = on_degenerate
        self.gap_tol = check_float(gap_tol, "gap_tol", minimum=0.0)
        self.signs = signs
        if frames_per_call not in (None, "auto") and (isinstance(frames_per_call, bool)
                                                      or not isinstance(frames_per_call, int) or frames_per_call < 1):
            raise ValueError(f"frames_per_call must be 'auto', None or a positive int, got {frames_per_call!r}")
        self.frames_per_call = frames_per_call
        self.backbone_takes_mask = takes_keyword(backbone, "mask")
        d, G = self.frame_group.d, self.frame_group.sampler()
        self.type_in = (point_type("position", d, G), *(point_type(k, d, G) for k in self.input_kinds))
        likes = backbone_out_types(backbone, len(self.output_kinds))
        outs = tuple(point_type(k, d, G, like) for k, like in zip(self.output_kinds, likes))
        self.type_out = outs[0] if self.single_output else outs

    def example_inputs(self, generator=None, dtype=torch.float64):
        """Three non-degenerate padded clouds ``(3, 10, d)`` with a mask (full clouds and no mask when
        the backbone takes no ``mask`` keyword); extra inputs per point (``(3, 10, 1)`` invariants,
        ``(3, 10, d)`` vectors)."""
        d = self.frame_group.d
        pos, mask = example_clouds(d, generator, dtype)
        extras = [torch.randn(*pos.shape[:2], d if k == "vector" else 1, generator=generator, dtype=dtype)
                  for k in self.input_kinds]
        return (pos, *extras), ({"mask": mask} if self.backbone_takes_mask else {})

    def extra_repr(self) -> str:
        return (f"group={self.frame_group.name}, output={self.output_kinds}, inputs={self.input_kinds}, "
                f"stochastic={self.stochastic}, on_degenerate={self.on_degenerate!r}")

    @property
    def num_frames(self) -> int:
        """``|F|``, the number of backbone evaluations per input in eval mode."""
        return 1 if self.signs == "skewness" else self.frame_group.num_frames

    def frames(self, pos: Tensor, mask: Tensor | None = None, batch: Tensor | None = None,
               num_graphs: int | None = None, generator: torch.Generator | None = None):
        """The frames used by [`forward`][]: ``(B, F', d, d)`` and centroid ``(B, d)``.

        ``F' = 1`` in stochastic training mode, ``|F|`` otherwise.
        """
        fr = pca_frames(pos, self.frame_group, mask, batch, num_graphs=num_graphs,
                        on_degenerate=self.on_degenerate, gap_tol=self.gap_tol, signs=self.signs,
                        generator=generator)
        frames = fr.frames
        if self.stochastic and self.training:
            B, F = frames.shape[:2]
            pick = torch.randint(F, (B,), generator=generator, device=frames.device)
            frames = frames[torch.arange(B, device=frames.device), pick][:, None]
        return frames, fr.centroid

    def forward(self, pos: Tensor, *extras: Tensor, mask: Tensor | None = None, batch: Tensor | None = None,
                edge_index: Tensor | None = None, num_graphs: int | None = None,
                generator: torch.Generator | None = None):
        """Frame-averaged backbone output(s); see the class docstring for shapes."""
        if self.input_kinds and len(extras) != len(self.input_kinds):
            raise ValueError(f"expected {len(self.input_kinds)} extra inputs {self.input_kinds}, "
                             f"got {len(extras)}")
        kinds_in = self.input_kinds or ("invariant",) * len(extras)
        d = self.frame_group.d
        for i, (k, x) in enumerate(zip(kinds_in, extras)):
            check_tensor(x, f"extra input {i}", dtype="any", min_ndim=1)
            if k == "vector" and x.shape[-1:] != (d,):
                raise ValueError(f"vector inputs must have last dimension {d}, got shape {tuple(x.shape)}")
        if edge_index is not None and batch is None:
            raise ValueError("edge_index is only supported with flat batches (pass batch=)")
        if mask is not None and batch is None and not self.backbone_takes_mask:
            raise ValueError(f"mask was given but the backbone ({type(self.backbone).__name__}) takes no mask= "
                             "keyword, so it would see the padding as points; pass full clouds without a "
                             "mask, a flat batch (batch=), or a backbone with forward(..., mask=None)")
        Q, c = self.frames(pos, mask, batch, num_graphs, generator)
        if batch is None:
            return self._forward_padded(pos, extras, kinds_in, mask, Q, c)
        _, batch = _flat_graphs(batch, Q.shape[0])  # (clamped on accelerators: the gathers stay in bounds)
        return self._forward_flat(pos, extras, kinds_in, batch, edge_index, Q, c)

    # ------------------------------------------------------------------ padded
    def _chunks(self, F: int, device: torch.device):
        per_call = self.frames_per_call
        if per_call == "auto":
            per_call = CPU_FRAMES_PER_CALL if device.type == "cpu" else None
        step = F if per_call is None else min(per_call, F)
        return [(f0, min(f0 + step, F)) for f0 in range(0, F, step)]

    def _forward_padded(self, pos, extras, kinds_in, mask, Q, c):
        B, F = Q.shape[:2]
        z = torch.einsum("bnd,bfde->bfne", pos - c[:, None], Q)  # Q^T (x - c) per frame
        if mask is not None:
            z = z * mask[:, None, :, None].to(z.dtype)
        args = [z]  # every argument as (B, F, ...)
        for k, x in zip(kinds_in, extras):
            if x.shape[0] != B:
                raise ValueError(f"extra inputs of a padded batch need leading dimension B={B}, "
                                 f"got shape {tuple(x.shape)}")
            if k == "vector":
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
        results = [self._average(kind, torch.cat([p[i] for p in pieces], dim=1), Q, c)
                   for i, kind in enumerate(self.output_kinds)]
        return results[0] if self.single_output else tuple(results)

    def _average(self, kind: str, y: Tensor, Q: Tensor, c: Tensor) -> Tensor:
        """Mean over the frame axis 1 of ``g . y``; ``y (B, F, ...)``, ``Q (B, F, d, d)``, ``c (B, d)``."""
        if kind == "invariant":
            return y.mean(1)
        d = Q.shape[-1]
        if y.shape[-1] != d:
            raise ValueError(f"{kind} outputs must have last dimension {d}, got shape {tuple(y.shape)}")
        out = torch.einsum("bfde,bf...e->b...d", Q.to(y.dtype), y) / Q.shape[1]
        if kind == "position":
            out = out + c.to(y.dtype).reshape(c.shape[0], *([1] * (out.ndim - 2)), d)
        return out

    # -------------------------------------------------------------------- flat
    def _forward_flat(self, pos, extras, kinds_in, batch, edge_index, Q, c):
        B, F = Q.shape[:2]
        n = pos.shape[0]
        Qn = Q[batch]  # (n, F, d, d)
        args = [torch.einsum("nd,nfde->fne", pos - c[batch], Qn)]  # every argument as (F, m, ...)
        for k, x in zip(kinds_in, extras):
            if x.shape[0] == n:
                Qx = Qn
            elif x.shape[0] == B:
                Qx = Q
            else:
                raise ValueError(f"extra inputs of a flat batch need leading dimension N_total={n} (per "
                                 f"point) or B={B} (per graph), got shape {tuple(x.shape)}")
            if k == "vector":
                args.append(torch.einsum("mfde,m...d->fm...e", Qx, x.to(Q.dtype)))
            else:
                args.append(x[None].expand(F, *x.shape))
        pieces = []
        for f0, f1 in self._chunks(F, pos.device):
            Fc = f1 - f0
            offsets = torch.arange(Fc, device=batch.device)
            kwargs = {"batch": (batch[None] + B * offsets[:, None]).reshape(-1)}
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
        for i, kind in enumerate(self.output_kinds):
            y = torch.cat([p[i] for p in pieces], dim=0).transpose(0, 1)  # (n or B, F, ...)
            if y.shape[0] == n:  # per point: frames of each point's graph
                results.append(self._average(kind, y, Qn, c[batch]))
            else:
                results.append(self._average(kind, y, Q, c))
        return results[0] if self.single_output else tuple(results)

    def _as_outputs(self, out) -> tuple[Tensor, ...]:
        outs = (out,) if isinstance(out, Tensor) else tuple(out)
        if len(outs) != len(self.output_kinds):
            raise ValueError(f"backbone returned {len(outs)} outputs but output kinds are {self.output_kinds}")
        return outs
