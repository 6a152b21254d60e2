"""EGNN: E(3) invariance / equivariance with geomlin.testing, permutation symmetry, forces."""

import torch

from geomlin.groups import E3
from geomlin.models import EGNNDynamics, EGNNPotential, gaussian_rbf
from geomlin.testing import assert_equivariant, assert_invariant


def _system(B=3, N=6):
    pos = 1.5 * torch.randn(B, N, 3, dtype=torch.float64)
    vel = torch.randn(B, N, 3, dtype=torch.float64)
    q = torch.randint(0, 2, (B, N, 1)).double() * 2 - 1
    return pos, vel, q


def test_potential_is_e3_invariant():
    net = EGNNPotential(num_species=5, hidden=16, layers=2).double()
    pos, _, _ = _system()
    z = torch.randint(0, 5, pos.shape[:2])
    assert_invariant(net, E3(), ("position", None), inputs=(pos, z))


def test_potential_forces_are_equivariant():
    net = EGNNPotential(num_species=5, hidden=16, layers=2).double()
    pos, _, _ = _system()
    z = torch.randint(0, 5, pos.shape[:2])

    def forces(p, zz):
        p = p.detach().requires_grad_(True)
        return -torch.autograd.grad(net(p, zz).sum(), p)[0]

    assert_equivariant(forces, E3(), ("position", None), "vector", inputs=(pos, z))


def test_potential_mask_and_permutation():
    net = EGNNPotential(num_species=5, hidden=16, layers=2).double()
    pos, _, _ = _system(B=1, N=5)
    z = torch.randint(0, 5, (1, 5))
    perm = torch.randperm(5)
    torch.testing.assert_close(net(pos, z), net(pos[:, perm], z[:, perm]), rtol=1e-12, atol=1e-12)
    padded = torch.cat([pos, torch.randn(1, 3, 3, dtype=torch.float64)], 1)
    zp = torch.cat([z, torch.zeros(1, 3, dtype=torch.long)], 1)
    mask = torch.tensor([[True] * 5 + [False] * 3])
    torch.testing.assert_close(net(pos, z), net(padded, zp, mask=mask), rtol=1e-12, atol=1e-12)


def test_dynamics_is_e3_equivariant():
    net = EGNNDynamics(hidden=16, layers=2).double()
    pos, vel, q = _system()
    assert_equivariant(net, E3(), ("position", "vector", None), "position", inputs=(pos, vel, q))


def test_rbf_oracle():
    # independent oracle: the Gaussian formula evaluated by hand at one point
    d = torch.tensor([1.3], dtype=torch.float64)
    out = gaussian_rbf(d, 5, 4.0)
    centres = torch.tensor([0.0, 1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
    torch.testing.assert_close(out[0], torch.exp(-0.5 * (1.3 - centres) ** 2))
