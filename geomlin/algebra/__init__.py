"""Clifford algebras of any signature, projective geometric algebra G(3,0,1), and the groups acting on them.

>>> from geomlin.algebra import CliffordAlgebra, pga
>>> CliffordAlgebra((1, 1, 1)).dim
8
>>> pga.BLADE_NAMES[pga.E123]
'e123'
"""

from geomlin.algebra import pga
from geomlin.algebra.clifford import METHODS, PRODUCTS, SUBSPACES, CliffordAlgebra, quaternion_type
from geomlin.algebra.pga import PGA
from geomlin.algebra.versor_groups import CliffordGroup, Pin301, PseudoOrthogonalGroup, pin_action

__all__ = ["METHODS", "PGA", "PRODUCTS", "SUBSPACES", "CliffordAlgebra", "CliffordGroup", "Pin301",
           "PseudoOrthogonalGroup", "pga", "pin_action", "quaternion_type"]
