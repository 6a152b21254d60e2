"""GauntPotential: E(3)-invariant energy, E(3)-equivariant forces, permutation symmetry, declarations."""

import pytest
import torch

from geomlin import validation
from geomlin.groups import E3
from geomlin.models import GauntPotential
from geomlin.models.gaunt_potential import DegreeLinear
from geomlin.models.graphs import count_neighbors
from geomlin.reps import Labels, Positions, Scalars, Vectors
from geomlin.testing import assert_equivariant, assert_invariant
from tests.device import simulated as sim  # registers the device before any backward runs
from tests.models.potentials import assert_padded_batch_equals_each_alone, energy_forces


def _model(**kwargs):
    torch.manual_seed(0)
    net = GauntPotential(num_species=5, hidden_channels=6, lmax=2, num_blocks=2, **kwargs).double()
    with torch.no_grad():  # move off the initialisation so that every block contributes
        for p in net.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return net


def _molecules(B=2, N=6):
    pos = 1.2 * torch.randn(B, N, 3, dtype=torch.float64)
    z = torch.randint(0, 5, (B, N))
    return pos, z


def test_declared_types():
    net = _model()
    assert net.type_in == (Positions(3, E3()), Labels(5)) and net.type_out == Scalars()
    assert_equivariant(net)  # energy invariant under E(3), reflections included


def test_energy_is_e3_invariant():
    net = _model()
    pos, z = _molecules()
    energy = net(pos, z)
    assert energy.shape == (2,) and torch.isfinite(energy).all() and energy.abs().min() > 1e-6
    assert_invariant(net, E3(), (Positions(3), None), inputs=(pos, z))


def test_forces_are_e3_equivariant():
    net = _model()
    pos, z = _molecules()

    def forces(p, zz):
        p = p.detach().requires_grad_(True)
        return -torch.autograd.grad(net(p, zz).sum(), p, create_graph=True)[0]

    f = forces(pos, z)
    assert f.abs().max() > 1e-6
    assert_equivariant(forces, E3(), (Positions(3), None), Vectors(3), inputs=(pos, z))


def test_permuting_atoms_permutes_forces_and_keeps_energy():
    net = _model()
    pos, z = _molecules(B=1, N=7)
    perm = torch.randperm(7)
    p1 = pos.clone().requires_grad_(True)
    p2 = pos[:, perm].clone().requires_grad_(True)
    e1, e2 = net(p1, z), net(p2, z[:, perm])
    torch.testing.assert_close(e1, e2, rtol=1e-12, atol=1e-12)
    (f1,) = torch.autograd.grad(e1.sum(), p1)
    (f2,) = torch.autograd.grad(e2.sum(), p2)
    torch.testing.assert_close(f1[:, perm], f2, rtol=1e-10, atol=1e-12)


def test_energy_depends_on_species_and_geometry():
    net = _model()
    pos, z = _molecules(B=1, N=5)
    other = (z + 1) % 5
    assert (net(pos, z) - net(pos, other)).abs().item() > 1e-8
    assert (net(pos, z) - net(1.3 * pos, z)).abs().item() > 1e-8


def test_force_training_double_backward():
    net = _model()
    pos, z = _molecules()
    pos.requires_grad_(True)
    (forces,) = torch.autograd.grad(net(pos, z).sum(), pos, create_graph=True)
    loss = forces.pow(2).sum()
    loss.backward()
    grads = [p.grad for p in net.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)


def test_bad_inputs():
    net = _model()
    pos, z = _molecules()
    with pytest.raises(ValueError, match="species"):
        net(pos, z[:, :3])
    with pytest.raises(ValueError, match=r"species must index atom types in \[0, 5\)"):
        net(pos, z + 5)
    with pytest.raises(TypeError, match="species"):
        net(pos, z.double())
    with pytest.raises(ValueError, match="pos"):
        net(pos[..., :2], z)
    with pytest.raises(ValueError, match="NaN"):
        net(pos.clone().fill_(float("nan")), z)
    with pytest.raises(ValueError, match="num_species"):
        GauntPotential(num_species=0)
    with pytest.raises(TypeError, match="unexpected"):
        GauntPotential(hiden=3)


def test_degree_linear_mixes_channels_per_degree():
    lin = DegreeLinear(3, 2).double()
    x = torch.randn(4, 3, 9, dtype=torch.float64)
    out = lin(x)
    torch.testing.assert_close(out[..., 1:4], torch.einsum("kc,bcd->bkd", lin.weight[1].double(), x[..., 1:4]))
    assert_equivariant(lin)


def test_padded_molecules_get_the_energy_and_forces_they_have_alone():
    # oracle: each molecule evaluated on its own, without padding or mask
    torch.manual_seed(0)
    net = GauntPotential(num_species=4, hidden_channels=4, lmax=1, num_blocks=2).double()
    sizes = (5, 3)
    pos = torch.zeros(2, 5, 3, dtype=torch.float64)
    species = torch.zeros(2, 5, dtype=torch.long)
    for b, n in enumerate(sizes):
        pos[b, :n], species[b, :n] = 1.2 * torch.randn(n, 3, dtype=torch.float64), torch.randint(1, 4, (n,))
    assert_padded_batch_equals_each_alone(net, pos, species, sizes)


def test_mask_shape_is_checked():
    net = GauntPotential(num_species=3, hidden_channels=2, lmax=1, num_blocks=1)
    with pytest.raises(ValueError, match="mask"):
        net(torch.randn(2, 4, 3), torch.zeros(2, 4, dtype=torch.long), mask=torch.ones(2, 3, dtype=torch.bool))


@pytest.mark.parametrize("with_mask", [False, True])
def test_padded_neighbour_list_gives_the_all_pairs_energy_and_forces(with_mask):
    """Oracle: the all-pairs model (max_neighbors=None) with the same weights; the cutoff is small,
    so the padded list (K >= the largest neighbour count) holds fewer edges than all pairs."""
    dense = _model(cutoff=2.0)
    pos, z = _molecules(B=3, N=8)
    mask = None
    if with_mask:
        mask = torch.ones(3, 8, dtype=torch.bool)
        mask[1, 5:] = False
    most = int(count_neighbors(pos, 2.0, mask).max())
    assert 0 < most < 7  # fewer than all pairs, so the padded list is a real subset
    e0, f0 = energy_forces(dense, pos, z, mask)
    for K in (most, most + 3):
        padded = _model(cutoff=2.0, max_neighbors=K)
        padded.load_state_dict(dense.state_dict())
        e, f = energy_forces(padded, pos, z, mask)
        assert torch.isfinite(f).all()  # unused (zero-length) slots give no NaN
        torch.testing.assert_close(e, e0, rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(f, f0, rtol=1e-10, atol=1e-10)
    if with_mask:
        assert torch.count_nonzero(f[1, 5:]) == 0
    too_few = _model(cutoff=2.0, max_neighbors=most - 1)
    with pytest.raises(ValueError, match=f"more than max_neighbors={most - 1} neighbours within cutoff=2.0"):
        too_few(pos, z, mask=mask)


def test_padded_neighbour_list_is_e3_equivariant_and_sync_free():
    net = _model(cutoff=2.5, max_neighbors=7)
    assert_equivariant(net)
    pos, z = _molecules(B=2, N=8)

    def forces(p, zz):
        p = p.detach().requires_grad_(True)
        return -torch.autograd.grad(net(p, zz).sum(), p, create_graph=True)[0]

    assert_equivariant(forces, E3(), (Positions(3), None), Vectors(3), inputs=(pos, z))
    want = energy_forces(net, pos, z)
    net, pos, z = sim.to_sim((net, pos, z))
    with validation.deferred_checks(), sim.watch() as log:
        got = energy_forces(net, pos, z)
    assert not log.events, log.report()
    for a, b in zip(sim.to_cpu(got), want):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
