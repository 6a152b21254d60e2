"""Module classes of :mod:`geomlin.algebra` (see tests/test_declarations.py)."""

from geomlin.algebra.clifford import ConstantTables

NOT_EQUIVARIANT = {
    ConstantTables: "a container of constant tables (non-persistent buffers) that layers pass as tables=; "
                    "it has no forward pass",
}
