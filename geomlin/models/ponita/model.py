"""[`Ponita`][]: the PONITA network (embedding -> ConvNeXt blocks -> readouts) on either space."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from geomlin.batching import BatchLayout, batch_layout, pool_sum
from geomlin.models.graphs import dense_edge_index, graph_edges
from geomlin.models.inputs import graph_fields, is_graph_data, model_layout
from geomlin.models.ponita.attributes import safe_norm
from geomlin.models.ponita.grid import GRID_METHODS
from geomlin.models.ponita.layers import ConvNeXtBlock
from geomlin.models.ponita.spaces import MODES
from geomlin.radial import polynomial_cutoff
from geomlin.validation import (
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


class Ponita(nn.Module):
    """PONITA on flat PyG batches or padded tensors (see [`geomlin.models.ponita`][] for the modes and attributes).

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
    ``forward(x, pos, vec=None, *, mask=None, batch=None, edge_index=None, edge_mask=None)`` returns
    ``(scalars, vectors)``: ``(G, out_channels)`` and ``(G, out_vector_channels, 3)`` with ``G`` the
    number of graphs (``task_level="graph"``) or nodes; an output with zero channels is ``None``.
    Float tensors in ``pos``'s dtype (at least float32: sums over edges and nodes accumulate in
    float32 under autocast, see [`geomlin.batching.scatter_sum`][]).

    Inputs ([`geomlin.models.inputs`][]): flat ``x (N, in_channels)``, ``pos (N, 3)``,
    ``vec (N, in_vector_channels, 3)`` with ``batch`` (PyG's batch vector or its planned
    [`BatchLayout`][geomlin.batching.BatchLayout]; without one, a single graph); padded
    ``x (B, N, in_channels)``, ``pos (B, N, 3)``, ``vec (B, N, in_vector_channels, 3)`` with an
    optional ``mask (B, N)`` (every pair of a graph is an edge, pairs with a padded node get zero
    weight; node outputs come back ``(B, N, ...)``); or a PyG ``Data`` / ``Batch`` as ``x``, read
    for ``x`` (when ``in_channels > 0``), ``pos`` and ``vec`` (when ``in_vector_channels > 0``).

    Graph inputs and host syncs: a flat batch's ``edge_index (2, E)`` int64 (source ``j``, target
    ``i``) is built once per batch with [`graph_edges`][geomlin.models.graphs.graph_edges] (at the
    collate step or on the device) and passed in, with a planned layout: forward and backward then
    never make the host wait for an accelerator. Omitted, the forward builds it itself with this
    model's ``cutoff`` (free for all pairs of a layout planned on the host; otherwise one to three
    host syncs per call on an accelerator). ``edge_index`` may hold pairs beyond ``cutoff`` (all
    pairs of a padded batch, say): the smooth window gives them exactly zero weight. Indices are
    checked by [`geomlin.validation.check_index`][] (deferred and clamped on accelerators).

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
        """Two graphs of 5 and 4 nodes (flat batch, planned), positions spread over ~2 units."""
        n = 9
        x = torch.randn(n, max(self.in_channels, 1), generator=generator, dtype=dtype)[:, :self.in_channels]
        pos = 1.2 * torch.randn(n, 3, generator=generator, dtype=dtype)
        args = [x if self.in_channels else None, pos]
        if self.in_vector_channels:
            args.append(torch.randn(n, self.in_vector_channels, 3, generator=generator, dtype=dtype))
        layout = batch_layout(batch=torch.tensor([0] * 5 + [1] * 4), num_graphs=2)
        edges = graph_edges(pos, layout, self.cutoff)  # precomputed: the sync-free call
        return tuple(args), {"batch": layout, "edge_index": edges}

    def extra_repr(self) -> str:
        space = self.space.extra_repr()
        return (f"mode={self.mode!r}{', ' + space if space else ''}, complete={self.complete}, cutoff={self.cutoff}, "
                f"task_level={self.task_level!r}")

    # -------------------------------------------------------------------- forward
    def _check(self, x, pos, vec, items: tuple) -> None:
        check_tensor(pos, "pos", shape=(*items, 3), finite=True, nonempty=True)
        if self.in_channels:
            check_tensor(x, "x", shape=(*items, self.in_channels), finite=True)
        elif x is not None:
            raise ValueError("this Ponita was built with in_channels=0; pass x=None")
        if self.in_vector_channels:
            check_tensor(vec, "vec", shape=(*items, self.in_vector_channels, 3), finite=True)
        elif vec is not None:
            raise ValueError("this Ponita was built with in_vector_channels=0 but vec was given")

    def forward(self, x, pos: Tensor | None = None, vec: Tensor | None = None, *, mask: Tensor | None = None,
                batch: Tensor | BatchLayout | None = None, edge_index: Tensor | None = None,
                edge_mask: Tensor | None = None, edge_vec: Tensor | None = None):
        """``(scalars, vectors)``; see the class docstring for shapes and for which calls sync.

        ``edge_mask (E,)`` bool (with ``edge_index``): edges marked False contribute exactly nothing
        (their kernels are zero). ``edge_vec (E, 3)`` (with ``edge_index``): the vectors ``p_j - p_i``
        of the edges ``j -> i``, for edges to periodic images (default ``pos[j] - pos[i]``;
        [`geomlin.neighbors.edge_vectors`][] gives them with cell shifts).
        """
        if is_graph_data(x):
            names = ("x",) * bool(self.in_channels) + ("pos",) + ("vec",) * bool(self.in_vector_channels)
            values, batch = graph_fields(x, names, "Ponita", pos=pos, vec=vec, mask=mask, batch=batch,
                                         edge_index=edge_index, edge_mask=edge_mask)
            fields = dict(zip(names, values))
            x, pos, vec = fields.get("x"), fields["pos"], fields.get("vec")
        check_tensor(pos, "pos", shape=(..., 3), what="points")
        if batch is None and mask is None and pos.ndim == 2:  # flat points without a batch: one graph
            batch = batch_layout(batch=torch.zeros(pos.shape[0], dtype=torch.int64, device=pos.device), num_graphs=1)
        layout = model_layout(pos, mask, batch)
        if edge_vec is not None and edge_index is None:
            raise ValueError("edge_vec needs the edge_index whose vectors it holds")
        if not layout.is_flat:
            return self._padded(x, pos, vec, layout, edge_index, edge_mask)
        self._check(x, pos, vec, (pos.shape[0],))
        if edge_index is None:  # the convenience path: host syncs on accelerators (see graph_edges)
            if edge_mask is not None:
                raise ValueError("edge_mask needs the edge_index it masks")
            edge_index = graph_edges(pos, layout, self.cutoff)
        scalars, vectors = self._nodes(x, pos, vec, edge_index, edge_mask, edge_vec)
        if self.task_level == "graph":
            scalars = None if scalars is None else pool_sum(scalars, layout)
            vectors = None if vectors is None else pool_sum(vectors, layout)
        return scalars, vectors

    def _padded(self, x, pos: Tensor, vec, layout: BatchLayout, edge_index, edge_mask):
        """Padded graphs ``(B, N, ...)``: every pair of a graph an edge (self-loops included), pairs with a
        padded node weighted zero; built without a host sync."""
        if edge_index is not None or edge_mask is not None:
            raise ValueError("edge_index and edge_mask are for flat batches (batch=); padded graphs use all pairs")
        B, N = pos.shape[:2]
        self._check(x, pos, vec, (B, N))
        edge_index = dense_edge_index(B, N, loop=True, device=pos.device)
        if layout.mask is not None:
            flat = layout.mask.reshape(-1)
            edge_mask = flat[edge_index[0]] & flat[edge_index[1]]
        scalars, vectors = self._nodes(None if x is None else x.reshape(B * N, -1), pos.reshape(B * N, 3),
                                       None if vec is None else vec.reshape(B * N, *vec.shape[2:]), edge_index,
                                       edge_mask)
        scalars = None if scalars is None else scalars.reshape(B, N, *scalars.shape[1:])
        vectors = None if vectors is None else vectors.reshape(B, N, *vectors.shape[1:])
        if self.task_level == "graph":
            scalars = None if scalars is None else pool_sum(scalars, layout)
            vectors = None if vectors is None else pool_sum(vectors, layout)
        return scalars, vectors

    def _nodes(self, x, pos: Tensor, vec, edge_index: Tensor, edge_mask: Tensor | None, edge_vec: Tensor | None = None):
        """Per-node ``(scalars (N, C_out), vectors (N, V_out, 3))`` of flat nodes over ``edge_index``."""
        check_tensor(edge_index, "edge_index", shape=(2, None), dtype="index")
        edge_index = check_index(edge_index, "edge_index", pos.shape[0], "nodes")
        src, dst = edge_index
        if edge_vec is None:
            rel = pos[src] - pos[dst]  # x = p_j - p_i for the message j -> i
        else:
            rel = check_tensor(edge_vec, "edge_vec", shape=(edge_index.shape[1], 3)).to(pos.dtype)
        dist = safe_norm(rel, keepdim=True)  # (E, 1)
        window = torch.ones_like(dist) if self.cutoff is None else polynomial_cutoff(dist, self.cutoff)
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
        return self.space.readout(scal, vecs, rel, window, edge_index, pos.shape[0])
