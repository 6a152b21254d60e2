"""Equivariance examples of the task models in :mod:`geomlin.train.tasks` (see tests/test_declarations.py)."""

from geomlin.models import EGNNPotential
from geomlin.train.tasks.molecules import MoleculeEnergyModel
from geomlin.train.tasks.nbody import GATrDynamics, MLPDynamics
from geomlin.train.tasks.pointcloud import GATrClassifier

EXAMPLES = {
    # energy invariant, forces equivariant; a composition baseline and a scale as QM9 training sets them
    MoleculeEnergyModel: [lambda: MoleculeEnergyModel(EGNNPotential(num_species=4, hidden_channels=8, num_blocks=1),
                                                      energy_mean=-3.0, scale=2.0,
                                                      atom_energies=[0.0, -0.5, -1.5, -2.0])],
    GATrDynamics: [lambda: GATrDynamics(hidden_mv_channels=4, hidden_s_channels=4, num_blocks=1, num_heads=2)],
    GATrClassifier: [lambda: GATrClassifier(5, hidden_mv_channels=4, hidden_s_channels=4, num_blocks=1,
                                            num_heads=2, max_points=8)],
}

NOT_EQUIVARIANT = {
    MLPDynamics: "the n-body task's non-equivariant baseline: an MLP on flattened coordinates",
}
