"""[`GauntTensorProduct`][]: the Gaunt tensor product as a drop-in for e3nn's tensor products."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from geomlin.gaunt.cache import RouteTables
from geomlin.gaunt.layout import NATURAL, PSEUDO, _blocks, _check_flat, _class_layout, _degree_index, _irreps
from geomlin.gaunt.product import METHODS, _common_dtype, gaunt_tensor_product, table_keys
from geomlin.validation import check_choice, check_positive_int, check_tensor

__all__ = ["GauntTensorProduct"]


class GauntTensorProduct(nn.Module):
    """Gaunt tensor product of e3nn irreps features: a drop-in for ``o3.FullyConnectedTensorProduct``
    / ``o3.TensorProduct`` (``GauntTensorProduct(irreps_in1, irreps_in2, irreps_out)``); every spec
    ``o3.Irreps(...)`` accepts (strings, ``o3.Irreps``, lists of ``(mul, (l, p))``, zero
    multiplicities, empty irreps, whose features have size 0 and give zeros).

    ``forward(x1 (..., irreps_in1.dim), x2 (..., irreps_in2.dim), weight=None) -> (..., irreps_out.dim)``
    in e3nn's flat layout, any parities and multiplicities:

    1. each input is split into its parity classes (``NATURAL``
       ``0e, 1o, 2e``, ``PSEUDO`` ``0o, 1e, 2o``) and every irrep block
       ``mul x l`` is mixed linearly into ``channels`` spherical functions per degree (e3nn's
       ``o3.Linear`` restricted to one degree). An input whose irreps all have multiplicity 1
       and distinct degrees, e.g. spherical harmonics ``1x0e+1x1o+1x2e``, is used as it is: one
       function shared by every channel, transformed once;
    2. per class pair the channel-wise Gaunt product, with per-(channel, degree) weights on
       ``x1`` and on the output (``natural = n n + p p``, ``pseudo = n p + p n``);
    3. every output irrep block is a linear map of its degree and class.

    ``shared_weights=False`` takes the per-(channel, degree) weights from ``weight
    (..., weight_numel)`` per sample (e.g. a radial MLP in a convolution, as in e3nn);
    ``channels`` defaults to the largest multiplicity of ``irreps_in1`` and ``irreps_out``.
    Equivariant under O(3) (reflections included) for every parity assignment.
    """

    def __init__(self, irreps_in1, irreps_in2, irreps_out, channels: int | None = None,
                 shared_weights: bool = True, internal_weights: bool | None = None, method: str = "auto"):
        super().__init__()
        from geomlin.reps.irreps import IrrepsRep

        if isinstance(irreps_in1, int) and not isinstance(irreps_in1, bool):
            raise TypeError(f"irreps_in1 must be e3nn Irreps, got the int {irreps_in1}: for sphere coefficients "
                            "of given degrees use SphereGauntProduct(lmax1, lmax2, lmax_out, channels)")

        self.irreps_in1 = _irreps(irreps_in1, "irreps_in1")
        self.irreps_in2 = _irreps(irreps_in2, "irreps_in2")
        self.irreps_out = _irreps(irreps_out, "irreps_out")
        muls = [mul for mul, _ in self.irreps_in1] + [mul for mul, _ in self.irreps_out]
        self.channels = check_positive_int(max(muls, default=0) or 1 if channels is None else channels, "channels")
        self.method = check_choice(method, "method", METHODS)
        if not isinstance(shared_weights, bool):
            raise TypeError(f"shared_weights must be a bool, got {shared_weights!r}")
        internal = shared_weights if internal_weights is None else internal_weights
        if internal and not shared_weights:
            raise ValueError("internal_weights=True needs shared_weights=True (as in e3nn)")
        self.shared_weights, self.internal_weights = shared_weights, bool(internal)
        self.lmax1, self.lmax2, self.lmax_out = (max((ir.l for _, ir in irreps), default=0) for irreps in
                                                 (self.irreps_in1, self.irreps_in2, self.irreps_out))
        C = self.channels
        self.classes1 = [p for p in (NATURAL, PSEUDO) if _class_layout(self.irreps_in1, p)]
        self.classes2 = [p for p in (NATURAL, PSEUDO) if _class_layout(self.irreps_in2, p)]
        degrees2 = [ir.l for _, ir in self.irreps_in2]
        self.shared_in2 = all(mul == 1 for mul, _ in self.irreps_in2) and len(set(degrees2)) == len(degrees2)
        self.mix1 = nn.ParameterList(nn.Parameter(torch.randn(mul, C) / math.sqrt(mul))
                                     for mul, _ in self.irreps_in1)
        self.mix2 = nn.ParameterList(() if self.shared_in2 else (nn.Parameter(torch.randn(mul, C) / math.sqrt(mul))
                                                                 for mul, _ in self.irreps_in2))
        self.mix_out = nn.ParameterList(nn.Parameter(torch.randn(C, mul) / math.sqrt(C)) for mul, _ in self.irreps_out)
        self._layout1 = _blocks(self.irreps_in1)
        self._layout2 = _blocks(self.irreps_in2)
        self._layout_out = _blocks(self.irreps_out)
        self._flat_in = tuple((irreps.dim, str(irreps)) for irreps in (self.irreps_in1, self.irreps_in2))
        #: Numbers of per-sample weights: per (channel, degree) of x1, then per (channel, degree) of the output.
        self.weight_numel = C * (self.lmax1 + 1) + C * (self.lmax_out + 1)
        if self.internal_weights:
            self.weight = nn.Parameter(torch.ones(self.weight_numel))
        else:
            self.register_parameter("weight", None)
        for L in {self.lmax1, self.lmax_out}:
            self.register_buffer(f"degree_index_{L}", _degree_index(L), persistent=False)
        self.tables = RouteTables(table_keys(self.method, self.lmax1, self.lmax2, self.lmax_out))
        self.type_in = (IrrepsRep(self.irreps_in1), IrrepsRep(self.irreps_in2))
        self.type_out = IrrepsRep(self.irreps_out)

    # -- layout maps
    def _to_sphere(self, x: Tensor, layout, mixes, parity: int, lmax: int) -> Tensor:
        """Flat block(s) of one parity class -> ``(..., C, (lmax+1)**2)`` (mixed channels)."""
        degrees: list = [None] * (lmax + 1)
        for (l, cls, mul, start, stop), mix in zip(layout, mixes):
            if cls == parity:
                block = torch.einsum("...ud,uc->...cd", x[..., start:stop].unflatten(-1, (mul, 2 * l + 1)),
                                     mix.to(x.dtype))
                degrees[l] = block if degrees[l] is None else degrees[l] + block
        return self._concat(degrees, x, self.channels)

    def _shared_sphere(self, x: Tensor, parity: int) -> Tensor:
        """A multiplicity-1 input of one class -> ``(..., 1, (L2+1)**2)``, unmixed."""
        degrees: list = [None] * (self.lmax2 + 1)
        for l, cls, _, start, stop in self._layout2:
            if cls == parity:
                degrees[l] = x[..., None, start:stop]
        return self._concat(degrees, x, 1)

    @staticmethod
    def _concat(degrees: list, like: Tensor, channels: int) -> Tensor:
        """Per-degree blocks ``(..., channels, 2l+1)`` (``None``: zero) -> ``(..., channels, (L+1)**2)``."""
        batch = torch.broadcast_shapes(*(d.shape[:-2] for d in degrees if d is not None))
        return torch.cat([like.new_zeros(*batch, channels, 2 * l + 1) if d is None else d.expand(*batch, channels, 2 * l + 1)
                          for l, d in enumerate(degrees)], dim=-1)

    def forward(self, x1: Tensor, x2: Tensor, weight: Tensor | None = None) -> Tensor:
        for name, x, (dim, text) in zip(("x1", "x2"), (x1, x2), self._flat_in):
            _check_flat(x, dim, text, name, finite=True)
        dtype = _common_dtype(x1, x2)
        x1, x2 = x1.to(dtype), x2.to(dtype)
        self.tables.prime(x1.device, dtype)
        C = self.channels
        if weight is None:
            if self.weight is None:
                raise ValueError(f"this GauntTensorProduct has shared_weights={self.shared_weights}, "
                                 f"internal_weights=False: pass weight of shape (..., {self.weight_numel})")
            weight = self.weight
        else:
            check_tensor(weight, "weight", min_ndim=1, finite=True,
                         what=f"per-sample weights (..., {self.weight_numel})")
            if weight.shape[-1] != self.weight_numel:
                raise ValueError(f"weight must have last dimension weight_numel = {self.weight_numel}, "
                                 f"got shape {tuple(weight.shape)}")
        weight = weight.to(x1.dtype)
        n1 = C * (self.lmax1 + 1)
        w1 = weight[..., :n1].unflatten(-1, (C, self.lmax1 + 1))[..., self._index(self.lmax1)]
        w_out = weight[..., n1:].unflatten(-1, (C, self.lmax_out + 1))[..., self._index(self.lmax_out)]
        sph1 = {p: self._to_sphere(x1, self._layout1, self.mix1, p, self.lmax1) * w1 for p in self.classes1}
        if self.shared_in2:
            sph2 = {p: self._shared_sphere(x2, p) for p in self.classes2}
        else:
            sph2 = {p: self._to_sphere(x2, self._layout2, self.mix2, p, self.lmax2) for p in self.classes2}
        products: dict = {}
        for p1, a in sph1.items():
            for p2, b in sph2.items():
                term = gaunt_tensor_product(a, b, self.lmax_out, self.method)
                products[p1 * p2] = term if p1 * p2 not in products else products[p1 * p2] + term
        batch = torch.broadcast_shapes(x1.shape[:-1], x2.shape[:-1], weight.shape[:-1])
        sizes = [2 * l + 1 for l in range(self.lmax_out + 1)]
        by_degree = {cls: torch.split(value * w_out, sizes, dim=-1) for cls, value in products.items()}
        pieces = []
        for (l, cls, mul, _, _), mix in zip(self._layout_out, self.mix_out):
            if cls not in by_degree:
                pieces.append(x1.new_zeros(*batch, mul * (2 * l + 1)))
                continue
            block = torch.einsum("...cd,cu->...ud", by_degree[cls][l], mix.to(x1.dtype))
            pieces.append(block.expand(*batch, mul, 2 * l + 1).flatten(-2))
        return torch.cat(pieces, dim=-1) if pieces else x1.new_zeros(*batch, 0)

    def _index(self, lmax: int) -> Tensor:
        return getattr(self, f"degree_index_{lmax}")

    def example_inputs(self, generator=None, dtype=torch.float64):
        """Random features of both irreps (and per-sample weights when ``shared_weights=False``)."""
        batch = 4
        x1 = torch.randn(batch, self.irreps_in1.dim, generator=generator, dtype=dtype)
        x2 = torch.randn(batch, self.irreps_in2.dim, generator=generator, dtype=dtype)
        if self.weight is None:
            return (x1, x2), {"weight": torch.randn(batch, self.weight_numel, generator=generator, dtype=dtype)}
        return (x1, x2), {}

    def extra_repr(self) -> str:
        return (f"{self.irreps_in1} x {self.irreps_in2} -> {self.irreps_out}, channels={self.channels}, "
                f"shared_weights={self.shared_weights}, method={self.method!r}")
