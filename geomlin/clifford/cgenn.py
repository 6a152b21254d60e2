"""Clifford-group equivariant layers for any metric (CGENN), with GLGENN weight sharing.

Ruhe, Brandstetter, Forre, "Clifford Group Equivariant Neural Networks", NeurIPS 2023.
The Clifford group of a :class:`~geomlin.algebra.CliffordAlgebra` acts on multivectors by the
twisted adjoint ``rho_v(x) = v x^ v^-1``, an algebra automorphism that preserves grades and
each grade's quadratic form ``<x_k ~x_k>_0``. So are equivariant:

* grade-wise channel mixing (:class:`MVLinear`, Sec. 4 "linear layers");
* any product restricted to grade paths ``<<x>_i <y>_j>_k``, here with a learned weight per
  channel and path (:class:`GeometricProductLayer`, the "geometric product layer");
* gating each grade by a function of invariants (:class:`MVSiLU`), and normalising by
  invariant norms (:class:`MVLayerNorm`).

The same holds for every orthogonal transformation of the quadratic form acting as an
outermorphism (:class:`~geomlin.algebra.PseudoOrthogonalGroup`, O(p,q,r)), which for degenerate
metrics is larger than what versors realise (similarities in G(3,0,1)); the layers declare that
group, and are tested under it and under :class:`~geomlin.algebra.CliffordGroup`.

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
from geomlin.algebra.clifford import SUBSPACES, _sparse, cached_constant
from geomlin.algebra.versor_groups import PseudoOrthogonalGroup, as_algebra
from geomlin.reps.types import Multivectors
from geomlin.validation import check_choice, check_finite, check_float, check_positive_int, check_tensor


def _check(algebra: CliffordAlgebra, x: Tensor, channels: int, where: str) -> None:
    algebra.check(x, f"{where}: x")
    if x.ndim < 2 or x.shape[-2] != channels:
        raise ValueError(f"{where}: x must have shape (..., {channels}, {algebra.dim}), got {tuple(x.shape)}")
    check_finite(x, f"{where}: x")


def _algebra(algebra) -> CliffordAlgebra:
    if isinstance(algebra, CliffordAlgebra):
        return algebra
    if isinstance(algebra, (tuple, list, Tensor)):
        return as_algebra(algebra)
    raise TypeError(f"algebra must be a CliffordAlgebra or a metric such as (1, 1, 1), got {type(algebra).__name__}")


def multivector_type(algebra: CliffordAlgebra, channels: int) -> Multivectors:
    """The declared type of CGENN / GLGENN features: ``Multivectors(algebra, channels)`` acted on by
    O(p,q,r) of the metric (:class:`~geomlin.algebra.PseudoOrthogonalGroup`)."""
    return Multivectors(algebra, channels, group=PseudoOrthogonalGroup(algebra))


def _index_on(algebra: CliffordAlgebra, subspaces: str, device) -> Tensor:
    """``(dim,)`` long: the weight slot (grade or quaternion type) of each component, on ``device``."""
    return cached_constant(("cgenn-index", algebra.metric, subspaces, device),
                           lambda: algebra.subspace_index(subspaces).to(device))


def _grade_to_subspace(algebra: CliffordAlgebra, subspaces: str, device) -> Tensor:
    """``(n + 1,)`` long: the weight slot of each grade."""
    def build():
        grades = torch.arange(algebra.n + 1)
        return (grades if subspaces == "grade" else grades % 4).to(device)
    return cached_constant(("cgenn-grade-slot", algebra.metric, subspaces, device), build)


class MVLinear(nn.Module):
    """Channel mixing with one weight per subspace ``(..., in_ch, dim) -> (..., out_ch, dim)``.

    ``out[..., o, k] = sum_i W[o, i, s(k)] x[..., i, k] (+ bias[o] on the scalar)`` where ``s(k)``
    is the grade of component ``k`` (``subspaces="grade"``: ``n + 1`` weights per channel pair) or
    its quaternion type (``"quaternion"``: 4 weights, GLGENN).
    """

    def __init__(self, algebra, in_channels: int, out_channels: int, bias: bool = True,
                 subspaces: str = "grade"):
        super().__init__()
        self.algebra = _algebra(algebra)
        self.in_channels = check_positive_int(in_channels, "in_channels")
        self.out_channels = check_positive_int(out_channels, "out_channels")
        self.subspaces = check_choice(subspaces, "subspaces", SUBSPACES)
        if not isinstance(bias, bool):
            raise TypeError(f"bias must be a bool, got {bias!r}")
        s = self.algebra.num_subspaces(subspaces)
        self.weight = nn.Parameter(torch.randn(out_channels, in_channels, s) / math.sqrt(in_channels))
        self.bias = nn.Parameter(torch.zeros(out_channels)) if bias else None
        self.type_in = multivector_type(self.algebra, in_channels)
        self.type_out = multivector_type(self.algebra, out_channels)

    def expanded_weight(self, dtype=None, device=None) -> Tensor:
        """``(out, in, dim)``: the weight of every component (shared within a subspace)."""
        w = self.weight if dtype is None else self.weight.to(dtype)
        return w[:, :, _index_on(self.algebra, self.subspaces, device or w.device)]

    def forward(self, x: Tensor) -> Tensor:
        """``x (..., in_channels, dim) -> (..., out_channels, dim)``."""
        _check(self.algebra, x, self.in_channels, "MVLinear")
        w = self.expanded_weight(x.dtype, x.device)  # (out, in, dim)
        out = torch.einsum("...ik,oik->...ok", x, w)
        if self.bias is not None:
            out = out + F.pad(self.bias.to(x.dtype)[:, None], (0, self.algebra.dim - 1))
        return out


def _path_plan(algebra: CliffordAlgebra, subspaces: str, device, dtype) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Sparse geometric-product terms: ``S_a (dim, nnz)``, ``S_b (dim, nnz)``, ``R (nnz, dim)`` and
    each term's path as a flat index ``(nnz,)`` into ``S^3`` (``S`` = number of subspaces)."""
    def build():
        sa, sb, r = (t.clone() for t in _sparse(algebra.metric, "geometric"))
        i, j, k = sa.abs().argmax(0), sb.argmax(0), r.argmax(1)
        g = algebra.subspace_index(subspaces)
        m = algebra.num_subspaces(subspaces)
        path = (g[i] * m + g[j]) * m + g[k]
        return sa.to(device, dtype), sb.to(device, dtype), r.to(device, dtype), path.to(device)
    return cached_constant(("cgenn-paths", algebra.metric, subspaces, device, dtype), build)


def _compact_index(algebra: CliffordAlgebra, subspaces: str, device) -> Tensor:
    """``(nnz,)`` long: the position of each Cayley term's path among the non-empty paths."""
    def build():
        paths = algebra.product_paths("geometric", subspaces).flatten()
        position = torch.cumsum(paths.long(), 0) - 1
        _, _, _, path = _path_plan(algebra, subspaces, torch.device("cpu"), torch.float64)
        return position[path].to(device)
    return cached_constant(("cgenn-compact", algebra.metric, subspaces, device), build)


def weighted_geometric_product(algebra: CliffordAlgebra, x: Tensor, y: Tensor, path_weights: Tensor,
                               subspaces: str = "grade") -> Tensor:
    """``out_{c,k} = sum_{ij} w[c, s_i, s_j, s_k] x_{c,i} y_{c,j} C_ijk`` with ``s`` the subspace
    (grade, or quaternion type) of a component.

    ``x, y (..., channels, dim)``, ``path_weights (channels, S, S, S)`` with ``S`` =
    ``algebra.num_subspaces(subspaces)``; only the non-zero Cayley terms are formed
    (``((x S_a) * (y S_b) * w) R``).
    """
    algebra.check(x, "x")
    algebra.check(y, "y")
    check_choice(subspaces, "subspaces", SUBSPACES)
    m = algebra.num_subspaces(subspaces)
    check_tensor(path_weights, "path_weights", shape=(x.shape[-2], m, m, m) if x.ndim >= 2 else (None, m, m, m))
    sa, sb, r, path = _path_plan(algebra, subspaces, x.device, x.dtype)
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

    def forward(self, x: Tensor) -> Tensor:
        alg = self.algebra
        norms = alg.grade_norms(x)  # (..., channels, n + 1), invariant
        s = torch.sigmoid(self.a.to(x.dtype))[:, _grade_to_subspace(alg, self.subspaces, x.device)]
        denom = s * (norms - 1.0) + 1.0
        return x / (denom[..., _index_on(alg, "grade", x.device)] + self.eps)


class GeometricProductLayer(nn.Module):
    """CGENN geometric-product layer (Ruhe et al. 2023, Sec. 4, "steerable geometric product"):
    ``(..., in_ch, dim) -> (..., out_ch, dim)``,

        y = (L(x) + P(sum_paths w_{c,ijk} <x_i N(R(x))_j>_k)) / sqrt(2)

    with ``L`` an :class:`MVLinear` with bias (the first-order term), ``R`` one without, ``N`` the
    per-grade operand normalisation of the reference and ``P`` an :class:`MVLinear` to
    ``out_channels`` (only when ``out_channels != in_channels``).

    One weight per channel and non-empty path (:meth:`CliffordAlgebra.product_paths`): grade paths
    ``(i, j, k)`` (56 / 84 / 165 for Euclidean ``n = 5 / 6 / 8``), or quaternion-type paths with
    ``subspaces="quaternion"`` (at most 32, GLGENN); the linear sublayers and the normalisation
    share weights the same way.
    """

    def __init__(self, algebra, in_channels: int, out_channels: int, subspaces: str = "grade"):
        super().__init__()
        self.algebra = _algebra(algebra)
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
        self.type_in = multivector_type(self.algebra, in_channels)
        self.type_out = multivector_type(self.algebra, out_channels)

    def dense_path_weights(self) -> Tensor:
        """``(in_channels, S, S, S)``: the path weights with zeros on empty paths."""
        paths = self.algebra.product_paths("geometric", self.subspaces).to(self.path_weights.device)
        out = self.path_weights.new_zeros(self.in_channels, *paths.shape)
        out[:, paths] = self.path_weights
        return out

    def forward(self, x: Tensor) -> Tensor:
        """``x (..., in_channels, dim) -> (..., out_channels, dim)``."""
        _check(self.algebra, x, self.in_channels, "GeometricProductLayer")
        sa, sb, r, _ = _path_plan(self.algebra, self.subspaces, x.device, x.dtype)
        w = self.path_weights.to(x.dtype)[:, _compact_index(self.algebra, self.subspaces, x.device)]
        prod = ((x @ sa) * (self.normalization(self.right(x)) @ sb) * w) @ r
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
        self.algebra = _algebra(algebra)
        self.channels = check_positive_int(channels, "channels")
        self.subspaces = check_choice(subspaces, "subspaces", SUBSPACES)
        s = self.algebra.num_subspaces(subspaces)
        self.a = nn.Parameter(torch.ones(channels, s))
        self.b = nn.Parameter(torch.zeros(channels, s))
        self.type_in = self.type_out = multivector_type(self.algebra, channels)

    def forward(self, x: Tensor) -> Tensor:
        """``x (..., channels, dim) -> (..., channels, dim)``."""
        _check(self.algebra, x, self.channels, "MVSiLU")
        alg = self.algebra
        # signed quadratic form of each grade; the scalar grade gates on the scalar itself
        sq = x * x * torch.diagonal(alg._tab("scalar", x)[..., 0]) * alg._tab("reverse", x)
        q = torch.stack([x[..., 0]] + [sq[..., s].sum(-1) for s in alg.grade_slices[1:]], -1)
        slot = _grade_to_subspace(alg, self.subspaces, x.device)
        gate = torch.sigmoid(self.a.to(x.dtype)[:, slot] * q + self.b.to(x.dtype)[:, slot])
        return x * gate[..., _index_on(alg, "grade", x.device)]


class MVLayerNorm(nn.Module):
    """``x / (mean_channels sum_k sqrt(|<x_k ~x_k>_0|) + eps) * a_c``; ``(..., channels, dim)`` -> same.

    The normaliser is one invariant per item; the only weights are per channel, so
    ``subspaces`` (accepted for a uniform interface) does not change this layer.
    """

    def __init__(self, algebra, channels: int, eps: float = 1e-6, subspaces: str = "grade"):
        super().__init__()
        self.algebra = _algebra(algebra)
        self.channels = check_positive_int(channels, "channels")
        self.eps = check_float(eps, "eps", minimum=0.0)
        self.subspaces = check_choice(subspaces, "subspaces", SUBSPACES)
        self.a = nn.Parameter(torch.ones(channels))
        self.type_in = self.type_out = multivector_type(self.algebra, channels)

    def forward(self, x: Tensor) -> Tensor:
        """``x (..., channels, dim) -> (..., channels, dim)``."""
        _check(self.algebra, x, self.channels, "MVLayerNorm")
        norms = self.algebra.grade_norms(x).sum(-1, keepdim=True)  # (..., channels, 1), invariant
        return x / (norms.mean(-2, keepdim=True) + self.eps) * self.a.to(x.dtype)[:, None]


class CGENNBlock(nn.Module):
    """Residual CGENN block ``x + MVSiLU(GeometricProductLayer(x))``, channels preserved.

    ``subspaces="quaternion"`` makes it a GLGENN block (all sublayers share weights by type).
    """

    def __init__(self, algebra, channels: int, subspaces: str = "grade"):
        super().__init__()
        algebra = _algebra(algebra)
        self.layer = GeometricProductLayer(algebra, channels, channels, subspaces=subspaces)
        self.act = MVSiLU(algebra, channels, subspaces=subspaces)
        self.type_in = self.type_out = multivector_type(algebra, channels)

    def forward(self, x: Tensor) -> Tensor:
        """``x (..., channels, dim) -> (..., channels, dim)``."""
        return x + self.act(self.layer(x))
