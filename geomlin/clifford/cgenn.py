"""Clifford-group equivariant layers for any metric (CGENN), with GLGENN weight sharing.

Ruhe, Brandstetter, Forre, "Clifford Group Equivariant Neural Networks", NeurIPS 2023.
The Clifford group of a [`CliffordAlgebra`][geomlin.algebra.clifford.CliffordAlgebra] acts on multivectors by
the twisted adjoint ``rho_v(x) = v x^ v^-1``, an algebra automorphism that preserves grades and
each grade's quadratic form ``<x_k ~x_k>_0``. So are equivariant:

* grade-wise channel mixing ([`MVLinear`][], Sec. 4 "linear layers");
* any product restricted to grade paths ``<<x>_i <y>_j>_k``, here with a learned weight per
  channel and path ([`GeometricProductLayer`][], the "geometric product layer");
* gating each grade by a function of invariants ([`MVSiLU`][]), and normalising by
  invariant norms ([`MVLayerNorm`][]).

The same holds for every orthogonal transformation of the quadratic form acting as an
outermorphism ([`PseudoOrthogonalGroup`][], O(p,q,r)), which for degenerate
metrics is larger than what versors realise (similarities in G(3,0,1)); the layers declare that
group, and are tested under it and under [`CliffordGroup`][geomlin.groups.versor.CliffordGroup].

**GLGENN weight sharing** (Filimoshina and Shirokov, "GLGENN", ICML 2025). ``subspaces=
"quaternion"`` ties the weights of the grades that share a quaternion type ``k mod 4``: a linear
layer has 4 weights per channel pair instead of ``n + 1``, the product layer one weight per
channel and *type* path, at most ``4 * 4 * 2 = 32`` (the grade of a product of grades ``i, j``
has the parity of ``i + j``) instead of 56 / 84 / 165 grade paths at ``n = 5 / 6 / 8``. A
``"quaternion"`` layer is exactly the ``"grade"`` layer whose weights are equal within each
type, so it is equivariant to the same groups. For ``n <= 3`` the two coincide.

This serves O(n) (metric ``(1,)*n``), Lorentz (``(1, -1, -1, -1)``) and degenerate (PGA) users.
Multivectors are ``(..., channels, dim)`` with ``dim = algebra.dim``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from geomlin.algebra import CliffordAlgebra
from geomlin.algebra.blades import selection_matrices
from geomlin.algebra.clifford import SUBSPACES
from geomlin.groups.versor import PseudoOrthogonalGroup, as_algebra
from geomlin.reps.types import Multivectors
from geomlin.tables import ConstantTables, table_on
from geomlin.validation import (
    check_broadcastable,
    check_choice,
    check_finite,
    check_float,
    check_positive_int,
    check_tensor,
)


def check_channels(algebra: CliffordAlgebra, x: Tensor, channels: int, where: str) -> None:
    """Refuse ``x`` unless it is finite multivectors ``(..., channels, algebra.dim)`` (a layer's input;
    ``where`` names the layer in the message)."""
    algebra.check(x, f"{where}: x")
    if x.ndim < 2 or x.shape[-2] != channels:
        raise ValueError(f"{where}: x must have shape (..., {channels}, {algebra.dim}), got {tuple(x.shape)}")
    check_finite(x, f"{where}: x")


def algebra_argument(algebra) -> CliffordAlgebra:
    """A layer's ``algebra`` argument: a [`CliffordAlgebra`][geomlin.algebra.clifford.CliffordAlgebra]
    or a metric such as ``(1, 1, 1)``; anything else is refused."""
    if isinstance(algebra, CliffordAlgebra):
        return algebra
    if isinstance(algebra, (tuple, list, Tensor)):
        return as_algebra(algebra)
    raise TypeError(f"algebra must be a CliffordAlgebra or a metric such as (1, 1, 1), got {type(algebra).__name__}")


def multivector_type(algebra: CliffordAlgebra, channels: int) -> Multivectors:
    """The declared type of CGENN / GLGENN features: ``Multivectors(algebra, channels)`` acted on by
    O(p,q,r) of the metric ([`PseudoOrthogonalGroup`][])."""
    return Multivectors(algebra, channels, group=PseudoOrthogonalGroup(algebra))


def _grade_slots(algebra: CliffordAlgebra, subspaces: str) -> Tensor:
    """``(n + 1,)`` long: the weight slot (grade or quaternion type) of each grade."""
    grades = torch.arange(algebra.n + 1)
    return grades if subspaces == "grade" else grades % 4


def _path_plan_cpu(algebra: CliffordAlgebra, subspaces: str) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Sparse geometric-product terms ``S_a (dim, nnz)``, ``S_b (dim, nnz)``, ``R (nnz, dim)`` (float64),
    each term's path as a flat index into ``S^3`` and as a position among the non-empty paths
    (``(nnz,)`` long each, ``S`` = number of subspaces)."""
    sa, sb, r = selection_matrices(algebra.table("geometric"))
    i, j, k = sa.abs().argmax(0), sb.argmax(0), r.argmax(1)
    g = algebra.subspace_index(subspaces)
    m = algebra.num_subspaces(subspaces)
    path = (g[i] * m + g[j]) * m + g[k]
    paths = algebra.product_paths("geometric", subspaces).flatten()
    compact = (torch.cumsum(paths.long(), 0) - 1)[path]
    return sa, sb, r, path, compact


def cgenn_tables(algebra: CliffordAlgebra, subspaces: str, *keys: str) -> ConstantTables:
    """The constant tables of a CGENN / GLGENN layer as non-persistent buffers.

    ``keys``: ``"cgenn:subspace_of"`` (``(dim,)`` weight slot of each component),
    ``"cgenn:grade_of"`` (``(dim,)`` grade of each component), ``"cgenn:grade_slot"`` (``(n + 1,)``
    weight slot of each grade), ``"cgenn:paths"`` (the sparse product terms and their paths, see
    [`weighted_geometric_product`][]), ``"cgenn:path_index"`` (``(num_paths,)`` flat index of the
    non-empty paths), or any key of
    [`CliffordAlgebra.tables`][geomlin.algebra.clifford.CliffordAlgebra.tables].
    """
    builders = {
        "cgenn:subspace_of": lambda: algebra.subspace_index(subspaces),
        "cgenn:grade_of": lambda: algebra.subspace_index("grade"),
        "cgenn:grade_slot": lambda: _grade_slots(algebra, subspaces),
        "cgenn:paths": lambda: _path_plan_cpu(algebra, subspaces),
        "cgenn:path_index": lambda: algebra.product_paths("geometric", subspaces).flatten().nonzero()[:, 0],
    }
    own = {key: builders[key]() for key in keys if key in builders}
    return ConstantTables({**own, **algebra.table_entries(*(key for key in keys if key not in builders))})


class MVLinear(nn.Module):
    """Channel mixing with one weight per subspace ``(..., in_ch, dim) -> (..., out_ch, dim)``.

    ``out[..., o, k] = sum_i W[o, i, s(k)] x[..., i, k] (+ bias[o] on the scalar)`` where ``s(k)``
    is the grade of component ``k`` (``subspaces="grade"``: ``n + 1`` weights per channel pair) or
    its quaternion type (``"quaternion"``: 4 weights, GLGENN).
    """

    def __init__(self, algebra, in_channels: int, out_channels: int, bias: bool = True,
                 subspaces: str = "grade"):
        super().__init__()
        self.algebra = algebra_argument(algebra)
        self.in_channels = check_positive_int(in_channels, "in_channels")
        self.out_channels = check_positive_int(out_channels, "out_channels")
        self.subspaces = check_choice(subspaces, "subspaces", SUBSPACES)
        if not isinstance(bias, bool):
            raise TypeError(f"bias must be a bool, got {bias!r}")
        s = self.algebra.num_subspaces(subspaces)
        self.weight = nn.Parameter(torch.randn(out_channels, in_channels, s) / math.sqrt(in_channels))
        self.bias = nn.Parameter(torch.zeros(out_channels)) if bias else None
        self.tables = cgenn_tables(self.algebra, subspaces, "cgenn:subspace_of")
        self.type_in = multivector_type(self.algebra, in_channels)
        self.type_out = multivector_type(self.algebra, out_channels)

    def expanded_weight(self, dtype=None, device=None) -> Tensor:
        """``(out, in, dim)``: the weight of every component (shared within a subspace), on
        ``device`` (default: the module's)."""
        w = self.weight if dtype is None else self.weight.to(dtype)
        w = w[:, :, self.tables.get("cgenn:subspace_of")]
        return w if device is None else w.to(device)

    def forward(self, x: Tensor) -> Tensor:
        """``x (..., in_channels, dim) -> (..., out_channels, dim)``."""
        check_channels(self.algebra, x, self.in_channels, "MVLinear")
        w = self.expanded_weight(x.dtype)  # (out, in, dim)
        out = torch.einsum("...ik,oik->...ok", x, w)
        if self.bias is not None:
            out = out + F.pad(self.bias.to(x.dtype)[:, None], (0, self.algebra.dim - 1))
        return out


def _path_plan(algebra: CliffordAlgebra, subspaces: str, device, dtype, tables: ConstantTables | None = None
               ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """``_path_plan_cpu`` on ``device`` (the matrices in ``dtype``), from ``tables`` or a cache."""
    key = f"cgenn:paths:{algebra.metric}:{subspaces}"
    if tables is not None:
        key = "cgenn:paths"
    return tuple(table_on(key, lambda: _path_plan_cpu(algebra, subspaces), device, dtype, i, tables) for i in range(5))


def weighted_geometric_product(algebra: CliffordAlgebra, x: Tensor, y: Tensor, path_weights: Tensor,
                               subspaces: str = "grade", *, tables: ConstantTables | None = None) -> Tensor:
    """``out_{c,k} = sum_{ij} w[c, s_i, s_j, s_k] x_{c,i} y_{c,j} C_ijk`` with ``s`` the subspace
    (grade, or quaternion type) of a component.

    ``x, y (..., channels, dim)``, ``path_weights (channels, S, S, S)`` with ``S`` =
    ``algebra.num_subspaces(subspaces)``; only the non-zero Cayley terms are formed
    (``((x S_a) * (y S_b) * w) R``). ``tables``: a module's [`cgenn_tables`][] with
    ``"cgenn:paths"`` (``None``: a per-(device, dtype) cache).
    """
    algebra.check(x, "x")
    algebra.check(y, "y")
    check_choice(subspaces, "subspaces", SUBSPACES)
    m = algebra.num_subspaces(subspaces)
    check_tensor(x, "x", min_ndim=2, what="(..., channels, dim) multivectors")
    check_tensor(y, "y", min_ndim=2, what="(..., channels, dim) multivectors")
    check_broadcastable(("x", x.shape[:-1]), ("y", y.shape[:-1]), what="(..., channels) shapes")
    check_tensor(path_weights, "path_weights", shape=(x.shape[-2], m, m, m),
                 what="one weight per channel of x and subspace triple")
    sa, sb, r, path, _ = _path_plan(algebra, subspaces, x.device, x.dtype, tables)
    w = path_weights.to(x.dtype).flatten(1)[:, path]  # (channels, nnz)
    return ((x @ sa) * (y @ sb) * w) @ r


class _OperandNormalization(nn.Module):
    """CGENN's normalisation of the right operand: each grade divided by
    ``sigmoid(a_{c,s}) (|x_k| - 1) + 1`` (an interpolation between 1 and its norm
    ``|x_k| = sqrt(|<x_k ~x_k>_0|)``), with one ``a`` per channel and subspace (grade or type)."""

    def __init__(self, algebra: CliffordAlgebra, channels: int, subspaces: str, eps: float = 1e-6):
        super().__init__()
        self.algebra, self.subspaces, self.eps = algebra, subspaces, eps
        self.a = nn.Parameter(torch.zeros(channels, algebra.num_subspaces(subspaces)))
        self.tables = cgenn_tables(algebra, subspaces, "quadratic_form", "cgenn:grade_slot", "cgenn:grade_of")

    def forward(self, x: Tensor) -> Tensor:
        norms = self.algebra.grade_norms(x, tables=self.tables)  # (..., channels, n + 1), invariant
        s = torch.sigmoid(self.a.to(norms.dtype))[:, self.tables.get("cgenn:grade_slot")]
        denom = s * (norms - 1.0) + 1.0
        return x / (denom[..., self.tables.get("cgenn:grade_of")] + self.eps)


class GeometricProductLayer(nn.Module):
    """CGENN geometric-product layer (Ruhe et al. 2023, Sec. 4, "steerable geometric product"):
    ``(..., in_ch, dim) -> (..., out_ch, dim)``,

        y = (L(x) + P(sum_paths w_{c,ijk} <x_i N(R(x))_j>_k)) / sqrt(2)

    with ``L`` an [`MVLinear`][] with bias (the first-order term), ``R`` one without, ``N`` the
    per-grade operand normalisation of the reference and ``P`` an [`MVLinear`][] to
    ``out_channels`` (only when ``out_channels != in_channels``).

    One weight per channel and non-empty path
    ([`CliffordAlgebra.product_paths`][geomlin.algebra.clifford.CliffordAlgebra.product_paths]): grade paths
    ``(i, j, k)`` (56 / 84 / 165 for Euclidean ``n = 5 / 6 / 8``), or quaternion-type paths with ``subspaces="quaternion"`` (at most 32, GLGENN); the linear sublayers and the normalisation
    share weights the same way.
    """

    def __init__(self, algebra, in_channels: int, out_channels: int, subspaces: str = "grade"):
        super().__init__()
        self.algebra = algebra_argument(algebra)
        self.in_channels = check_positive_int(in_channels, "in_channels")
        self.out_channels = check_positive_int(out_channels, "out_channels")
        self.subspaces = check_choice(subspaces, "subspaces", SUBSPACES)
        num_paths = int(self.algebra.product_paths("geometric", subspaces).sum())
        self.right = MVLinear(self.algebra, in_channels, in_channels, bias=False, subspaces=subspaces)
        self.normalization = _OperandNormalization(self.algebra, in_channels, subspaces)
        self.first_order = MVLinear(self.algebra, in_channels, out_channels, subspaces=subspaces)
        self.out = (MVLinear(self.algebra, in_channels, out_channels, bias=False, subspaces=subspaces)
                    if out_channels != in_channels else None)
        #: ``(in_channels, num_paths)``: one weight per channel and non-empty path.
        self.path_weights = nn.Parameter(torch.randn(in_channels, num_paths) / math.sqrt(self.algebra.dim + 1))
        self.tables = cgenn_tables(self.algebra, subspaces, "cgenn:paths", "cgenn:path_index")
        self.type_in = multivector_type(self.algebra, in_channels)
        self.type_out = multivector_type(self.algebra, out_channels)

    def dense_path_weights(self) -> Tensor:
        """``(in_channels, S, S, S)``: the path weights with zeros on empty paths."""
        m = self.algebra.num_subspaces(self.subspaces)
        out = self.path_weights.new_zeros(self.in_channels, m ** 3)
        out = out.index_copy(1, self.tables.get("cgenn:path_index"), self.path_weights)
        return out.view(self.in_channels, m, m, m)

    def forward(self, x: Tensor) -> Tensor:
        """``x (..., in_channels, dim) -> (..., out_channels, dim)``."""
        check_channels(self.algebra, x, self.in_channels, "GeometricProductLayer")
        sa, sb, r, _, compact = _path_plan(self.algebra, self.subspaces, x.device, x.dtype, self.tables)
        y = self.normalization(self.right(x))
        w = self.path_weights.to(x.dtype)[:, compact]
        prod = ((x @ sa) * (y.to(x.dtype) @ sb) * w) @ r
        if self.out is not None:
            prod = self.out(prod)
        return (self.first_order(x) + prod) / math.sqrt(2.0)


class MVSiLU(nn.Module):
    """Grade-wise gating ``x_k * sigmoid(a_{c,s(k)} q_k + b_{c,s(k)})`` with invariants ``q_0 = <x>_0``,
    ``q_k = <x_k ~x_k>_0``; ``(..., channels, dim)`` -> same.

    ``s(k)`` is the grade (``subspaces="grade"``: ``n + 1`` pairs ``(a, b)`` per channel) or its
    quaternion type (``"quaternion"``: 4 pairs, tied across the grades of a type).
    """

    def __init__(self, algebra, channels: int, subspaces: str = "grade"):
        super().__init__()
        self.algebra = algebra_argument(algebra)
        self.channels = check_positive_int(channels, "channels")
        self.subspaces = check_choice(subspaces, "subspaces", SUBSPACES)
        s = self.algebra.num_subspaces(subspaces)
        self.a = nn.Parameter(torch.ones(channels, s))
        self.b = nn.Parameter(torch.zeros(channels, s))
        self.tables = cgenn_tables(self.algebra, subspaces, "quadratic_form", "cgenn:grade_slot", "cgenn:grade_of")
        self.type_in = self.type_out = multivector_type(self.algebra, channels)

    def forward(self, x: Tensor) -> Tensor:
        """``x (..., channels, dim) -> (..., channels, dim)``."""
        check_channels(self.algebra, x, self.channels, "MVSiLU")
        # signed quadratic form of each grade; the scalar grade gates on the scalar itself
        forms = self.algebra.grade_quadratic_forms(x, tables=self.tables)
        q = torch.cat([x[..., :1].to(forms.dtype), forms[..., 1:]], -1)
        slot = self.tables.get("cgenn:grade_slot")
        gate = torch.sigmoid(self.a.to(q.dtype)[:, slot] * q + self.b.to(q.dtype)[:, slot])
        return x * gate[..., self.tables.get("cgenn:grade_of")].to(x.dtype)


class MVLayerNorm(nn.Module):
    """``x / (mean_channels sum_k sqrt(|<x_k ~x_k>_0|) + eps) * a_c``; ``(..., channels, dim)`` -> same.

    The normaliser is one invariant per item; the only weights are per channel, so
    ``subspaces`` (accepted for a uniform interface) does not change this layer.
    """

    def __init__(self, algebra, channels: int, eps: float = 1e-6, subspaces: str = "grade"):
        super().__init__()
        self.algebra = algebra_argument(algebra)
        self.channels = check_positive_int(channels, "channels")
        self.eps = check_float(eps, "eps", minimum=0.0)
        self.subspaces = check_choice(subspaces, "subspaces", SUBSPACES)
        self.a = nn.Parameter(torch.ones(channels))
        self.tables = cgenn_tables(self.algebra, subspaces, "quadratic_form")
        self.type_in = self.type_out = multivector_type(self.algebra, channels)

    def forward(self, x: Tensor) -> Tensor:
        """``x (..., channels, dim) -> (..., channels, dim)``."""
        check_channels(self.algebra, x, self.channels, "MVLayerNorm")
        norms = self.algebra.grade_norms(x, tables=self.tables).sum(-1, keepdim=True)  # (..., channels, 1), invariant
        return x / (norms.mean(-2, keepdim=True) + self.eps) * self.a.to(x.dtype)[:, None]


class CGENNBlock(nn.Module):
    """Residual CGENN block ``x + MVSiLU(GeometricProductLayer(x))``, channels preserved.

    ``subspaces="quaternion"`` makes it a GLGENN block (all sublayers share weights by type).
    """

    def __init__(self, algebra, channels: int, subspaces: str = "grade"):
        super().__init__()
        algebra = algebra_argument(algebra)
        self.layer = GeometricProductLayer(algebra, channels, channels, subspaces=subspaces)
        self.act = MVSiLU(algebra, channels, subspaces=subspaces)
        self.type_in = self.type_out = multivector_type(algebra, channels)

    def forward(self, x: Tensor) -> Tensor:
        """``x (..., channels, dim) -> (..., channels, dim)``."""
        return x + self.act(self.layer(x))
