"""Module classes of geomlin's ground floor (see tests/test_declarations.py)."""

from geomlin.tables import ConstantTables

NOT_EQUIVARIANT = {
    ConstantTables: "a holder of constant tables (non-persistent buffers moved with a layer) that kernels read "
                    "through tables=; it has no forward pass",
}
