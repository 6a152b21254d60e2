"""Layers on any Clifford algebra: CGENN, GLGENN weight sharing, GCAN group-action layers, and
geometric-algebra attention.

* [`geomlin.clifford.cgenn`][] — Clifford-group equivariant layers (Ruhe et al. 2023);
  with ``subspaces="quaternion"`` the GLGENN layers (Filimoshina and Shirokov 2025), equivariant to
  O(p,q,r) ([`PseudoOrthogonalGroup`][geomlin.groups.versor.PseudoOrthogonalGroup]) with fewer
  weights;
* [`geomlin.clifford.gcan`][] — group action layers with learned versors (Ruhe et al.
  2023b), geometric templates that are not equivariant;
* [`geomlin.clifford.ga_attention`][] — attention over geometric products of
  tuples of points in G(3) (Spellings 2021), rotation-invariant or covariant, on the products and
  invariants of [`geomlin.clifford.tuple_products`][] and the neighbourhoods of
  [`geomlin.clifford.neighbor_search`][].

Multivectors are ``(..., channels, algebra.dim)``.

>>> import torch
>>> from geomlin.algebra import CliffordAlgebra
>>> from geomlin.clifford import CGENNBlock
>>> block = CGENNBlock(CliffordAlgebra((1, 1, 1)), channels=4)
>>> block(torch.randn(10, 4, 8)).shape
torch.Size([10, 4, 8])
"""

from geomlin.clifford import cgenn, ga_attention, gcan, neighbor_search, tuple_products
from geomlin.clifford.cgenn import (
    CGENNBlock,
    GeometricProductLayer,
    MVLayerNorm,
    MVLinear,
    MVSiLU,
    weighted_geometric_product,
)
from geomlin.clifford.ga_attention import GAAttention, GAMultivectorAttention, GAVectorAttention
from geomlin.clifford.gcan import GCAMLP, GCAGate, GCAGroupNorm, GroupActionLinear
from geomlin.clifford.neighbor_search import Neighborhoods, neighborhoods

__all__ = [
    "GCAMLP",
    "CGENNBlock",
    "GAAttention",
    "GAMultivectorAttention",
    "GAVectorAttention",
    "GCAGate",
    "GCAGroupNorm",
    "GeometricProductLayer",
    "GroupActionLinear",
    "MVLayerNorm",
    "MVLinear",
    "MVSiLU",
    "Neighborhoods",
    "cgenn",
    "ga_attention",
    "gcan",
    "neighbor_search",
    "neighborhoods",
    "tuple_products",
    "weighted_geometric_product",
]
