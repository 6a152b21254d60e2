"""Clifford algebras of any signature, projective geometric algebra G(3,0,1), and versor groups.

>>> from geomlin.algebra import CliffordAlgebra, pga
>>> CliffordAlgebra((1, 1, 1)).dim
8
>>> pga.BLADE_NAMES[pga.E123]
'e123'
"""

from geomlin.algebra import pga
from geomlin.algebra.clifford import METHODS, PRODUCTS, CliffordAlgebra
from geomlin.algebra.pga import PGA
from geomlin.algebra.versor_groups import CliffordGroup, Pin301, pin_action

__all__ = ["METHODS", "PGA", "PRODUCTS", "CliffordAlgebra", "CliffordGroup", "Pin301", "pga", "pin_action"]
