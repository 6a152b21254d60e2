"""E(n)-equivariant graph network (EGNN; Satorras, Hoogeboom, Welling, ICML 2021), dense version.

For small fully connected systems (molecules of tens of atoms, n-body) every
pair interacts, so the layers work on padded tensors ``(B, N, ...)`` with all
``N^2`` pairs — no edge lists. One layer (Eqs. 3-6 of the paper, plus Eq. 7 for velocities):

    m_ij  = phi_e(h_i, h_j, rbf(|x_i - x_j|), a_ij)
    x_i' = x_i + sum_j (x_i - x_j) phi_x(m_ij) / (N - 1)
    h_i' = h_i + phi_h(h_i, sum_j m_ij)

Invariant features ``h`` stay invariant and positions move equivariantly under
E(3) (rotations, reflections, translations) and permutations of the nodes.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

#: Default number of Gaussian radial basis functions for the pair distance.
DEFAULT_RBF = 16


def check_molecule_inputs(pos: Tensor, species: Tensor, num_species: int) -> None:
    """Validate a padded molecule batch: ``pos (B, N, 3)`` and integer ``species (B, N) < num_species``."""
    if pos.ndim != 3 or pos.shape[-1] != 3:
        raise ValueError(f"pos must be (B, N, 3), got shape {tuple(pos.shape)}")
    if species.shape != pos.shape[:2]:
        raise ValueError(f"species must be (B, N) = {tuple(pos.shape[:2])}, got {tuple(species.shape)}")
    if species.numel() and int(species.max()) >= num_species:
        raise ValueError(f"species must be < num_species={num_species}, got max {int(species.max())}")


def gaussian_rbf(dist: Tensor, num: int, cutoff: float) -> Tensor:
    """Gaussian radial basis ``(..., num)`` of ``dist (...)`` with centres evenly spaced on ``[0, cutoff]``."""
    centres = torch.linspace(0.0, cutoff, num, dtype=dist.dtype, device=dist.device)
    width = cutoff / max(num - 1, 1)
    return torch.exp(-0.5 * ((dist[..., None] - centres) / width) ** 2)


def _pair_mask(mask: Tensor | None, B: int, N: int, device) -> Tensor:
    eye = torch.eye(N, dtype=torch.bool, device=device)
    pm = ~eye.expand(B, N, N)
    if mask is not None:
        pm = pm & mask[:, :, None] & mask[:, None, :]
    return pm


class EGNNLayer(nn.Module):
    """One dense EGNN layer; see the module docstring.

    Shapes: ``h (B, N, hidden)``, ``pos (B, N, 3)``, optional ``edge_attr (B, N, N, edge_dim)``,
    optional ``vel (B, N, 3)``, optional ``mask (B, N)`` bool. Returns ``(h', pos')`` (and ``vel'``
    when ``vel`` is given, then ``pos' = pos + vel'``).
    """

    def __init__(self, hidden: int, edge_dim: int = 0, num_rbf: int = DEFAULT_RBF, cutoff: float = 5.0,
                 update_coords: bool = True):
        super().__init__()
        self.num_rbf, self.cutoff, self.update_coords = num_rbf, float(cutoff), update_coords
        self.phi_e = nn.Sequential(nn.Linear(2 * hidden + num_rbf + edge_dim, hidden), nn.SiLU(),
                                   nn.Linear(hidden, hidden), nn.SiLU())
        self.phi_h = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.SiLU(), nn.Linear(hidden, hidden))
        if update_coords:
            self.phi_x = nn.Sequential(nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, 1))
            self.phi_v = nn.Sequential(nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, 1))

    def forward(self, h: Tensor, pos: Tensor, edge_attr: Tensor | None = None, vel: Tensor | None = None,
                mask: Tensor | None = None):
        B, N, H = h.shape
        diff = pos[:, :, None, :] - pos[:, None, :, :]                   # (B, N, N, 3): x_i - x_j
        dist = torch.sqrt((diff * diff).sum(-1) + 1e-12)                # smooth at 0 (self pairs are masked)
        feats = [h[:, :, None, :].expand(B, N, N, H), h[:, None, :, :].expand(B, N, N, H),
                 gaussian_rbf(dist, self.num_rbf, self.cutoff)]
        if edge_attr is not None:
            feats.append(edge_attr)
        pm = _pair_mask(mask, B, N, h.device).to(h.dtype)[..., None]    # (B, N, N, 1)
        m = self.phi_e(torch.cat(feats, dim=-1)) * pm
        h_new = h + self.phi_h(torch.cat([h, m.sum(dim=2)], dim=-1))
        if mask is not None:
            h_new = h_new * mask[..., None].to(h.dtype)
        if not self.update_coords:
            return (h_new, pos) if vel is None else (h_new, pos, vel)
        n_nb = pm.sum(dim=2).clamp_min(1.0)                               # (B, N, 1) neighbour counts
        shift = (diff * self.phi_x(m) * pm).sum(dim=2) / n_nb
        if vel is None:
            return h_new, pos + shift
        vel_new = self.phi_v(h) * vel + shift
        return h_new, pos + vel_new, vel_new


class EGNNPotential(nn.Module):
    """Invariant energy model: atom embeddings -> EGNN layers -> per-atom energies -> sum.

    ``forward(pos (B, N, 3), species (B, N) int64, mask=None) -> energy (B,)``; differentiate
    with respect to ``pos`` for forces ``-dE/dpos``. Energy is E(3) and permutation invariant.
    ``num_species`` bounds the atomic numbers (``species < num_species``).
    """

    def __init__(self, num_species: int = 10, hidden: int = 64, layers: int = 3, num_rbf: int = DEFAULT_RBF,
                 cutoff: float = 5.0):
        super().__init__()
        self.num_species = num_species
        self.embed = nn.Embedding(num_species, hidden)
        self.layers = nn.ModuleList(EGNNLayer(hidden, num_rbf=num_rbf, cutoff=cutoff, update_coords=False)
                                    for _ in range(layers))
        self.readout = nn.Sequential(nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, 1))

    def forward(self, pos: Tensor, species: Tensor, mask: Tensor | None = None) -> Tensor:
        check_molecule_inputs(pos, species, self.num_species)
        h = self.embed(species).to(pos.dtype)
        for layer in self.layers:
            h, _ = layer(h, pos, mask=mask)
        e = self.readout(h).squeeze(-1)
        if mask is not None:
            e = e * mask.to(e.dtype)
        return e.sum(dim=-1)


class EGNNDynamics(nn.Module):
    """EGNN for n-body prediction (Satorras et al. Sec. 5.1): positions after a fixed horizon.

    ``forward(pos (B, N, 3), vel (B, N, 3), charges (B, N, 1)) -> pos' (B, N, 3)``;
    E(3) equivariant in ``(pos, vel)`` (positions as points, velocities as vectors).
    Edge attributes are the charge products ``q_i q_j``; node features start from ``|v_i|``.
    """

    def __init__(self, hidden: int = 64, layers: int = 4, num_rbf: int = DEFAULT_RBF, cutoff: float = 6.0):
        super().__init__()
        self.embed = nn.Linear(2, hidden)
        self.layers = nn.ModuleList(EGNNLayer(hidden, edge_dim=1, num_rbf=num_rbf, cutoff=cutoff)
                                    for _ in range(layers))
        self.scale = 1.0 / math.sqrt(layers)

    def forward(self, pos: Tensor, vel: Tensor, charges: Tensor) -> Tensor:
        for name, t in (("pos", pos), ("vel", vel)):
            if t.ndim != 3 or t.shape[-1] != 3:
                raise ValueError(f"{name} must be (B, N, 3), got shape {tuple(t.shape)}")
        q = charges.reshape(pos.shape[0], pos.shape[1], 1).to(pos.dtype)
        h = self.embed(torch.cat([vel.norm(dim=-1, keepdim=True), q], dim=-1))
        edge = q[:, :, None, :] * q[:, None, :, :]
        x, v = pos, vel
        for layer in self.layers:
            h, x, v = layer(h, x, edge_attr=edge, vel=v)
        return x
