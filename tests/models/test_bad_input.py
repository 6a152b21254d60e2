"""Bad input to geomlin.models (PointNet, EGNN, PONITA and its orientation grids): each case names the
exception type and a phrase of the message; the documented results of empty clouds at the end."""

import dataclasses

import pytest
import torch

from geomlin.batching import batch_layout
from geomlin.models import GATrClassifier, GauntPotential
from geomlin.models.egnn import EGNNDynamics, EGNNPotential
from geomlin.models.graphs import dense_edge_index
from geomlin.models.pointnet import PointNet, VNPointNetClassifier
from geomlin.models.ponita import Ponita, PonitaDynamics, grid_symmetries, orientation_grid
from tests.refusals import assert_refused

NAN = float("nan")


def _with_nan(shape):
    x = torch.randn(*shape, dtype=torch.float64)
    x.view(-1)[0] = NAN
    return x


def _molecules(*fields):
    """A PyG batch of molecules of 2 and 3 atoms with ``fields`` (default ``pos`` and ``z``)."""
    from torch_geometric.data import Batch, Data

    fields = fields or ("pos", "z")
    items = [{"pos": torch.randn(n, 3), "z": torch.ones(n, dtype=torch.long)} for n in (2, 3)]
    return Batch.from_data_list([Data(**{k: v for k, v in d.items() if k in fields}) for d in items])


def _icosahedron_with_repeats():
    grid = orientation_grid(12, "icosahedral")
    return torch.cat([grid, grid[:3]])  # rows 12..14 repeat rows 0..2


CASES = [
    # ---- PONITA options and side inputs (issue 22)
    ("points mode with num_ori -5", lambda: Ponita(1, 8, 1, mode="points", num_ori=-5), ValueError,
     "num_ori must be >= 1, got -5"),
    ("points mode with an unknown grid", lambda: Ponita(1, 8, 1, mode="points", grid="hexagonal"), ValueError,
     "grid must be one of"),
    ("multiple_readouts as a string", lambda: Ponita(1, 8, 1, multiple_readouts="no"), TypeError,
     "multiple_readouts must be a bool, got 'no'"),
    ("dynamics charges of shape (n, B, 1)",
     lambda: PonitaDynamics(8, 1)(torch.randn(2, 5, 3), torch.randn(2, 5, 3), torch.randn(5, 2, 1)), ValueError,
     "charges must have shape (2, 5, 1)"),
    ("dynamics NaN charges",
     lambda: PonitaDynamics(8, 1)(torch.randn(2, 5, 3), torch.randn(2, 5, 3), torch.full((2, 5, 1), NAN)),
     ValueError, "charges contains NaN"),
    # ---- orientation grids
    ("grid with repeated points", lambda: grid_symmetries(_icosahedron_with_repeats()), ValueError,
     "got rows 0 and 12 equal"),
    ("grid with a zero row", lambda: grid_symmetries(torch.tensor([[1.0, 0, 0], [0, 0, 0]])), ValueError,
     "zero vector in row 1"),
    ("grid symmetries with tol 0", lambda: grid_symmetries(orientation_grid(12, "icosahedral"), tol=0.0), ValueError,
     "tol must be > 0"),
    ("repulsion grid of 20000", lambda: orientation_grid(20000, "repulsion"), ValueError,
     "would need about 26.8 GiB (estimated), above the limit of 8 GiB"),
    ("fibonacci grid of 10^9", lambda: orientation_grid(10**9), ValueError,
     "orientation_grid(num_ori=1000000000) (float64 points and temporaries) would need about 89.4 GiB"),
    ("all pairs of 10^5 nodes", lambda: dense_edge_index(10, 10**5), ValueError,
     "dense_edge_index(num_graphs=10, num_nodes=100000) (all pairs, int64) would need about"),
    # ---- EGNN (issue 24)
    ("NaN positions into EGNNPotential",
     lambda: EGNNPotential(num_species=3)(_with_nan((2, 4, 3)).float(), torch.zeros(2, 4, dtype=torch.long)),
     ValueError, "pos contains NaN"),
    ("NaN velocities into EGNNDynamics",
     lambda: EGNNDynamics()(torch.randn(2, 4, 3), _with_nan((2, 4, 3)).float(), torch.ones(2, 4, 1)), ValueError,
     "vel contains NaN"),
    ("inf charges into EGNNDynamics",
     lambda: EGNNDynamics()(torch.randn(2, 4, 3), torch.randn(2, 4, 3), torch.full((2, 4, 1), float("inf"))),
     ValueError, "charges contains NaN or inf"),
    # ---- PointNet (issue 24)
    ("PointNet num_graphs below the batch's graphs",
     lambda: PointNet(3)(torch.randn(6, 3), batch=batch_layout(batch=torch.tensor([0, 0, 1, 1, 2, 2]), num_graphs=2)),
     ValueError, "batch refers to graph 2 but there are 2 graphs (num_graphs=2"),
    # ---- PyG inputs (issue 32)
    ("padded positions with a batch vector",
     lambda: EGNNPotential(num_species=3)(torch.randn(2, 4, 3), torch.zeros(2, 4, dtype=torch.long),
                                          batch=torch.zeros(2, dtype=torch.long)),
     ValueError, "flat inputs (N_total, ...) with batch= need 2 dimensions here, got shape (2, 4, 3)"),
    ("flat species of the wrong shape",
     lambda: GauntPotential(num_species=3)(torch.randn(5, 3), torch.zeros(5, 1, dtype=torch.long),
                                           batch=torch.tensor([0, 0, 1, 1, 1])),
     ValueError, "species must have shape (N_total,) = (5,) to match pos, got (5, 1)"),
    ("a PyG batch and a mask", lambda: EGNNPotential(num_species=3)(_molecules(), mask=torch.ones(2, 3).bool()),
     ValueError, "EGNNPotential got a PyG Batch and mask="),
    ("a PyG batch without atomic numbers", lambda: EGNNPotential(num_species=3)(_molecules("pos")), ValueError,
     "has no field 'z'"),
    ("a flat GATr layout without an attention plan",
     lambda: GATrClassifier(2, average_orientations=False)(torch.randn(5, 3), batch=dataclasses.replace(
         batch_layout(batch=torch.tensor([0, 0, 1, 1, 1])), method=None)),  # as planned on a device from num_graphs
     ValueError, "no attention plan"),
    ("PointNet NaN positions", lambda: PointNet(3)(_with_nan((2, 5, 3)).float()), ValueError, "pos contains NaN"),
    ("PointNet inf features", lambda: PointNet(3, feature_dim=1)(torch.randn(2, 5, 3), features=torch.full((2, 5, 1),
                                                                                                           float("inf"))),
     ValueError, "features contains NaN or inf"),
]


@pytest.mark.parametrize("name,call,error,phrase", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_refused(name, call, error, phrase):
    assert_refused(call, error, phrase)


def test_grids_without_repeats_keep_their_symmetries():
    # oracle: the rotation group of the icosahedron has order 60 (and 120 with the improper elements)
    assert len(grid_symmetries(orientation_grid(12, "icosahedral"))) == 60
    assert len(grid_symmetries(orientation_grid(20, "icosahedral"), proper=False)) == 120


def test_pointnet_pools_an_empty_cloud_to_zeros_as_documented():
    net = PointNet(3).double()
    empty = net(torch.randn(2, 0, 3, dtype=torch.float64))
    # documented: a cloud with no points pools to zeros, so the logits are the head applied to zeros
    torch.testing.assert_close(empty, net.head(torch.zeros(2, net.head[0].in_features, dtype=torch.float64)))
    masked = net(torch.randn(2, 4, 3, dtype=torch.float64), mask=torch.zeros(2, 4, dtype=torch.bool))
    torch.testing.assert_close(empty, masked, rtol=0, atol=0)


def test_vn_classifier_gives_an_empty_cloud_the_fully_masked_result():
    net = VNPointNetClassifier(3).double()
    empty = net(torch.randn(2, 0, 3, dtype=torch.float64))
    assert torch.isfinite(empty).all()
    masked = net(torch.randn(2, 4, 3, dtype=torch.float64), torch.zeros(2, 4, dtype=torch.bool))
    torch.testing.assert_close(empty, masked, rtol=1e-12, atol=1e-12)
