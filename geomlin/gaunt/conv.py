"""``GauntConvolution``: message passing whose messages are Gaunt products with edge harmonics.

For an edge ``j -> i`` with ``r_ij = pos[i] - pos[j]`` (in a periodic cell ``pos[i] - pos[j] - S @ cell``, the
vector from the image of ``j`` that the edge joins; [`geomlin.neighbors.edge_vectors`][] with the sign flipped)

    m_ij[c] = w_out[c, l3](|r_ij|) * gaunt( w_in[c, l1](|r_ij|) x_j[c],  Y(r_ij / |r_ij|) ),
    x_i'    = (1 / avg_degree) sum_j m_ij

where the radial weights ``w_in`` (per channel and degree of the node features) and ``w_out``
(per channel and output degree) come from a small MLP on a Bessel radial basis with a smooth
polynomial cutoff ([`geomlin.radial`][]; Luo et al., ICLR 2024, sec. 4: "equivariant convolutions").  The edge
harmonics ``Y`` do not depend on the channel, so they are transformed to the sphere grid once
per edge and shared by every channel ([`gaunt_tensor_product`][] with
``Y`` of shape ``(E, 1, D)``).  Because the harmonics have parity ``(-1)^l`` the layer is
E(3)-equivariant on natural features (``0e, 1o, 2e, ...``).

Memory: the messages are formed and summed in chunks of edges, and with autograd on each chunk is
recomputed in the backward pass ([`geomlin.batching.scatter_messages`][]): what the layer keeps
for the backward is linear in the edges with a small constant (the edge vectors and indices), not the
``C (L+1)^2`` values of every message.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from geomlin.batching import scatter_messages
from geomlin.gaunt.cache import route_tables
from geomlin.gaunt.harmonics import spherical_harmonics
from geomlin.gaunt.layout import check_layout, degree_index
from geomlin.gaunt.product import METHODS, gaunt_tensor_product, table_keys
from geomlin.groups.euclidean import E3
from geomlin.neighbors import edge_vectors
from geomlin.precision import compute_dtype
from geomlin.radial import COINCIDENT, bessel_basis, polynomial_cutoff
from geomlin.reps.types import Positions, SphereCoefficients
from geomlin.validation import (
    check_choice,
    check_condition,
    check_float,
    check_index,
    check_mask,
    check_nonnegative_int,
    check_positive_float,
    check_positive_int,
    check_tensor,
)

#: Masked-out edges (``edge_mask`` False) are given this length, in cutoffs, along x: beyond the
#: cutoff, so their messages and gradients are exactly zero, and not zero, so nothing divides by 0.
MASKED_EDGE_LENGTH = 2.0


def park_masked_edges(vec: Tensor, edge_mask: Tensor, cutoff: float) -> Tensor:
    """``vec (E, 3)`` with the edges that ``edge_mask (E,)`` marks False moved to [`MASKED_EDGE_LENGTH`][]
    cutoffs along x: beyond the cutoff, so their messages and gradients are exactly zero (and never of
    zero length, so nothing divides by 0)."""
    far = vec.new_zeros(3)
    far[0] = MASKED_EDGE_LENGTH * cutoff
    return torch.where(edge_mask[:, None], vec, far)


def _spread(lmax: int) -> Tensor:
    """``(lmax + 1, (lmax + 1)**2)`` 0/1 matrix: row ``l`` marks the coefficients of degree ``l``."""
    return torch.nn.functional.one_hot(degree_index(lmax), lmax + 1).T.to(torch.float64)


class GauntConvolution(nn.Module):
    """E(3)-equivariant convolution with Gaunt-product messages (PyG ``edge_index``).

    Build ``edge_index`` with geomlin's own search,
    [`radius_graph`][geomlin.datasets.transforms.radius_graph] (or
    [`geomlin.neighbors.radius_pairs`][]): PyG's ``torch_geometric.nn.radius_graph`` needs
    ``torch-cluster`` or ``pyg-lib``, which geomlin's extras do not install.

    Parameters
    ----------
    lmax_in, lmax_sh, lmax_out : int
        degrees of node features, edge harmonics and output.
    channels : int
        channels of the node features (kept).
    num_basis : int
        size of the Bessel basis.
    cutoff : float
        distance beyond which edges contribute nothing.
    avg_degree : float
        messages are summed and divided by this.
    hidden_channels : int
        width of the radial MLP.
    method : str
        Gaunt method (see [`gaunt_tensor_product`][]).

    Forward
    -------
    ``x (N, C, (lmax_in+1)**2)``, ``pos (N, 3)``, ``edge_index (2, E)`` int64 (row 0 = source
    ``j``, row 1 = target ``i``) -> ``(N, C, (lmax_out+1)**2)``. Optional ``edge_mask (E,)`` bool:
    edges marked False (the unused slots of a padded neighbour list,
    [`padded_neighbors`][geomlin.models.graphs.padded_neighbors]) contribute exactly zero, with zero gradient,
    whatever their endpoints (self-pairs included). Periodic cells: ``shift (E, 3)`` integer lattice
    shifts with ``cell (G, 3, 3)`` (and ``batch (N,)`` when ``G > 1``), as
    [`geomlin.neighbors.neighbor_list`][] returns them. [`convolve`][geomlin.gaunt.conv.GauntConvolution.convolve]
    takes the edge vectors directly.
    """

    def __init__(self, lmax_in: int, lmax_sh: int, lmax_out: int, channels: int, num_basis: int = 8,
                 cutoff: float = 5.0, avg_degree: float = 1.0, hidden_channels: int = 32, method: str = "auto"):
        super().__init__()
        self.lmax_in = check_nonnegative_int(lmax_in, "lmax_in")
        self.lmax_sh = check_nonnegative_int(lmax_sh, "lmax_sh")
        self.lmax_out = check_nonnegative_int(lmax_out, "lmax_out")
        self.channels = check_positive_int(channels, "channels")
        self.num_basis = check_positive_int(num_basis, "num_basis")
        self.cutoff = check_positive_float(cutoff, "cutoff")
        self.avg_degree = check_float(avg_degree, "avg_degree", minimum=0.0, strict_minimum=True)
        self.hidden_channels = check_positive_int(hidden_channels, "hidden_channels")
        self.method = check_choice(method, "method", METHODS)
        self.radial = nn.Sequential(nn.Linear(num_basis, hidden_channels), nn.SiLU(),
                                    nn.Linear(hidden_channels, channels * (lmax_in + 1 + lmax_out + 1)))
        self.register_buffer("spread_in", _spread(lmax_in), persistent=False)
        self.register_buffer("spread_out", _spread(lmax_out), persistent=False)
        self.tables = route_tables(table_keys(self.method, self.lmax_in, self.lmax_sh, self.lmax_out))
        group = E3()  # messages see only differences of positions: translations act trivially on the features
        self.type_in = (SphereCoefficients(self.lmax_in, channels, group=group), Positions(3, group), None)
        self.type_out = SphereCoefficients(self.lmax_out, channels, group=group)

    def forward(self, x: Tensor, pos: Tensor, edge_index: Tensor, edge_mask: Tensor | None = None, *,
                shift: Tensor | None = None, cell: Tensor | None = None, batch: Tensor | None = None) -> Tensor:
        x = x.to(check_layout(x, "x", self.channels, self.lmax_in))
        if x.ndim != 3:
            raise ValueError(f"x must have shape (N, {self.channels}, {(self.lmax_in + 1) ** 2}), got {tuple(x.shape)}")
        check_tensor(pos, "pos", shape=(x.shape[0], 3), dtype="any", finite=True)
        pos = pos.to(compute_dtype(pos, "pos"))
        check_tensor(edge_index, "edge_index", shape=(2, None), dtype="index")
        # on accelerators the range test is deferred and the indices clamped (geomlin.validation)
        edge_index = check_index(edge_index, "edge_index", x.shape[0], "nodes")
        vec = -edge_vectors(pos, edge_index, shift, cell, batch)                    # r_ij = pos_i - image of pos_j
        if edge_mask is not None:
            check_mask(edge_mask, "edge_mask", (edge_index.shape[1],))
            vec = park_masked_edges(vec, edge_mask, self.cutoff)
        return self.convolve(x, vec, edge_index)

    def convolve(self, x: Tensor, vec: Tensor, edge_index: Tensor) -> Tensor:
        """The convolution on given edge vectors: ``x (N, C, D_in)``, ``vec (E, 3)`` = ``r_ij`` of every edge
        ``j -> i`` of ``edge_index (2, E)`` (checked) -> ``(N, C, D_out)``.

        Messages are formed and summed at their targets in chunks of edges and, with autograd on,
        recomputed in the backward pass instead of kept ([`geomlin.batching.scatter_messages`][], twice
        differentiable): the memory held for the backward is ``vec``, the indices and the source features
        gathered per edge, not the ``O(E C D)`` sphere-function values of the messages. The numbers are those of one pass over all edges.
        """
        r = torch.linalg.vector_norm(vec, dim=-1)
        check_condition(r >= COINCIDENT, "edge_index contains an edge between coincident positions (zero-length edge)")
        src, dst = edge_index
        out = scatter_messages(self._messages, dst, x.shape[0], (x.index_select(0, src), vec))
        return out.to(x.dtype) / self.avg_degree

    def _messages(self, x_j: Tensor, vec: Tensor) -> Tensor:
        """``m_ij (E, C, D_out)`` of the edges with source features ``x_j (E, C, D_in)`` and vectors ``vec (E, 3)``."""
        r = torch.linalg.vector_norm(vec, dim=-1)
        radial = self.radial(bessel_basis(r, self.num_basis, self.cutoff).to(self.radial[0].weight.dtype))
        radial = radial.to(x_j.dtype) * polynomial_cutoff(r, self.cutoff).to(x_j.dtype)[:, None]
        radial = radial.view(-1, self.channels, self.lmax_in + 1 + self.lmax_out + 1)
        # per degree -> per coefficient by a 0/1 matrix (exact; far faster than gathering the last axis)
        w_in = radial[..., : self.lmax_in + 1] @ self.spread_in.to(x_j.dtype)      # (E, C, D_in)
        w_out = radial[..., self.lmax_in + 1:] @ self.spread_out.to(x_j.dtype)     # (E, C, D_out)
        edge_sh = spherical_harmonics(self.lmax_sh, vec.to(x_j.dtype))[:, None, :]  # (E, 1, D_sh): shared by channels
        return gaunt_tensor_product(x_j * w_in, edge_sh, self.lmax_out, self.method, tables=self.tables) * w_out

    def example_inputs(self, generator=None, dtype=torch.float64):
        """A fully connected graph of 5 nodes within the cutoff, with random features."""
        n = 5
        pos = torch.randn(n, 3, generator=generator, dtype=dtype) * (0.2 * self.cutoff)
        src, dst = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
        keep = src != dst
        edge_index = torch.stack([src[keep], dst[keep]])
        x = torch.randn(n, self.channels, (self.lmax_in + 1) ** 2, generator=generator, dtype=dtype)
        return (x, pos, edge_index), {}

    def extra_repr(self) -> str:
        return (f"lmax_in={self.lmax_in}, lmax_sh={self.lmax_sh}, lmax_out={self.lmax_out}, "
                f"channels={self.channels}, cutoff={self.cutoff}")
