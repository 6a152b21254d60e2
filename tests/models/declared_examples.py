"""Equivariance examples of the module classes in :mod:`geomlin.models` (see tests/test_declarations.py)."""

import torch

from geomlin.batching import batch_layout
from geomlin.models import (
    EGNNDynamics,
    EGNNLayer,
    EGNNPotential,
    GATrClassifier,
    GATrDynamics,
    GauntPotential,
    MLPDynamics,
    MoleculeEnergyModel,
    PeriodicStep,
    PointNet,
    Ponita,
    PonitaDynamics,
    PonitaPotential,
    VNPointNetClassifier,
)
from geomlin.models.md import EnergyAndForces
from geomlin.models.ponita import (
    BundleSpace,
    ConvNeXtBlock,
    FiberBundleConv,
    KernelBasis,
    PointConv,
    PointSpace,
)
from geomlin.neighbors import neighbor_list
from tests.randomized import randomized


def _flat_gatr_classifier():
    """The flat (PyG) layout: three clouds of 4, 6 and 2 points, both orientations in one batch, planned from
    bounds (sync-free on any device)."""
    model = randomized(GATrClassifier(5, hidden_mv_channels=4, hidden_s_channels=4, num_blocks=1, num_heads=2), 0.4)
    batch = batch_layout(batch=torch.tensor([0] * 4 + [1] * 6 + [2] * 2), num_graphs=3, max_items=6)
    return model, {"inputs": (torch.randn(12, 3, dtype=torch.float64),), "kwargs": {"batch": batch}}


def _flat_potential():
    """A flat PyG batch of molecules of 4 and 3 atoms, planned on the host (all pairs without a sync)."""
    model = EGNNPotential(num_species=5, hidden_channels=8, num_blocks=2, num_basis=4)
    batch = batch_layout(batch=torch.tensor([0] * 4 + [1] * 3))
    return model, {"inputs": (1.5 * torch.randn(7, 3, dtype=torch.float64), torch.randint(5, (7,))),
                   "kwargs": {"batch": batch}}


def _periodic_step():
    """A triclinic box thinner than twice the cutoff (several images per neighbour), its edges found once:
    positions and cell rotate together, the edges and shifts stay (the stress, a 3x3 tensor, is checked
    against its own action in tests/models/test_edges.py)."""
    model = MoleculeEnergyModel(GauntPotential(4, hidden_channels=4, lmax=2, num_blocks=1, correlation=2,
                                               cutoff=3.0), energy_mean=-1.0, scale=2.0)
    g = torch.Generator().manual_seed(0)
    cell = torch.tensor([[4.4, 0.0, 0.0], [1.3, 3.9, 0.0], [-0.8, 0.9, 4.6]], dtype=torch.float64)
    pos = torch.rand(8, 3, generator=g, dtype=torch.float64) @ cell
    edge_index, shift = neighbor_list(pos, 3.0, cell=cell[None])
    return PeriodicStep(randomized(model, 0.5)), {
        "inputs": (pos, torch.randint(4, (8,), generator=g), edge_index, shift, cell[None])}


EXAMPLES = {
    EGNNLayer: [lambda: EGNNLayer(8, num_basis=4),
                lambda: EGNNLayer(8, edge_dim=2, num_basis=4, update_coords=False)],
    EGNNPotential: [lambda: EGNNPotential(num_species=5, hidden_channels=8, num_blocks=2, num_basis=4),
                    lambda: EGNNPotential(num_species=5, hidden_channels=8, num_blocks=2, num_basis=4, cutoff=3.0,
                                          max_neighbors=4),
                    _flat_potential],
    # eager (backend=None): the compiled step is tested in tests/models/test_md.py
    EnergyAndForces: [lambda: EnergyAndForces(EGNNPotential(num_species=5, hidden_channels=8, num_blocks=2,
                                                            num_basis=4, max_neighbors=4), backend=None)],
    EGNNDynamics: [lambda: EGNNDynamics(hidden_channels=8, num_blocks=2, num_basis=4)],
    # energy invariant, forces equivariant; a composition baseline and a scale as QM9 training sets them
    MoleculeEnergyModel: [lambda: MoleculeEnergyModel(EGNNPotential(num_species=4, hidden_channels=8, num_blocks=1),
                                                      energy_mean=-3.0, scale=2.0,
                                                      atom_energies=[0.0, -0.5, -1.5, -2.0])],
    VNPointNetClassifier: [lambda: VNPointNetClassifier(5, hidden_channels=6, num_blocks=1)],
    Ponita: [
        lambda: Ponita(3, 8, 2, 1, in_vector_channels=1, out_vector_channels=2, mode="points", cutoff=2.5),
        lambda: Ponita(3, 8, 2, 2, in_vector_channels=1, out_vector_channels=1, num_ori=12, grid="icosahedral"),
        lambda: Ponita(2, 8, 1, 1, in_vector_channels=1, out_vector_channels=1, num_ori=12, grid="icosahedral",
                       complete=True, task_level="node"),
        # a float32 layer scale makes the node features float32 under autocast while the messages are not
        lambda: Ponita(2, 8, 1, 2, in_vector_channels=1, out_vector_channels=1, num_ori=12, grid="icosahedral",
                       complete=True, layer_scale=0.5, cutoff=3.0),
    ],
    PeriodicStep: [_periodic_step],
    PonitaPotential: [lambda: PonitaPotential(num_species=4, hidden_channels=8, num_blocks=1)],
    PonitaDynamics: [lambda: PonitaDynamics(hidden_channels=8, num_blocks=1, mode="points")],
    GATrDynamics: [lambda: GATrDynamics(hidden_mv_channels=4, hidden_s_channels=4, num_blocks=1, num_heads=2)],
    GATrClassifier: [lambda: GATrClassifier(5, hidden_mv_channels=4, hidden_s_channels=4, num_blocks=1,
                                            num_heads=2),
                     _flat_gatr_classifier],
}

NOT_EQUIVARIANT = {
    PointNet: "the non-equivariant baseline (frames and canonicalization wrap it)",
    MLPDynamics: "the n-body task's non-equivariant baseline: an MLP on flattened coordinates",
    KernelBasis: "an MLP on invariant pair attributes (no group acts on its input); checked inside Ponita",
    PointConv: "a PONITA layer on invariant features and kernels; its symmetry comes from how Ponita builds the "
               "attributes and is checked on Ponita",
    FiberBundleConv: "a PONITA layer on grid functions indexed by the orientation grid; equivariance needs the "
                     "grid permutation and is checked on Ponita",
    ConvNeXtBlock: "wraps a PONITA convolution (see PointConv / FiberBundleConv); checked on Ponita",
    PointSpace: "PONITA's point-cloud mode as a holder of its bases and readout (no forward); checked on Ponita",
    BundleSpace: "PONITA's fiber-bundle mode as a holder of its grid, bases and readout (no forward); checked on "
                 "Ponita",
}
