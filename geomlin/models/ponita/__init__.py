"""PONITA: fast, expressive SE(3) weight sharing in position-orientation space
(Bekkers, Vadgama, Hesselink, van der Linden, Romero, ICLR 2024, "Fast, Expressive SE(n)
Equivariant Networks through Weight-Sharing in Position-Orientation Space").

Two modes, one architecture (embedding -> ConvNeXt blocks -> readouts):

``mode="points"`` (the paper's point-cloud mode, ``num_ori = 0``)
    Features live on the points ``p_i`` of R^3; a message from ``j`` to ``i`` is weighted by a
    kernel of the invariant ``|x|``, ``x = p_j - p_i``. Exactly E(3) invariant (hence SE(3));
    vector outputs are ``sum_j w_ij (p_j - p_i)`` with invariant weights, exactly equivariant.
``mode="bundle"`` (the fiber bundle R^3 x S^2)
    Every point carries a function on a grid of orientations ``o_1 .. o_O`` (see
    [`geomlin.models.ponita.grid`][]). Pair attributes of ``(p_i, o_i)`` and
    ``(p_j, o_j)``:

    * separable (default; the reference's fast path): the spatial step at a fixed orientation
      ``o`` uses ``(o.x, |x - (o.x) o|)``, then the spherical step mixes orientations with a
      kernel of ``o_i.o_j`` (Eq. 13-14 of the paper);
    * ``complete=True``: one non-separable kernel of ``(o_i.x, |x - (o_i.x) o_i|, o_i.o_j, x.o_j,
      (o_i x x).o_j)``. The orbit space of such pairs under SE(3) is four-dimensional, and the
      first three attributes do not separate it: with ``o_i = e_z`` and ``x = e_x`` the partners
      ``o_j = e_x`` and ``o_j = e_y`` share ``(0, 1, 0)`` yet no rotation maps one pair onto the
      other (``x.o_j`` is 1 vs 0); ``o_j = (e_x +- e_y)/sqrt 2`` share all four dot products and
      are mirror images, told apart only by the sign of the triple product (tested).

    Scalars are read out as the mean over the sphere, vectors as ``sum_k f(o_k) o_k / O``. The
    model is equivariant up to the grid: *exactly* equivariant to the rotations that permute the
    grid (the 60 icosahedral rotations for the ``"icosahedral"`` grids), approximately to the
    others, with an error that falls as ``num_ori`` grows (tested).

Kernels: polynomial features of the attributes (degrees ``1..degree``) -> MLP -> a basis,
windowed by a smooth polynomial cutoff ([`geomlin.radial.polynomial_cutoff`][]) when ``cutoff`` is
set; per-channel (depthwise) convolutions with ``torch.index_add_`` (no torch-scatter; sums in
float32 under autocast), ConvNeXt blocks (conv -> LayerNorm -> MLP -> residual), readouts after
every block (averaged). Inputs are flat PyG batches (``x (N, C)``, ``pos (N, 3)``, ``batch``) and
their graph ``edge_index`` (all pairs within a graph, or within ``cutoff``, self-loops included:
[`graph_edges`][geomlin.models.graphs.graph_edges]), padded tensors with a mask (all pairs, those
with a padded node weighted zero), or PyG ``Data`` / ``Batch`` objects
([`geomlin.models.inputs`][]).

Modules, one idea each: [`attributes`][geomlin.models.ponita.attributes] (pure functions of the
pairs), [`grid`][geomlin.models.ponita.grid] (orientation grids and their symmetries),
[`layers`][geomlin.models.ponita.layers] (kernel basis, convolutions, ConvNeXt block),
[`spaces`][geomlin.models.ponita.spaces] (points and bundle), [`model`][geomlin.models.ponita.model]
([`Ponita`][geomlin.models.ponita.model.Ponita]) and [`adapters`][geomlin.models.ponita.adapters]
([`PonitaPotential`][geomlin.models.ponita.adapters.PonitaPotential],
[`PonitaDynamics`][geomlin.models.ponita.adapters.PonitaDynamics]).
"""

from geomlin.models.ponita.adapters import PonitaDynamics, PonitaPotential
from geomlin.models.ponita.attributes import (
    bundle_pair_attributes,
    complete_attributes,
    fiber_attributes,
    point_attributes,
    polynomial_features,
    safe_norm,
    spatial_attributes,
    sphere_to_scalar,
    sphere_to_vector,
    vector_to_sphere,
)
from geomlin.models.ponita.grid import grid_symmetries, grid_symmetry_group, orientation_grid
from geomlin.models.ponita.layers import ConvNeXtBlock, FiberBundleConv, KernelBasis, PointConv
from geomlin.models.ponita.model import TASK_LEVELS, Ponita
from geomlin.models.ponita.spaces import MODES, BundleSpace, PointSpace

__all__ = [
    "MODES", "TASK_LEVELS", "BundleSpace", "ConvNeXtBlock", "FiberBundleConv", "KernelBasis", "PointConv",
    "PointSpace", "Ponita", "PonitaDynamics", "PonitaPotential", "bundle_pair_attributes", "complete_attributes",
    "fiber_attributes", "grid_symmetries", "grid_symmetry_group", "orientation_grid", "point_attributes",
    "polynomial_features", "safe_norm", "spatial_attributes", "sphere_to_scalar", "sphere_to_vector",
    "vector_to_sphere",
]
