"""A MACE-flavoured interatomic potential built on [`geomlin.gaunt`][] (Luo et al., ICLR 2024).

Atoms carry ``C`` channels of spherical functions (real SH coefficients up to
degree ``L``, natural parity ``0e, 1o, 2e, ...``). Each interaction block is

    m = GauntConvolution(x, pos)                 # messages: Gaunt products with edge harmonics
    b = ManyBodyGaunt(m)                         # many-body features sum_nu w_nu m^nu (Gaunt powers)
    x = x + W_l b, gated by SiLU of the scalars  # per-degree channel mixing, equivariant gate

and the energy is the sum over atoms of an MLP of the final scalar (``l = 0``)
channels. Everything is E(3) equivariant, so the energy is invariant and the
forces ``-dE/dpos`` are equivariant; the energy is a sum over atoms of functions that
treat every neighbour alike, so permuting the atoms (with their species) leaves it unchanged.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from geomlin.batching import BatchLayout, pool_sum
from geomlin.gaunt.conv import park_masked_edges
from geomlin.gaunt.layout import degree_index
from geomlin.groups import E3
from geomlin.models.edges import potential_inputs
from geomlin.models.graphs import dense_edge_index, padded_edge_index, padded_neighbors
from geomlin.reps.types import Labels, Positions, Scalars, SphereCoefficients
from geomlin.validation import (
    check_index,
    check_nonnegative_int,
    check_positive_float,
    check_positive_int,
    check_tensor,
)

#: Gain on the summed messages: integral-normalised harmonics carry a factor 1/sqrt(4 pi) each, so
#: Gaunt products of them are ~4 pi too small at initialisation; this restores order-one signals
#: (with the sum over neighbours divided by ``sqrt(avg_num_neighbors)``).
MESSAGE_GAIN = 4 * math.pi
#: Default ``avg_num_neighbors``: the neighbours of every atom of a 9-atom molecule (the bundled
#: ethanol); ``geomlin train molecules`` measures it on its training data.
DEFAULT_AVG_NUM_NEIGHBORS = 8.0
#: Padded atoms (``mask`` False) are parked this many cutoffs apart, and as far from their molecule's
#: centroid, so that no edge of theirs is within the cutoff (their messages vanish) or of zero length.
PAD_SPACING = 4.0


class DegreeLinear(nn.Module):
    """Channel mixing per degree: ``y[c', (l,m)] = sum_c W_l[c', c] x[c, (l,m)]`` on ``(..., C, (L+1)^2)``.

    O(3)-equivariant on sphere coefficients of either parity (one matrix per degree, shared by the
    ``2l + 1`` orders).
    """

    def __init__(self, channels: int, lmax: int):
        super().__init__()
        self.channels = check_positive_int(channels, "channels")
        self.lmax = check_nonnegative_int(lmax, "lmax")
        self.weight = nn.Parameter(torch.randn(lmax + 1, channels, channels) / math.sqrt(channels))
        self.register_buffer("degree", degree_index(lmax), persistent=False)
        self.type_in = SphereCoefficients(self.lmax, channels)
        self.type_out = SphereCoefficients(self.lmax, channels)

    def forward(self, x: Tensor) -> Tensor:
        self.type_in.check(x, "x")
        w = self.weight.to(x.dtype)[self.degree]                       # (D, C', C)
        return torch.einsum("dkc,...cd->...kd", w, x)


class GauntPotential(nn.Module):
    """Energy model ``E(pos, species)`` from Gaunt convolutions and many-body Gaunt powers.

    The default sizes (32 channels, ``lmax`` 3, correlation 3; the ``gaunt`` model of ``geomlin train
    molecules``) won a grid of channels {16, 32} x ``lmax`` {2, 3} x correlation {2, 3} on a validation
    split of the bundled ethanol trajectory (``benchmarks/bench_molecules.py --tune``; docs/molecules.md).

    Parameters
    ----------
    num_species : int
        atomic numbers must be ``< num_species``.
    hidden_channels : int
        feature channels.
    lmax : int
        SH degree of the features.
    num_blocks : int
        interaction blocks.
    correlation : int
        body order of [`ManyBodyGaunt`][geomlin.gaunt.powers.ManyBodyGaunt] (powers 1..correlation).
    cutoff : float
        distance (Angstrom) beyond which atoms do not interact.
    num_basis : int
        size of the Bessel radial basis.
    max_neighbors : int or None
        ``None`` (default): the edges of [`geomlin.models.edges`][] (all pairs of molecules of up to
        [`DENSE_BLOCK`][geomlin.models.edges.DENSE_BLOCK] atoms, a cell-list search beyond, periodic
        cells, or the caller's ``edge_index``). An int ``K``: padded molecules ``(B, N, 3)`` without a
        cell take a static-shape padded neighbour list, the (at most) ``K`` atoms within the cutoff of
        every atom ([`padded_neighbors`][geomlin.models.graphs.padded_neighbors], ``B N K`` edges, unused
        slots contribute exactly zero), at any ``N``; the energy is the all-pairs one (up to rounding),
        and an atom with more than ``K`` neighbours within the cutoff is a ValueError, never a
        truncation. The shapes depend on ``B, N, K`` only, so one compiled graph serves a whole
        trajectory ([`EnergyAndForces`][geomlin.models.md.EnergyAndForces]).
    avg_num_neighbors : float
        the sum of the messages at an atom is divided by ``sqrt(avg_num_neighbors)`` (and scaled by
        [`MESSAGE_GAIN`][]): a constant, so the energy is a sum of local terms (the same molecule far
        from others, or a periodic box and its supercell, get the same energy per atom). ``geomlin
        train molecules`` sets it to the mean number of neighbours within the cutoff of its training
        data.

    Shapes
    ------
    ``forward(pos (B, N, 3), species (B, N) int64, mask=None) -> energy (B,)`` in ``pos``'s
    dtype. ``mask (B, N)`` bool marks the real atoms of padded molecules of different sizes: padded
    atoms are moved out of every real atom's cutoff ([`PAD_SPACING`][]) and their energies are left
    out, so a padded molecule gets the energy (and forces) it has alone.

    ``forward(pos (N_total, 3), species (N_total,), batch=...)`` (or ``forward(data)``, a PyG
    ``Data`` / ``Batch`` with ``pos`` and ``z``; [`geomlin.models.inputs`][]) passes messages over
    a flat edge list. Edges and cells, in every form, follow [`geomlin.models.edges`][]:
    ``edge_index (2, E)`` with ``shift (E, 3)`` and ``cell (G, 3, 3)`` from the caller, or ``cell``
    (and ``pbc``) alone for the model's own periodic search. Messages are formed and summed in
    chunks of edges and recomputed in the backward pass
    ([`GauntConvolution.convolve`][geomlin.gaunt.conv.GauntConvolution.convolve]), so memory grows
    with the atoms and edges at a small constant.
    """

    #: The edges exclude the self-pairs ``(i, i)`` ([`geomlin.models.edges.neighbor_settings`][]).
    edge_loops = False

    def __init__(self, num_species: int = 10, hidden_channels: int = 32, lmax: int = 3, num_blocks: int = 2,
                 correlation: int = 3, cutoff: float = 5.0, num_basis: int = 8, max_neighbors: int | None = None,
                 avg_num_neighbors: float = DEFAULT_AVG_NUM_NEIGHBORS):
        super().__init__()
        from geomlin.gaunt import GauntConvolution, ManyBodyGaunt

        self.num_species = check_positive_int(num_species, "num_species")
        self.hidden_channels = check_positive_int(hidden_channels, "hidden_channels")
        self.lmax = check_nonnegative_int(lmax, "lmax")
        self.num_blocks = check_positive_int(num_blocks, "num_blocks")
        self.cutoff = check_positive_float(cutoff, "cutoff")
        self.max_neighbors = None if max_neighbors is None else check_positive_int(max_neighbors, "max_neighbors")
        self.avg_num_neighbors = check_positive_float(avg_num_neighbors, "avg_num_neighbors")
        self.gain = MESSAGE_GAIN / math.sqrt(self.avg_num_neighbors)
        channels = self.hidden_channels
        self.embed = nn.Embedding(num_species, channels)
        self.convs = nn.ModuleList(
            GauntConvolution(0 if k == 0 else lmax, lmax, lmax, channels, num_basis=num_basis, cutoff=cutoff)
            for k in range(num_blocks))
        self.many_body = nn.ModuleList(ManyBodyGaunt(lmax, lmax, channels, correlation) for _ in range(num_blocks))
        self.mix = nn.ModuleList(DegreeLinear(channels, lmax) for _ in range(num_blocks))
        self.readout = nn.Sequential(nn.Linear(channels, channels), nn.SiLU(), nn.Linear(channels, 1))
        self.type_in = (Positions(3, E3()), Labels(num_species))
        self.type_out = Scalars()

    def forward(self, pos: Tensor, species: Tensor | None = None, mask: Tensor | None = None, *,
                batch: Tensor | BatchLayout | None = None, edge_index: Tensor | None = None,
                shift: Tensor | None = None, cell: Tensor | None = None, pbc=None) -> Tensor:
        """Energy ``(B,)``; see the class docstring for the input forms."""
        inputs = potential_inputs("GauntPotential", pos, species, mask, batch, self.num_species,
                                  edge_index=edge_index, shift=shift, cell=cell, pbc=pbc)
        check_tensor(inputs.pos, "pos", dtype=(torch.float32, torch.float64))
        if not inputs.padded(self.max_neighbors):
            graph = inputs.graph(self.cutoff, loop=self.edge_loops)
            e = self._atom_energies(graph.pos, graph.species, graph.edge_index, -graph.vectors())
            return pool_sum(e, graph.layout).to(e.dtype)
        pos, species, mask = inputs.pos, inputs.species, inputs.mask
        B, N, _ = pos.shape
        if mask is not None:
            pos = self._park_padding(pos, mask)
        if self.max_neighbors is None:
            edges, edge_mask = dense_edge_index(B, N, device=pos.device), None  # all pairs: no host sync
        else:  # static shapes, no host sync; more than K neighbours is an error
            edges, edge_mask = padded_edge_index(*padded_neighbors(pos, self.cutoff, self.max_neighbors, mask))
        flat = pos.reshape(B * N, 3)
        vec = flat.index_select(0, edges[1]) - flat.index_select(0, edges[0])   # r_ij = pos_i - pos_j
        if edge_mask is not None:
            vec = park_masked_edges(vec, edge_mask, self.cutoff)
        e = self._atom_energies(flat, species.reshape(-1), edges, vec).reshape(B, N)
        if mask is not None:
            e = e * mask.to(e.dtype)
        return e.sum(dim=-1)

    def _atom_energies(self, pos: Tensor, species: Tensor, edges: Tensor, vec: Tensor) -> Tensor:
        """Per-atom energies ``(N,)`` of flat atoms ``pos (N, 3)``, ``species (N,)`` over ``edges (2, E)``
        with vectors ``vec (E, 3)`` (``r_ij = pos_i - pos_j``, image of ``j`` in a cell)."""
        n = pos.shape[0]
        dim = (self.lmax + 1) ** 2
        edges = check_index(edges, "edge_index", n, "atoms")
        x = self.embed(species).to(pos.dtype)[:, :, None]                      # (N, C, 1): l = 0 only
        for k, (conv, body, mix) in enumerate(zip(self.convs, self.many_body, self.mix)):
            m = conv.convolve(x, vec, edges) * self.gain
            update = mix(body(m))
            if k == 0:
                x = torch.cat([x, x.new_zeros(n, self.hidden_channels, dim - 1)], dim=-1)
            x = x + update
            gate = torch.sigmoid(x[..., :1])                                   # invariant gate per channel
            x = torch.cat([nn.functional.silu(x[..., :1]), x[..., 1:] * gate], dim=-1)
        return self.readout(x[..., 0])[..., 0]

    def _park_padding(self, pos: Tensor, mask: Tensor) -> Tensor:
        """``pos`` with padded atom ``k`` of a molecule at its centroid + ``(k + 1) PAD_SPACING cutoff`` along x.

        Measured from the centroid of the real atoms, so the placement moves with the molecule
        (translations stay exact), and no real atom is within reach: the centroid is at most the
        molecule's radius from each atom, and the first slot is ``PAD_SPACING`` cutoffs away.
        """
        weight = mask.to(pos.dtype)[..., None]                                  # (B, N, 1)
        centroid = (pos * weight).sum(dim=1, keepdim=True) / weight.sum(dim=1, keepdim=True).clamp(min=1)
        radius = ((pos - centroid).norm(dim=-1) * weight[..., 0]).amax(dim=1)[:, None, None]  # (B, 1, 1)
        slot = torch.arange(1, pos.shape[1] + 1, device=pos.device, dtype=pos.dtype)[None, :, None]
        axis = pos.new_zeros(3)
        axis[0] = 1.0
        parked = centroid + (radius + slot * PAD_SPACING * self.cutoff) * axis
        return torch.where(mask[..., None], pos, parked)

    def example_inputs(self, generator=None, dtype=torch.float64):
        """Two molecules of 5 atoms spread over ~ the cutoff, random species."""
        pos = torch.randn(2, 5, 3, generator=generator, dtype=dtype) * (0.3 * self.cutoff)
        species = torch.randint(self.num_species, (2, 5), generator=generator)
        return (pos, species), {}
