"""Frames and canonicalization: make any backbone exactly invariant or equivariant.

* [`pca_frames`][] -- PCA frames for O(d)/SO(d)/E(d)/SE(d) with degeneracy handling
  (``on_degenerate="moments"``: axes from higher moments, [`moment_axes`][]) and one-element
  frames signed by third moments (``signs="skewness"``);
* [`FrameAveraging`][] -- average a backbone over its frame (Puny et al. 2022);
* [`Canonicalization`][] -- run a backbone once in a learned canonical pose
  (Kaba et al. 2023) with the canonicalization prior (Mondal et al. 2023), using
  [`PointCloudCanonicalizer`][] (vector neurons; Gram-Schmidt or Procrustes) or
  [`ImageCanonicalizer`][] (C4/D4).
"""

from geomlin.frames.averaging import FrameAveraging
from geomlin.frames.canonicalization import (
    Canonicalization,
    Canonicalizer,
    PointCloudCanonicalizer,
    gram_schmidt_orthogonal,
    gram_schmidt_rotation,
)
from geomlin.frames.images import (
    DiscreteElements,
    ImageCanonicalizer,
    act_on_image,
    image_action,
    regular_action,
)
from geomlin.frames.pca import (
    DegenerateFrameError,
    FrameGroup,
    PCAFrames,
    as_frame_group,
    moment_axes,
    pca_frames,
)
from geomlin.frames.vector_neurons import VNLeakyReLU, VNLinear, VNPointNet

__all__ = [
    "Canonicalization",
    "Canonicalizer",
    "DegenerateFrameError",
    "DiscreteElements",
    "FrameAveraging",
    "FrameGroup",
    "ImageCanonicalizer",
    "PCAFrames",
    "PointCloudCanonicalizer",
    "VNLeakyReLU",
    "VNLinear",
    "VNPointNet",
    "act_on_image",
    "as_frame_group",
    "gram_schmidt_orthogonal",
    "gram_schmidt_rotation",
    "image_action",
    "moment_axes",
    "pca_frames",
    "regular_action",
]
