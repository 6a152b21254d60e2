"""Declarations of the export wrappers in [`geomlin.deploy`][] (see tests/test_declarations.py)."""

from geomlin.deploy import KeywordsAsPositional

NOT_EQUIVARIANT = {
    KeywordsAsPositional: "an export wrapper passing keyword inputs by position; the wrapped model's declared "
                          "types are audited",
}
