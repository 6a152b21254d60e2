"""Reference models used by the examples and the ``geomlin`` command.

* :class:`PointNet` — the non-equivariant point-cloud baseline (and a backbone
  for frame averaging / canonicalization);
* :class:`EGNNPotential`, :class:`EGNNDynamics` — dense E(n)-equivariant graph networks for
  molecular energies/forces and n-body dynamics.
"""

from geomlin.models.egnn import EGNNDynamics, EGNNLayer, EGNNPotential, gaussian_rbf
from geomlin.models.pointnet import PointNet, masked_max_pool, scatter_max_pool

__all__ = [
           "EGNNDynamics",
           "EGNNLayer",
           "EGNNPotential",
           "PointNet",
           "gaussian_rbf",
           "masked_max_pool",
           "scatter_max_pool",
]
