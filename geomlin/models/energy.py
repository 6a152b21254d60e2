"""[`MoleculeEnergyModel`][]: an invariant energy network as a potential, energy and forces in data units.

The networks of [`geomlin.models`][] predict a standardised energy ``net(pos, species)``; the wrapper
adds the energy scale and shift of the data (a mean, per-element reference energies) and returns the
forces ``-dE/dpos`` by autograd, so every potential (Gaunt, PONITA, EGNN) is trained, evaluated,
exported and run in molecular dynamics the same way.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from geomlin.batching import BatchLayout, pool_sum, scatter_sum
from geomlin.models.edges import EDGE_FIELDS
from geomlin.models.inputs import MOLECULE_FIELDS, graph_fields, is_graph_data, model_layout
from geomlin.models.md import require_autograd
from geomlin.reps import Labels, Positions, Scalars, Vectors
from geomlin.reps.declarations import ExportShapes

__all__ = ["EXAMPLE_ATOMS", "MoleculeEnergyModel", "PeriodicStep"]

#: Atoms per example molecule of [`MoleculeEnergyModel.example_inputs`][].
EXAMPLE_ATOMS = 6


class MoleculeEnergyModel(nn.Module):
    """Wraps an invariant energy network: standardised energy -> physical energy and forces.

    ``E(pos, species) = energy_mean + sum_i atom_energies[species_i] + scale * net(pos, species)``.

    ``forward(pos (B, N, 3), species (B, N) int64, mask=None) -> (energy (B,), forces (B, N, 3))`` with
    ``forces = -dE/dpos`` (graph kept for training). ``mask (B, N)`` bool marks real atoms of
    padded molecules. Flat molecules ``pos (N_total, 3)``, ``species (N_total,)`` with ``batch=``,
    or a PyG ``Data`` / ``Batch`` with ``pos`` and ``z`` ([`geomlin.models.inputs`][]), give
    ``forces (N_total, 3)``; the network sees the same layout (every potential of
    [`geomlin.models`][] takes all three). ``compute_forces=False`` returns ``(energy, None)``
    without the gradient. Declared types: positions ``Positions(3)`` and species
    ``Labels(num_species)`` -> energy ``Scalars()`` (E(3) invariant) and forces ``Vectors(3)``
    (E(3) equivariant).

    Edges and periodic cells go to the network as [`geomlin.models.edges`][] describes
    (``edge_index``, ``shift``, ``cell``, ``pbc`` as keywords or fields of a PyG object). With a
    ``cell``, ``compute_stress=True`` also returns the stress ``(1 / V) dE/d(epsilon)`` ``(B, 3, 3)``
    (energy per volume in the data's units; ASE's sign and convention) from the derivative of the
    energy by the cell and the positions ([`strain_derivative`][]).
    """

    #: Exported programs take molecules of 3 atoms or more (geomlin.deploy).
    export_shapes = ExportShapes(min_items=3, reason="the dense pair list has N - 1 neighbours per atom; PyTorch "
                                 "specialises a size of 1, so a program for any N >= 3 cannot also take N = 2 "
                                 "(pad a diatomic molecule to 3 atoms)")

    def __init__(self, net: nn.Module, energy_mean: float = 0.0, scale: float = 1.0,
                 atom_energies: Tensor | list[float] | None = None):
        super().__init__()
        self.net = net
        self.num_species = int(net.num_species)
        self.register_buffer("energy_mean", torch.tensor(float(energy_mean), dtype=torch.float64))
        self.register_buffer("scale", torch.tensor(float(scale), dtype=torch.float64))
        ref = torch.zeros(self.num_species, dtype=torch.float64)
        if atom_energies is not None:
            given = torch.as_tensor(atom_energies, dtype=torch.float64).reshape(-1)
            if given.numel() > self.num_species:
                raise ValueError(f"atom_energies has {given.numel()} entries for {self.num_species} species")
            ref[:given.numel()] = given
        self.register_buffer("atom_energies", ref)
        self.type_in = (Positions(3), Labels(self.num_species))
        self.type_out = (Scalars(), Vectors(3))

    def example_inputs(self, generator: torch.Generator | None = None, dtype: torch.dtype = torch.float64):
        """Two molecules of [`EXAMPLE_ATOMS`][] atoms: ``(pos (2, 6, 3), species (2, 6))``."""
        pos = 1.5 * torch.randn(2, EXAMPLE_ATOMS, 3, generator=generator, dtype=dtype)
        species = torch.randint(self.num_species, (2, EXAMPLE_ATOMS), generator=generator)
        return (pos, species), {}

    def energy(self, pos: Tensor, species: Tensor | None = None, mask: Tensor | None = None, *,
               batch: Tensor | BatchLayout | None = None, edge_index: Tensor | None = None,
               shift: Tensor | None = None, cell: Tensor | None = None, pbc=None) -> Tensor:
        """Energy ``(B,)`` in data units (padded, flat or PyG inputs, edges and cells as [`forward`][])."""
        if is_graph_data(pos):
            data = pos
            (pos, species), batch = graph_fields(data, MOLECULE_FIELDS, "MoleculeEnergyModel", species=species,
                                                 mask=mask, batch=batch, edge_index=edge_index, shift=shift,
                                                 cell=cell, pbc=pbc)
            edge_index, shift, cell, pbc = (getattr(data, name, None) for name in EDGE_FIELDS)
        given = {"edge_index": edge_index, "shift": shift, "cell": cell, "pbc": pbc}
        edges = {k: v for k, v in given.items() if v is not None}   # a plain net(pos, species) needs none
        if batch is None:
            out = self.net(pos, species, mask=mask, **edges)
            layout = None
        else:
            layout = model_layout(pos, mask, batch)
            out = self.net(pos, species, batch=layout, **edges)
        ref = self.atom_energies.to(pos.dtype)[species]
        if layout is not None:
            ref = pool_sum(ref, layout).to(pos.dtype)
        elif mask is not None:
            ref = (ref * mask.to(pos.dtype)).sum(dim=-1)
        else:
            ref = ref.sum(dim=-1)
        return self.energy_mean.to(pos.dtype) + ref + self.scale.to(pos.dtype) * out

    def forward(self, pos: Tensor, species: Tensor | None = None, mask: Tensor | None = None,
                compute_forces: bool = True, compute_stress: bool = False, *,
                batch: Tensor | BatchLayout | None = None, edge_index: Tensor | None = None,
                shift: Tensor | None = None, cell: Tensor | None = None, pbc=None) -> tuple:
        """``(energy (B,), forces)``: padded ``(B, N, 3)`` forces, or flat ``(N_total, 3)`` for flat and PyG inputs
        (see the class docstring); ``(energy, None)`` with ``compute_forces=False``; ``(energy, forces,
        stress (B, 3, 3))`` with ``compute_stress=True`` (periodic inputs, a ``cell``)."""
        if is_graph_data(pos):
            data = pos
            (pos, species), batch = graph_fields(data, MOLECULE_FIELDS, "MoleculeEnergyModel", species=species,
                                                 mask=mask, batch=batch, edge_index=edge_index, shift=shift,
                                                 cell=cell, pbc=pbc)
            edge_index, shift, cell, pbc = (getattr(data, name, None) for name in EDGE_FIELDS)
        if batch is not None:
            batch = model_layout(pos, mask, batch)  # planned once, for the network and the reference energies
        edges = {"batch": batch, "edge_index": edge_index, "shift": shift, "pbc": pbc}
        if compute_stress and cell is None:
            raise ValueError("compute_stress=True needs the periodic cell (cell=): the stress is the energy's "
                             "derivative by a strain of the cell")
        if not compute_forces:
            if compute_stress:
                raise ValueError("compute_stress=True needs compute_forces=True")
            return self.energy(pos, species, mask, cell=cell, **edges), None
        require_autograd("MoleculeEnergyModel")
        with torch.enable_grad():
            if not pos.requires_grad:
                pos = pos.detach().requires_grad_(True)
            if not compute_stress:
                e = self.energy(pos, species, mask, cell=cell, **edges)
                (grad,) = torch.autograd.grad(e.sum(), pos, create_graph=self.training)
                return e, -grad
            graphs = pos.shape[0] if batch is None else batch.num_graphs
            cell = cell.to(pos.dtype)
            cell = (cell[None] if cell.ndim == 2 else cell).expand(graphs, 3, 3).clone()
            if not cell.requires_grad:
                cell.requires_grad_(True)
            e = self.energy(pos, species, mask, cell=cell, **edges)
            grad, grad_cell = torch.autograd.grad(e.sum(), (pos, cell), create_graph=self.training)
        stress = strain_derivative(pos, grad, cell, grad_cell, batch, graphs) / cell_volume(cell)[:, None, None]
        return e, -grad, stress


class PeriodicStep(nn.Module):
    """One periodic system with its edges handed in: ``(pos, species, edge_index, shift, cell) -> (energy, forces, stress)``.

    What the ASE calculator runs on a periodic cell and what ``geomlin export`` packages for a model
    trained on periodic frames: the neighbour search ([`geomlin.neighbors.neighbor_list`][]) is made
    outside (its output size depends on the positions, so it cannot be one compiled graph), and
    everything else is one graph with dynamic numbers of atoms and edges.

    Parameters
    ----------
    potential : nn.Module
        a [`MoleculeEnergyModel`][] (energy in data units), or an energy network of
        [`geomlin.models`][] (wrapped in one with no shift or scale).

    Shapes
    ------
    ``forward(pos (N, 3), species (N,) int64, edge_index (2, E) int64, shift (E, 3) int64, cell (1, 3, 3))``
    returns ``energy (1,)``, ``forces (N, 3)`` and ``stress (1, 3, 3)`` (energy per volume, ASE's
    sign), in ``pos``'s dtype; inference only (the graph is not kept for training).
    """

    def __init__(self, potential: nn.Module):
        super().__init__()
        self.potential = potential if isinstance(potential, MoleculeEnergyModel) else MoleculeEnergyModel(potential)
        # the cell's rows (lattice vectors) rotate with the positions; edges and integer shifts are invariant
        self.type_in = (*self.potential.type_in, None, None, Vectors(3, 3))
        self.type_out = (Scalars(), Vectors(3), None)

    def forward(self, pos: Tensor, species: Tensor, edge_index: Tensor, shift: Tensor, cell: Tensor):
        graph = torch.zeros_like(species)
        # one graph, planned without reading anything (a traced program cannot read values)
        layout = BatchLayout("flat", batch=graph, num_graphs=1, method=None, sets=graph)
        energy, forces, stress = self.potential(pos, species, compute_stress=True, batch=layout,
                                                edge_index=edge_index, shift=shift, cell=cell)
        return energy.detach(), forces.detach(), stress.detach()


def cell_volume(cell: Tensor) -> Tensor:
    """``|det cell|`` of cells ``(G, 3, 3)``: ``(G,)``."""
    return torch.linalg.det(cell).abs()


def strain_derivative(pos: Tensor, grad: Tensor, cell: Tensor, grad_cell: Tensor, layout: BatchLayout | None,
                      num_graphs: int) -> Tensor:
    """``dE/d(epsilon) (G, 3, 3)``, symmetrised: the derivative of the energy by a homogeneous strain
    ``x -> x (1 + epsilon)`` of positions and cell together, from ``dE/dpos`` and ``dE/dcell``.

    ``sum_i pos_i (x) dE/dpos_i + cell^T dE/dcell`` per graph (the virial with its sign flipped); divided
    by the cell volume it is the stress ASE reports (``(1 / V) dE/d(epsilon)``; Nielsen & Martin,
    Phys. Rev. B 32, 3780 (1985)). ``pos``, ``grad`` padded ``(B, N, 3)`` (``layout`` None) or flat
    ``(N_total, 3)`` with the flat ``layout``.
    """
    outer = pos[..., :, None] * grad[..., None, :]                           # (..., 3, 3)
    if layout is None:
        per_graph = outer.sum(dim=1)
    else:
        per_graph = scatter_sum(outer.reshape(-1, 9), layout.batch, num_graphs).reshape(num_graphs, 3, 3)
    w = per_graph.to(cell.dtype) + cell.transpose(-1, -2) @ grad_cell
    return 0.5 * (w + w.transpose(-1, -2))
