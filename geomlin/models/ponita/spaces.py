"""The two spaces PONITA runs on: points of R^3 (``mode="points"``) and the fiber bundle R^3 x S^2 (``"bundle"``).

Each space lifts the inputs onto its features, builds the convolutions' kernels from the pair
attributes of [`geomlin.models.ponita.attributes`][], reads the outputs back as scalars and
vectors, and names the group the model is exactly equivariant to.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from geomlin.batching import scatter_sum
from geomlin.models.ponita.attributes import (
    NUM_COMPLETE_ATTRS,
    NUM_FIBER_ATTRS,
    NUM_POINT_ATTRS,
    NUM_SPATIAL_ATTRS,
    complete_attributes,
    fiber_attributes,
    point_attributes,
    safe_norm,
    spatial_attributes,
    sphere_to_scalar,
    sphere_to_vector,
    vector_to_sphere,
)
from geomlin.models.ponita.grid import grid_symmetry_group, orientation_grid
from geomlin.models.ponita.layers import FiberBundleConv, KernelBasis, PointConv


class PointSpace(nn.Module):
    """PONITA's point-cloud mode: features on the points of R^3, kernels of ``|x|`` (exactly E(3) invariant).

    Vector inputs enter as their norms ``|v|``; vector outputs are ``sum_j w_ij (p_j - p_i)`` with
    invariant weights ``w_ij`` (exactly equivariant). One of the two spaces [`Ponita`][] runs on
    ([`MODES`][]); both answer the same calls (lift, kernels, readout, symmetry group).
    """

    def __init__(self, in_vector_channels: int, out_vector_channels: int, hidden: int, num_basis: int, degree: int):
        super().__init__()
        self.basis = KernelBasis(NUM_POINT_ATTRS, hidden, num_basis, degree)
        if out_vector_channels:
            self.vector_basis = KernelBasis(NUM_POINT_ATTRS, hidden, num_basis, degree)
            self.vector_kernel = nn.Linear(num_basis, out_vector_channels, bias=False)

    grid = None

    @staticmethod
    def conv(hidden: int, num_basis: int) -> nn.Module:
        """The convolution of one block."""
        return PointConv(hidden, num_basis)

    @staticmethod
    def num_inputs(in_channels: int, in_vector_channels: int) -> int:
        """Input features per point: the scalars and one norm per vector channel."""
        return in_channels + in_vector_channels

    def lift(self, x: Tensor | None, vec: Tensor | None, dtype: torch.dtype) -> Tensor:
        """``x (N, C_in)``, ``vec (N, V_in, 3)`` -> ``(N, C_in + V_in)``: the scalars and ``|v|``."""
        feats = [] if x is None else [x.to(dtype)]
        if vec is not None:
            feats.append(safe_norm(vec.to(dtype)))
        return torch.cat(feats, dim=-1)

    def kernels(self, rel: Tensor, window: Tensor) -> tuple:
        """The convolutions' arguments after ``(h, edge_index)``: the windowed basis of ``|x|`` ``(E, K)``."""
        return (self.basis(point_attributes(rel)) * window,)

    def readout(self, scal: Tensor, vecs: Tensor, rel: Tensor, window: Tensor, edge_index: Tensor, num_nodes: int):
        """Per-point ``(scalars (N, C_out), vectors (N, V_out, 3))`` (None for zero channels)."""
        scalars = scal if scal.shape[-1] else None
        if not vecs.shape[-1]:
            return scalars, None
        src, dst = edge_index
        w = self.vector_kernel(self.vector_basis(point_attributes(rel)) * window) * vecs[src]  # (E, V)
        return scalars, scatter_sum(w[:, :, None] * rel[:, None, :], dst, num_nodes)

    def symmetry_group(self):
        """E(3): the model is exactly invariant / equivariant."""
        from geomlin.groups import E3

        return E3()

    def extra_repr(self) -> str:
        return ""


class BundleSpace(nn.Module):
    """PONITA's fiber-bundle mode: features on R^3 x S^2, a function on a grid of ``num_ori`` orientations
    per point ([`geomlin.models.ponita.grid`][]), separable (spatial, then spherical) kernels or, with
    ``complete``, one kernel of the five complete pair attributes.

    Vector inputs are lifted to the sphere as ``v . o``; scalars are read out as the mean over the
    sphere, vectors as ``sum_k f(o_k) o_k / O``. Exactly equivariant to the rotations (and, without
    ``complete``, reflections) that permute the grid.
    """

    def __init__(self, in_vector_channels: int, out_vector_channels: int, hidden: int, num_basis: int, degree: int,
                 num_ori: int = 16, grid: str = "fibonacci", grid_seed: int = 0, complete: bool = False):
        super().__init__()
        self.complete = complete
        self.grid_method = grid
        self.register_buffer("grid", orientation_grid(num_ori, grid, grid_seed), persistent=False)
        self.basis = KernelBasis(NUM_COMPLETE_ATTRS if complete else NUM_SPATIAL_ATTRS, hidden, num_basis, degree)
        self.fiber_basis = None if complete else KernelBasis(NUM_FIBER_ATTRS, hidden, num_basis, degree)

    def conv(self, hidden: int, num_basis: int) -> nn.Module:
        """The convolution of one block."""
        return FiberBundleConv(hidden, num_basis, self.complete)

    @staticmethod
    def num_inputs(in_channels: int, in_vector_channels: int) -> int:
        """Input features per (point, orientation): the scalars and ``v . o`` per vector channel."""
        return in_channels + in_vector_channels

    def lift(self, x: Tensor | None, vec: Tensor | None, dtype: torch.dtype) -> Tensor:
        """``x (N, C_in)``, ``vec (N, V_in, 3)`` -> ``(N, O, C_in + V_in)``: scalars copied to every
        orientation, vectors as ``v . o``."""
        grid = self.grid.to(dtype)
        feats = [] if x is None else [x.to(dtype)[:, None, :].expand(-1, grid.shape[0], -1)]
        if vec is not None:
            feats.append(vector_to_sphere(vec.to(dtype), grid))
        return torch.cat(feats, dim=-1)

    def kernels(self, rel: Tensor, window: Tensor) -> tuple:
        """The convolutions' arguments after ``(h, edge_index)``: the windowed spatial basis ``(E, O, K)``
        and the spherical one ``(O, O, K)``, or the complete basis ``(E, O, O, K)`` and None."""
        grid = self.grid.to(rel.dtype)
        if self.complete:
            return self.basis(complete_attributes(rel, grid)) * window[:, :, None, None], None
        return self.basis(spatial_attributes(rel, grid)) * window[:, :, None], self.fiber_basis(fiber_attributes(grid))

    def readout(self, scal: Tensor, vecs: Tensor, rel: Tensor, window: Tensor, edge_index: Tensor, num_nodes: int):
        """Per-point ``(scalars (N, C_out), vectors (N, V_out, 3))`` from ``(N, O, ...)`` (None for zero channels)."""
        scalars = sphere_to_scalar(scal) if scal.shape[-1] else None
        vectors = sphere_to_vector(vecs, self.grid.to(vecs.dtype)) if vecs.shape[-1] else None
        return scalars, vectors

    def symmetry_group(self):
        """The rotations (and, without ``complete``, the reflections) that permute the grid."""
        return grid_symmetry_group(self.grid, proper=self.complete)

    def extra_repr(self) -> str:
        return f"num_ori={self.grid.shape[0]}, grid={self.grid_method!r}"


#: The spaces of [`Ponita`][]: its ``mode`` names one.
MODES = {"points": PointSpace, "bundle": BundleSpace}
