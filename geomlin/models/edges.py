"""The edges a potential passes messages over: one convention for handing them in, one rule for finding them.

Every potential of [`geomlin.models`][] ([`GauntPotential`][geomlin.models.GauntPotential],
[`PonitaPotential`][geomlin.models.PonitaPotential], [`EGNNPotential`][geomlin.models.EGNNPotential], and
[`MoleculeEnergyModel`][geomlin.models.MoleculeEnergyModel] around any of them) takes the same
keywords, or the same fields of a PyG ``Data`` / ``Batch`` ([`EDGE_FIELDS`][]):

* ``edge_index (2, E)`` int64, rows (source ``j``, target ``i``) on the flat atoms (PyG's layout);
* ``shift (E, 3)`` integer lattice shifts ``S`` of the edges, with ``cell``: the edge ``j -> i`` joins
  atom ``i`` to the image of atom ``j`` at ``pos[j] + S @ cell`` (ASE's ``neighbor_list("ijS")``,
  matscipy's, nequip's ``edge_cell_shift``, fairchem's ``cell_offsets``);
* ``cell (G, 3, 3)`` (or ``(3, 3)`` for every graph) lattice vectors as rows, one cell per graph
  (PyG collates a per-graph ``Data.cell (1, 3, 3)`` to ``(G, 3, 3)``), and ``pbc`` (a bool, three
  bools, ``(3,)`` or ``(G, 3)`` bool; default all periodic) which of them are periodic.

[`geomlin.neighbors.neighbor_list`][] returns ``edge_index`` and ``shift`` in exactly this form. The
edge vectors are ``pos[j] - pos[i] + S @ cell`` ([`geomlin.neighbors.edge_vectors`][]), computed in
the forward, so energies are differentiable in ``pos`` (forces) and in ``cell`` (stress).

**Which edges a potential uses** ([`PotentialInputs.graph`][]):

1. ``edge_index`` given: those edges (with their shifts in a cell). Pairs beyond the model's cutoff
   may be among them: the smooth cutoffs of the potentials give them exactly zero weight.
2. a periodic ``cell`` given (no ``edge_index``): the pairs within the model's cutoff from the
   cell-list search of [`geomlin.neighbors.neighbor_list`][], with their images; a cell too small
   for the cutoff is refused there, with its height and the cutoff.
3. free molecules of at most [`DENSE_BLOCK`][] atoms each: every pair of each molecule, no search
   (for molecules that small all pairs are as fast as a search, and need no host sync on an
   accelerator; the pairs beyond the cutoff weigh zero, so the energy is the same). Padded batches
   of that width keep their padded path (all pairs, or the static padded neighbour list
   ``max_neighbors`` of compiled MD, [`padded_neighbors`][geomlin.models.graphs.padded_neighbors]).
4. anything larger: the cell-list search within the cutoff ([`geomlin.neighbors.neighbor_list`][]),
   ``O(N log N + pairs)``, linear in the number of atoms at a fixed density. A padded batch wider
   than the block is flattened first (its real atoms only).

Paths 2 and 4 read sizes back from an accelerator (the searches' host syncs) and have
data-dependent shapes, so they do not trace into one compiled graph: compiled MD uses path 3's
padded forms, and compiled or exported periodic models take ``edge_index`` and ``shift`` from the
caller (path 1; geomlin's ASE calculator does the search outside the graph).
"""

from __future__ import annotations

import dataclasses

import torch
from torch import Tensor

from geomlin.batching import BatchLayout, batch_layout
from geomlin.models.graphs import graph_edges
from geomlin.models.inputs import MOLECULE_FIELDS, graph_fields, is_graph_data, molecule_inputs
from geomlin.neighbors import edge_vectors, neighbor_list
from geomlin.validation import check_tensor, shape_str

__all__ = ["DENSE_BLOCK", "EDGE_FIELDS", "AtomGraph", "PotentialInputs", "neighbor_settings", "potential_inputs"]

#: Atoms per free molecule up to which a potential takes all pairs of the molecule as its edges
#: instead of a cell-list search (path 3 of the module docstring). At liquid density a 5 Angstrom
#: cutoff holds about 50 neighbours, so up to 64 atoms all pairs are at most ~1.3x the pairs of a
#: search, and cost no search and no host sync.
DENSE_BLOCK = 64
#: The optional fields a potential reads from a PyG ``Data`` / ``Batch`` beside ``pos`` and ``z``.
EDGE_FIELDS = ("edge_index", "shift", "cell", "pbc")


@dataclasses.dataclass(frozen=True)
class AtomGraph:
    """Flat atoms and the edges a potential passes messages over (see the module docstring).

    Attributes
    ----------
    pos : Tensor of shape (N, 3)
        float positions (the ones the caller differentiates, or a view of them).
    species : Tensor of shape (N,)
        int64 species.
    layout : BatchLayout
        the flat layout: ``layout.batch (N,)``, ``layout.num_graphs``.
    edge_index : Tensor of shape (2, E)
        int64, rows (source ``j``, target ``i``).
    shift : Tensor of shape (E, 3) or None
        integer lattice shifts (with ``cell``).
    cell : Tensor of shape (G, 3, 3) or None
        lattice vectors as rows, per graph (or one for all).
    """

    pos: Tensor
    species: Tensor
    layout: BatchLayout
    edge_index: Tensor
    shift: Tensor | None = None
    cell: Tensor | None = None

    def vectors(self) -> Tensor:
        """``(E, 3)`` edge vectors ``pos[j] - pos[i] + S @ cell`` ([`geomlin.neighbors.edge_vectors`][]):
        differentiable in ``pos`` and ``cell``, no host sync."""
        if self.shift is None:
            return edge_vectors(self.pos, self.edge_index)
        return edge_vectors(self.pos, self.edge_index, self.shift, self.cell, self.layout.batch)


@dataclasses.dataclass(frozen=True)
class PotentialInputs:
    """A potential's checked inputs in any form; [`graph`][geomlin.models.edges.PotentialInputs.graph]
    settles its edges ([`potential_inputs`][] builds it)."""

    model: str
    pos: Tensor
    species: Tensor
    layout: BatchLayout
    edge_index: Tensor | None = None
    shift: Tensor | None = None
    cell: Tensor | None = None
    pbc: object = None

    @property
    def mask(self) -> Tensor | None:
        """The padded layout's mask ``(B, N)`` (None for flat inputs)."""
        return None if self.layout.is_flat else self.layout.mask

    def largest(self) -> int:
        """Atoms of the largest molecule (padded: the width; flat: the layout's sizes, or one read)."""
        return _largest(self.layout) if self.layout.is_flat else self.pos.shape[1]

    def padded(self, max_neighbors: int | None = None) -> bool:
        """Whether the potential runs its padded path: padded molecules without edges or a cell, of at most
        [`DENSE_BLOCK`][] atoms, or any width with a static padded neighbour list (``max_neighbors``)."""
        if self.layout.is_flat or self.edge_index is not None or self.cell is not None:
            return False
        return max_neighbors is not None or self.pos.shape[1] <= DENSE_BLOCK

    def graph(self, cutoff: float, loop: bool = False) -> AtomGraph:
        """The flat atoms and their edges by the rule of the module docstring (``loop``: with self-pairs
        ``i -> i``, as PONITA's convolutions take them)."""
        pos, species, layout = self.pos, self.species, self.layout
        if not layout.is_flat:
            pos, species, layout = _flatten(pos, species, layout)
        if self.edge_index is not None:
            return AtomGraph(pos, species, layout, self.edge_index, self.shift, self.cell)
        if self.cell is not None:
            edges, shift = neighbor_list(pos.detach(), cutoff, layout.batch, self.cell.detach(), self.pbc, loop)
            return AtomGraph(pos, species, layout, edges, shift, self.cell)
        if _largest(layout) <= DENSE_BLOCK:
            return AtomGraph(pos, species, layout, graph_edges(pos.detach(), layout, loop=loop))
        edges, _ = neighbor_list(pos.detach(), cutoff, layout.batch, loop=loop)
        return AtomGraph(pos, species, layout, edges)


def potential_inputs(model: str, pos, species: Tensor | None, mask: Tensor | None, batch, num_species: int, *,
                     edge_index: Tensor | None = None, shift: Tensor | None = None, cell: Tensor | None = None,
                     pbc=None) -> PotentialInputs:
    """A potential's inputs in any form (padded, flat, PyG; [`geomlin.models.inputs`][]), checked.

    ``pos`` may be a PyG ``Data`` / ``Batch``: ``pos`` and ``z`` are read, and each of
    [`EDGE_FIELDS`][] it holds (then none of them may be given as a keyword). ``model`` names the
    caller in error messages. Raises ValueError / TypeError naming the input: edges of a padded
    batch, ``shift`` without ``cell`` and ``edge_index``, a cell per graph that does not match the
    number of graphs, edge shapes that do not agree.
    """
    if is_graph_data(pos):
        data = pos
        (pos, species), batch = graph_fields(data, MOLECULE_FIELDS, model, species=species, mask=mask, batch=batch,
                                             edge_index=edge_index, shift=shift, cell=cell, pbc=pbc)
        edge_index, shift, cell, pbc = (getattr(data, name, None) for name in EDGE_FIELDS)
    pos, species, layout = molecule_inputs(model, pos, species, mask, batch, num_species)
    graphs = layout.num_graphs if layout.is_flat else pos.shape[0]
    if edge_index is not None:
        if not layout.is_flat:
            raise ValueError(f"{model}: edge_index indexes flat atoms (pos (N_total, 3) with batch=, or a PyG "
                             f"Batch); padded molecules (B, N, 3) take their edges from the model")
        check_tensor(edge_index, "edge_index", shape=(2, None), dtype="index", what="rows (source j, target i)")
    if shift is not None:
        if edge_index is None or cell is None:
            raise ValueError(f"{model}: shift (the lattice shifts of edge_index) needs edge_index and cell")
        check_tensor(shift, "shift", shape=(edge_index.shape[1], 3), dtype=("int", "float"),
                     what="one integer lattice shift per edge of edge_index")
    if cell is not None:
        check_tensor(cell, "cell", dtype=(torch.float32, torch.float64), what="lattice vectors as rows")
        cell = cell.to(pos.dtype)
        if cell.shape == (3, 3):
            cell = cell[None]
        if cell.ndim != 3 or cell.shape[1:] != (3, 3) or cell.shape[0] not in (1, graphs):
            raise ValueError(f"{model}: cell must have shape (G, 3, 3) (one cell per graph, G = {graphs}) or "
                             f"(3, 3), got {shape_str(cell.shape)}")
        if edge_index is not None and shift is None:
            raise ValueError(f"{model}: edges in a cell need their lattice shifts: pass shift (E, 3) with "
                             "edge_index (geomlin.neighbors.neighbor_list returns both)")
    elif pbc is not None and _any_periodic(pbc):
        raise ValueError(f"{model}: pbc marks periodic axes but no cell was given")
    return PotentialInputs(model, pos, species, layout, edge_index, shift, cell, pbc)


def neighbor_settings(model) -> tuple[float, bool]:
    """``(cutoff, loop)`` of the neighbour list a potential takes: its cutoff, and whether its edges include
    the self-pairs ``(i, i)`` (its class attribute ``edge_loops``: PONITA's convolutions do).

    ``model`` may wrap the potential (a [`MoleculeEnergyModel`][geomlin.models.MoleculeEnergyModel]'s
    ``net``, a step's ``potential``). Raises ValueError for a module that names no cutoff.
    """
    inner = model
    for _ in range(4):
        if getattr(inner, "cutoff", None) is not None:
            return float(inner.cutoff), bool(getattr(inner, "edge_loops", False))
        inner = getattr(inner, "potential", None) or getattr(inner, "net", None)
        if inner is None:
            break
    raise ValueError(f"{type(model).__name__} names no cutoff: its neighbours in a periodic cell cannot be found "
                     "(pass edge_index, shift and cell)")


def _any_periodic(pbc) -> bool:
    if isinstance(pbc, Tensor):
        return bool(pbc.any())
    return bool(pbc) if isinstance(pbc, bool) else any(bool(p) for p in pbc)


def _largest(layout: BatchLayout) -> int:
    """The largest graph of a flat layout (its host sizes, or one read of the device)."""
    if layout.sizes:
        return max(layout.sizes)
    if layout.max_items:
        return layout.max_items
    counts = torch.bincount(layout.batch, minlength=layout.num_graphs)
    return int(counts.max()) if counts.numel() else 0


def _flatten(pos: Tensor, species: Tensor, layout: BatchLayout) -> tuple[Tensor, Tensor, BatchLayout]:
    """The real atoms of padded molecules ``(B, N, 3)`` as a flat batch (one read of the mask on an
    accelerator: the searches that follow sync anyway)."""
    B, N = pos.shape[:2]
    flat_pos, flat_species = pos.reshape(B * N, 3), species.reshape(B * N)
    if layout.mask is None:
        batch = torch.arange(B, device=pos.device).repeat_interleave(N)
    else:
        keep = layout.mask.reshape(-1).nonzero().squeeze(1)
        flat_pos, flat_species, batch = flat_pos.index_select(0, keep), flat_species.index_select(0, keep), keep // N
    return flat_pos, flat_species, batch_layout(batch=batch, num_graphs=B)
