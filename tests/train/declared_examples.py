"""Equivariance examples of the task models in :mod:`geomlin.train.tasks` (see tests/test_declarations.py)."""

from geomlin.train.tasks.nbody import GATrDynamics, MLPDynamics
from geomlin.train.tasks.pointcloud import GATrClassifier

EXAMPLES = {
    GATrDynamics: [lambda: GATrDynamics(hidden_mv_channels=4, hidden_s_channels=4, num_blocks=1, num_heads=2)],
    GATrClassifier: [lambda: GATrClassifier(5, hidden_mv_channels=4, hidden_s_channels=4, num_blocks=1,
                                            num_heads=2, max_points=8)],
}

NOT_EQUIVARIANT = {
    MLPDynamics: "the n-body task's non-equivariant baseline: an MLP on flattened coordinates",
}
