"""Checks shared by the potential tests (Gaunt, EGNN, PONITA): energies and forces by autograd, and the
padded-batch oracle (each molecule evaluated alone, without padding or mask)."""

import torch


def energy_forces(net, pos, species, mask=None):
    """``(energy (B,), forces -dE/dpos (B, N, 3))`` of ``net`` at ``pos``, both detached."""
    p = pos.clone().requires_grad_(True)
    e = net(p, species) if mask is None else net(p, species, mask=mask)
    (g,) = torch.autograd.grad(e.sum(), p)
    return e.detach(), -g


def assert_padded_batch_equals_each_alone(net, pos, species, sizes):
    """Molecule ``b`` holds the first ``sizes[b]`` atoms of ``pos (B, N, 3)`` / ``species (B, N)``; the
    padded batch with its mask must give each molecule's energy and forces alone, and zero force on
    every padding slot."""
    mask = torch.zeros(species.shape, dtype=torch.bool)
    for b, n in enumerate(sizes):
        mask[b, :n] = True
    energy, forces = energy_forces(net, pos, species, mask)
    for b, n in enumerate(sizes):
        e, f = energy_forces(net, pos[b:b + 1, :n], species[b:b + 1, :n])
        torch.testing.assert_close(energy[b:b + 1], e, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(forces[b, :n], f[0], rtol=1e-10, atol=1e-12)
        assert torch.count_nonzero(forces[b, n:]) == 0  # padded atoms feel no force
