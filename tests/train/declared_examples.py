"""Equivariance examples of the task models in :mod:`geomlin.train.tasks` (see tests/test_declarations.py)."""

from geomlin.models import EGNNPotential
from geomlin.train.tasks.molecules import MoleculeEnergyModel

EXAMPLES = {
    # energy invariant, forces equivariant; a composition baseline and a scale as QM9 training sets them
    MoleculeEnergyModel: [lambda: MoleculeEnergyModel(EGNNPotential(num_species=4, hidden_channels=8, num_blocks=1),
                                                      energy_mean=-3.0, scale=2.0,
                                                      atom_energies=[0.0, -0.5, -1.5, -2.0])],
}
