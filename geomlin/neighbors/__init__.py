"""Neighbour search, once for the whole package: cell lists for clouds and periodic cells, dense slots for small sets.

Every layer of geomlin that needs neighbours calls this package; it imports nothing of geomlin but
validation, so it sits on the lowest floor. Three entry points:

* **Clouds** (flat batches of any size, at the data boundary): [`radius_pairs`][] and
  [`knn_pairs`][] ([`geomlin.neighbors.cell_list`][]), exact cell-list searches whose output size
  depends on the data (host syncs on accelerators). The datasets' graph transforms and PONITA's
  radius graphs use them.
* **Atoms, free or in periodic cells** (flat PyG batches at the data boundary):
  [`neighbor_list`][] ([`geomlin.neighbors.periodic`][]), the pairs within a cutoff as a PyG
  ``edge_index`` with integer cell shifts ``S`` per edge (ASE's and matscipy's convention,
  ``r_ij = pos[j] - pos[i] + S @ cell``), for orthorhombic and triclinic cells with periodic
  boundaries on any subset of the three axes; [`edge_vectors`][] turns the shifts into edge vectors
  inside a forward (differentiable in ``pos`` and ``cell``, no host sync).
* **Small dense sets** (molecules, tuples of a layer, inside a model): [`nearest_neighbors`][]
  ([`geomlin.neighbors.dense`][]), the nearest points of every point in fixed slots ``(..., N, K)``,
  from all ``N^2`` distances: its shapes depend only on the input's, so it runs on any device with
  no host sync and traces into one compiled graph. The padded neighbour lists of the potentials use it.

The cell-list searches cost ``O(N log N + candidate pairs)``, linear in the number of points at a
fixed density. They read sizes back from an accelerator (two to five host syncs, listed in each
function's docstring): run them once per batch at the data boundary (a dataset transform on the
CPU, or once on the device before the forward), never inside a model. Bad input (NaN positions,
a cutoff that is not positive, ``k < 1``, a cell too small for the cutoff) is refused at once on
every device: the value checks ride on the first of those syncs.
"""

from geomlin.neighbors.cell_list import knn_pairs, radius_pairs
from geomlin.neighbors.dense import nearest_neighbors
from geomlin.neighbors.periodic import edge_vectors, neighbor_list

__all__ = ["edge_vectors", "knn_pairs", "nearest_neighbors", "neighbor_list", "radius_pairs"]
