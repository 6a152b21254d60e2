"""geomlin: equivariant geometric deep learning in PyTorch.

Floors, lowest first: each imports only from the floors listed before it (tests/test_layout.py).

The ground floor: plumbing every package shares, one home per piece, importing nothing above it.

* ``geomlin.tables`` — the one ``ConstantTables`` and the one device cache every kernel reads;
* ``geomlin.precision`` — the autocast rule (float32 or float64, autocast off where it matters);
* ``geomlin.validation`` — the shared input checks every public boundary uses (deferred on
  accelerators only inside an explicit ``deferred_checks()`` scope);
* ``geomlin.batching`` — the one batch layout (padded or flat PyG), planned once at the data boundary:
  graph counts, scatter sums, pools, padded <-> flat converters;
* ``geomlin.radial`` — radial bases and cutoff envelopes of pair distances;
* ``geomlin.linalg`` — sync-free small-matrix solvers (Jacobi eigenvectors and SVD, exponentials);
* ``geomlin.io_atomic`` — atomic file writes;
* ``geomlin.neighbors`` — the one neighbour search: cell lists for clouds and periodic cells, dense slots.

The core:

* ``geomlin.algebra`` — Clifford algebras of any signature (blade tables, the algebra), G(3,0,1);
* ``geomlin.groups`` — symmetry groups as generators (matrix groups, rigid motions, versor groups),
  sampling, the one parser of group names;
* ``geomlin.reps`` — feature types: representations and their algebra, multivectors, sphere
  coefficients, tensors of order k, positions / vectors / scalars, images, and how each is acted on;
* ``geomlin.testing`` — the one equivariance checker every test uses.

The five layer families, on one floor (none imports another):

* ``geomlin.linear`` — equivariant linear maps: basis solvers, diagram layers, equivariant MLPs;
* ``geomlin.clifford`` — layers on any Clifford algebra: CGENN, GLGENN weight sharing, GCAN
  group-action layers, geometric-algebra attention;
* ``geomlin.gatr`` — the Geometric Algebra Transformer on G(3,0,1);
* ``geomlin.frames`` — PCA frames, frame averaging, canonicalization;
* ``geomlin.gaunt`` — Gaunt tensor products of spherical-harmonic coefficients.

Data, models and running them:

* ``geomlin.datasets`` — offline-first loaders for molecules and point clouds (PyG data);
* ``geomlin.models`` — reference models used by the examples and the command line;
* ``geomlin.train`` — the training loop, tasks, distributed setup, checkpoints;
* ``geomlin.deploy`` — torch.export programs with dynamic sizes, AOTInductor packages with checked
  inputs, ``load`` of checkpoints and packages, the ASE calculator;
* ``geomlin.cli`` — the ``geomlin`` command (train, bench, audit, export).
"""

__version__ = "0.1.0"

#: Names served lazily from a higher floor, so that ``import geomlin`` stays light.
_LAZY = {"load": "geomlin.deploy.loading"}


def __getattr__(name: str):
    """``geomlin.load``: [`geomlin.deploy.loading.load`][] (a checkpoint or package in, a ready model out)."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'geomlin' has no attribute {name!r}")
