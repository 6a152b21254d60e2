"""Declarations of the export wrappers in :mod:`geomlin.deploy` (see tests/test_declarations.py)."""

from geomlin.deploy import EnergyAndForces, KeywordsAsPositional

NOT_EQUIVARIANT = {
    EnergyAndForces: "an export wrapper of a potential (energy and -dE/dpos); the potential's declared types are "
                     "audited, and geomlin audit checks the exported package",
    KeywordsAsPositional: "an export wrapper passing keyword inputs by position; the wrapped model's declared "
                          "types are audited",
}
