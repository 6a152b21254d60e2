"""Clifford algebras of any signature and projective geometric algebra G(3,0,1).

The groups acting on multivectors (Pin(3,0,1), Clifford groups, O(p,q,r)) are in
[`geomlin.groups.versor`][].

>>> from geomlin.algebra import CliffordAlgebra, pga
>>> CliffordAlgebra((1, 1, 1)).dim
8
>>> pga.BLADE_NAMES[pga.E123]
'e123'
"""

from geomlin.algebra import pga
from geomlin.algebra.clifford import METHODS, PRODUCTS, SUBSPACES, CliffordAlgebra, quaternion_type
from geomlin.algebra.pga import PGA

__all__ = ["METHODS", "PGA", "PRODUCTS", "SUBSPACES", "CliffordAlgebra", "pga", "quaternion_type"]
