"""Graphs of batched point sets, settled at the data boundary, and the sums over their edges.

The number of edges of a batch depends on its data (graph sizes, which pairs lie within a
radius), and on an accelerator reading such a size makes the host wait for the device. So the
models of [`geomlin.models`][] take ``edge_index`` from the caller where it depends on the data, and
this module builds it once per batch, before the forward (or in the forward, from a planned
[`BatchLayout`][geomlin.batching.BatchLayout] that knows the sizes):

* [`dense_edge_index`][]: all pairs of ``B`` graphs of ``N`` nodes each (padded batches). Its size
  ``B N (N - 1)`` (or ``B N^2``) is known from the shapes, so it is built on any device without
  a host sync; [`PonitaPotential`][], [`PonitaDynamics`][]
  and [`GauntPotential`][] call it inside their forward for that reason.
* [`graph_edges`][]: all pairs within each graph of a flat PyG batch, optionally only those within
  a cutoff (the cell-list search of [`geomlin.neighbors`][]). All pairs of a layout planned on the
  host ([`geomlin.batching.batch_layout`][] of a CPU batch vector) are built on any device without
  a host sync; otherwise it reads one number back (the count of same-graph pairs), or with a cutoff
  those of the cell list. Run it where the batch is collated, or once per batch on the device.
* [`padded_neighbors`][]: the neighbours within a cutoff of every atom of a padded batch as a
  fixed-size list, at most ``K`` per atom (``(B, N, K)`` slots and a mask of the used ones). Its
  shapes depend only on ``B, N, K``, so it runs inside a compiled graph with no host sync and one
  compiled graph serves a whole MD trajectory; an atom with more than ``K`` neighbours is an
  error, never a silent truncation ([`count_neighbors`][] is the test).
  [`padded_edge_index`][] flattens it into an ``edge_index (2, B N K)``.

The sums over edges and nodes are [`geomlin.batching.scatter_sum`][] (accumulated in at least float32).
"""

from __future__ import annotations

import torch
from torch import Tensor

from geomlin.batching import BatchLayout, as_layout
from geomlin.neighbors import nearest_neighbors, radius_pairs
from geomlin.validation import (
    check_bool,
    check_condition,
    check_mask,
    check_memory,
    check_nonnegative_int,
    check_positive_float,
    check_positive_int,
    check_tensor,
)


def dense_edge_index(num_graphs: int, num_nodes: int, loop: bool = False, device=None) -> Tensor:
    """All ordered pairs ``j -> i`` within each of ``num_graphs`` graphs of ``num_nodes`` nodes.

    Parameters
    ----------
    num_graphs, num_nodes : int
        ``B`` graphs whose nodes are numbered ``b N .. b N + N - 1`` (a padded ``(B, N, ...)``
        batch flattened to ``(B N, ...)``).
    loop : bool
        Include the self-pairs ``i -> i``.
    device : torch.device, optional
        Where to build it (no host sync on any device: the size is known from the arguments).

    Returns
    -------
    Tensor
        ``edge_index (2, B N (N - 1))`` int64 (``(2, B N^2)`` with ``loop``), rows (source ``j``,
        target ``i``), ordered by graph, then target, then source.
    """
    B = check_nonnegative_int(num_graphs, "num_graphs")
    N = check_nonnegative_int(num_nodes, "num_nodes")
    check_bool(loop, "loop")
    width = N if loop else max(N - 1, 0)
    if not torch.compiler.is_compiling():  # the message would make symbolic sizes concrete (a recompile per size)
        check_memory(2 * B * N * width * 8 * 2, f"dense_edge_index(num_graphs={B}, num_nodes={N}) (all pairs, int64)",
                     "use a radius graph (graph_edges) for large graphs")
    target = torch.arange(N, device=device)[:, None].expand(N, width)
    source = torch.arange(width, device=device)[None, :].expand(N, width)
    if not loop:
        source = source + (source >= target)  # skip the diagonal
    offset = torch.arange(B, device=device)[:, None, None] * N
    return torch.stack([(source + offset).reshape(-1), (target + offset).reshape(-1)])


def graph_edges(pos: Tensor, batch: Tensor | BatchLayout | None = None, cutoff: float | None = None,
                loop: bool = True) -> Tensor:
    """Edges between the nodes of each graph of a flat batch, optionally only those within ``cutoff``.

    Parameters
    ----------
    pos : Tensor
        ``(N, d)`` float positions (only read with ``cutoff``).
    batch : Tensor or BatchLayout, optional
        ``(N,)`` sorted graph index of every node, or its planned
        [`BatchLayout`][geomlin.batching.BatchLayout] (default: one graph).
    cutoff : float, optional
        Only the pairs with ``|p_j - p_i| <= cutoff``, from the cell-list search of
        [`geomlin.neighbors.radius_pairs`][] (the smooth windows of the models vanish at the cutoff).
    loop : bool
        Include the self-pairs ``i -> i`` (PONITA's convolutions do).

    Returns
    -------
    Tensor
        ``edge_index (2, E)`` int64 on ``pos``'s device, rows (source ``j``, target ``i``), ordered
        by graph, then target, then source (with ``cutoff``: by target, then distance, then source).

    Notes
    -----
    All pairs (``sum_b n_b^2`` of them, work and memory alike) are built without a host sync when
    the layout knows its sizes (planned on the host); otherwise the number of pairs is read back
    once. With ``cutoff`` the host syncs are those of [`geomlin.neighbors.radius_pairs`][] (two or
    three), work ``O(N log N + pairs)``. Build the edges once per batch (at the collate step, or on
    the device before the forward) and hand them to the model.
    """
    check_tensor(pos, "pos", ndim=2, finite=True)
    N, device = pos.shape[0], pos.device
    check_bool(loop, "loop")
    if cutoff is not None:
        cutoff = check_positive_float(cutoff, "cutoff")
    if batch is None:
        batch = torch.zeros(N, dtype=torch.int64, device=device)
    layout = as_layout(batch=batch, num_items=N)
    if cutoff is not None:
        src, dst, _ = radius_pairs(pos, cutoff, layout.batch, loop)
        return torch.stack([src, dst])
    num_graphs, batch = layout.num_graphs, layout.batch
    # nodes of graph b are starts[b] .. starts[b+1] - 1 (the batch vector is sorted)
    starts = torch.searchsorted(batch, torch.arange(num_graphs + 1, device=device))
    counts = starts[1:] - starts[:-1]
    width = counts if loop else (counts - 1).clamp_min(0)  # sources per target
    pairs = counts * width
    if layout.sizes:  # the output size from the host sizes: no sync
        total = sum(n * (n if loop else max(n - 1, 0)) for n in layout.sizes)
    else:
        total = int(pairs.sum())  # the one host sync (the output size)
    graph = torch.repeat_interleave(torch.arange(num_graphs, device=device), pairs, output_size=total)
    local = torch.arange(total, device=device) - (torch.cumsum(pairs, 0) - pairs)[graph]
    row = width[graph]
    target, source = local // row.clamp_min(1), local % row.clamp_min(1)
    if not loop:
        source = source + (source >= target)
    return torch.stack([starts[graph] + source, starts[graph] + target])


def _all_neighbors(pos: Tensor, cutoff: float, mask: Tensor | None) -> tuple[Tensor, Tensor]:
    """Every neighbour within ``cutoff`` of every atom, nearest first: ``(B, N, N - 1)`` slots and their
    mask ([`geomlin.neighbors.nearest_neighbors`][]); ``(B, N, 0)`` for single atoms."""
    B, N, _ = pos.shape
    if N < 2:
        return (torch.zeros(B, N, 0, dtype=torch.long, device=pos.device),
                torch.zeros(B, N, 0, dtype=torch.bool, device=pos.device))
    return nearest_neighbors(pos, N - 1, cutoff, loop=False, mask=mask)


def _check_neighbor_inputs(pos: Tensor, cutoff: float, mask: Tensor | None) -> float:
    check_tensor(pos, "pos", shape=(None, None, 3), what="B molecules of N atoms")
    if mask is not None:
        check_mask(mask, "mask", tuple(pos.shape[:2]))
    return check_positive_float(cutoff, "cutoff")


def count_neighbors(pos: Tensor, cutoff: float, mask: Tensor | None = None) -> Tensor:
    """Number of neighbours of every atom closer than ``cutoff``: ``(B, N)`` int64.

    Parameters
    ----------
    pos : Tensor
        ``(B, N, 3)`` float positions of ``B`` padded molecules.
    cutoff : float
        Radius; a pair counts when ``|p_j - p_i| < cutoff`` (strictly, as the smooth cutoffs of the
        potentials vanish at ``cutoff``), ``j != i``.
    mask : Tensor, optional
        ``(B, N)`` bool, the real atoms; padded atoms have no neighbours and are no one's neighbour.

    Returns
    -------
    Tensor
        ``(B, N)`` int64 on ``pos``'s device, computed without a host sync (shapes only).
    """
    cutoff = _check_neighbor_inputs(pos, cutoff, mask)
    return _all_neighbors(pos, cutoff, mask)[1].sum(dim=-1)


def padded_neighbors(pos: Tensor, cutoff: float, max_neighbors: int,
                     mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """The neighbours within ``cutoff`` of every atom, nearest first, in ``max_neighbors`` fixed slots.

    A static-shape neighbour list: its shapes depend only on ``B, N`` and ``K = max_neighbors``, never
    on the positions, so it is built on any device without a host sync, traces into one
    ``torch.compile(fullgraph=True)`` graph, and that graph serves every frame of a trajectory. The
    work and memory are ``O(B N^2)`` (all pairs are measured and sorted by
    [`geomlin.neighbors.nearest_neighbors`][], the ``K`` nearest kept): meant for molecules of up to a
    few hundred atoms; for large systems use a cell list at the data boundary
    ([`geomlin.neighbors.radius_pairs`][]).

    Parameters
    ----------
    pos : Tensor
        ``(B, N, 3)`` float positions of ``B`` padded molecules (detached: the selection has no
        gradient; the models compute the edge vectors from ``pos`` themselves).
    cutoff : float
        Radius; ``j != i`` is a neighbour of ``i`` when ``|p_j - p_i| < cutoff``.
    max_neighbors : int
        ``K``, the slots per atom.
    mask : Tensor, optional
        ``(B, N)`` bool, the real atoms of padded molecules: padded atoms get no neighbours and are
        no one's neighbour.

    Returns
    -------
    neighbors : Tensor
        ``(B, N, K)`` int64, ``neighbors[b, i, k]`` the atom (in ``[0, N)``, within molecule ``b``)
        in slot ``k`` of atom ``i``: its ``k``-th nearest neighbour, or ``i`` itself in an unused slot.
    edge_mask : Tensor
        ``(B, N, K)`` bool, True for the used slots. Consumers must give the unused slots zero weight
        (and keep them out of anything that divides by a distance: they have zero length).

    Raises
    ------
    ValueError
        When an atom has more than ``K`` neighbours within ``cutoff``. Nothing is ever dropped
        silently. The test goes through [`geomlin.validation.check_condition`][]: at once (on an
        accelerator inside [`geomlin.validation.deferred_checks`][] deferred to the scope's end, no host
        sync), and skipped while ``torch.compile`` traces (values cannot be read there): a compiled
        caller checks [`count_neighbors`][] outside the graph, as
        [`EnergyAndForces`][geomlin.models.md.EnergyAndForces] does on every step.
    """
    cutoff = _check_neighbor_inputs(pos, cutoff, mask)
    K = check_positive_int(max_neighbors, "max_neighbors")
    B, N, _ = pos.shape
    neighbors, edge_mask = _all_neighbors(pos, cutoff, mask)                      # (B, N, N - 1)
    check_condition(edge_mask.sum(dim=-1) <= K,
                    f"an atom has more than max_neighbors={K} neighbours within cutoff={cutoff}: raise "
                    f"max_neighbors (no neighbour is ever dropped silently)")
    k = neighbors.shape[-1]
    if k >= K:
        return neighbors[..., :K], edge_mask[..., :K]
    own = torch.arange(N, device=pos.device)[None, :, None].expand(B, N, K - k)  # fewer atoms than slots
    return torch.cat([neighbors, own], dim=-1), torch.cat([edge_mask, edge_mask.new_zeros(B, N, K - k)], dim=-1)


def padded_edge_index(neighbors: Tensor, edge_mask: Tensor) -> tuple[Tensor, Tensor]:
    """The padded neighbour list of [`padded_neighbors`][] as an edge list of the flattened batch.

    Parameters
    ----------
    neighbors, edge_mask : Tensor
        ``(B, N, K)`` int64 and bool, as [`padded_neighbors`][] returns them.

    Returns
    -------
    edge_index : Tensor
        ``(2, B N K)`` int64, rows (source ``j``, target ``i``) on the nodes ``b N + i`` of the
        flattened ``(B N, ...)`` batch, ordered by graph, then target, then slot; unused slots are
        self-pairs ``i -> i``.
    edge_mask : Tensor
        ``(B N K,)`` bool, True for the used slots.
    """
    check_tensor(neighbors, "neighbors", ndim=3, dtype="index")
    check_mask(edge_mask, "edge_mask", tuple(neighbors.shape))
    B, N, K = neighbors.shape
    offset = torch.arange(B, device=neighbors.device)[:, None, None] * N
    target = torch.arange(N, device=neighbors.device)[None, :, None].expand(B, N, K)
    return torch.stack([(neighbors + offset).reshape(-1), (target + offset).reshape(-1)]), edge_mask.reshape(-1)
