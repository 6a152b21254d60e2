"""Euclidean groups E(d) / SE(d) for point clouds: rigid transforms ``x -> R x + t``.

E(d) is not a linear group on R^d, so it is not a [`Group`][]; it follows the same
[`SymmetryGroup`][] protocol: ``sample(n, generator, dtype)`` returns [`RigidTransform`][]
batches (understood by [`geomlin.testing`][]), and its generators act on homogeneous coordinates
``(x, 1)`` in ``R^(d+1)``, where ``x -> R x + t`` is the matrix ``[[R, t], [0, 1]]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from geomlin.groups.base import SymmetryGroup, check_sample_count, check_sample_dtype, haar_orthogonal
from geomlin.validation import check_float, check_positive_int, check_tensor


@dataclass(frozen=True)
class RigidTransform:
    """A (batch of) rigid motion(s) ``x -> R x + t``.

    Attributes
    ----------
    R : Tensor of shape (..., d, d)
        orthogonal matrices (det +-1).
    t : Tensor of shape (..., d)
        translations.
    """

    R: Tensor
    t: Tensor

    def __post_init__(self):
        check_tensor(self.R, "RigidTransform R", min_ndim=2)
        check_tensor(self.t, "RigidTransform t", min_ndim=1)
        if self.R.shape[-1] != self.R.shape[-2] or self.t.shape[-1] != self.R.shape[-1]:
            raise ValueError(f"RigidTransform needs R (..., d, d) and t (..., d), got "
                             f"{tuple(self.R.shape)} and {tuple(self.t.shape)}")

    def __len__(self) -> int:
        return self.R.shape[0]

    def __getitem__(self, i) -> RigidTransform:
        return RigidTransform(self.R[i], self.t[i])

    def to(self, *args, **kwargs) -> RigidTransform:
        return RigidTransform(self.R.to(*args, **kwargs), self.t.to(*args, **kwargs))

    def inverse(self) -> RigidTransform:
        Rt = self.R.transpose(-1, -2)
        return RigidTransform(Rt, -(Rt @ self.t[..., None])[..., 0])


def _apply_matrix(R: Tensor, x: Tensor) -> Tensor:
    """``R x`` on the last axis of ``x``; a batched ``R (B, d, d)`` pairs with ``x (B, ..., d)``."""
    if not isinstance(R, Tensor):
        raise TypeError(f"g must be a RigidTransform, got R of type {type(R).__name__}")
    check_tensor(x, "x", shape=(..., R.shape[-1]), what=f"points or vectors of R^{R.shape[-1]}")
    if R.ndim == 2:
        return x @ R.transpose(-1, -2).to(x.dtype)
    lead = R.shape[:-2]
    if x.shape[: len(lead)] != lead:
        raise ValueError(f"batched R {tuple(R.shape)} does not match x {tuple(x.shape)}")
    flat = x.reshape(*lead, -1, x.shape[-1])
    out = flat @ R.transpose(-1, -2).to(x.dtype)
    return out.reshape(x.shape)


def transform_positions(g: RigidTransform, pos: Tensor) -> Tensor:
    """Positions ``(..., d)`` -> ``R pos + t`` (rotate, reflect and translate)."""
    _check_transform(g)
    out = _apply_matrix(g.R, pos)
    t = g.t.to(pos.dtype)
    if t.ndim == 1:
        return out + t
    return out + t.reshape(*t.shape[:-1], *([1] * (pos.ndim - t.ndim)), t.shape[-1])


def transform_vectors(g: RigidTransform, vec: Tensor) -> Tensor:
    """Vectors ``(..., d)`` (velocities, forces, normals) -> ``R vec``; no translation."""
    _check_transform(g)
    return _apply_matrix(g.R, vec)


def _check_transform(g) -> None:
    if not isinstance(g, RigidTransform):
        raise TypeError(f"g must be a RigidTransform (from E3().sample(...)), got {type(g).__name__}")


def transform_scalars(g: RigidTransform, x: Tensor) -> Tensor:
    """Scalars are invariant: returns ``x`` unchanged (any shape)."""
    return x


class Euclidean(SymmetryGroup):
    """E(d) (``reflections=True``) or SE(d), whose elements are [`RigidTransform`][] batches.

    ``sample(n)`` returns Haar-uniform rotations (with reflections for E(d)) and
    Gaussian translations with standard deviation ``translation_scale`` (a sampling option: it is
    not part of the group's identity).

    Generators, on homogeneous coordinates ``(x, 1)``: ``lie_algebra`` holds the ``d(d-1)/2``
    rotations ``E_ij - E_ji`` of the upper-left block and the ``d`` translations ``E_id``;
    ``discrete_generators`` the reflection of the first axis (E(d) only).
    """

    def __init__(self, d: int = 3, reflections: bool = True, translation_scale: float = 1.0):
        self.d = check_positive_int(d, "d")
        if not isinstance(reflections, bool):
            raise TypeError(f"reflections must be a bool, got {type(reflections).__name__}")
        self.reflections = reflections
        self.translation_scale = check_float(translation_scale, "translation_scale", minimum=0.0)
        self.name = f"{'E' if reflections else 'SE'}({d})"

    def key(self) -> tuple:
        """Identity of the group (the translation scale only changes how it is sampled)."""
        return ("Euclidean", self.d, self.reflections)

    @property
    def lie_algebra(self) -> Tensor:
        """``(d(d+1)/2, d+1, d+1)`` float64: rotations, then translations, on homogeneous coordinates."""
        d = self.d
        gens = []
        for i in range(d):
            for j in range(i + 1, d):
                a = torch.zeros(d + 1, d + 1, dtype=torch.float64)
                a[i, j], a[j, i] = -1.0, 1.0
                gens.append(a)
        for i in range(d):
            a = torch.zeros(d + 1, d + 1, dtype=torch.float64)
            a[i, d] = 1.0
            gens.append(a)
        return torch.stack(gens)

    @property
    def discrete_generators(self) -> Tensor:
        """``(1, d+1, d+1)`` float64 reflection of the first axis for E(d); ``(0, d+1, d+1)`` for SE(d)."""
        if not self.reflections:
            return torch.zeros(0, self.d + 1, self.d + 1, dtype=torch.float64)
        flip = torch.eye(self.d + 1, dtype=torch.float64)
        flip[0, 0] = -1.0
        return flip[None]

    def is_subgroup_of(self, other) -> bool:
        """SE(d) lies in E(d); each lies in itself."""
        return isinstance(other, Euclidean) and other.d == self.d and (other.reflections or not self.reflections)

    def sample(self, n: int = 1, generator=None, dtype=torch.float64) -> RigidTransform:
        """``n`` random rigid transforms: R ``(n, d, d)``, t ``(n, d)``."""
        n = check_sample_count(n)
        check_sample_dtype(dtype)
        R = haar_orthogonal(n, self.d, generator, special=not self.reflections)
        t = torch.randn(n, self.d, generator=generator, dtype=torch.float64) * self.translation_scale
        return RigidTransform(R.to(dtype), t.to(dtype))


def E3(translation_scale: float = 1.0) -> Euclidean:
    """E(3): rotations, reflections and translations of 3D space."""
    return Euclidean(3, reflections=True, translation_scale=translation_scale)


def SE3(translation_scale: float = 1.0) -> Euclidean:
    """SE(3): proper rotations and translations of 3D space."""
    return Euclidean(3, reflections=False, translation_scale=translation_scale)


def random_rigid(n: int, d: int = 3, reflections: bool = True, generator=None,
                 dtype=torch.float64) -> RigidTransform:
    """``n`` random E(d) (or SE(d)) transforms; see [`Euclidean`][]."""
    return Euclidean(d, reflections).sample(n, generator, dtype)
