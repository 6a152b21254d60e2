"""Reference models used by the examples and the ``geomlin`` command.

* :class:`PointNet` — the non-equivariant point-cloud baseline (and a backbone
  for frame averaging / canonicalization);
* :class:`EGNNPotential`, :class:`EGNNDynamics` — dense E(n)-equivariant graph networks for
  molecular energies/forces and n-body dynamics;
* :class:`GauntPotential` — an interatomic potential from Gaunt convolutions and many-body
  Gaunt powers (:mod:`geomlin.gaunt`).
"""

from geomlin.models.egnn import EGNNDynamics, EGNNLayer, EGNNPotential, gaussian_rbf
from geomlin.models.gaunt_potential import GauntPotential, dense_edge_index
from geomlin.models.pointnet import PointNet, masked_max_pool, scatter_max_pool

__all__ = [
           "EGNNDynamics",
           "EGNNLayer",
           "EGNNPotential",
           "GauntPotential",
           "PointNet",
           "dense_edge_index",
           "gaussian_rbf",
           "masked_max_pool",
           "scatter_max_pool",
]
