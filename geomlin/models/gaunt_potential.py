"""A MACE-flavoured interatomic potential built on :mod:`geomlin.gaunt` (Luo et al., ICLR 2024).

Atoms carry ``C`` channels of spherical functions (real SH coefficients up to
degree ``L``, natural parity ``0e, 1o, 2e, ...``). Each interaction block is

    m = GauntConvolution(x, pos)                 # messages: Gaunt products with edge harmonics
    b = ManyBodyGaunt(m)                         # many-body features sum_nu w_nu m^nu (Gaunt powers)
    x = x + W_l b, gated by SiLU of the scalars  # per-degree channel mixing, equivariant gate

and the energy is the sum over atoms of an MLP of the final scalar (``l = 0``)
channels. Everything is E(3) equivariant, so the energy is invariant and the
forces ``-dE/dpos`` are equivariant.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from geomlin.models.egnn import check_molecule_inputs

#: Gain on the summed messages: integral-normalised harmonics carry a factor 1/sqrt(4 pi) each, so
#: Gaunt products of them are ~4 pi too small at initialisation; this restores order-one signals.
MESSAGE_GAIN = 4 * math.pi


def _degree_index(lmax: int) -> Tensor:
    """Degree ``l`` of each SH coefficient ``0..(lmax+1)^2-1`` (e3nn order)."""
    return torch.repeat_interleave(torch.arange(lmax + 1), torch.arange(lmax + 1) * 2 + 1)


def dense_edge_index(B: int, N: int, device=None) -> Tensor:
    """All ordered pairs ``j -> i`` (``i != j``) within each of ``B`` graphs of ``N`` nodes: ``(2, B N (N-1))``."""
    i, j = torch.meshgrid(torch.arange(N, device=device), torch.arange(N, device=device), indexing="ij")
    keep = i != j
    src, dst = j[keep], i[keep]
    offset = (torch.arange(B, device=device) * N)[:, None]
    return torch.stack([(src[None] + offset).reshape(-1), (dst[None] + offset).reshape(-1)])


class DegreeLinear(nn.Module):
    """Channel mixing per degree: ``y[c', (l,m)] = sum_c W_l[c', c] x[c, (l,m)]`` on ``(..., C, (L+1)^2)``."""

    def __init__(self, channels: int, lmax: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(lmax + 1, channels, channels) / math.sqrt(channels))
        self.register_buffer("degree", _degree_index(lmax), persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        w = self.weight.to(x.dtype)[self.degree]                       # (D, C', C)
        return torch.einsum("dkc,...cd->...kd", w, x)


class GauntPotential(nn.Module):
    """Energy model ``E(pos, species)`` from Gaunt convolutions and many-body Gaunt powers.

    Parameters
    ----------
    num_species : atomic numbers must be ``< num_species``.
    channels, lmax : feature channels and SH degree.
    layers : interaction blocks.
    correlation : body order of :class:`~geomlin.gaunt.ManyBodyGaunt` (powers 1..correlation).
    cutoff : radius (Angstrom) of the convolutions.

    Shapes: ``forward(pos (B, N, 3), species (B, N) int64) -> energy (B,)`` in ``pos``'s dtype.
    """

    def __init__(self, num_species: int = 10, channels: int = 16, lmax: int = 2, layers: int = 2,
                 correlation: int = 2, cutoff: float = 5.0, num_radial: int = 8):
        super().__init__()
        from geomlin.gaunt import GauntConvolution, ManyBodyGaunt

        self.num_species, self.channels, self.lmax = num_species, channels, lmax
        self.embed = nn.Embedding(num_species, channels)
        self.convs = nn.ModuleList(
            GauntConvolution(0 if k == 0 else lmax, lmax, lmax, channels, num_radial=num_radial, cutoff=cutoff)
            for k in range(layers))
        self.many_body = nn.ModuleList(ManyBodyGaunt(lmax, lmax, channels, correlation) for _ in range(layers))
        self.mix = nn.ModuleList(DegreeLinear(channels, lmax) for _ in range(layers))
        self.readout = nn.Sequential(nn.Linear(channels, channels), nn.SiLU(), nn.Linear(channels, 1))

    def forward(self, pos: Tensor, species: Tensor) -> Tensor:
        check_molecule_inputs(pos, species, self.num_species)
        B, N, _ = pos.shape
        flat = pos.reshape(B * N, 3)
        edges = dense_edge_index(B, N, pos.device)
        dim = (self.lmax + 1) ** 2
        x = self.embed(species.reshape(-1)).to(pos.dtype)[:, :, None]          # (BN, C, 1): l = 0 only
        for k, (conv, body, mix) in enumerate(zip(self.convs, self.many_body, self.mix)):
            m = conv(x, flat, edges) * (MESSAGE_GAIN / math.sqrt(max(N - 1, 1)))
            update = mix(body(m))
            if k == 0:
                x = torch.cat([x, x.new_zeros(B * N, self.channels, dim - 1)], dim=-1)
            x = x + update
            gate = torch.sigmoid(x[..., :1])                                   # invariant gate per channel
            x = torch.cat([nn.functional.silu(x[..., :1]), x[..., 1:] * gate], dim=-1)
        e = self.readout(x[..., 0]).reshape(B, N)
        return e.sum(dim=-1)
