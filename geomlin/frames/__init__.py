"""Frames and canonicalization: make any backbone exactly invariant or equivariant.

* :func:`pca_frames` -- PCA frames for O(d)/SO(d)/E(d)/SE(d) with degeneracy handling;
* :class:`FrameAveraging` -- average a backbone over its frame (Puny et al. 2022).
"""

from geomlin.frames.averaging import FrameAveraging
from geomlin.frames.pca import DegenerateFrameError, FrameGroup, PCAFrames, as_frame_group, pca_frames

__all__ = [
           "DegenerateFrameError",
           "FrameAveraging",
           "FrameGroup",
           "PCAFrames",
           "as_frame_group",
           "pca_frames",
]
