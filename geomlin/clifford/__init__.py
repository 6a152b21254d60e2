"""Layers on any Clifford algebra: Clifford-group equivariant networks (CGENN).

Multivectors are ``(..., channels, algebra.dim)``; every layer is equivariant to the Clifford
group of its algebra (:class:`geomlin.algebra.CliffordGroup`), reflections included.

>>> import torch
>>> from geomlin.algebra import CliffordAlgebra
>>> from geomlin.clifford import CGENNBlock
>>> block = CGENNBlock(CliffordAlgebra((1, 1, 1)), channels=4)
>>> block(torch.randn(10, 4, 8)).shape
torch.Size([10, 4, 8])
"""

from geomlin.clifford import cgenn
from geomlin.clifford.cgenn import CGENNBlock, GeometricProductLayer, MVLayerNorm, MVLinear, MVSiLU

__all__ = ["CGENNBlock", "GeometricProductLayer", "MVLayerNorm", "MVLinear", "MVSiLU", "cgenn"]
