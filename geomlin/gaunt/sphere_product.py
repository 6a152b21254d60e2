"""[`SphereGauntProduct`][]: the channel-wise Gaunt product of sphere coefficients, with learnable weights."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from geomlin.gaunt.cache import route_tables
from geomlin.gaunt.layout import check_layout, degree_index
from geomlin.gaunt.product import METHODS, common_dtype, gaunt_tensor_product, table_keys
from geomlin.reps.types import SphereCoefficients
from geomlin.validation import check_choice, check_nonnegative_int, check_positive_int

__all__ = ["SphereGauntProduct"]


class SphereGauntProduct(nn.Module):
    """Channel-wise Gaunt product of sphere coefficients with learnable per-(channel, degree) weights.

    ``out[c] = w_out[c, l] * gaunt(w1[c, l1] x1[c], w2[c, l2] x2[c])`` (weights broadcast over the
    orders ``m`` of each degree): the e3nn "uuu" tensor product restricted to Gaunt paths,
    reweighted through the degree weights (Luo et al., ICLR 2024, sec. 3.3). For e3nn's flat
    irreps layout use [`GauntTensorProduct`][].

    Parameters
    ----------
    lmax_in1, lmax_in2, lmax_out : int
        Degrees of the two inputs and of the output.
    channels : int
        Channels ``C``, multiplied channel by channel.
    method : str
        One of [`METHODS`][geomlin.gaunt.METHODS].

    Shapes
    ------
    ``forward(x1 (..., C, (lmax_in1+1)**2), x2 (..., C or 1, (lmax_in2+1)**2)) -> (..., C, (lmax_out+1)**2)``;
    a single channel of ``x2`` is shared by all (and transformed once), leading axes broadcast;
    float32/float64.
    """

    def __init__(self, lmax_in1: int, lmax_in2: int, lmax_out: int, channels: int, method: str = "auto"):
        super().__init__()
        self.lmax_in1 = check_nonnegative_int(lmax_in1, "lmax_in1")
        self.lmax_in2 = check_nonnegative_int(lmax_in2, "lmax_in2")
        self.lmax_out = check_nonnegative_int(lmax_out, "lmax_out")
        self.channels = check_positive_int(channels, "channels")
        self.method = check_choice(method, "method", METHODS)
        self.weight1 = nn.Parameter(torch.ones(channels, lmax_in1 + 1))
        self.weight2 = nn.Parameter(torch.ones(channels, lmax_in2 + 1))
        self.weight_out = nn.Parameter(torch.ones(channels, lmax_out + 1))
        for L in {self.lmax_in1, self.lmax_in2, self.lmax_out}:
            self.register_buffer(f"degree_index_{L}", degree_index(L), persistent=False)
        #: the tables of every route the product may take, moved with the module (see geomlin.gaunt.cache)
        self.tables = route_tables(table_keys(self.method, self.lmax_in1, self.lmax_in2, self.lmax_out))
        self.type_in = (SphereCoefficients(self.lmax_in1, channels), SphereCoefficients(self.lmax_in2, channels))
        self.type_out = SphereCoefficients(self.lmax_out, channels)

    def _expand(self, weight: Tensor, lmax: int) -> Tensor:
        return weight[:, getattr(self, f"degree_index_{lmax}")]

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        check_layout(x1, "x1", self.channels, self.lmax_in1)
        check_layout(x2, "x2", self.channels, self.lmax_in2, shared_ok=True)
        dtype = common_dtype(x1, x2)
        x1, x2 = x1.to(dtype), x2.to(dtype)
        a = x1 * self._expand(self.weight1, self.lmax_in1).to(x1.dtype)
        b = x2 * self._expand(self.weight2, self.lmax_in2).to(x2.dtype)  # per-channel weights: no longer shared
        out = gaunt_tensor_product(a, b, self.lmax_out, self.method, tables=self.tables)
        return out * self._expand(self.weight_out, self.lmax_out).to(out.dtype)

    def extra_repr(self) -> str:
        return (f"lmax_in1={self.lmax_in1}, lmax_in2={self.lmax_in2}, lmax_out={self.lmax_out}, channels={self.channels}, "
                f"method={self.method!r}")
