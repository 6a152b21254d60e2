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
* ``canonicalize(x, g, kind=..., **kw)``: ``g^{-1} . x``;
* ``invert(y, g, kind, **kw)``: ``g . y`` for ``kind`` in ``{"invariant", "vector",
  "position", "regular"}`` (those meaningful for the group);
* ``prior_loss(g)``: the canonicalization prior, distance of ``g`` to the identity
  (``|R - I|_F^2`` for continuous groups, cross-entropy to the identity element for
  discrete ones); add ``beta * prior_loss`` to the task loss so the canonical pose stays
  close to the (upright) training distribution;
* ``identity_metric(g)``: fraction of predictions at (or near) the identity.

Point clouds use :class:`PointCloudCanonicalizer` (vector neurons, SO(d)/O(d)/SE(d)/E(d));
images use :class:`geomlin.frames.images.ImageCanonicalizer` (C4/D4).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from geomlin.frames.pca import _check_positions, as_frame_group, point_moments
from geomlin.frames.vector_neurons import VNPointNet
from geomlin.groups import RigidTransform

#: Kinds accepted by ``invert`` (each canonicalizer supports those meaningful for its group).
INVERT_KINDS = ("invariant", "vector", "position", "regular")
#: Default angle (radians) within which :meth:`identity_metric` counts a rotation as the identity.
IDENTITY_ANGLE = math.radians(10.0)
#: Lower bound on vector norms in Gram-Schmidt so that a vanishing vector gives a finite frame.
GRAM_SCHMIDT_EPS = 1e-12
#: Sharpness of the soft orientation sign used for straight-through gradients (O(3)).
ORIENTATION_SHARPNESS = 4.0


def gram_schmidt_rotation(v1: Tensor, v2: Tensor, v3: Tensor | None = None) -> Tensor:
    """Orthogonal frame from predicted vectors (Kaba et al. 2023, Sec. 4.2).

    ``e1 = v1/|v1|``, ``e2 = (v2 - <v2,e1> e1) / |.|``, ``e3 = s (e1 x e2)`` with
    ``s = +1`` (SO(3), when ``v3`` is None) or ``s = sign <v3, e1 x e2>`` (O(3)).
    The sign uses a straight-through estimator: the value is exactly +-1, the gradient
    that of ``tanh(ORIENTATION_SHARPNESS <v3/|v3|, e1 x e2>)``.

    Parameters
    ----------
    v1, v2, v3: ``(..., 3)`` vectors.

    Returns
    -------
    ``(..., 3, 3)`` with columns ``e1, e2, e3``; ``R(Q v) = Q R(v)`` for ``Q`` in SO(3)
    (``v3`` None) or O(3) (``v3`` given).
    """
    if v1.shape[-1] != 3 or v2.shape != v1.shape or (v3 is not None and v3.shape != v1.shape):
        raise ValueError(f"gram_schmidt_rotation needs matching (..., 3) vectors, got "
                         f"{tuple(v1.shape)}, {tuple(v2.shape)}, {None if v3 is None else tuple(v3.shape)}")
    e1 = v1 / v1.norm(dim=-1, keepdim=True).clamp_min(GRAM_SCHMIDT_EPS)
    u2 = v2 - (v2 * e1).sum(-1, keepdim=True) * e1
    e2 = u2 / u2.norm(dim=-1, keepdim=True).clamp_min(GRAM_SCHMIDT_EPS)
    n = torch.linalg.cross(e1, e2, dim=-1)
    if v3 is not None:
        a = (v3 * n).sum(-1, keepdim=True)
        hard = torch.where(a >= 0, torch.ones_like(a), -torch.ones_like(a))
        soft = torch.tanh(ORIENTATION_SHARPNESS * a / v3.norm(dim=-1, keepdim=True).clamp_min(GRAM_SCHMIDT_EPS))
        n = n * (hard + (soft - soft.detach()))
    return torch.stack([e1, e2, n], dim=-1)


def gram_schmidt_orthogonal(vectors: Tensor, special: bool) -> Tensor:
    """Orthogonal ``(..., d, d)`` from ``d`` vectors given as rows of ``(..., d, d)``.

    Gram-Schmidt via QR, made unique by a positive diagonal of ``r`` (so ``Q V -> Q q``
    for every orthogonal ``Q``); with ``special`` the last column is multiplied by
    ``det q`` so that ``det = +1`` (equivariant for ``Q`` in SO(d)). Used for ``d != 3``.
    """
    q, r = torch.linalg.qr(vectors.transpose(-1, -2))
    signs = torch.sign(torch.diagonal(r, dim1=-2, dim2=-1))
    signs = torch.where(signs == 0, torch.ones_like(signs), signs)
    q = q * signs[..., None, :]
    if special:
        det = torch.linalg.det(q)
        q = torch.cat([q[..., :-1], q[..., -1:] * det[..., None, None]], dim=-1)
    return q


class Canonicalizer(nn.Module, ABC):
    """Abstract base of the canonicalization contract (see the module docstring).

    Subclasses implement ``forward``, ``canonicalize``, ``invert``, ``prior_loss`` and
    ``identity_metric``; all take and return explicit tensors or group elements.
    """

    @abstractmethod
    def forward(self, x: Tensor, **kwargs):
        """Predicted group elements of the batch ``x``."""

    @abstractmethod
    def canonicalize(self, x: Tensor, g, kind: str | None = None, **kwargs) -> Tensor:
        """``g^{-1} . x``."""

    @abstractmethod
    def invert(self, y: Tensor, g, kind: str, **kwargs) -> Tensor:
        """``g . y`` for an output of the given kind."""

    @abstractmethod
    def prior_loss(self, g) -> Tensor:
        """Scalar distance of ``g`` to the identity."""

    @abstractmethod
    def identity_metric(self, g) -> Tensor:
        """Scalar fraction of ``g`` at the identity."""


class PointCloudCanonicalizer(Canonicalizer):
    """Vector-neuron canonicalizer for point clouds: ``(B, N, 3)`` -> rigid motions.

    A :class:`~geomlin.frames.vector_neurons.VNPointNet` predicts 2 vectors (SO(3)/SE(3))
    or 3 (O(3)/E(3)) from the centred cloud; :func:`gram_schmidt_rotation` turns them
    into ``R``. For E(3)/SE(3) the translation is the centroid, for O(3)/SO(3) zero.
    Other dimensions ``d`` use ``d`` vectors and QR (:func:`gram_schmidt_orthogonal`).

    Parameters
    ----------
    group: ``"SO3" | "O3" | "SE3" | "E3"`` (or the ``(n)`` forms, geomlin groups, samplers).
    hidden, layers: width and depth of the vector-neuron network.

    Group elements are :class:`~geomlin.groups.RigidTransform` with ``R (B, d, d)``, ``t (B, d)``.
    Inputs: padded ``(B, N, d)`` with optional ``mask (B, N)``, or flat ``(N_total, d)``
    with ``batch (N_total,)``.
    """

    def __init__(self, group="SO3", hidden: int = 16, layers: int = 2):
        super().__init__()
        self.frame_group = as_frame_group(group)
        d = self.frame_group.d
        self.num_vectors = (2 if self.frame_group.special else 3) if d == 3 else d
        self.net = VNPointNet(self.num_vectors, hidden=hidden, layers=layers)

    def forward(self, pos: Tensor, mask: Tensor | None = None, batch: Tensor | None = None,
                num_graphs: int | None = None) -> RigidTransform:
        """Predicted elements ``g = (R (B, d, d), t (B, d))``; ``g(Q x + s) = (Q, s) g(x)``."""
        fg = self.frame_group
        _check_positions(pos, fg.d, mask, batch)
        centroid, _, _, _ = point_moments(pos, fg.translation, mask, batch, num_graphs)
        x = pos - (centroid[batch] if batch is not None else centroid[:, None])
        v = self.net(x, mask=mask, batch=batch, num_graphs=centroid.shape[0])  # (B, k, d)
        if fg.d == 3:
            R = gram_schmidt_rotation(v[:, 0], v[:, 1], None if fg.special else v[:, 2])
        else:
            R = gram_schmidt_orthogonal(v, fg.special)
        return RigidTransform(R, centroid)

    def canonicalize(self, x: Tensor, g: RigidTransform, kind: str | None = "position",
                     mask: Tensor | None = None, batch: Tensor | None = None, **_) -> Tensor:
        """``g^{-1} . x``: ``R^T (x - t)`` (position) or ``R^T x`` (vector); invariants unchanged.

        ``x``: ``(B, ..., d)`` or flat ``(N_total, ..., d)`` with ``batch``; masked entries are zeroed.
        """
        kind = kind or "position"
        if kind == "invariant":
            return x
        if kind not in ("position", "vector"):
            raise ValueError(f"point clouds canonicalize 'position', 'vector' or 'invariant' inputs, got {kind!r}")
        R, t = _per_item(g, x, batch)
        if kind == "position":
            x = x - t
        out = (R.transpose(-1, -2) @ x.unsqueeze(-1)).squeeze(-1)
        if mask is not None and out.ndim >= 3 and out.shape[:2] == mask.shape:
            out = out * mask.reshape(*mask.shape, *([1] * (out.ndim - 2))).to(out.dtype)
        return out

    def invert(self, y: Tensor, g: RigidTransform, kind: str, batch: Tensor | None = None, **_) -> Tensor:
        """``g . y``: ``y`` (invariant), ``R y`` (vector), ``R y + t`` (position).

        ``y``: ``(B, ..., d)`` per cloud, or flat per point ``(N_total, ..., d)`` with ``batch``.
        """
        if kind == "invariant":
            return y
        if kind not in ("position", "vector"):
            raise ValueError(f"point-cloud outputs are 'invariant', 'vector' or 'position', got {kind!r} "
                             "('regular' needs a finite group)")
        if batch is not None and y.shape[0] != batch.shape[0]:
            batch = None  # per-cloud output of a flat batch
        R, t = _per_item(g, y, batch)
        out = (R @ y.unsqueeze(-1)).squeeze(-1)
        return out + t if kind == "position" else out

    def prior_loss(self, g: RigidTransform) -> Tensor:
        """Canonicalization prior ``mean_b |R_b - I|_F^2`` (Mondal et al. 2023, Sec. 3.2); scalar."""
        eye = torch.eye(g.R.shape[-1], dtype=g.R.dtype, device=g.R.device)
        return ((g.R - eye) ** 2).sum((-1, -2)).mean()

    def identity_metric(self, g: RigidTransform, angle: float = IDENTITY_ANGLE) -> Tensor:
        """Fraction of ``R`` within ``angle`` radians of the identity (``|R - I|_F <= 2 sqrt2 sin(angle/2)``)."""
        eye = torch.eye(g.R.shape[-1], dtype=g.R.dtype, device=g.R.device)
        dist = (g.R - eye).flatten(-2).norm(dim=-1)
        return (dist <= 2 * math.sqrt(2) * math.sin(angle / 2)).to(g.R.dtype).mean()


def _per_item(g: RigidTransform, x: Tensor, batch: Tensor | None) -> tuple[Tensor, Tensor]:
    """``R`` and ``t`` broadcastable against ``x``: ``(B, 1.., d, d)`` / ``(B, 1.., d)``."""
    R, t = g.R.to(x.dtype), g.t.to(x.dtype)
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
    canonicalizer: a :class:`Canonicalizer` (e.g. :class:`PointCloudCanonicalizer`,
        :class:`~geomlin.frames.images.ImageCanonicalizer`).
    backbone: any module; called as ``backbone(x_canonical, *extras, **kwargs)`` with the
        same keyword arguments (``mask=``, ``batch=``) as :meth:`forward`.
    output: kind of the backbone's output (``"invariant" | "vector" | "position" | "regular"``
        or another kind the canonicalizer supports, e.g. ``"image"``), or a tuple of kinds.
    inputs: kinds of extra positional inputs (``"invariant"`` or ``"vector"``), canonicalized too.
    freeze_backbone: set ``requires_grad=False`` on the backbone (pretrained models); gradients
        still reach the canonicalizer through the canonical input.

    ``forward(x, ..., return_elements=True)`` also returns ``g`` for ``prior_loss(g)``.
    """

    def __init__(self, canonicalizer: Canonicalizer, backbone: nn.Module, output="invariant", *,
                 inputs: Sequence[str] | str = (), freeze_backbone: bool = False):
        super().__init__()
        if not isinstance(canonicalizer, Canonicalizer):
            raise TypeError(f"canonicalizer must be a geomlin Canonicalizer, got {type(canonicalizer).__name__}")
        if not callable(backbone):
            raise TypeError(f"backbone must be callable, got {type(backbone).__name__}")
        self.canonicalizer = canonicalizer
        self.backbone = backbone
        self.single_output = isinstance(output, str)
        self.output_kinds = (output,) if isinstance(output, str) else tuple(output)
        self.input_kinds = (inputs,) if isinstance(inputs, str) else tuple(inputs)
        if freeze_backbone and isinstance(backbone, nn.Module):
            backbone.requires_grad_(False)

    def forward(self, x: Tensor, *extras: Tensor, return_elements: bool = False, **kwargs):
        """Canonicalize, run the backbone, map the outputs back. ``kwargs``: ``mask=``/``batch=``."""
        if self.input_kinds and len(extras) != len(self.input_kinds):
            raise ValueError(f"expected {len(self.input_kinds)} extra inputs {self.input_kinds}, got {len(extras)}")
        g = self.canonicalizer(x, **kwargs)
        xc = self.canonicalizer.canonicalize(x, g, None, **kwargs)
        kinds_in = self.input_kinds or ("invariant",) * len(extras)
        ec = [self.canonicalizer.canonicalize(e, g, k, **kwargs) for k, e in zip(kinds_in, extras)]
        out = self.backbone(xc, *ec, **kwargs)
        outs = (out,) if isinstance(out, Tensor) else tuple(out)
        if len(outs) != len(self.output_kinds):
            raise ValueError(f"backbone returned {len(outs)} outputs but output kinds are {self.output_kinds}")
        ys = tuple(self.canonicalizer.invert(y, g, k, **kwargs) for k, y in zip(self.output_kinds, outs))
        y = ys[0] if self.single_output else ys
        return (y, g) if return_elements else y

    def prior_loss(self, g) -> Tensor:
        """The canonicalizer's prior loss of ``g`` (scalar)."""
        return self.canonicalizer.prior_loss(g)

    def identity_metric(self, g) -> Tensor:
        """The canonicalizer's identity metric of ``g`` (scalar)."""
        return self.canonicalizer.identity_metric(g)
