"""EGNN: E(3) invariance / equivariance with geomlin.testing (explicit and from the declared types),
permutation symmetry, forces, masks, renamed arguments, bad input."""

import pytest
import torch

from geomlin.groups import E3, SE3
from geomlin.models import EGNNDynamics, EGNNLayer, EGNNPotential
from geomlin.radial import gaussian_rbf
from geomlin.reps import Labels, Positions, Scalars, Vectors, declared_group, declared_types
from geomlin.reps.feature_type import group_key
from geomlin.testing import assert_equivariant, assert_invariant
from tests.models.potentials import energy_forces


def _system(B=3, N=6):
    pos = 1.5 * torch.randn(B, N, 3, dtype=torch.float64)
    vel = torch.randn(B, N, 3, dtype=torch.float64)
    q = torch.randint(0, 2, (B, N, 1)).double() * 2 - 1
    return pos, vel, q


def test_potential_is_e3_invariant():
    net = EGNNPotential(num_species=5, hidden_channels=16, num_blocks=2).double()
    pos, _, _ = _system()
    z = torch.randint(0, 5, pos.shape[:2])
    assert_invariant(net, E3(), (Positions(3), None), inputs=(pos, z))


def test_potential_forces_are_equivariant():
    net = EGNNPotential(num_species=5, hidden_channels=16, num_blocks=2).double()
    pos, _, _ = _system()
    z = torch.randint(0, 5, pos.shape[:2])

    def forces(p, zz):
        p = p.detach().requires_grad_(True)
        return -torch.autograd.grad(net(p, zz).sum(), p)[0]

    assert_equivariant(forces, E3(), (Positions(3), None), Vectors(3), inputs=(pos, z))


def test_potential_mask_and_permutation():
    net = EGNNPotential(num_species=5, hidden_channels=16, num_blocks=2).double()
    pos, _, _ = _system(B=1, N=5)
    z = torch.randint(0, 5, (1, 5))
    perm = torch.randperm(5)
    torch.testing.assert_close(net(pos, z), net(pos[:, perm], z[:, perm]), rtol=1e-12, atol=1e-12)
    padded = torch.cat([pos, torch.randn(1, 3, 3, dtype=torch.float64)], 1)
    zp = torch.cat([z, torch.zeros(1, 3, dtype=torch.long)], 1)
    mask = torch.tensor([[True] * 5 + [False] * 3])
    torch.testing.assert_close(net(pos, z), net(padded, zp, mask=mask), rtol=1e-12, atol=1e-12)


def test_dynamics_is_e3_equivariant():
    net = EGNNDynamics(hidden_channels=16, num_blocks=2).double()
    pos, vel, q = _system()
    assert_equivariant(net, E3(), (Positions(3), Vectors(3), None), Positions(3), inputs=(pos, vel, q))


def test_rbf_oracle():
    # independent oracle: the Gaussian formula evaluated by hand at one point
    d = torch.tensor([1.3], dtype=torch.float64)
    out = gaussian_rbf(d, 5, 4.0)
    centres = torch.tensor([0.0, 1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
    torch.testing.assert_close(out[0], torch.exp(-0.5 * (1.3 - centres) ** 2))


def test_declared_types_drive_the_checker():
    """assert_equivariant(module) alone: E(3) from the declared Positions, reflections included."""
    pot = EGNNPotential(num_species=4, hidden_channels=8, num_blocks=2).double()
    assert declared_types(pot) == ((Positions(3), Labels(4)), (Scalars(),))
    assert group_key(declared_group(pot)) == group_key(E3())
    assert_equivariant(pot)
    dyn = EGNNDynamics(hidden_channels=8, num_blocks=2).double()
    assert declared_types(dyn) == ((Positions(3), Vectors(3), Scalars(1)), (Positions(3),))
    assert_equivariant(dyn)
    assert_equivariant(dyn, group=SE3())
    assert_equivariant(EGNNLayer(8, edge_dim=1).double())


def test_dynamics_permutation_equivariant():
    net = EGNNDynamics(hidden_channels=16, num_blocks=2).double()
    pos, vel, q = _system(B=2, N=5)
    perm = torch.randperm(5)
    out = net(pos, vel, q)
    torch.testing.assert_close(net(pos[:, perm], vel[:, perm], q[:, perm]), out[:, perm], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("call, error, message", [
    (lambda n: n(torch.randn(2, 4, 3), torch.zeros(2, 4)), TypeError, "species must have an integer dtype"),
    (lambda n: n(torch.randn(2, 4, 3), torch.full((2, 4), 7)), ValueError, r"species must index atom types in \[0, 5\)"),
    (lambda n: n(torch.randn(2, 4, 3), torch.full((2, 4), -1)), ValueError, "species must index atom types"),
    (lambda n: n(torch.randn(2, 4, 2), torch.zeros(2, 4, dtype=torch.long)), ValueError, r"pos must have shape"),
    (lambda n: n(torch.randn(2, 4, 3).int(), torch.zeros(2, 4, dtype=torch.long)), TypeError, "floating-point"),
    (lambda n: n(torch.randn(2, 4, 3), torch.zeros(2, 4, dtype=torch.long), mask=torch.ones(2, 4)), TypeError,
     "mask must have dtype torch.bool"),
])
def test_potential_refuses_bad_input(call, error, message):
    with pytest.raises(error, match=message):
        call(EGNNPotential(num_species=5, hidden_channels=8, num_blocks=1))


def test_constructor_arguments():
    with pytest.raises(ValueError, match="num_blocks must be >= 1"):
        EGNNPotential(num_blocks=0)
    with pytest.raises(ValueError, match="cutoff must be > 0"):
        EGNNLayer(8, cutoff=0.0)
    with pytest.raises(ValueError, match=r"edge_attr \(B, N, N, 1\) is required"):
        EGNNLayer(8, edge_dim=1)(torch.randn(2, 3, 8), torch.randn(2, 3, 3))
    with pytest.raises(ValueError, match=r"edge_attr must have shape \(2, 3, 3, 1\)"):
        EGNNLayer(8, edge_dim=1)(torch.randn(2, 3, 8), torch.randn(2, 3, 3), edge_attr=torch.randn(2, 3, 3, 2))


@pytest.mark.parametrize("with_mask", [False, True])
def test_padded_neighbour_list_gives_the_all_pairs_energy_and_forces(with_mask):
    """Oracle: the all-pairs potential with the same weights. EGNN has no smooth envelope, so the two
    agree when every pair is within the cutoff (here 50, K >= N - 1)."""
    torch.manual_seed(0)
    dense = EGNNPotential(num_species=5, hidden_channels=8, num_blocks=2, num_basis=4, cutoff=50.0).double()
    pos, _, _ = _system(B=3, N=6)
    z = torch.randint(0, 5, pos.shape[:2])
    mask = None
    if with_mask:
        mask = torch.ones(3, 6, dtype=torch.bool)
        mask[0, 4:] = False
    e0, f0 = energy_forces(dense, pos, z, mask)
    for K in (5, 9):
        padded = EGNNPotential(num_species=5, hidden_channels=8, num_blocks=2, num_basis=4, cutoff=50.0,
                               max_neighbors=K).double()
        padded.load_state_dict(dense.state_dict())
        e, f = energy_forces(padded, pos, z, mask)
        assert torch.isfinite(f).all()
        torch.testing.assert_close(e, e0, rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(f, f0, rtol=1e-10, atol=1e-10)
    padded.max_neighbors = 4
    with pytest.raises(ValueError, match="more than max_neighbors=4 neighbours within cutoff=50.0"):
        padded(pos, z, mask=mask)


def test_layer_on_a_padded_neighbour_list():
    """With every pair a used slot the layer (edge attributes, coordinates, velocities) equals the
    all-pairs layer; with a short cutoff the result does not depend on the number of spare slots."""
    from geomlin.models.graphs import count_neighbors, padded_neighbors

    torch.manual_seed(1)
    layer = EGNNLayer(8, edge_dim=2, num_basis=4).double()
    B, N = 2, 6
    h = torch.randn(B, N, 8, dtype=torch.float64)
    pos, vel, _ = _system(B, N)
    attr = torch.randn(B, N, N, 2, dtype=torch.float64)
    mask = torch.ones(B, N, dtype=torch.bool)
    mask[1, -1] = False
    full = layer(h, pos, edge_attr=attr, vel=vel, mask=mask)
    listed = layer(h, pos, edge_attr=attr, vel=vel, mask=mask, neighbors=padded_neighbors(pos, 100.0, N + 2, mask))
    for a, b in zip(listed, full):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    most = int(count_neighbors(pos, 1.5).max())
    assert most < N - 1
    short = [layer(h, pos, edge_attr=attr, vel=vel, neighbors=padded_neighbors(pos, 1.5, K)) for K in (most, N)]
    for a, b in zip(*short):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    assert (short[0][0] - layer(h, pos, edge_attr=attr, vel=vel)[0]).abs().max() > 1e-6
    with pytest.raises(ValueError, match=r"neighbors\[0\] must have shape"):
        layer(h, pos, edge_attr=attr, neighbors=padded_neighbors(pos[:1], 1.5, N))
