"""Frames and canonicalization: make any backbone exactly invariant or equivariant.

* [`pca_frames`][] -- PCA frames for O(d)/SO(d)/E(d)/SE(d) with degeneracy handling
  (``on_degenerate="moments"``: axes from higher moments, [`moment_axes`][]) and one-element
  frames signed by third moments (``signs="skewness"``);
* [`FrameAveraging`][] -- average a backbone over its frame (Puny et al. 2022);
* [`Canonicalization`][] -- run a backbone once in a learned canonical pose
  (Kaba et al. 2023) with the canonicalization prior (Mondal et al. 2023), using
  [`PointCloudCanonicalizer`][] (vector neurons; Gram-Schmidt or Procrustes) or
  [`ImageCanonicalizer`][] (C4/D4, on the group convolutions of [`geomlin.frames.group_conv`][]).

Inputs and outputs are described by feature types ([`geomlin.reps`][]): ``FrameAveraging(backbone,
"E3", output=Vectors(3))`` rotates the backbone's vectors back.
"""

from geomlin.frames.averaging import FrameAveraging
from geomlin.frames.canonicalization import (
    Canonicalization,
    Canonicalizer,
    PointCloudCanonicalizer,
    gram_schmidt_orthogonal,
    gram_schmidt_rotation,
)
from geomlin.frames.group_conv import GroupConv2d, LiftingConv2d
from geomlin.frames.images import DiscreteElements, ImageCanonicalizer
from geomlin.frames.moments import moment_axes
from geomlin.frames.pca import DegenerateFrameError, PCAFrames, frame_group, pca_frames
from geomlin.frames.vector_neurons import VNLeakyReLU, VNLinear, VNPointNet

__all__ = [
    "Canonicalization",
    "Canonicalizer",
    "DegenerateFrameError",
    "DiscreteElements",
    "FrameAveraging",
    "GroupConv2d",
    "ImageCanonicalizer",
    "LiftingConv2d",
    "PCAFrames",
    "PointCloudCanonicalizer",
    "VNLeakyReLU",
    "VNLinear",
    "VNPointNet",
    "frame_group",
    "gram_schmidt_orthogonal",
    "gram_schmidt_rotation",
    "moment_axes",
    "pca_frames",
]
