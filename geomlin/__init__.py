"""geomlin: equivariant geometric deep learning in PyTorch.

Subpackages (import what you need): ``geomlin.groups``, ``geomlin.reps``,
``geomlin.linear``, ``geomlin.algebra``, ``geomlin.gatr``, ``geomlin.frames``,
``geomlin.gaunt``, ``geomlin.datasets``, and the shared equivariance checker
``geomlin.testing``.
"""

__version__ = "0.1.0"
