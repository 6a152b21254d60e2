"""Module classes of geomlin.deploy for tests/test_declarations.py (see tests/models/declared_examples.py)."""

from geomlin.deploy.packaged import PackagedModel

EXAMPLES: dict = {}

NOT_EQUIVARIANT = {
    PackagedModel: "a compiled package around an exported model; its equivariance is that model's, measured on "
                   "the package by geomlin audit PACKAGE (tests/cli/test_export.py) and audit --physics "
                   "(tests/deploy/test_physics.py)",
}
