"""``GauntConvolution``: message passing whose messages are Gaunt products with edge harmonics.

For an edge ``j -> i`` with ``r_ij = pos[i] - pos[j]``

    m_ij[c] = gaunt( x_j[c],  R_c,l(|r_ij|) Y_l(r_ij / |r_ij|) ),      x_i' = (1 / avg_degree) sum_j m_ij

where ``R`` is a small MLP on a Bessel radial basis with a smooth polynomial
cutoff, giving one weight per (channel, degree ``l`` of the edge harmonics)
(Luo et al., ICLR 2024, sec. 4: "equivariant convolutions").  Because the
harmonics have parity ``(-1)^l`` the layer is E(3)-equivariant on natural
features (``0e, 1o, 2e, ...``).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch_geometric.nn import MessagePassing

from geomlin.gaunt.modules import _check_layout, _degree_index
from geomlin.gaunt.product import _check_lmax, gaunt_tensor_product
from geomlin.gaunt.tables import spherical_harmonics


def bessel_basis(r: Tensor, num: int, cutoff: float) -> Tensor:
    """``sqrt(2 / c) sin(n pi r / c) / r`` for ``n = 1..num``: ``(E,) -> (E, num)``."""
    n = torch.arange(1, num + 1, device=r.device, dtype=r.dtype)
    r = r.clamp_min(1e-9)[:, None]
    return math.sqrt(2.0 / cutoff) * torch.sin(n * math.pi * r / cutoff) / r


def polynomial_cutoff(r: Tensor, cutoff: float, p: int = 6) -> Tensor:
    """Smooth envelope, 1 at ``r = 0``, 0 with ``p`` vanishing derivatives at ``r = cutoff``: ``(E,) -> (E,)``."""
    x = (r / cutoff).clamp(max=1.0)
    env = (1.0 - (p + 1.0) * (p + 2.0) / 2.0 * x ** p + p * (p + 2.0) * x ** (p + 1)
           - p * (p + 1.0) / 2.0 * x ** (p + 2))
    return env * (r < cutoff).to(r.dtype)


class GauntConvolution(MessagePassing):
    """E(3)-equivariant convolution with Gaunt-product messages (PyG ``edge_index``).

    Parameters
    ----------
    lmax_in, lmax_sh, lmax_out : degrees of node features, edge harmonics and output.
    channels : int
    num_radial : int, size of the Bessel basis.
    cutoff : float, radius beyond which edges contribute nothing.
    avg_degree : float, messages are summed and divided by this.
    method : Gaunt method (see :func:`~geomlin.gaunt.gaunt_tensor_product`).

    Forward
    -------
    x (N, C, (lmax_in+1)**2), pos (N, 3), edge_index (2, E) long (row 0 = source j,
    row 1 = target i) -> (N, C, (lmax_out+1)**2).
    """

    def __init__(self, lmax_in: int, lmax_sh: int, lmax_out: int, channels: int, num_radial: int = 8,
                 cutoff: float = 5.0, avg_degree: float = 1.0, hidden: int = 32, method: str = "auto"):
        super().__init__(aggr="add", flow="source_to_target", node_dim=0)
        for name, value in (("lmax_in", lmax_in), ("lmax_sh", lmax_sh), ("lmax_out", lmax_out)):
            _check_lmax(value, name)
        if cutoff <= 0:
            raise ValueError(f"cutoff must be > 0, got {cutoff}")
        self.lmax_in, self.lmax_sh, self.lmax_out = lmax_in, lmax_sh, lmax_out
        self.channels, self.num_radial, self.cutoff = channels, num_radial, float(cutoff)
        self.avg_degree, self.method = float(avg_degree), method
        self.radial = nn.Sequential(nn.Linear(num_radial, hidden), nn.SiLU(),
                                    nn.Linear(hidden, channels * (lmax_sh + 1)))
        self.register_buffer("degree_sh", _degree_index(lmax_sh), persistent=False)

    def forward(self, x: Tensor, pos: Tensor, edge_index: Tensor) -> Tensor:
        _check_layout(x, "x", self.channels, self.lmax_in)
        if pos.ndim != 2 or pos.shape != (x.shape[0], 3):
            raise ValueError(f"pos must have shape ({x.shape[0]}, 3), got {tuple(pos.shape)}")
        if edge_index.ndim != 2 or edge_index.shape[0] != 2 or edge_index.dtype != torch.long:
            raise ValueError(f"edge_index must be a (2, E) long tensor, got {tuple(edge_index.shape)} "
                             f"{edge_index.dtype}")
        src, dst = edge_index
        vec = pos[dst] - pos[src]
        r = torch.linalg.vector_norm(vec, dim=-1)
        if bool((r == 0).any()):
            raise ValueError("edge_index contains an edge between coincident positions (zero-length edge)")
        radial = self.radial(bessel_basis(r, self.num_radial, self.cutoff).to(self.radial[0].weight.dtype))
        radial = radial.to(x.dtype) * polynomial_cutoff(r, self.cutoff)[:, None]
        radial = radial.view(-1, self.channels, self.lmax_sh + 1)[..., self.degree_sh]  # (E, C, Dsh)
        edge_sh = spherical_harmonics(self.lmax_sh, vec)[:, None, :] * radial
        out = self.propagate(edge_index, x=x, edge_sh=edge_sh, size=(x.shape[0], x.shape[0]))
        return out / self.avg_degree

    def message(self, x_j: Tensor, edge_sh: Tensor) -> Tensor:
        return gaunt_tensor_product(x_j, edge_sh, self.lmax_out, self.method)

    def extra_repr(self) -> str:
        return (f"lmax_in={self.lmax_in}, lmax_sh={self.lmax_sh}, lmax_out={self.lmax_out}, "
                f"channels={self.channels}, cutoff={self.cutoff}")
