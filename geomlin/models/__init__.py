"""Reference models used by the examples and the ``geomlin`` command.

* [`PointNet`][] — the non-equivariant point-cloud baseline (and a backbone
  for frame averaging / canonicalization);
* [`EGNNPotential`][], [`EGNNDynamics`][] — dense E(n)-equivariant graph networks for
  molecular energies/forces and n-body dynamics;
* [`GauntPotential`][] — an interatomic potential from Gaunt convolutions and many-body
  Gaunt powers ([`geomlin.gaunt`][]);
* [`VNPointNetClassifier`][] — an E(3)-invariant vector-neuron point-cloud classifier;
* [`GATrClassifier`][], [`GATrDynamics`][] — GATr on embedded coordinates for point-cloud
  classification and n-body dynamics, exact under reflections by averaging both orientations;
* [`MLPDynamics`][] — the non-equivariant n-body baseline;
* [`Ponita`][] (+ [`PonitaPotential`][], [`PonitaDynamics`][]) — SE(3) weight sharing in
  position-orientation space (Bekkers et al. 2024), in point-cloud and fiber-bundle mode;
* [`geomlin.models.inputs`][] — the one input convention of every model: padded tensors with
  ``mask=``, flat tensors with ``batch=`` (PyG's batch vector or a planned
  [`BatchLayout`][geomlin.batching.BatchLayout]), or a PyG ``Data`` / ``Batch``, with equal results;
  and the potentials' input checks;
* [`geomlin.models.graphs`][] — the edges of a batch, built once at the data boundary
  ([`graph_edges`][], [`dense_edge_index`][]), so that the forwards never wait for an accelerator,
  and the static-shape padded neighbour list of the potentials ([`padded_neighbors`][]);
* [`MoleculeEnergyModel`][] — any of the potentials' networks with the data's energy scale and
  shift, energy and forces ``-dE/dpos`` (what ``geomlin train molecules`` trains);
* [`PeriodicStep`][] — one periodic cell with its edges handed in: energy, forces and stress (the
  ASE calculator's and a periodic package's program); [`geomlin.models.edges`][] — how every
  potential takes edges and cells;
* [`geomlin.models.md`][] — [`EnergyAndForces`][], a potential's energy and forces compiled once
  for a whole MD trajectory, and [`velocity_verlet_step`][].
"""

from geomlin.models.egnn import EGNNDynamics, EGNNLayer, EGNNPotential
from geomlin.models.energy import MoleculeEnergyModel, PeriodicStep
from geomlin.models.gatr_models import GATrClassifier, GATrDynamics
from geomlin.models.gaunt_potential import GauntPotential
from geomlin.models.graphs import (
    count_neighbors,
    dense_edge_index,
    graph_edges,
    padded_edge_index,
    padded_neighbors,
)
from geomlin.models.md import EnergyAndForces, velocity_verlet_step
from geomlin.models.mlp_dynamics import MLPDynamics
from geomlin.models.pointnet import PointNet, VNPointNetClassifier
from geomlin.models.ponita import Ponita, PonitaDynamics, PonitaPotential, grid_symmetries, orientation_grid

__all__ = [
           "EGNNDynamics",
           "EGNNLayer",
           "EGNNPotential",
           "EnergyAndForces",
           "GATrClassifier",
           "GATrDynamics",
           "GauntPotential",
           "MLPDynamics",
           "MoleculeEnergyModel",
           "PeriodicStep",
           "PointNet",
           "Ponita",
           "PonitaDynamics",
           "PonitaPotential",
           "VNPointNetClassifier",
           "count_neighbors",
           "dense_edge_index",
           "graph_edges",
           "grid_symmetries",
           "orientation_grid",
           "padded_edge_index",
           "padded_neighbors",
           "velocity_verlet_step",
]
