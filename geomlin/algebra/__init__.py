"""Clifford algebras of any signature and projective geometric algebra G(3,0,1).

>>> from geomlin.algebra import CliffordAlgebra, pga
>>> CliffordAlgebra((1, 1, 1)).dim
8
>>> pga.BLADE_NAMES[pga.E123]
'e123'
"""

from geomlin.algebra import pga
from geomlin.algebra.clifford import METHODS, PRODUCTS, CliffordAlgebra
from geomlin.algebra.pga import PGA

__all__ = ["METHODS", "PGA", "PRODUCTS", "CliffordAlgebra", "pga"]
