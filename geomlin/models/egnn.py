"""E(n)-equivariant graph network (EGNN; Satorras, Hoogeboom, Welling, ICML 2021), dense version.

For small fully connected systems (molecules of tens of atoms, n-body) every
pair interacts: the layers work on padded tensors ``(B, N, ...)`` with all ``N^2`` pairs (or a
static-shape padded neighbour list), or on a flat PyG batch ``(N_total, ...)`` with an
``edge_index`` (message passing over a flat edge list: all pairs within each molecule, or the
pairs within a cutoff from a cell list). One layer (Eqs. 3-6 of the paper, plus Eq. 7 for
velocities):

    m_ij  = phi_e(h_i, h_j, rbf(|x_i - x_j|), a_ij)
    x_i' = x_i + sum_j (x_i - x_j) phi_x(m_ij) / (N - 1)
    h_i' = h_i + phi_h(h_i, sum_j m_ij)

Invariant features ``h`` stay invariant and positions move equivariantly under
E(3) (rotations, reflections, translations) and permutations of the nodes.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from geomlin.batching import BatchLayout, pool_sum, scatter_messages, scatter_sum
from geomlin.models.edges import potential_inputs
from geomlin.models.graphs import graph_edges, padded_neighbors
from geomlin.models.inputs import particle_inputs
from geomlin.radial import gaussian_rbf, polynomial_cutoff
from geomlin.reps import Labels, Positions, Scalars, Vectors
from geomlin.validation import (
    check_bool,
    check_index,
    check_mask,
    check_nonnegative_int,
    check_positive_float,
    check_positive_int,
    check_tensor,
)

#: Default number of Gaussian radial basis functions for the pair distance.
DEFAULT_NUM_BASIS = 16
#: Size of the example systems of ``example_inputs``: 2 systems of 5 nodes.
EXAMPLE_SYSTEMS, EXAMPLE_NODES = 2, 5
#: Added to squared pair distances under the square root, so that it is smooth at 0 (self pairs are masked).
DISTANCE_EPS = 1e-12


def _pair_mask(mask: Tensor | None, B: int, N: int, device) -> Tensor:
    eye = torch.eye(N, dtype=torch.bool, device=device)
    pm = ~eye.expand(B, N, N)
    if mask is not None:
        pm = pm & mask[:, :, None] & mask[:, None, :]
    return pm


def _gather_neighbors(neighbors: tuple[Tensor, Tensor], pos: Tensor, h: Tensor, edge_attr: Tensor | None,
                      mask: Tensor | None) -> tuple[Tensor, Tensor, Tensor | None, Tensor]:
    """The sources of a padded neighbour list: ``pos_j (B, N, K, 3)``, ``h_j (B, N, K, H)``, the
    gathered ``edge_attr (B, N, K, edge_dim)`` (or None) and the used slots ``(B, N, K)`` bool."""
    index, edge_mask = neighbors
    B, N = pos.shape[:2]
    check_tensor(index, "neighbors[0]", shape=(B, N, None), dtype="index", what="B systems, N nodes, K slots")
    check_mask(edge_mask, "neighbors[1]", tuple(index.shape))
    K = index.shape[2]
    index = check_index(index, "neighbors[0]", N, "nodes")
    flat = index.reshape(B, N * K, 1)

    def gather(t: Tensor) -> Tensor:
        return t.gather(1, flat.expand(B, N * K, t.shape[-1])).reshape(B, N, K, t.shape[-1])

    if edge_attr is not None:
        edge_attr = edge_attr.gather(2, index[..., None].expand(B, N, K, edge_attr.shape[-1]))
    pm = edge_mask
    if mask is not None:
        pm = pm & mask[:, :, None] & mask.gather(1, index.reshape(B, N * K)).reshape(B, N, K)
    return gather(pos), gather(h), edge_attr, pm


class EGNNLayer(nn.Module):
    """One dense EGNN layer; see the module docstring.

    Shapes: ``h (B, N, hidden_channels)``, ``pos (B, N, 3)``, optional ``edge_attr (B, N, N, edge_dim)``,
    optional ``vel (B, N, 3)``, optional ``mask (B, N)`` bool. Returns ``(h', pos')`` (and ``vel'``
    when ``vel`` is given, then ``pos' = pos + vel'``). Optional ``neighbors``: a padded neighbour
    list ``(index (B, N, K) int64, edge_mask (B, N, K) bool)`` from
    [`padded_neighbors`][geomlin.models.graphs.padded_neighbors]; the sums then run over the used slots instead
    of all ``N - 1`` other nodes (equal when every pair is a used slot; ``edge_attr`` stays
    ``(B, N, N, edge_dim)`` and is gathered). Flat inputs: ``h (N_total, hidden_channels)``,
    ``pos``, ``vel (N_total, 3)`` with ``edge_index (2, E)`` (source ``j``, target ``i``; every
    node's neighbours, e.g. all pairs of its graph from
    [`graph_edges`][geomlin.models.graphs.graph_edges] with ``loop=False``) and
    ``edge_attr (E, edge_dim)``; the sums run over the edges. Declared types: node features
    ``Scalars(hidden_channels)`` and positions ``Positions(3)`` in and out (E(3)); edge attributes
    and masks are invariant keyword inputs.

    ``envelope=True`` weights every message by the smooth cutoff of its pair's distance
    ([`geomlin.radial.polynomial_cutoff`][] at ``cutoff``: exactly zero beyond it), which a potential
    needs to be local. Flat inputs may give ``edge_vec (E, 3)``, the vectors ``x_i - x_j`` of the edges
    (to the periodic image of ``j`` an edge joins); by default they are ``pos[i] - pos[j]``.
    """

    def __init__(self, hidden_channels: int = 64, edge_dim: int = 0, num_basis: int = DEFAULT_NUM_BASIS, cutoff: float = 5.0,
                 update_coords: bool = True, envelope: bool = False):
        super().__init__()
        self.envelope = check_bool(envelope, "envelope")
        hidden_channels = check_positive_int(hidden_channels, "hidden_channels")
        self.hidden_channels = hidden_channels
        self.edge_dim = check_nonnegative_int(edge_dim, "edge_dim")
        self.num_basis = check_positive_int(num_basis, "num_basis")
        self.cutoff = check_positive_float(cutoff, "cutoff")
        self.update_coords = update_coords
        H = hidden_channels
        self.phi_e = nn.Sequential(nn.Linear(2 * H + self.num_basis + self.edge_dim, H), nn.SiLU(),
                                   nn.Linear(H, H), nn.SiLU())
        self.phi_h = nn.Sequential(nn.Linear(2 * H, H), nn.SiLU(), nn.Linear(H, H))
        if update_coords:
            self.phi_x = nn.Sequential(nn.Linear(H, H), nn.SiLU(), nn.Linear(H, 1))
            self.phi_v = nn.Sequential(nn.Linear(H, H), nn.SiLU(), nn.Linear(H, 1))
        self.type_in = (Scalars(H), Positions(3))
        self.type_out = (Scalars(H), Positions(3))

    def example_inputs(self, generator: torch.Generator | None = None, dtype: torch.dtype = torch.float64):
        """``(h, pos)`` of 2 systems of 5 nodes, plus ``edge_attr`` when ``edge_dim > 0``."""
        B, N = EXAMPLE_SYSTEMS, EXAMPLE_NODES
        h = torch.randn(B, N, self.hidden_channels, generator=generator, dtype=dtype)
        pos = 1.5 * torch.randn(B, N, 3, generator=generator, dtype=dtype)
        kwargs = {}
        if self.edge_dim:
            kwargs["edge_attr"] = torch.randn(B, N, N, self.edge_dim, generator=generator, dtype=dtype)
        return (h, pos), kwargs

    def forward(self, h: Tensor, pos: Tensor, edge_attr: Tensor | None = None, vel: Tensor | None = None,
                mask: Tensor | None = None, neighbors: tuple[Tensor, Tensor] | None = None,
                edge_index: Tensor | None = None, edge_vec: Tensor | None = None):
        if edge_attr is None and self.edge_dim:
            raise ValueError(f"edge_attr (B, N, N, {self.edge_dim}) is required (flat: (E, {self.edge_dim})): the "
                             f"layer has edge_dim={self.edge_dim}")
        if edge_index is not None:
            if mask is not None or neighbors is not None:
                raise ValueError("edge_index is for flat inputs, which have no mask or padded neighbour list")
            return self._flat(h, pos, edge_attr, vel, edge_index, edge_vec)
        check_tensor(h, "h", shape=(None, None, self.hidden_channels), what="B systems, N nodes, hidden channels")
        B, N, H = h.shape
        check_tensor(pos, "pos", shape=(B, N, 3))
        if edge_attr is not None:
            check_tensor(edge_attr, "edge_attr", shape=(B, N, N, self.edge_dim))
        if vel is not None:
            check_tensor(vel, "vel", shape=(B, N, 3))
        if mask is not None:
            check_mask(mask, "mask", (B, N))
        if neighbors is None:                                            # all pairs: (B, N, N, ...)
            pos_j, h_j = pos[:, None, :, :].expand(B, N, N, 3), h[:, None, :, :].expand(B, N, N, H)
            pm = _pair_mask(mask, B, N, h.device)
        else:                                                            # padded list: (B, N, K, ...)
            pos_j, h_j, edge_attr, pm = _gather_neighbors(neighbors, pos, h, edge_attr, mask)
        width = pm.shape[2]
        diff = pos[:, :, None, :] - pos_j                                # (B, N, width, 3): x_i - x_j
        pm = pm.to(h.dtype)[..., None]                                   # (B, N, width, 1)
        m = self._messages(h[:, :, None, :].expand(B, N, width, H), h_j, diff, edge_attr) * pm
        h_new = h + self.phi_h(torch.cat([h, m.sum(dim=2)], dim=-1))
        if mask is not None:
            h_new = h_new * mask[..., None].to(h.dtype)
        if not self.update_coords:
            return (h_new, pos) if vel is None else (h_new, pos, vel)
        n_nb = pm.sum(dim=2).clamp_min(1.0)                               # (B, N, 1) neighbour counts
        shift = (diff * self.phi_x(m) * pm).sum(dim=2) / n_nb
        return self._moved(h, h_new, pos, vel, shift)

    def _messages(self, h_i: Tensor, h_j: Tensor, diff: Tensor, edge_attr: Tensor | None) -> Tensor:
        """``m_ij = phi_e(h_i, h_j, rbf(|x_i - x_j|), a_ij)`` over any leading axes (pairs or edges), times
        the smooth cutoff of ``|x_i - x_j|`` with ``envelope``."""
        dist = torch.sqrt((diff * diff).sum(-1) + DISTANCE_EPS)
        feats = [h_i, h_j, gaussian_rbf(dist, self.num_basis, self.cutoff)]
        if edge_attr is not None:
            feats.append(edge_attr)
        m = self.phi_e(torch.cat(feats, dim=-1))
        return m * polynomial_cutoff(dist, self.cutoff)[..., None].to(m.dtype) if self.envelope else m

    def _moved(self, h: Tensor, h_new: Tensor, pos: Tensor, vel: Tensor | None, shift: Tensor):
        if vel is None:
            return h_new, pos + shift
        vel_new = self.phi_v(h) * vel + shift
        return h_new, pos + vel_new, vel_new

    def _flat(self, h: Tensor, pos: Tensor, edge_attr: Tensor | None, vel: Tensor | None, edge_index: Tensor,
              edge_vec: Tensor | None):
        """The layer on a flat batch: messages over ``edge_index`` summed at their targets, chunk by chunk
        ([`geomlin.batching.scatter_messages`][]: recomputed for the backward, not kept)."""
        check_tensor(h, "h", shape=(None, self.hidden_channels), what="N_total nodes of a flat batch, hidden channels")
        N = h.shape[0]
        check_tensor(pos, "pos", shape=(N, 3))
        check_tensor(edge_index, "edge_index", shape=(2, None), dtype="index")
        edge_index = check_index(edge_index, "edge_index", N, "nodes")
        if edge_attr is not None:
            check_tensor(edge_attr, "edge_attr", shape=(edge_index.shape[1], self.edge_dim))
        if vel is not None:
            check_tensor(vel, "vel", shape=(N, 3))
        src, dst = edge_index
        if edge_vec is None:
            diff = pos.index_select(0, dst) - pos.index_select(0, src)          # (E, 3): x_i - x_j
        else:
            diff = check_tensor(edge_vec, "edge_vec", shape=(edge_index.shape[1], 3)).to(pos.dtype)
        edge = (h.index_select(0, dst), h.index_select(0, src), diff)
        summed = scatter_messages(self._edge_terms, dst, N, edge if edge_attr is None else (*edge, edge_attr))
        summed = summed.to(h.dtype)
        h_new = h + self.phi_h(torch.cat([h, summed[:, :self.hidden_channels]], dim=-1))
        if not self.update_coords:
            return (h_new, pos) if vel is None else (h_new, pos, vel)
        n_nb = scatter_sum(torch.ones_like(diff[:, :1]), dst, N).clamp_min(1.0)
        shift = (summed[:, self.hidden_channels:] / n_nb).to(pos.dtype)
        return self._moved(h, h_new, pos, vel, shift)

    def _edge_terms(self, h_i: Tensor, h_j: Tensor, diff: Tensor, edge_attr: Tensor | None = None) -> Tensor:
        """What the flat layer sums per edge: ``m_ij (E, H)``, and ``(x_i - x_j) phi_x(m_ij) (E, 3)`` beside it
        when coordinates are updated."""
        m = self._messages(h_i, h_j, diff, edge_attr)
        return torch.cat([m, diff * self.phi_x(m)], dim=-1) if self.update_coords else m


class EGNNPotential(nn.Module):
    """Invariant energy model: atom embeddings -> EGNN layers -> per-atom energies -> sum.

    ``forward(pos (B, N, 3), species (B, N) int64, mask=None) -> energy (B,)``, flat
    ``forward(pos (N_total, 3), species (N_total,), batch=...)`` or ``forward(data)`` (a PyG
    ``Data`` / ``Batch`` with ``pos`` and ``z``; [`geomlin.models.inputs`][]); differentiate
    with respect to ``pos`` for forces ``-dE/dpos``. Energy is E(3) and permutation invariant:
    declared types ``Positions(3)``, ``Labels(num_species)`` -> ``Scalars()``. ``num_species``
    bounds the atomic numbers (``species < num_species``); ``mask (B, N)`` bool marks the real
    atoms of padded molecules. Edges and periodic cells follow [`geomlin.models.edges`][] (all pairs
    of small molecules, a cell-list search for larger systems and periodic cells, or the caller's
    ``edge_index`` with ``shift`` and ``cell``); a flat batch's messages are summed chunk by chunk
    and recomputed for the backward ([`geomlin.batching.scatter_messages`][]).

    Every message is weighted by the smooth cutoff of its pair's distance
    ([`geomlin.radial.polynomial_cutoff`][], ``envelope=True`` of [`EGNNLayer`][]), so pairs beyond
    ``cutoff`` contribute exactly zero and the energy is the same whichever edges beyond it are
    given: all pairs, a radius graph, or a padded list. ``cutoff`` is also the range of the Gaussian
    radial basis. ``max_neighbors``: ``None`` (default) for the edges above; an int ``K`` for a
    static-shape padded list of the (at most) ``K`` atoms closer than ``cutoff`` to every atom of
    padded molecules ([`padded_neighbors`][geomlin.models.graphs.padded_neighbors]; more than ``K``
    is a ValueError, never a truncation), for compiled MD.
    """

    #: The edges exclude the self-pairs ``(i, i)`` ([`geomlin.models.edges.neighbor_settings`][]).
    edge_loops = False

    def __init__(self, num_species: int = 10, hidden_channels: int = 64, num_blocks: int = 3,
                 num_basis: int = DEFAULT_NUM_BASIS, cutoff: float = 5.0, max_neighbors: int | None = None):
        super().__init__()
        num_blocks = check_positive_int(num_blocks, "num_blocks")
        self.num_species = check_positive_int(num_species, "num_species")
        self.cutoff = check_positive_float(cutoff, "cutoff")
        self.max_neighbors = None if max_neighbors is None else check_positive_int(max_neighbors, "max_neighbors")
        self.embed = nn.Embedding(self.num_species, hidden_channels)
        self.layers = nn.ModuleList(EGNNLayer(hidden_channels, num_basis=num_basis, cutoff=cutoff, update_coords=False,
                                              envelope=True) for _ in range(num_blocks))
        self.readout = nn.Sequential(nn.Linear(hidden_channels, hidden_channels), nn.SiLU(),
                                     nn.Linear(hidden_channels, 1))
        self.type_in = (Positions(3), Labels(self.num_species))
        self.type_out = Scalars()

    def example_inputs(self, generator: torch.Generator | None = None, dtype: torch.dtype = torch.float64):
        """Two molecules of 5 atoms: ``(pos (2, 5, 3), species (2, 5))``."""
        pos = 1.5 * torch.randn(EXAMPLE_SYSTEMS, EXAMPLE_NODES, 3, generator=generator, dtype=dtype)
        species = torch.randint(self.num_species, (EXAMPLE_SYSTEMS, EXAMPLE_NODES), generator=generator)
        return (pos, species), {}

    def forward(self, pos: Tensor, species: Tensor | None = None, mask: Tensor | None = None, *,
                batch: Tensor | BatchLayout | None = None, edge_index: Tensor | None = None,
                shift: Tensor | None = None, cell: Tensor | None = None, pbc=None) -> Tensor:
        """Energy ``(B,)``; see the class docstring for the input forms."""
        inputs = potential_inputs("EGNNPotential", pos, species, mask, batch, self.num_species,
                                  edge_index=edge_index, shift=shift, cell=cell, pbc=pbc)
        if not inputs.padded(self.max_neighbors):
            graph = inputs.graph(self.cutoff, loop=self.edge_loops)
            vec = -graph.vectors()                                               # x_i - (image of) x_j
            h = self.embed(graph.species).to(graph.pos.dtype)
            for layer in self.layers:
                h, _ = layer(h, graph.pos, edge_index=graph.edge_index, edge_vec=vec)
            e = self.readout(h).squeeze(-1)
            return pool_sum(e, graph.layout).to(e.dtype)
        pos, mask = inputs.pos, inputs.mask
        h = self.embed(inputs.species).to(pos.dtype)
        neighbors = None
        if self.max_neighbors is not None:  # static shapes, no host sync; more than K neighbours is an error
            neighbors = padded_neighbors(pos, self.cutoff, self.max_neighbors, mask)
        for layer in self.layers:
            h, _ = layer(h, pos, mask=mask, neighbors=neighbors)
        e = self.readout(h).squeeze(-1)
        if mask is not None:
            e = e * mask.to(e.dtype)
        return e.sum(dim=-1)


class EGNNDynamics(nn.Module):
    """EGNN for n-body prediction (Satorras et al. Sec. 5.1): positions after a fixed horizon.

    ``forward(pos (B, N, 3), vel (B, N, 3), charges (B, N, 1), mask=None) -> pos' (B, N, 3)``, flat
    ``(N_total, ...)`` with ``batch=``, or a PyG ``Data`` / ``Batch`` with
    [`PARTICLE_FIELDS`][geomlin.models.inputs.PARTICLE_FIELDS] (flat ``pos' (N_total, 3)``);
    E(3) equivariant in ``(pos, vel)``: declared types ``Positions(3)``, ``Vectors(3)``,
    ``Scalars(1)`` -> ``Positions(3)``. Edge attributes are the charge products ``q_i q_j``; node
    features start from ``|v_i|``; every pair of a system interacts.
    """

    def __init__(self, hidden_channels: int = 64, num_blocks: int = 4, num_basis: int = DEFAULT_NUM_BASIS,
                 cutoff: float = 6.0):
        super().__init__()
        hidden_channels = check_positive_int(hidden_channels, "hidden_channels")
        num_blocks = check_positive_int(num_blocks, "num_blocks")
        self.embed = nn.Linear(2, hidden_channels)
        self.layers = nn.ModuleList(EGNNLayer(hidden_channels, edge_dim=1, num_basis=num_basis, cutoff=cutoff)
                                    for _ in range(num_blocks))
        self.scale = 1.0 / math.sqrt(num_blocks)
        self.type_in = (Positions(3), Vectors(3), Scalars(1))
        self.type_out = Positions(3)

    def example_inputs(self, generator: torch.Generator | None = None, dtype: torch.dtype = torch.float64):
        """Two systems of 5 charged particles: ``pos, vel (2, 5, 3)``, charges ``(2, 5, 1)`` in ``{-1, +1}``."""
        B, N = EXAMPLE_SYSTEMS, EXAMPLE_NODES
        pos = torch.randn(B, N, 3, generator=generator, dtype=dtype)
        vel = 0.5 * torch.randn(B, N, 3, generator=generator, dtype=dtype)
        q = torch.randint(0, 2, (B, N, 1), generator=generator).to(dtype) * 2 - 1
        return (pos, vel, q), {}

    def forward(self, pos: Tensor, vel: Tensor | None = None, charges: Tensor | None = None,
                mask: Tensor | None = None, batch: Tensor | BatchLayout | None = None) -> Tensor:
        pos, vel, charges, layout = particle_inputs("EGNNDynamics", pos, vel, charges, mask, batch)
        q = charges.to(pos.dtype)
        h = self.embed(torch.cat([vel.norm(dim=-1, keepdim=True), q], dim=-1))
        x, v = pos, vel
        if layout.is_flat:
            edges = graph_edges(pos, layout, loop=False)
            edge = q[edges[0]] * q[edges[1]]
            for layer in self.layers:
                h, x, v = layer(h, x, edge_attr=edge, vel=v, edge_index=edges)
            return x
        edge = q[:, :, None, :] * q[:, None, :, :]
        for layer in self.layers:
            h, x, v = layer(h, x, edge_attr=edge, vel=v, mask=layout.mask)
        return x
