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
    [`geomlin.models.ponita_grid`][]). Pair attributes of ``(p_i, o_i)`` and
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
windowed by a smooth polynomial cutoff (Klicpera et al. 2020, Eq. 8) when ``cutoff`` is set;
per-channel (depthwise) convolutions with ``torch.index_add_`` (no torch-scatter; sums in float32
under autocast), ConvNeXt blocks (conv -> LayerNorm -> MLP -> residual), readouts after every
block (averaged). Inputs are flat PyG batches (``x (N, C)``, ``pos (N, 3)``, ``batch (N,)``) and
their graph: ``edge_index`` (all pairs within a graph, or within ``cutoff``, self-loops included:
[`graph_edges`][]) and ``num_graphs``, built once per batch by the caller
so that the forward never waits for an accelerator; [`Ponita`][] builds them itself when they
are not given (with host syncs, see its docstring). The padded adapters [`PonitaPotential`][]
and [`PonitaDynamics`][] use all pairs ([`dense_edge_index`][]) and
are sync-free as they are.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from geomlin.gaunt.conv import polynomial_cutoff
from geomlin.models.graphs import count_graphs, dense_edge_index, graph_edges, scatter_sum
from geomlin.models.ponita_grid import GRID_METHODS, grid_symmetry_group, orientation_grid
from geomlin.validation import (
    check_batch_vector,
    check_bool,
    check_choice,
    check_float,
    check_index,
    check_int,
    check_mask,
    check_nonnegative_int,
    check_positive_float,
    check_positive_int,
    check_tensor,
)

#: Task levels: one output per graph (sum over its nodes) or per node.
TASK_LEVELS = ("graph", "node")
#: Exponent ``p`` of the polynomial cutoff (DimeNet's default).
CUTOFF_EXPONENT = 6
#: Number of pair attributes: points mode, bundle spatial step, bundle spherical step, complete set.
NUM_POINT_ATTRS, NUM_SPATIAL_ATTRS, NUM_FIBER_ATTRS, NUM_COMPLETE_ATTRS = 1, 2, 1, 5


# ----------------------------------------------------------------------------- pure functions
def safe_norm(x: Tensor, dim: int = -1, keepdim: bool = False) -> Tensor:
    """``|x|`` with a zero (not NaN) derivative at ``x = 0`` (self-loops, ``x`` parallel to ``o``)."""
    sq = (x * x).sum(dim, keepdim=keepdim)
    # ``!= 0``, not ``> 0``: a NaN stays NaN
    return torch.where(sq != 0, sq.clamp_min(torch.finfo(sq.dtype).tiny).sqrt(), torch.zeros_like(sq))


def point_attributes(rel: Tensor) -> Tensor:
    """Points mode: ``|x|`` of relative positions ``rel (E, 3)`` -> ``(E, 1)``."""
    return safe_norm(rel, keepdim=True)


def spatial_attributes(rel: Tensor, grid: Tensor) -> Tensor:
    """Bundle mode, spatial step at a fixed orientation: ``(o.x, |x - (o.x) o|)``.

    ``rel (E, 3)``, ``grid (O, 3)`` unit vectors -> ``(E, O, 2)``.
    """
    along = rel @ grid.T  # (E, O)
    perp = rel[:, None, :] - along[..., None] * grid[None]
    return torch.stack([along, safe_norm(perp)], dim=-1)


def fiber_attributes(grid: Tensor) -> Tensor:
    """Bundle mode, spherical step: ``o_a . o_b`` -> ``(O, O, 1)``."""
    return (grid @ grid.T)[..., None]


def bundle_pair_attributes(rel: Tensor, o_i: Tensor, o_j: Tensor, complete: bool = False) -> Tensor:
    """Invariants of pairs ``(p_i, o_i)``, ``(p_j, o_j)`` of R^3 x S^2 with ``rel = p_j - p_i``.

    ``(o_i.x, |x - (o_i.x) o_i|, o_i.o_j)`` and, with ``complete``, also ``x.o_j`` and the triple
    product ``(o_i x x).o_j``; broadcast over the leading axes of ``rel``, ``o_i``, ``o_j`` (``(..., 3)``)
    -> ``(..., 3)`` or ``(..., 5)``. Invariant under every rotation (and translation); the triple
    product changes sign under reflections.
    """
    rel, o_i, o_j = torch.broadcast_tensors(rel, o_i, o_j)
    along = (o_i * rel).sum(-1)
    attrs = [along, safe_norm(rel - along[..., None] * o_i), (o_i * o_j).sum(-1)]
    if complete:
        attrs += [(rel * o_j).sum(-1), (torch.linalg.cross(o_i, rel, dim=-1) * o_j).sum(-1)]
    return torch.stack(attrs, dim=-1)


def complete_attributes(rel: Tensor, grid: Tensor) -> Tensor:
    """All pairs of grid orientations of every edge: ``rel (E, 3)``, ``grid (O, 3)`` ->
    ``(E, O_i, O_j, 5)``, the [`bundle_pair_attributes`][] with ``complete=True``."""
    return bundle_pair_attributes(rel[:, None, None, :], grid[None, :, None, :], grid[None, None, :, :], True)


def polynomial_features(a: Tensor, degree: int) -> Tensor:
    """All monomials of degrees ``1..degree`` of the last axis: ``(..., k)`` -> ``(..., k + k^2 + ... + k^degree)``
    (products over ordered index tuples, as in the reference)."""
    out, term = [a], a
    for _ in range(degree - 1):
        term = (term[..., :, None] * a[..., None, :]).flatten(-2)
        out.append(term)
    return torch.cat(out, dim=-1)


def sphere_to_scalar(f: Tensor) -> Tensor:
    """Mean over the orientations: ``(N, O, C)`` -> ``(N, C)``."""
    return f.mean(dim=-2)


def sphere_to_vector(f: Tensor, grid: Tensor) -> Tensor:
    """``sum_k f(o_k) o_k / O``: ``(N, O, C)``, ``grid (O, 3)`` -> ``(N, C, 3)``."""
    return torch.einsum("noc,od->ncd", f, grid.to(f.dtype)) / grid.shape[0]


def vector_to_sphere(v: Tensor, grid: Tensor) -> Tensor:
    """Lift vectors to functions on the sphere, ``f(o_k) = v . o_k``: ``(N, C, 3)`` -> ``(N, O, C)``."""
    return torch.einsum("ncd,od->noc", v, grid.to(v.dtype))


# ------------------------------------------------------------------------------------ modules
class KernelBasis(nn.Module):
    """Polynomial features of pair attributes -> MLP -> ``num_basis`` basis functions (the reference's
    ``PolynomialFeatures -> Linear -> GELU -> Linear -> GELU``, with the input width computed, not lazy)."""

    def __init__(self, num_attrs: int, hidden_channels: int, num_basis: int, degree: int):
        super().__init__()
        self.degree = degree
        width = sum(num_attrs ** k for k in range(1, degree + 1))
        self.net = nn.Sequential(nn.Linear(width, hidden_channels), nn.GELU(),
                                 nn.Linear(hidden_channels, num_basis), nn.GELU())

    def forward(self, attrs: Tensor) -> Tensor:
        """``(..., num_attrs)`` -> ``(..., num_basis)``."""
        return self.net(polynomial_features(attrs, self.degree))


class PointConv(nn.Module):
    """Depthwise convolution on points: ``out_i = sum_j k(|x_ij|) * h_j + b`` (``(N, C)`` -> ``(N, C)``)."""

    def __init__(self, channels: int, num_basis: int):
        super().__init__()
        self.kernel = nn.Linear(num_basis, channels, bias=False)
        self.bias = nn.Parameter(torch.zeros(channels))

    def forward(self, h: Tensor, edge_index: Tensor, basis: Tensor) -> Tensor:
        src, dst = edge_index
        msg = self.kernel(basis) * h[src]
        return scatter_sum(msg, dst, h.shape[0]) + self.bias


class FiberBundleConv(nn.Module):
    """Depthwise convolution on R^3 x S^2: ``(N, O, C)`` -> ``(N, O, C)``.

    Separable (default): ``y(p_i, o) = sum_j k_s(o.x, |x_perp|) h(p_j, o)`` (spatial, fixed ``o``),
    then ``out(p_i, o') = 1/O sum_o k_f(o.o') y(p_i, o) + b`` (spherical). Complete: one kernel
    ``out(p_i, o_a) = 1/O sum_j sum_b k(attrs(x, o_a, o_b)) h(p_j, o_b) + b``.
    """

    def __init__(self, channels: int, num_basis: int, complete: bool = False):
        super().__init__()
        self.complete = complete
        self.kernel = nn.Linear(num_basis, channels, bias=False)
        if not complete:
            self.fiber_kernel = nn.Linear(num_basis, channels, bias=False)
        self.bias = nn.Parameter(torch.zeros(channels))

    def forward(self, h: Tensor, edge_index: Tensor, basis: Tensor, fiber_basis: Tensor | None) -> Tensor:
        src, dst = edge_index
        O = h.shape[1]
        if self.complete:  # basis (E, O_a, O_b, K)
            msg = torch.einsum("eabc,ebc->eac", self.kernel(basis), h[src]) / O
            return scatter_sum(msg, dst, h.shape[0]) + self.bias
        y = scatter_sum(self.kernel(basis) * h[src], dst, h.shape[0])  # basis (E, O, K)
        return torch.einsum("noc,opc->npc", y, self.fiber_kernel(fiber_basis)) / O + self.bias


class ConvNeXtBlock(nn.Module):
    """``h + scale * MLP(LayerNorm(conv(h)))`` with a ``widening_factor`` times wider GELU MLP."""

    def __init__(self, conv: nn.Module, channels: int, widening_factor: int = 4, layer_scale: float | None = None):
        super().__init__()
        self.conv = conv
        self.norm = nn.LayerNorm(channels)
        self.mlp = nn.Sequential(nn.Linear(channels, widening_factor * channels), nn.GELU(),
                                 nn.Linear(widening_factor * channels, channels))
        self.layer_scale = None if layer_scale is None else nn.Parameter(torch.full((channels,), float(layer_scale)))

    def forward(self, h: Tensor, *conv_args) -> Tensor:
        y = self.mlp(self.norm(self.conv(h, *conv_args)))
        return h + (y if self.layer_scale is None else self.layer_scale * y)


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
    per point ([`geomlin.models.ponita_grid`][]), separable (spatial, then spherical) kernels or, with
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


class Ponita(nn.Module):
    """PONITA on flat PyG batches (see the module docstring for the modes and attributes).

    Parameters
    ----------
    in_channels : int
        scalar input features per node (``x (N, in_channels)``).
    hidden_channels : int
        channels of every block (and of the kernel MLPs).
    out_channels : int
        scalar outputs (0 for none).
    num_blocks : int
        ConvNeXt blocks.
    in_vector_channels : int
        vector inputs per node (``vec (N, in_vector_channels, 3)``); bundle mode lifts
        them to the sphere as ``v . o``, points mode adds ``|v|`` to the scalars (invariant).
    out_vector_channels : int
        vector outputs (0 for none).
    mode : str
        ``"points"`` or ``"bundle"``.
    num_ori : int
        orientations of the bundle grid; grid: ``"fibonacci" | "repulsion" | "icosahedral"``;
        grid_seed: seed of the repulsion grid.
    complete : bool
        bundle mode only: the non-separable kernel on the five complete pair attributes.
    cutoff : float | None
        cutoff of the graph and of the smooth window (None: all pairs, no window).
    num_basis : int | None
        basis functions per kernel (default ``hidden_channels``); degree: of the polynomial features.
    widening_factor, layer_scale
        of the ConvNeXt blocks.
    task_level : str
        ``"graph"`` (sum over each graph's nodes) or ``"node"``.
    multiple_readouts : bool
        read out after every block and average (the reference's default), or only at the end.

    Notes
    -----
    ``forward(x, pos, vec=None, *, batch=None, edge_index=None, num_graphs=None)`` returns
    ``(scalars, vectors)``: ``(G, out_channels)`` and ``(G, out_vector_channels, 3)`` with ``G`` the
    number of graphs (``task_level="graph"``) or nodes; an output with zero channels is ``None``.
    Float tensors in ``pos``'s dtype (at least float32: sums over edges and nodes accumulate in
    float32 under autocast, see [`scatter_sum`][]).

    Graph inputs and host syncs: ``edge_index (2, E)`` int64 (source ``j``, target ``i``) and
    ``num_graphs`` are what the forward needs. Given both (``num_graphs`` only matters for
    ``task_level="graph"``), forward and backward never make the host wait for an accelerator:
    build them once per batch with [`graph_edges`][] (at the collate
    step or on the device) and pass PyG's ``Batch.num_graphs``. Omitted, the forward builds them
    itself ([`graph_edges`][] with this model's ``cutoff``, and
    [`count_graphs`][]): convenient, but on an accelerator that is one
    to three host syncs per call. ``edge_index`` may hold pairs beyond ``cutoff`` (all pairs of a
    padded batch, say): the smooth window gives them exactly zero weight. Indices are checked by
    [`geomlin.validation.check_index`][] (deferred and clamped on accelerators).

    Declared types: ``(Scalars, Positions[, Vectors]) -> (Scalars, Vectors)`` under E(3) (points
    mode) or under the rotations that permute the grid (bundle mode; see [`grid_symmetries`][]).
    """

    def __init__(self, in_channels: int, hidden_channels: int, out_channels: int, num_blocks: int = 2, *,
                 in_vector_channels: int = 0, out_vector_channels: int = 0, mode: str = "bundle",
                 num_ori: int = 16, grid: str = "fibonacci", grid_seed: int = 0, complete: bool = False,
                 cutoff: float | None = None, num_basis: int | None = None, degree: int = 3,
                 widening_factor: int = 4, layer_scale: float | None = None, task_level: str = "graph",
                 multiple_readouts: bool = True):
        super().__init__()
        self.in_channels = check_nonnegative_int(in_channels, "in_channels")
        self.in_vector_channels = check_nonnegative_int(in_vector_channels, "in_vector_channels")
        if self.in_channels + self.in_vector_channels == 0:
            raise ValueError("Ponita needs input features: in_channels + in_vector_channels must be >= 1")
        hidden = check_positive_int(hidden_channels, "hidden_channels")
        self.out_channels = check_nonnegative_int(out_channels, "out_channels")
        self.out_vector_channels = check_nonnegative_int(out_vector_channels, "out_vector_channels")
        if self.out_channels + self.out_vector_channels == 0:
            raise ValueError("Ponita needs outputs: out_channels + out_vector_channels must be >= 1")
        num_blocks = check_positive_int(num_blocks, "num_blocks")
        self.mode = check_choice(mode, "mode", tuple(MODES))
        self.task_level = check_choice(task_level, "task_level", TASK_LEVELS)
        check_bool(complete, "complete")
        if complete and self.mode != "bundle":
            raise ValueError("complete=True needs mode='bundle' (points mode has the single attribute |x|)")
        self.complete = complete
        self.cutoff = None if cutoff is None else check_positive_float(cutoff, "cutoff")
        num_basis = hidden if num_basis is None else check_positive_int(num_basis, "num_basis")
        degree = check_positive_int(degree, "degree")
        widening_factor = check_positive_int(widening_factor, "widening_factor")
        if layer_scale is not None:
            layer_scale = check_float(layer_scale, "layer_scale")
        self.multiple_readouts = check_bool(multiple_readouts, "multiple_readouts")
        # checked in points mode too (where they are unused), so a typo is never silently accepted
        num_ori = check_positive_int(num_ori, "num_ori")
        check_choice(grid, "grid", GRID_METHODS)
        grid_seed = check_int(grid_seed, "grid_seed", minimum=0)

        grid_args = {"num_ori": num_ori, "grid": grid, "grid_seed": grid_seed, "complete": complete}
        self.space = MODES[self.mode](self.in_vector_channels, self.out_vector_channels, hidden, num_basis, degree,
                                     **(grid_args if self.mode == "bundle" else {}))
        convs = [self.space.conv(hidden, num_basis) for _ in range(num_blocks)]
        num_inputs = self.space.num_inputs(self.in_channels, self.in_vector_channels)
        self.embed = nn.Linear(num_inputs, hidden, bias=False)
        self.blocks = nn.ModuleList(ConvNeXtBlock(c, hidden, widening_factor, layer_scale) for c in convs)
        outs = self.out_channels + self.out_vector_channels
        self.readouts = nn.ModuleList(nn.Linear(hidden, outs) if (self.multiple_readouts or k == num_blocks - 1)
                                      else None for k in range(num_blocks))
        self._types: tuple | None = None

    # ---------------------------------------------------------------- declarations
    def symmetry_group(self):
        """The group the model is exactly equivariant to: E(3) (points mode) or the rotations (and,
        without ``complete``, the reflections) that permute the grid (bundle mode)."""
        return self.space.symmetry_group()

    @property
    def grid(self) -> Tensor | None:
        """The orientation grid ``(O, 3)`` of bundle mode (None in points mode)."""
        return self.space.grid

    def _declared(self) -> tuple:
        """``(type_in, type_out)``, built on first use (finding the grid's symmetries takes a moment)."""
        if self._types is None:
            from geomlin.reps.types import Positions, Scalars, Vectors

            group = self.symmetry_group()
            type_in = [Scalars(self.in_channels) if self.in_channels else None, Positions(3, group)]
            if self.in_vector_channels:
                type_in.append(Vectors(3, self.in_vector_channels, group))
            type_out = (Scalars(self.out_channels) if self.out_channels else None,
                        Vectors(3, self.out_vector_channels, group) if self.out_vector_channels else None)
            self._types = (tuple(type_in), type_out)
        return self._types

    @property
    def type_in(self) -> tuple:
        """``(Scalars(in_channels) or None, Positions(3)[, Vectors(3, in_vector_channels)])`` under [`symmetry_group`][]."""
        return self._declared()[0]

    @property
    def type_out(self) -> tuple:
        """``(Scalars(out_channels) or None, Vectors(3, out_vector_channels) or None)``."""
        return self._declared()[1]

    def example_inputs(self, generator=None, dtype=torch.float64):
        """Two graphs of 5 and 4 nodes (flat batch), positions spread over ~2 units."""
        n = 9
        x = torch.randn(n, max(self.in_channels, 1), generator=generator, dtype=dtype)[:, :self.in_channels]
        pos = 1.2 * torch.randn(n, 3, generator=generator, dtype=dtype)
        args = [x if self.in_channels else None, pos]
        if self.in_vector_channels:
            args.append(torch.randn(n, self.in_vector_channels, 3, generator=generator, dtype=dtype))
        batch = torch.tensor([0] * 5 + [1] * 4)
        edges = graph_edges(pos, batch, 2, self.cutoff)  # precomputed: the sync-free call
        return tuple(args), {"batch": batch, "edge_index": edges, "num_graphs": 2}

    def extra_repr(self) -> str:
        space = self.space.extra_repr()
        return (f"mode={self.mode!r}{', ' + space if space else ''}, complete={self.complete}, cutoff={self.cutoff}, "
                f"task_level={self.task_level!r}")

    # -------------------------------------------------------------------- forward
    def _check(self, x, pos, vec, batch, edge_index, num_graphs):
        check_tensor(pos, "pos", shape=(None, 3), finite=True, nonempty=True)
        N = pos.shape[0]
        if self.in_channels:
            check_tensor(x, "x", shape=(N, self.in_channels), finite=True)
        elif x is not None:
            raise ValueError("this Ponita was built with in_channels=0; pass x=None")
        if self.in_vector_channels:
            check_tensor(vec, "vec", shape=(N, self.in_vector_channels, 3), finite=True)
        elif vec is not None:
            raise ValueError("this Ponita was built with in_vector_channels=0 but vec was given")
        if batch is None:
            batch = torch.zeros(N, dtype=torch.int64, device=pos.device)
            num_graphs = 1 if num_graphs is None else num_graphs
        if num_graphs is None and (edge_index is None or self.task_level == "graph"):
            num_graphs = count_graphs(batch)  # a host sync on accelerators (documented: pass num_graphs)
        if num_graphs is not None:
            num_graphs = check_positive_int(num_graphs, "num_graphs")
        batch = check_batch_vector(batch, "batch", N, num_graphs=num_graphs).long()
        if edge_index is not None:
            check_tensor(edge_index, "edge_index", shape=(2, None), dtype="index")
            edge_index = check_index(edge_index, "edge_index", N, "nodes")
        return batch, edge_index, num_graphs

    def forward(self, x: Tensor | None, pos: Tensor, vec: Tensor | None = None, *, batch: Tensor | None = None,
                edge_index: Tensor | None = None, num_graphs: int | None = None, edge_mask: Tensor | None = None):
        """``(scalars, vectors)``; see the class docstring for shapes and for which calls sync.

        ``edge_mask (E,)`` bool (with ``edge_index``): edges marked False contribute exactly nothing
        (their kernels are zero), e.g. the pairs with a padded atom in a padded batch.
        """
        batch, edge_index, num_graphs = self._check(x, pos, vec, batch, edge_index, num_graphs)
        if edge_index is None:  # the convenience path: host syncs on accelerators (see graph_edges)
            if edge_mask is not None:
                raise ValueError("edge_mask needs the edge_index it masks")
            edge_index = graph_edges(pos, batch, num_graphs, self.cutoff)
        src, dst = edge_index
        rel = pos[src] - pos[dst]  # x = p_j - p_i for the message j -> i
        dist = safe_norm(rel, keepdim=True)  # (E, 1)
        window = torch.ones_like(dist) if self.cutoff is None else polynomial_cutoff(dist, self.cutoff, CUTOFF_EXPONENT)
        if edge_mask is not None:
            check_mask(edge_mask, "edge_mask", (edge_index.shape[1],))
            window = window * edge_mask[:, None].to(window.dtype)
        h = self.embed(self.space.lift(x, vec, pos.dtype))  # (N, C) or (N, O, C)
        conv_args = (edge_index, *self.space.kernels(rel, window))
        readouts = []
        for block, readout in zip(self.blocks, self.readouts):
            h = block(h, *conv_args)
            if readout is not None:
                readouts.append(readout(h))
        out = sum(readouts) / len(readouts)
        scal, vecs = out.split([self.out_channels, self.out_vector_channels], dim=-1)
        scalars, vectors = self.space.readout(scal, vecs, rel, window, edge_index, pos.shape[0])
        if self.task_level == "graph":
            scalars = None if scalars is None else _pool(scalars, batch, num_graphs)
            vectors = None if vectors is None else _pool(vectors, batch, num_graphs)
        return scalars, vectors


def padded_graph(num_graphs: int, num_nodes: int, device) -> dict:
    """The graph keywords of [`Ponita.forward`][] for ``B`` padded graphs of ``N`` nodes: ``batch (B N,)``,
    every pair with self-loops as ``edge_index (2, B N^2)``, and ``num_graphs``; built without a host sync.

    With a ``cutoff`` the pairs beyond it get zero weight from the smooth window, so the outputs
    equal those on the cutoff graph.
    """
    batch = torch.arange(num_graphs, device=device)[:, None].expand(num_graphs, num_nodes).reshape(-1)
    return {"batch": batch, "edge_index": dense_edge_index(num_graphs, num_nodes, loop=True, device=device),
            "num_graphs": num_graphs}


def _pool(v: Tensor, batch: Tensor, num_graphs: int) -> Tensor:
    """Sum over the nodes of each graph: ``(N, ...)`` -> ``(num_graphs, ...)``."""
    return scatter_sum(v, batch, num_graphs)


# ------------------------------------------------------------------------- task adapters
class PonitaPotential(nn.Module):
    """An interatomic potential from [`Ponita`][]: ``forward(pos (B, N, 3), species (B, N), mask=None) -> energy (B,)``.

    One-hot species in, one scalar per atom out, summed over each molecule's atoms; forces are
    ``-dE/dpos``. ``mask (B, N)`` bool marks the real atoms of padded molecules of different sizes
    (QM9): the pairs with a padded atom get zero weight and padded atoms are left out of the sum, so
    each molecule's energy is the one it has alone (tested). Defaults (the ``ponita`` model of
    ``geomlin train molecules``): point-cloud mode, exactly E(3) invariant, all atom pairs (small
    molecules), 2 blocks of 64 channels, 64 basis functions: the best of channels {64, 128} x blocks
    {2, 4} on a validation split of the bundled ethanol trajectory (``benchmarks/bench_molecules.py
    --tune``; docs/molecules.md). At a few hundred optimiser steps point-cloud mode beat the
    fiber-bundle mode there at a fraction of its cost; ``mode="bundle"`` (default grid: the 12
    icosahedral directions) is the paper's full model.
    """

    def __init__(self, num_species: int = 10, hidden_channels: int = 64, num_blocks: int = 2, *,
                 mode: str = "points", num_ori: int = 12, grid: str = "icosahedral", cutoff: float | None = None,
                 num_basis: int | None = 64, **kwargs):
        super().__init__()
        self.num_species = check_positive_int(num_species, "num_species")
        self.net = Ponita(self.num_species, hidden_channels, 1, num_blocks, mode=mode, num_ori=num_ori,
                          grid=grid, cutoff=cutoff, num_basis=num_basis, task_level="node", **kwargs)

    @property
    def type_in(self) -> tuple:
        """``(Positions(3), Labels(num_species))`` under the network's symmetry group."""
        from geomlin.reps.types import Labels

        return (self.net.type_in[1], Labels(self.num_species))

    @property
    def type_out(self):
        from geomlin.reps.types import Scalars

        return Scalars()

    def example_inputs(self, generator=None, dtype=torch.float64):
        pos = 1.3 * torch.randn(2, 6, 3, generator=generator, dtype=dtype)
        return (pos, torch.randint(self.num_species, (2, 6), generator=generator)), {}

    def forward(self, pos: Tensor, species: Tensor, mask: Tensor | None = None) -> Tensor:
        from geomlin.models.egnn import check_molecule_inputs

        species = check_molecule_inputs(pos, species, self.num_species, mask)
        B, N, _ = pos.shape
        x = nn.functional.one_hot(species.reshape(-1), self.num_species).to(pos.dtype)
        graph = padded_graph(B, N, pos.device)
        edge_mask = None
        if mask is not None:
            flat = mask.reshape(-1)
            edge_mask = flat[graph["edge_index"][0]] & flat[graph["edge_index"][1]]
        energy, _ = self.net(x, pos.reshape(B * N, 3), edge_index=graph["edge_index"], edge_mask=edge_mask)
        energy = energy[:, 0].view(B, N)
        return (energy if mask is None else energy * mask.to(energy.dtype)).sum(dim=1)


class PonitaDynamics(nn.Module):
    """N-body dynamics with [`Ponita`][] (the reference's n-body setup): charges as scalars,
    velocities as vectors lifted to the sphere, one vector per particle read out as the displacement.

    ``forward(pos (B, n, 3), vel (B, n, 3), charges (B, n, 1)) -> pos' (B, n, 3)``, ``pos + v_out``.
    Defaults (the ``ponita`` model of ``geomlin train nbody``): fiber-bundle mode on the 12 icosahedral
    directions (point-cloud mode would see only the speeds ``|v|``, not their directions), 3 blocks of
    64 channels.
    """

    def __init__(self, hidden_channels: int = 64, num_blocks: int = 3, *, mode: str = "bundle",
                 num_ori: int = 12, grid: str = "icosahedral", **kwargs):
        super().__init__()
        self.net = Ponita(1, hidden_channels, 0, num_blocks, in_vector_channels=1, out_vector_channels=1,
                          mode=mode, num_ori=num_ori, grid=grid, task_level="node", **kwargs)

    @property
    def type_in(self) -> tuple:
        """``(Positions(3), Vectors(3), Scalars(1))`` (positions, velocities, charges)."""
        from geomlin.reps.types import Scalars, Vectors

        positions = self.net.type_in[1]
        return (positions, Vectors(3, None, positions.group), Scalars(1))

    @property
    def type_out(self):
        return self.net.type_in[1]

    def example_inputs(self, generator=None, dtype=torch.float64):
        pos = torch.randn(2, 5, 3, generator=generator, dtype=dtype)
        vel = 0.5 * torch.randn(2, 5, 3, generator=generator, dtype=dtype)
        q = torch.randint(0, 2, (2, 5, 1), generator=generator).to(dtype) * 2 - 1
        return (pos, vel, q), {}

    def forward(self, pos: Tensor, vel: Tensor, charges: Tensor) -> Tensor:
        for name, t in (("pos", pos), ("vel", vel)):
            check_tensor(t, name, ndim=3, shape=(None, None, 3), finite=True)
        if vel.shape != pos.shape:
            raise ValueError(f"vel must have the shape of pos {tuple(pos.shape)}, got {tuple(vel.shape)}")
        B, n, _ = pos.shape
        # the exact shape (not just the count): charges (n, B, 1) would be silently reordered
        check_tensor(charges, "charges", shape=(B, n, 1), dtype=("float", "int"), finite=True,
                     what="one charge per particle, as pos (B, n, 3)")
        q = charges.reshape(B * n, 1).to(pos.dtype)
        _, v = self.net(q, pos.reshape(B * n, 3), vel.reshape(B * n, 1, 3), **padded_graph(B, n, pos.device))
        return pos + v.reshape(B, n, 3)

