"""Clifford-group equivariant layers for any metric (CGENN).

Ruhe, Brandstetter, Forre, "Clifford Group Equivariant Neural Networks", NeurIPS 2023.
The Clifford group of a :class:`~geomlin.algebra.CliffordAlgebra` acts on multivectors by the
twisted adjoint ``rho_v(x) = v x^ v^-1``, an algebra automorphism that preserves grades and
each grade's quadratic form ``<x_k ~x_k>_0``. So are equivariant:

* grade-wise channel mixing (:class:`MVLinear`, Sec. 4 "linear layers");
* any product restricted to grade paths ``<<x>_i <y>_j>_k``, here with a learned weight per
  channel and path (:class:`GeometricProductLayer`, the "geometric product layer");
* gating each grade by a function of invariants (:class:`MVSiLU`), and normalising by
  invariant norms (:class:`MVLayerNorm`).

This serves O(n) (metric ``(1,)*n``), Lorentz (``(1, -1, -1, -1)``) and degenerate (PGA) users.
Multivectors are ``(..., channels, dim)`` with ``dim = algebra.dim``.
:class:`~geomlin.algebra.CliffordGroup` samples versors for :mod:`geomlin.testing`.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from geomlin.algebra import CliffordAlgebra
from geomlin.algebra.clifford import cached_constant
from geomlin.algebra.versor_groups import as_algebra


def _check(algebra: CliffordAlgebra, x: Tensor, channels: int, where: str) -> None:
    algebra.check(x, f"{where}: x")
    if x.ndim < 2 or x.shape[-2] != channels:
        raise ValueError(f"{where}: x must have shape (..., {channels}, {algebra.dim}), got {tuple(x.shape)}")


def _grades_on(algebra: CliffordAlgebra, device) -> Tensor:
    return cached_constant(("cgenn-grades", algebra.metric, device), lambda: algebra.grades.to(device))


class MVLinear(nn.Module):
    """Grade-wise channel mixing ``(..., in_ch, dim) -> (..., out_ch, dim)``.

    ``out[..., o, k] = sum_i W[o, i, grade(k)] x[..., i, k] (+ bias[o] on the scalar)``.
    """

    def __init__(self, algebra, in_channels: int, out_channels: int, bias: bool = True):
        super().__init__()
        self.algebra = as_algebra(algebra)
        self.in_channels, self.out_channels = in_channels, out_channels
        self.weight = nn.Parameter(torch.randn(out_channels, in_channels, self.algebra.n + 1) / math.sqrt(in_channels))
        self.bias = nn.Parameter(torch.zeros(out_channels)) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        _check(self.algebra, x, self.in_channels, "MVLinear")
        w = self.weight.to(x.dtype)[:, :, _grades_on(self.algebra, x.device)]  # (out, in, dim)
        out = torch.einsum("...ik,oik->...ok", x, w)
        if self.bias is not None:
            out = out + F.pad(self.bias.to(x.dtype)[:, None], (0, self.algebra.dim - 1))
        return out


def _path_plan(algebra: CliffordAlgebra, device, dtype) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Sparse geometric-product terms: ``S_a (dim, nnz)``, ``S_b (dim, nnz)``, ``R (nnz, dim)`` and
    each term's grade path as a flat index ``(nnz,)`` into ``(n+1)^3``."""
    def build():
        table = algebra.table("geometric")
        i, j, k = table.nonzero(as_tuple=True)
        nnz = len(i)
        col = torch.arange(nnz)
        sa = torch.zeros(algebra.dim, nnz, dtype=torch.float64)
        sa[i, col] = table[i, j, k]
        sb = torch.zeros(algebra.dim, nnz, dtype=torch.float64)
        sb[j, col] = 1.0
        r = torch.zeros(nnz, algebra.dim, dtype=torch.float64)
        r[col, k] = 1.0
        g = algebra.grades
        m = algebra.n + 1
        path = (g[i] * m + g[j]) * m + g[k]
        return sa.to(device, dtype), sb.to(device, dtype), r.to(device, dtype), path.to(device)
    return cached_constant(("cgenn-paths", algebra.metric, device, dtype), build)


def weighted_geometric_product(algebra: CliffordAlgebra, x: Tensor, y: Tensor, path_weights: Tensor) -> Tensor:
    """``out_{c,k} = sum_{ij} w[c, g_i, g_j, g_k] x_{c,i} y_{c,j} C_ijk``.

    ``x, y (..., channels, dim)``, ``path_weights (channels, n+1, n+1, n+1)``; only the
    non-zero Cayley terms are formed (``((x S_a) * (y S_b) * w) R``).
    """
    sa, sb, r, path = _path_plan(algebra, x.device, x.dtype)
    w = path_weights.to(x.dtype).flatten(1)[:, path]  # (channels, nnz)
    return ((x @ sa) * (y @ sb) * w) @ r


class GeometricProductLayer(nn.Module):
    """CGENN geometric-product layer: ``x -> MVLinear(x) + normalise(sum_paths w <x_i y_j>_k)``
    with ``y = MVLinear(x)``; ``(..., in_ch, dim) -> (..., out_ch, dim)``."""

    def __init__(self, algebra, in_channels: int, out_channels: int):
        super().__init__()
        self.algebra = as_algebra(algebra)
        self.in_channels = in_channels
        m = self.algebra.n + 1
        self.right = MVLinear(self.algebra, in_channels, in_channels)
        self.first_order = MVLinear(self.algebra, in_channels, out_channels)
        self.out = MVLinear(self.algebra, in_channels, out_channels, bias=False)
        self.path_weights = nn.Parameter(torch.randn(in_channels, m, m, m) / m)
        self.norm = MVLayerNorm(self.algebra, in_channels)

    def forward(self, x: Tensor) -> Tensor:
        _check(self.algebra, x, self.in_channels, "GeometricProductLayer")
        prod = weighted_geometric_product(self.algebra, x, self.right(x), self.path_weights)
        return self.first_order(x) + self.out(self.norm(prod))


class MVSiLU(nn.Module):
    """Grade-wise gating ``x_k * sigmoid(a_{c,k} q_k + b_{c,k})`` with invariants ``q_0 = <x>_0``,
    ``q_k = <x_k ~x_k>_0``; ``(..., channels, dim)`` -> same."""

    def __init__(self, algebra, channels: int):
        super().__init__()
        self.algebra = as_algebra(algebra)
        self.channels = channels
        self.a = nn.Parameter(torch.ones(channels, self.algebra.n + 1))
        self.b = nn.Parameter(torch.zeros(channels, self.algebra.n + 1))

    def forward(self, x: Tensor) -> Tensor:
        _check(self.algebra, x, self.channels, "MVSiLU")
        alg = self.algebra
        # signed quadratic form of each grade; the scalar grade gates on the scalar itself
        sq = x * x * torch.diagonal(alg._tab("scalar", x)[..., 0]) * alg._tab("reverse", x)
        q = torch.stack([x[..., 0]] + [sq[..., s].sum(-1) for s in alg.grade_slices[1:]], -1)
        gate = torch.sigmoid(self.a.to(x.dtype) * q + self.b.to(x.dtype))
        return x * gate[..., _grades_on(alg, x.device)]


class MVLayerNorm(nn.Module):
    """``x / (mean_channels sqrt(|<x ~x>_0|) + eps) * a_c``; ``(..., channels, dim)`` -> same."""

    def __init__(self, algebra, channels: int, eps: float = 1e-6):
        super().__init__()
        self.algebra = as_algebra(algebra)
        self.eps = eps
        self.a = nn.Parameter(torch.ones(channels))

    def forward(self, x: Tensor) -> Tensor:
        norms = self.algebra.grade_norms(x).sum(-1, keepdim=True)  # (..., channels, 1), invariant
        return x / (norms.mean(-2, keepdim=True) + self.eps) * self.a.to(x.dtype)[:, None]


class CGENNBlock(nn.Module):
    """Residual CGENN block ``x + MVSiLU(GeometricProductLayer(x))``, channels preserved."""

    def __init__(self, algebra, channels: int):
        super().__init__()
        self.layer = GeometricProductLayer(algebra, channels, channels)
        self.act = MVSiLU(algebra, channels)

    def forward(self, x: Tensor) -> Tensor:
        return x + self.act(self.layer(x))
