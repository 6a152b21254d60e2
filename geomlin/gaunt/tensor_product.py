"""[`GauntTensorProduct`][]: the Gaunt tensor product as a drop-in for e3nn's tensor products."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from geomlin.gaunt.cache import route_tables
from geomlin.gaunt.layout import NATURAL, PSEUDO, as_irreps, check_flat, class_layout, irreps_blocks
from geomlin.gaunt.product import (
    METHODS,
    check_method,
    common_dtype,
    gaunt_operator,
    gaunt_rows,
    resolve_method,
    table_keys,
)
from geomlin.precision import full_precision
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
                            "of given degrees use SphereGauntProduct(lmax_in1, lmax_in2, lmax_out, channels)")

        self.irreps_in1 = as_irreps(irreps_in1, "irreps_in1")
        self.irreps_in2 = as_irreps(irreps_in2, "irreps_in2")
        self.irreps_out = as_irreps(irreps_out, "irreps_out")
        muls = [mul for mul, _ in self.irreps_in1] + [mul for mul, _ in self.irreps_out]
        self.channels = check_positive_int(max(muls, default=0) or 1 if channels is None else channels, "channels")
        self.method = check_choice(method, "method", METHODS)
        if not isinstance(shared_weights, bool):
            raise TypeError(f"shared_weights must be a bool, got {shared_weights!r}")
        internal = shared_weights if internal_weights is None else internal_weights
        if internal and not shared_weights:
            raise ValueError("internal_weights=True needs shared_weights=True (as in e3nn)")
        self.shared_weights, self.internal_weights = shared_weights, bool(internal)
        self.lmax_in1, self.lmax_in2, self.lmax_out = (max((ir.l for _, ir in irreps), default=0) for irreps in
                                                 (self.irreps_in1, self.irreps_in2, self.irreps_out))
        C = self.channels
        self.classes1 = [p for p in (NATURAL, PSEUDO) if class_layout(self.irreps_in1, p)]
        self.classes2 = [p for p in (NATURAL, PSEUDO) if class_layout(self.irreps_in2, p)]
        degrees2 = [ir.l for _, ir in self.irreps_in2]
        self.shared_in2 = all(mul == 1 for mul, _ in self.irreps_in2) and len(set(degrees2)) == len(degrees2)
        self.mix1 = nn.ParameterList(nn.Parameter(torch.randn(mul, C) / math.sqrt(mul))
                                     for mul, _ in self.irreps_in1)
        self.mix2 = nn.ParameterList(() if self.shared_in2 else (nn.Parameter(torch.randn(mul, C) / math.sqrt(mul))
                                                                 for mul, _ in self.irreps_in2))
        self.mix_out = nn.ParameterList(nn.Parameter(torch.randn(C, mul) / math.sqrt(C)) for mul, _ in self.irreps_out)
        self._layout1 = irreps_blocks(self.irreps_in1)
        self._layout2 = irreps_blocks(self.irreps_in2)
        self._layout_out = irreps_blocks(self.irreps_out)
        self._flat_in = tuple((irreps.dim, str(irreps)) for irreps in (self.irreps_in1, self.irreps_in2))
        self._dim_out = self.irreps_out.dim  # an int: torch.compile cannot guard on e3nn's Irreps
        #: Numbers of per-sample weights: per (channel, degree) of x1, then per (channel, degree) of the output.
        self.weight_numel = C * (self.lmax_in1 + 1) + C * (self.lmax_out + 1)
        if self.internal_weights:
            self.weight = nn.Parameter(torch.ones(self.weight_numel))
        else:
            self.register_parameter("weight", None)
        #: per class of x2: its multiplicity-1 blocks are degrees 0, 1, ... in order from offset 0 (no gather)
        self._shared_view = {p: self.shared_in2 and [(l, s) for l, c, _, s, _ in self._layout2 if c == p]
                             == [(l, l * l) for l in range(self.lmax_in2 + 1)] for p in self.classes2}
        self.tables = route_tables(table_keys(self.method, self.lmax_in1, self.lmax_in2, self.lmax_out))
        self.type_in = (IrrepsRep(self.irreps_in1), IrrepsRep(self.irreps_in2))
        self.type_out = IrrepsRep(self.irreps_out)

    # -- layout maps (degree-major: (N, D, C), the degree axis before the channels)
    def _mix(self, x: Tensor, layout, mixes, parity: int, lmax: int, w: Tensor | None) -> Tensor:
        """Flat rows ``x (N, dim)`` -> the mixed functions of one parity class ``(N, (lmax+1)**2, C)``.

        A block ``u x l`` is ``(N, u, 2l+1)`` in e3nn's layout; transposed to ``(N (2l+1), u)`` its channel
        mix is one GEMM. ``w (N, C, lmax+1)`` are per-sample weights (shared ones are folded into ``mixes``).
        """
        N, C = x.shape[0], self.channels
        degrees: list = [None] * (lmax + 1)
        for (l, cls, mul, start, stop), mix in zip(layout, mixes):
            if cls != parity:
                continue
            d = 2 * l + 1
            rows = x[:, start:stop].view(N, mul, d).transpose(1, 2).reshape(N * d, mul)
            block = (rows @ mix).view(N, d, C)
            degrees[l] = block if degrees[l] is None else degrees[l] + block
        if w is not None:
            degrees = [None if b is None else b * w[:, None, :, l] for l, b in enumerate(degrees)]
        return torch.cat([x.new_zeros(N, 2 * l + 1, C) if b is None else b for l, b in enumerate(degrees)], dim=1)

    def _shared(self, x: Tensor, parity: int) -> Tensor:
        """A multiplicity-1 input of one class -> ``(N, (lmax_in2+1)**2)``, unmixed (zero at missing degrees)."""
        if self._shared_view[parity]:  # the flat layout is the sphere layout already
            return x[:, : (self.lmax_in2 + 1) ** 2]
        degrees: list = [None] * (self.lmax_in2 + 1)
        for l, cls, _, start, stop in self._layout2:
            if cls == parity:
                degrees[l] = x[:, start:stop]
        return torch.cat([x.new_zeros(x.shape[0], 2 * l + 1) if b is None else b for l, b in enumerate(degrees)], dim=1)

    def _mixes(self, weights: Tensor, dtype: torch.dtype) -> tuple[list, list, bool]:
        """``(mix1, mix_out, per_sample)``: the mixing matrix of every block of ``x1`` and of the output in
        ``dtype``, with shared (not per-sample) weights folded in."""
        C = self.channels
        per_sample = weights.dim() > 1
        w1 = weights[..., : C * (self.lmax_in1 + 1)].unflatten(-1, (C, self.lmax_in1 + 1))
        wo = weights[..., C * (self.lmax_in1 + 1):].unflatten(-1, (C, self.lmax_out + 1))
        mix1 = [m.to(dtype) if per_sample else m.to(dtype) * w1[:, l] for (l, *_), m in zip(self._layout1, self.mix1)]
        mix_out = [m.to(dtype) if per_sample else wo[:, l, None] * m.to(dtype)
                   for (l, *_), m in zip(self._layout_out, self.mix_out)]
        return mix1, mix_out, per_sample

    def forward(self, x1: Tensor, x2: Tensor, weight: Tensor | None = None) -> Tensor:
        for name, x, (dim, text) in zip(("x1", "x2"), (x1, x2), self._flat_in):
            check_flat(x, dim, text, name, finite=True)
        dtype = common_dtype(x1, x2)
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
        weight = weight.to(dtype)
        batch = torch.broadcast_shapes(x1.shape[:-1], x2.shape[:-1], weight.shape[:-1])
        N = math.prod(batch)
        if N == 0 or not self._dim_out:
            return x1.new_zeros(*batch, self._dim_out, dtype=dtype)
        x1 = x1.to(dtype).expand(*batch, x1.shape[-1]).reshape(N, -1)
        x2 = x2.to(dtype).expand(*batch, x2.shape[-1]).reshape(N, -1)
        with full_precision(x1):  # under autocast: float32, as the routes compute (geomlin.precision)
            return self._forward(x1, x2, weight, batch, dtype).view(*batch, -1)

    def _forward(self, x1: Tensor, x2: Tensor, weight: Tensor, batch: tuple, dtype: torch.dtype) -> Tensor:
        """Rows ``x1 (N, dim1)``, ``x2 (N, dim2)`` and ``weight`` -> ``(N, irreps_out.dim)``."""
        N, C = x1.shape[0], self.channels
        mix1, mix_out, per_sample = self._mixes(weight, dtype)
        w1 = wo = None
        if per_sample:
            weight = weight.expand(*batch, self.weight_numel).reshape(N, -1)
            n1 = C * (self.lmax_in1 + 1)
            w1 = weight[:, :n1].unflatten(-1, (C, self.lmax_in1 + 1))
            wo = weight[:, n1:].unflatten(-1, (C, self.lmax_out + 1))
        a = {p: self._mix(x1, self._layout1, mix1, p, self.lmax_in1, w1) for p in self.classes1}
        degree_block = self._products(a, x2, dtype)
        pieces = []
        for (l, cls, mul, _, _), mix in zip(self._layout_out, mix_out):
            d = 2 * l + 1
            y = degree_block(cls, l)                                    # (N, 2l+1, C)
            if y is None:  # no class pair gives this class
                pieces.append(x1.new_zeros(N, mul * d))
                continue
            if wo is not None:
                y = y * wo[:, None, :, l]
            z = (y.reshape(N * d, C) @ mix).view(N, d, mul)
            pieces.append(z.transpose(1, 2).reshape(N, mul * d))
        return torch.cat(pieces, dim=1)

    def _products(self, a: dict, x2: Tensor, dtype: torch.dtype):
        """The Gaunt products of every class pair, as ``degree_block(class, l) -> (N, 2l+1, C)`` (or None).

        Spherical harmonics (``shared_in2``) on the direct route meet every channel through their
        Gaunt operator ([`gaunt_operator`][geomlin.gaunt.product.gaunt_operator]): one batched GEMM per
        class pair, in the degree-major layout. Otherwise the product of every class pair runs on the
        chosen route ([`gaunt_rows`][geomlin.gaunt.product.gaunt_rows]) in the sphere layout.
        """
        N, C = x2.shape[0], self.channels
        L1, L2, Lo = self.lmax_in1, self.lmax_in2, self.lmax_out
        method = resolve_method(self.method, L1, L2, Lo, x2.device, dtype, self.shared_in2)
        check_method(method, x2.device, L1, L2, Lo, dtype)
        if self.shared_in2:
            b = {p: self._shared(x2, p) for p in self.classes2}           # (N, D2)
        else:
            mix2 = [m.to(dtype) for m in self.mix2]
            b = {p: self._mix(x2, self._layout2, mix2, p, L2, None) for p in self.classes2}  # (N, D2, C)
        pairs: dict = {}
        for p1 in a:
            for p2 in b:
                pairs.setdefault(p1 * p2, []).append((p1, p2))
        if self.shared_in2 and method == "direct":
            ops = {p: gaunt_operator(f, L1, Lo, tables=self.tables) for p, f in b.items()}    # (N, Do, D1)
            products = {}
            for cls, members in pairs.items():
                for p1, p2 in members:
                    term = torch.bmm(ops[p2], a[p1])                       # (N, Do, C)
                    products[cls] = term if cls not in products else products[cls] + term

            sizes = [2 * l + 1 for l in range(Lo + 1)]
            by_degree = {cls: torch.split(v, sizes, dim=1) for cls, v in products.items()}  # one grad buffer each

            def degree_block(cls, l):
                return None if cls not in by_degree else by_degree[cls][l]

            return degree_block
        products: dict = {}
        for cls, members in pairs.items():
            for p1, p2 in members:
                rows1 = a[p1].transpose(1, 2).reshape(N * C, -1)
                if self.shared_in2:
                    term = gaunt_rows(rows1, b[p2], L1, L2, Lo, method, C, 2, tables=self.tables)
                else:
                    term = gaunt_rows(rows1, b[p2].transpose(1, 2).reshape(N * C, -1), L1, L2, Lo, method,
                                      tables=self.tables)
                products[cls] = term if cls not in products else products[cls] + term
        products = {cls: v.view(N, C, -1) for cls, v in products.items()}

        def degree_block(cls, l):
            return None if cls not in products else products[cls][..., l * l:(l + 1) ** 2].transpose(1, 2)

        return degree_block

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
