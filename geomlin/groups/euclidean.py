"""Euclidean groups E(d) / SE(d) for point clouds: rigid transforms ``x -> R x + t``.

E(d) is not a linear group on R^d, so it is not a [`Group`][]; it is a
sampler with the same ``sample(n, generator, dtype)`` signature that returns
[`RigidTransform`][] batches, understood by [`geomlin.testing`][].
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from geomlin.groups.base import _check_count, _check_sample_dtype, haar_orthogonal
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


class Euclidean:
    """E(d) (``reflections=True``) or SE(d) as a sampler of [`RigidTransform`][].

    ``sample(n)`` returns Haar-uniform rotations (with reflections for E(d)) and
    Gaussian translations with standard deviation ``translation_scale``.
    """

    def __init__(self, d: int = 3, reflections: bool = True, translation_scale: float = 1.0):
        self.d = check_positive_int(d, "d")
        if not isinstance(reflections, bool):
            raise TypeError(f"reflections must be a bool, got {type(reflections).__name__}")
        self.reflections = reflections
        self.translation_scale = check_float(translation_scale, "translation_scale", minimum=0.0)
        self.name = f"{'E' if reflections else 'SE'}({d})"

    def __repr__(self) -> str:
        return self.name

    def key(self) -> tuple:
        """Identity of the group (the translation scale only changes how it is sampled)."""
        return ("Euclidean", self.d, self.reflections)

    def __eq__(self, other) -> bool:
        return isinstance(other, Euclidean) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())

    def is_subgroup_of(self, other) -> bool:
        """SE(d) lies in E(d); each lies in itself."""
        return isinstance(other, Euclidean) and other.d == self.d and (other.reflections or not self.reflections)

    def sample(self, n: int = 1, generator=None, dtype=torch.float64) -> RigidTransform:
        """``n`` random rigid transforms: R ``(n, d, d)``, t ``(n, d)``."""
        n = _check_count(n)
        _check_sample_dtype(dtype)
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
