"""Equivariance examples of the module classes in :mod:`geomlin.models` (see tests/test_declarations.py)."""

from geomlin.models import EGNNDynamics, EGNNLayer, EGNNPotential

EXAMPLES = {
    EGNNLayer: [lambda: EGNNLayer(8, num_rbf=4),
                lambda: EGNNLayer(8, edge_dim=2, num_rbf=4, update_coords=False)],
    EGNNPotential: [lambda: EGNNPotential(num_species=5, hidden_channels=8, num_blocks=2, num_rbf=4)],
    EGNNDynamics: [lambda: EGNNDynamics(hidden_channels=8, num_blocks=2, num_rbf=4)],
}
