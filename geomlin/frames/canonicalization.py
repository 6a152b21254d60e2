"""Learned canonicalization (Kaba et al. 2023, "Equivariance with Learned Canonicalization
Functions") with the canonicalization prior (Mondal et al. 2023, "Equivariant Adaptation
of Large Pretrained Models").

A canonicalizer ``h`` is a small equivariant network that predicts one group element per
input, ``h(g x) = g h(x)``. Running a backbone ``phi`` in the canonical pose and mapping
the result back,

    f(x) = h(x) . phi(h(x)^{-1} . x),

is exactly invariant / equivariant for ANY ``phi`` (also a frozen pretrained one).

The contract (explicit values, no hidden state) every canonicalizer here follows:

* ``canonicalizer(x, **kw) -> g``: the predicted group elements (differentiable);
* ``canonicalize(x, g, type=None, **kw)``: ``g^{-1} . x`` for ``x`` of the feature type ``type``
  (default: the canonicalizer's own input type);
* ``invert(y, g, type, **kw)``: ``g . y`` for ``y`` of the feature type ``type`` (those meaningful
  for the group: ``Scalars``, ``Vectors``, ``Positions`` for point clouds; ``Scalars``,
  ``Vectors(2)``, ``Images``, ``RegularFeatures`` for images);
* ``prior_loss(g)``: the canonicalization prior, distance of ``g`` to the identity
  (``|R - I|_F^2`` for continuous groups, cross-entropy to the identity element for
  discrete ones); add ``beta * prior_loss`` to the task loss so the canonical pose stays
  close to the (upright) training distribution;
* ``identity_metric(g)``: fraction of predictions at (or near) the identity.

Point clouds use [`PointCloudCanonicalizer`][] (vector neurons, SO(d)/O(d)/SE(d)/E(d));
images use [`geomlin.frames.images.ImageCanonicalizer`][] (C4/D4).

Every canonicalizer declares ``type_in`` and, for ``forward(..., as_tensors=True)`` (the group
elements as plain tensors), ``type_out``; ``bind_type(t)`` gives the feature type ``t`` under the
canonicalizer's group, from which [`Canonicalization`][] composes its own declaration.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from geomlin.batching import BatchLayout, as_layout
from geomlin.frames.averaging import INVARIANT, backbone_out_types, feature_types, point_type
from geomlin.frames.moments import point_moments
from geomlin.frames.pca import cloud_layout, example_clouds, frame_group, is_special, pca_frames
from geomlin.frames.vector_neurons import POOLINGS, VNPointNet
from geomlin.groups import Euclidean, RigidTransform, special_procrustes
from geomlin.precision import full_precision, working_dtype
from geomlin.reps.feature_type import FeatureType
from geomlin.reps.types import Frames, Positions, Scalars, Vectors
from geomlin.validation import check_bool, check_choice, check_float, check_positive_int, check_tensor

#: Default angle (radians) within which ``identity_metric`` counts a rotation as the identity.
IDENTITY_ANGLE = math.radians(10.0)
#: Lower bound on vector norms in Gram-Schmidt so that a vanishing vector gives a finite frame.
GRAM_SCHMIDT_EPS = 1e-12
#: Sharpness of the soft orientation sign used for straight-through gradients (O(3)).
ORIENTATION_SHARPNESS = 4.0
#: Gap below which the moment frame fed to the canonicalizer takes its axes from higher moments.
MOMENT_FRAME_GAP_TOL = 0.2
#: How predicted vectors become an orthogonal matrix.
ORTHOGONALIZATIONS = ("gram_schmidt", "procrustes")


def gram_schmidt_rotation(v1: Tensor, v2: Tensor, v3: Tensor | None = None) -> Tensor:
    """Orthogonal frame from predicted vectors (Kaba et al. 2023, Sec. 4.2).

    ``e1 = v1/|v1|``, ``e2 = (v2 - <v2,e1> e1) / |.|``, ``e3 = s (e1 x e2)`` with
    ``s = +1`` (SO(3), when ``v3`` is None) or ``s = sign <v3, e1 x e2>`` (O(3)).
    The sign uses a straight-through estimator: the value is exactly +-1, the gradient
    that of ``tanh(ORIENTATION_SHARPNESS <v3/|v3|, e1 x e2>)``.

    Parameters
    ----------
    v1, v2, v3
        ``(..., 3)`` vectors.

    Returns
    -------
    Tensor
        ``(..., 3, 3)`` with columns ``e1, e2, e3``; ``R(Q v) = Q R(v)`` for ``Q`` in SO(3)
        (``v3`` None) or O(3) (``v3`` given). Always orthogonal: a vanishing ``v1`` is replaced by
        ``e_x`` and a ``v2`` parallel to ``v1`` by a fixed perpendicular (not equivariant there, but
        never the singular "rotation" a plain division would give).
    """
    if v1.shape[-1] != 3 or v2.shape != v1.shape or (v3 is not None and v3.shape != v1.shape):
        raise ValueError(f"gram_schmidt_rotation needs matching (..., 3) vectors, got "
                         f"{tuple(v1.shape)}, {tuple(v2.shape)}, {None if v3 is None else tuple(v3.shape)}")
    e1 = _unit_or(v1, _axis_like(v1, 0))
    u2 = v2 - (v2 * e1).sum(-1, keepdim=True) * e1
    e2 = _unit_or(u2, _perpendicular(e1))
    n = torch.linalg.cross(e1, e2, dim=-1)
    if v3 is not None:
        a = (v3 * n).sum(-1, keepdim=True)
        hard = torch.where(a >= 0, torch.ones_like(a), -torch.ones_like(a))
        soft = torch.tanh(ORIENTATION_SHARPNESS * a / v3.norm(dim=-1, keepdim=True).clamp_min(GRAM_SCHMIDT_EPS))
        n = n * (hard + (soft - soft.detach()))
    return torch.stack([e1, e2, n], dim=-1)


def _axis_like(v: Tensor, i: int) -> Tensor:
    e = torch.zeros_like(v)
    e[..., i] = 1.0
    return e


def _perpendicular(e: Tensor) -> Tensor:
    """A unit vector perpendicular to the unit vectors ``e (..., 3)``: ``e x`` (the axis ``e`` is least aligned with)."""
    axis = torch.nn.functional.one_hot(e.detach().abs().argmin(-1), 3).to(e.dtype)
    p = torch.linalg.cross(e, axis, dim=-1)
    return p / p.norm(dim=-1, keepdim=True)


def _unit_or(v: Tensor, fallback: Tensor) -> Tensor:
    """``v / |v|``, or ``fallback`` where ``|v| <= GRAM_SCHMIDT_EPS``."""
    norm = v.norm(dim=-1, keepdim=True)
    small = norm <= GRAM_SCHMIDT_EPS
    return torch.where(small, fallback, v / norm.clamp_min(GRAM_SCHMIDT_EPS))


def gram_schmidt_orthogonal(vectors: Tensor, special: bool) -> Tensor:
    """Orthogonal ``(..., d, d)`` from ``d`` vectors given as rows of ``(..., d, d)``.

    Gram-Schmidt via QR, made unique by a positive diagonal of ``r`` (so ``Q V -> Q q``
    for every orthogonal ``Q``); with ``special`` the last column is multiplied by
    ``det q`` so that ``det = +1`` (equivariant for ``Q`` in SO(d)). Used for ``d != 3``.
    Computed in at least float32 with autocast off; returned in ``vectors``' dtype.
    """
    check_tensor(vectors, "vectors", min_ndim=2)
    if vectors.shape[-1] != vectors.shape[-2]:
        raise ValueError(f"vectors must hold d vectors of dimension d, (..., d, d), got shape {tuple(vectors.shape)}")
    with full_precision(vectors):  # QR has no half-precision kernels; autocast would not help
        q, r = torch.linalg.qr(vectors.to(working_dtype(vectors.dtype)).transpose(-1, -2))
        signs = torch.sign(torch.diagonal(r, dim1=-2, dim2=-1))
        signs = torch.where(signs == 0, torch.ones_like(signs), signs)
        q = q * signs[..., None, :]
        if special:
            det = torch.linalg.det(q)
            q = torch.cat([q[..., :-1], q[..., -1:] * det[..., None, None]], dim=-1)
    return q.to(vectors.dtype)


class Canonicalizer(nn.Module, ABC):
    """Abstract base of the canonicalization contract (see the module docstring).

    Subclasses implement ``forward``, ``canonicalize``, ``invert``, ``prior_loss`` and
    ``identity_metric``; all take and return explicit tensors or group elements. They should also
    declare ``type_in`` and implement [`bind_type`][] so that [`Canonicalization`][] can declare its
    types.
    """

    @abstractmethod
    def forward(self, x: Tensor, **kwargs):
        """Predicted group elements of the batch ``x``."""

    @abstractmethod
    def canonicalize(self, x: Tensor, g, type: FeatureType | None = None, **kwargs) -> Tensor:
        """``g^{-1} . x`` for ``x`` of the feature type ``type`` (default: the input type)."""

    @abstractmethod
    def invert(self, y: Tensor, g, type: FeatureType, **kwargs) -> Tensor:
        """``g . y`` for an output of the feature type ``type``."""

    @abstractmethod
    def prior_loss(self, g) -> Tensor:
        """Scalar distance of ``g`` to the identity."""

    @abstractmethod
    def identity_metric(self, g) -> Tensor:
        """Scalar fraction of ``g`` at the identity."""

    def bind_type(self, t: FeatureType) -> FeatureType:
        """The feature type ``t`` under this canonicalizer's group (``ValueError`` for a type it cannot
        canonicalize or invert); by default ``t`` itself."""
        return t


class PointCloudCanonicalizer(Canonicalizer):
    """Vector-neuron canonicalizer for point clouds: ``(B, N, d)`` -> rigid motions.

    A [`VNPointNet`][] on the centred cloud predicts vectors
    that become the rotation ``R``:

    * ``orthogonalization="gram_schmidt"`` (Kaba et al. 2023): 2 vectors (SO(3)/SE(3)) or 3
      (O(3)/E(3)) through [`gram_schmidt_rotation`][]; the first vector fixes the first axis,
      and for O(3) the orientation is a hard sign with a straight-through gradient;
    * ``orthogonalization="procrustes"`` (Levinson et al. 2020): ``d`` vectors as the columns of
      ``M``, ``R = special_procrustes(M)`` (SO/SE) or the polar factor of ``M`` (O/E). The vectors
      are treated symmetrically, the map is smooth where ``M`` is invertible, and the O(d) polar
      factor is exactly equivariant (``polar(Q M) = Q polar(M)``) without a sign.

    Other dimensions ``d`` with Gram-Schmidt use ``d`` vectors and QR
    ([`gram_schmidt_orthogonal`][]). For E(d)/SE(d) the translation is the centroid, for
    O(d)/SO(d) zero.

    Parameters
    ----------
    group : SymmetryGroup or str
        ``SO(d)``, ``O(d)``, ``SE(d)``, ``E(d)`` or its name (``"SO3"``, ``"E(3)"``); see
        [`frame_group`][geomlin.frames.pca.frame_group].
    hidden_channels, num_blocks : int
        width and depth of the vector-neuron network.
    orthogonalization : str
        ``"gram_schmidt"`` (default) or ``"procrustes"``.
    pooling : str
        ``"mean"`` (default) or ``"attention"`` (softmax over invariant point scores: can
        single out corners of symmetric shapes; see [`VNPointNet`][]).

    Notes
    -----
    Group elements are [`RigidTransform`][geomlin.groups.euclidean.RigidTransform] with ``R (B, d, d)``,
    ``t (B, d)``; ``forward(..., as_tensors=True)`` returns the tuple ``(R, t)`` instead (declared as
    ``type_out = (Frames(d), Positions(d))``). Inputs: padded ``(B, N, d)`` with optional
    ``mask (B, N)``, or flat ``(N_total, d)`` with ``batch``. A cloud whose points coincide has
    every rotation as a symmetry; it gets ``R = I`` (its canonical cloud is the same for any
    ``R``, so invariant outputs stay exact).
    """

    def __init__(self, group="SO3", hidden_channels: int = 16, num_blocks: int = 2, *,
                 orthogonalization: str = "gram_schmidt", pooling: str = "mean", moment_frame: bool = False,
                 gap_tol: float = MOMENT_FRAME_GAP_TOL):
        super().__init__()
        self.group = frame_group(group)
        self.orthogonalization = check_choice(orthogonalization, "orthogonalization", ORTHOGONALIZATIONS)
        check_choice(pooling, "pooling", POOLINGS)
        d = self.group.d
        if self.orthogonalization == "procrustes" or d != 3:
            self.num_vectors = d
        else:
            self.num_vectors = 2 if is_special(self.group) else 3
        check_bool(moment_frame, "moment_frame")
        self.moment_frame = moment_frame
        self.gap_tol = check_float(gap_tol, "gap_tol", minimum=0.0)
        self.net = VNPointNet(self.num_vectors, check_positive_int(hidden_channels, "hidden_channels"),
                              check_positive_int(num_blocks, "num_blocks"), pooling=pooling,
                              frame_channels=d if moment_frame else 0, d=d)
        self.type_in = Positions(d, self.group)
        self.type_out = (Frames(d, self.group), Positions(d, self.group))

    def extra_repr(self) -> str:
        return f"group={self.group}, orthogonalization={self.orthogonalization!r}"

    def bind_type(self, t: FeatureType) -> FeatureType:
        """``Scalars`` (any invariant type), ``Vectors(d)`` or ``Positions(d)`` under the canonicalizer's group."""
        return point_type(t, self.group.d, self.group, "point-cloud features")

    def example_inputs(self, generator=None, dtype=torch.float64):
        """Non-degenerate padded clouds with a mask; ``as_tensors=True`` so outputs are ``(R, t)``."""
        pos, mask = example_clouds(self.group.d, generator, dtype)
        return (pos,), {"mask": mask, "as_tensors": True}

    def forward(self, pos: Tensor, mask: Tensor | None = None, batch: Tensor | BatchLayout | None = None,
                as_tensors: bool = False):
        """Predicted elements ``g = (R (B, d, d), t (B, d))``; ``g(Q x + s) = (Q, s) g(x)``.

        ``batch``: a flat batch's vector ``(N_total,)`` or its planned
        [`BatchLayout`][geomlin.batching.BatchLayout] (see [`geomlin.batching`][]).
        """
        G, special = self.group, is_special(self.group)
        layout = cloud_layout(pos, G.d, mask, batch)
        centroid, cov, _, sq = point_moments(pos, isinstance(G, Euclidean), layout)
        x = pos - (centroid[layout.batch] if layout.is_flat else centroid[:, None])
        frame = None
        if self.moment_frame:
            fr = pca_frames(pos, G, batch=layout, on_degenerate="moments", gap_tol=self.gap_tol, signs="skewness")
            rms = torch.diagonal(cov, dim1=-2, dim2=-1).sum(-1).clamp_min(0).sqrt()
            frame = fr.frames[:, 0].transpose(-1, -2) * rms[:, None, None]  # axes as rows, length scale
        v = self.net(x, batch=layout, frame=frame)  # (B, k, d)
        # the rotation in the points' precision (under autocast the network's vectors may be half)
        v = v.to(torch.promote_types(working_dtype(v.dtype), pos.dtype))
        if self.orthogonalization == "procrustes":
            R = special_procrustes(v.transpose(-1, -2), special=special)
        elif G.d == 3:
            R = gram_schmidt_rotation(v[:, 0], v[:, 1], None if special else v[:, 2])
        else:
            R = gram_schmidt_orthogonal(v, special)
        # Coincident points (zero spread): every rotation is a symmetry; use the identity.
        spread = torch.diagonal(cov, dim1=-2, dim2=-1).sum(-1)
        still = spread.detach() <= (torch.finfo(pos.dtype).eps * 1e2) ** 2 * sq.detach().clamp_min(
            torch.finfo(pos.dtype).tiny)
        eye = torch.eye(G.d, dtype=R.dtype, device=R.device)
        R = torch.where(still[:, None, None], eye, R)
        g = RigidTransform(R, centroid)
        return (g.R, g.t) if as_tensors else g

    def canonicalize(self, x: Tensor, g: RigidTransform, type: FeatureType | None = None,
                     mask: Tensor | None = None, batch: Tensor | BatchLayout | None = None, **_) -> Tensor:
        """``g^{-1} . x``: ``R^T (x - t)`` (``Positions``, the default) or ``R^T x`` (``Vectors``);
        invariant types unchanged.

        ``x``: ``(B, ..., d)`` or flat ``(N_total, ..., d)`` with ``batch``; masked entries are zeroed.
        """
        type = self.type_in if type is None else type
        if type.is_invariant:
            return x
        _check_point_type(type, "canonicalize")
        R, t = _per_item(g, x, batch)
        if isinstance(type, Positions):
            x = x - t
        out = (R.transpose(-1, -2) @ x.unsqueeze(-1)).squeeze(-1)
        if mask is not None and out.ndim >= 3 and out.shape[:2] == mask.shape:
            out = out * mask.reshape(*mask.shape, *([1] * (out.ndim - 2))).to(out.dtype)
        return out

    def invert(self, y: Tensor, g: RigidTransform, type: FeatureType, batch: Tensor | BatchLayout | None = None,
               **_) -> Tensor:
        """``g . y``: ``y`` (invariant types), ``R y`` (``Vectors``), ``R y + t`` (``Positions``).

        ``y``: ``(B, ..., d)`` per cloud, or flat per point ``(N_total, ..., d)`` with ``batch``.
        """
        if type.is_invariant:
            return y
        _check_point_type(type, "invert")
        batch = _item_sets(batch)
        if batch is not None and y.shape[0] != batch.shape[0]:
            batch = None  # per-cloud output of a flat batch
        R, t = _per_item(g, y, batch)
        out = (R @ y.unsqueeze(-1)).squeeze(-1)
        return out + t if isinstance(type, Positions) else out

    def prior_loss(self, g: RigidTransform) -> Tensor:
        """Canonicalization prior ``mean_b |R_b - I|_F^2`` (Mondal et al. 2023, Sec. 3.2); scalar."""
        eye = torch.eye(g.R.shape[-1], dtype=g.R.dtype, device=g.R.device)
        return ((g.R - eye) ** 2).sum((-1, -2)).mean()

    def identity_metric(self, g: RigidTransform, angle: float = IDENTITY_ANGLE) -> Tensor:
        """Fraction of ``R`` within ``angle`` radians of the identity (``|R - I|_F <= 2 sqrt2 sin(angle/2)``)."""
        eye = torch.eye(g.R.shape[-1], dtype=g.R.dtype, device=g.R.device)
        dist = (g.R - eye).flatten(-2).norm(dim=-1)
        return (dist <= 2 * math.sqrt(2) * math.sin(angle / 2)).to(g.R.dtype).mean()


def _check_point_type(t: FeatureType, what: str) -> None:
    if not isinstance(t, (Positions, Vectors)):
        raise TypeError(f"point-cloud canonicalizers {what} Scalars (invariant types), Vectors and Positions, "
                         f"got {t!r}")


def _item_sets(batch: Tensor | BatchLayout | None) -> Tensor | None:
    """The batch vector of a flat batch (given as a vector or a layout); None for a padded one."""
    if isinstance(batch, BatchLayout):
        return batch.batch if batch.is_flat else None
    return batch


def _per_item(g: RigidTransform, x: Tensor, batch: Tensor | BatchLayout | None) -> tuple[Tensor, Tensor]:
    """``R`` and ``t`` broadcastable against ``x``: ``(B, 1.., d, d)`` / ``(B, 1.., d)``."""
    R, t = g.R.to(x.dtype), g.t.to(x.dtype)
    batch = _item_sets(batch)
    if batch is not None:
        R, t = R[batch], t[batch]
    if x.shape[0] != R.shape[0]:
        raise ValueError(f"x has leading dimension {x.shape[0]} but there are {R.shape[0]} group elements "
                         "(pass batch= for flat per-point tensors)")
    extra = x.ndim - 2
    R = R.reshape(R.shape[0], *([1] * extra), *R.shape[-2:])
    t = t.reshape(t.shape[0], *([1] * extra), t.shape[-1])
    return R, t


class Canonicalization(nn.Module):
    """``f(x) = h(x) . backbone(h(x)^{-1} . x)``: a backbone made invariant/equivariant by a canonicalizer.

    Parameters
    ----------
    canonicalizer : Canonicalizer
        a [`Canonicalizer`][] (e.g. [`PointCloudCanonicalizer`][],
        [`ImageCanonicalizer`][geomlin.frames.images.ImageCanonicalizer]).
    backbone : nn.Module
        any module; called as ``backbone(x_canonical, *extras, **kwargs)`` with the
        same keyword arguments (``mask=``, ``batch=``) as [`forward`][] (a batch vector comes
        planned, as a [`BatchLayout`][geomlin.batching.BatchLayout]).
    output : FeatureType or tuple of FeatureType
        the feature type of the backbone's output (``Scalars()``, ``Vectors(d)``, ``Positions(d)``,
        or another type the canonicalizer supports, e.g. ``Images`` / ``RegularFeatures``), or a tuple
        of them.
    inputs : FeatureType or Sequence[FeatureType]
        feature types of extra positional inputs (invariant ones or ``Vectors(d)``), canonicalized too.
    freeze_backbone : bool
        set ``requires_grad=False`` on the backbone (pretrained models); gradients
        still reach the canonicalizer through the canonical input.

    Notes
    -----
    ``forward(x, ..., return_elements=True)`` also returns ``g`` for ``prior_loss(g)``.

    Declared types: ``type_in`` is the canonicalizer's input type followed by the input types,
    ``type_out`` the output types, all under the canonicalizer's group
    ([`Canonicalizer.bind_type`][]); an output declared ``Scalars()`` reuses the backbone's declared
    ``Scalars`` when it has one. A canonicalizer without ``type_in`` leaves the wrapper undeclared.
    """

    def __init__(self, canonicalizer: Canonicalizer, backbone: nn.Module,
                 output: FeatureType | Sequence[FeatureType] = INVARIANT, *,
                 inputs: FeatureType | Sequence[FeatureType] = (), freeze_backbone: bool = False):
        super().__init__()
        if not isinstance(canonicalizer, Canonicalizer):
            raise TypeError(f"canonicalizer must be a geomlin Canonicalizer, got {type(canonicalizer).__name__}")
        if not callable(backbone):
            raise TypeError(f"backbone must be callable, got {type(backbone).__name__}")
        self.canonicalizer = canonicalizer
        self.backbone = backbone
        self.single_output = isinstance(output, FeatureType)
        outputs = feature_types(output, "output")
        if not outputs:
            raise ValueError("output must hold at least one feature type")
        likes = backbone_out_types(backbone, len(outputs))
        self.output_types = tuple(like if t == Scalars() and isinstance(like, Scalars) else canonicalizer.bind_type(t)
                                  for t, like in zip(outputs, likes))
        self.input_types = tuple(canonicalizer.bind_type(t) for t in feature_types(inputs, "inputs"))
        if freeze_backbone and isinstance(backbone, nn.Module):
            backbone.requires_grad_(False)
        if hasattr(canonicalizer, "type_in"):
            self.type_in = (canonicalizer.type_in, *self.input_types)
            self.type_out = self.output_types[0] if self.single_output else self.output_types

    def example_inputs(self, generator=None, dtype=torch.float64):
        """The canonicalizer's example input (without ``as_tensors``) and one extra per input type
        (``(*x.shape[:-1], *shape)``, ``(..., 1)`` for an invariant type without a shape)."""
        (x, *_), kwargs = self.canonicalizer.example_inputs(generator=generator, dtype=dtype)
        kwargs = {k: v for k, v in kwargs.items() if k != "as_tensors"}
        extras = [torch.randn(*x.shape[:-1], *(t.shape or (1,)), generator=generator, dtype=dtype)
                  for t in self.input_types]
        return (x, *extras), kwargs

    def forward(self, x: Tensor, *extras: Tensor, return_elements: bool = False, **kwargs):
        """Canonicalize, run the backbone, map the outputs back. ``kwargs``: ``mask=``/``batch=``."""
        if self.input_types and len(extras) != len(self.input_types):
            raise ValueError(f"expected {len(self.input_types)} extra inputs {self.input_types}, got {len(extras)}")
        if isinstance(kwargs.get("batch"), Tensor):  # planned once, for the canonicalizer and the backbone
            kwargs = {**kwargs, "batch": as_layout(batch=kwargs["batch"], num_items=x.shape[0])}
        g = self.canonicalizer(x, **kwargs)
        xc = self.canonicalizer.canonicalize(x, g, None, **kwargs)
        types_in = self.input_types or (Scalars(),) * len(extras)
        ec = [self.canonicalizer.canonicalize(e, g, t, **kwargs) for t, e in zip(types_in, extras)]
        out = self.backbone(xc, *ec, **kwargs)
        outs = (out,) if isinstance(out, Tensor) else tuple(out)
        if len(outs) != len(self.output_types):
            raise ValueError(f"backbone returned {len(outs)} outputs but the output types are {self.output_types}")
        ys = tuple(self.canonicalizer.invert(y, g, t, **kwargs) for t, y in zip(self.output_types, outs))
        y = ys[0] if self.single_output else ys
        return (y, g) if return_elements else y

    def prior_loss(self, g) -> Tensor:
        """The canonicalizer's prior loss of ``g`` (scalar)."""
        return self.canonicalizer.prior_loss(g)

    def identity_metric(self, g) -> Tensor:
        """The canonicalizer's identity metric of ``g`` (scalar)."""
        return self.canonicalizer.identity_metric(g)
