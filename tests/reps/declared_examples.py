"""Equivariance examples of the module classes in :mod:`geomlin.reps` (see tests/test_declarations.py)."""

from geomlin.reps import EquivariantSequential
from tests.reps.test_types import _Mv

EXAMPLES = {
    EquivariantSequential: [lambda: EquivariantSequential(_Mv(2, 3), _Mv(3, 2))],
}
