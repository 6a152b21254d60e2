"""geomlin: equivariant geometric deep learning in PyTorch.

Floors, lowest first: each imports only from the floors listed before it (tests/test_layout.py).

* ``geomlin.validation`` — the shared input checks every public boundary uses;
* ``geomlin.io_atomic`` — atomic file writes;
* ``geomlin.neighbors`` — the one neighbour search: cell lists for clouds and periodic cells, dense slots;
* ``geomlin.algebra`` — Clifford algebras of any signature, G(3,0,1);
* ``geomlin.groups`` — symmetry groups as generators (matrix groups, rigid motions, versor groups),
  sampling, the one parser of group names;
* ``geomlin.reps`` — feature types: representations and their algebra, multivectors, sphere
  coefficients, tensors of order k, positions / vectors / scalars, images, and how each is acted on;
* ``geomlin.testing`` — the one equivariance checker every test uses;
* ``geomlin.linear`` — equivariant linear maps: basis solvers, diagram layers, equivariant MLPs;
* ``geomlin.clifford`` — layers on any Clifford algebra: CGENN, GLGENN weight sharing, GCAN
  group-action layers, geometric-algebra attention;
* ``geomlin.gatr`` — the Geometric Algebra Transformer on G(3,0,1);
* ``geomlin.frames`` — PCA frames, frame averaging, canonicalization;
* ``geomlin.gaunt`` — Gaunt tensor products of spherical-harmonic coefficients;
* ``geomlin.datasets`` — offline-first loaders for molecules and point clouds (PyG data);
* ``geomlin.models`` — reference models used by the examples and the command line;
* ``geomlin.train`` — the training loop, tasks, distributed setup, checkpoints;
* ``geomlin.deploy`` — torch.export programs with dynamic sizes and AOTInductor packages;
* ``geomlin.cli`` — the ``geomlin`` command (train, bench, audit, export).
"""

__version__ = "0.1.0"
