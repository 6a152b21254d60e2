"""Reference models used by the examples and the ``geomlin`` command.

* :class:`PointNet` — the non-equivariant point-cloud baseline (and a backbone
  for frame averaging / canonicalization).
"""

from geomlin.models.pointnet import PointNet, masked_max_pool, scatter_max_pool

__all__ = ["PointNet", "masked_max_pool", "scatter_max_pool"]
