"""Graphs of batched point sets, settled at the data boundary, and the sums over their edges.

The number of edges of a batch depends on its data (graph sizes, which pairs lie within a
radius), and on an accelerator reading such a size makes the host wait for the device. So the
models of [`geomlin.models`][] never find their graph in ``forward``: they take ``edge_index``
(and ``num_graphs``) from the caller, and this module builds them once per batch, before the forward:

* [`dense_edge_index`][]: all pairs of ``B`` graphs of ``N`` nodes each (padded batches). Its size
  ``B N (N - 1)`` (or ``B N^2``) is known from the shapes, so it is built on any device without
  a host sync; [`PonitaPotential`][], [`PonitaDynamics`][]
  and [`GauntPotential`][] call it inside their forward for that reason.
* [`graph_edges`][]: all pairs within each graph of a flat PyG batch (sorted ``batch`` vector),
  optionally only those closer than a radius. On an accelerator it reads one number back (the
  count of same-graph pairs) and, with a radius, a second (the count within it); on the CPU it
  costs nothing extra. Run it where the batch is collated, or once per batch on the device.
* [`count_graphs`][]: ``batch[-1] + 1`` as a Python int (one sync on an accelerator); pass
  ``num_graphs`` to the models instead when the collate step knows it (PyG's ``Batch.num_graphs``).

[`scatter_sum`][] is the sum over edges (or nodes) that every model uses: it accumulates in at
least float32, so a bfloat16 / float16 message under autocast is summed in float32 (a bfloat16
sum of a few hundred messages would keep only about two significant digits).
"""

from __future__ import annotations

import torch
from torch import Tensor

from geomlin.validation import (
    check_batch_vector,
    check_bool,
    check_memory,
    check_nonnegative_int,
    check_positive_float,
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
    check_memory(2 * B * N * width * 8 * 2, f"dense_edge_index(num_graphs={B}, num_nodes={N}) (all pairs, int64)",
                 "use a radius graph (graph_edges) for large graphs")
    target = torch.arange(N, device=device)[:, None].expand(N, width)
    source = torch.arange(width, device=device)[None, :].expand(N, width)
    if not loop:
        source = source + (source >= target)  # skip the diagonal
    offset = torch.arange(B, device=device)[:, None, None] * N
    return torch.stack([(source + offset).reshape(-1), (target + offset).reshape(-1)])


def count_graphs(batch: Tensor) -> int:
    """Number of graphs of a sorted PyG batch vector, ``batch[-1] + 1`` (0 when empty).

    Reads one value back: a host sync on an accelerator. Pass ``num_graphs`` (PyG's
    ``Batch.num_graphs``) to the models instead where the caller knows it.
    """
    check_tensor(batch, "batch", ndim=1, dtype="int")
    return int(batch[-1]) + 1 if batch.numel() else 0


def graph_edges(pos: Tensor, batch: Tensor | None = None, num_graphs: int | None = None,
                radius: float | None = None, loop: bool = True) -> Tensor:
    """Edges between the nodes of each graph of a flat batch, optionally only those closer than ``radius``.

    Parameters
    ----------
    pos : Tensor
        ``(N, d)`` float positions (only read with ``radius``).
    batch : Tensor, optional
        ``(N,)`` sorted graph index of every node (default: one graph).
    num_graphs : int, optional
        Number of graphs (default [`count_graphs`][], one more host sync on an accelerator).
    radius : float, optional
        Keep the pairs with ``|p_j - p_i| < radius``.
    loop : bool
        Include the self-pairs ``i -> i`` (PONITA's convolutions do).

    Returns
    -------
    Tensor
        Tensor
            ``edge_index (2, E)`` int64 on ``pos``'s device, rows (source ``j``, target ``i``), ordered
            by graph, then target, then source.

        Host syncs on an accelerator: one to read ``E`` (the number of same-graph pairs,
        ``sum_b n_b^2``) and, with ``radius``, one for the pairs within it; the work and memory are
        ``O(sum_b n_b^2)``. Build the edges once per batch (at the collate step, or on the device
        before the forward) and hand them to the model.
    """
    check_tensor(pos, "pos", ndim=2, finite=True)
    N, device = pos.shape[0], pos.device
    check_bool(loop, "loop")
    if radius is not None:
        radius = check_positive_float(radius, "radius")
    if batch is None:
        batch = torch.zeros(N, dtype=torch.int64, device=device)
    if num_graphs is None:
        num_graphs = count_graphs(batch)
    num_graphs = check_nonnegative_int(num_graphs, "num_graphs")
    batch = check_batch_vector(batch, "batch", N, num_graphs=num_graphs).long()
    # nodes of graph b are starts[b] .. starts[b+1] - 1 (the batch vector is sorted)
    starts = torch.searchsorted(batch, torch.arange(num_graphs + 1, device=device))
    counts = starts[1:] - starts[:-1]
    width = counts if loop else (counts - 1).clamp_min(0)  # sources per target
    pairs = counts * width
    total = int(pairs.sum())  # the one host sync (the output size)
    graph = torch.repeat_interleave(torch.arange(num_graphs, device=device), pairs, output_size=total)
    local = torch.arange(total, device=device) - (torch.cumsum(pairs, 0) - pairs)[graph]
    row = width[graph]
    target, source = local // row.clamp_min(1), local % row.clamp_min(1)
    if not loop:
        source = source + (source >= target)
    edges = torch.stack([starts[graph] + source, starts[graph] + target])
    if radius is not None:
        p = pos.detach()
        edges = edges[:, (p[edges[0]] - p[edges[1]]).norm(dim=-1) < radius]  # host sync: the kept count
    return edges


def scatter_sum(values: Tensor, index: Tensor, num_rows: int) -> Tensor:
    """``out[r] = sum_{e : index[e] = r} values[e]``, accumulated in at least float32.

    Parameters
    ----------
    values : Tensor
        ``(E, ...)`` floating messages (bfloat16 / float16 under autocast).
    index : Tensor
        ``(E,)`` int64 row of every message, in ``[0, num_rows)`` (checked by the caller).
    num_rows : int
        Rows of the output.

    Returns
    -------
    Tensor
        ``(num_rows, ...)`` in ``values``'s dtype promoted to at least float32 (float64 stays float64).
    """
    dtype = torch.promote_types(values.dtype, torch.float32)
    out = torch.zeros(num_rows, *values.shape[1:], dtype=dtype, device=values.device)
    return out.index_add_(0, index, values.to(dtype))
