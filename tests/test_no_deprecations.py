"""Nothing is released, so nothing is deprecated: no alias, no ``**deprecated`` catch-all, no
moved-module shim, and the former spellings are plain errors (issue 23, item 1)."""

import re
from pathlib import Path

import pytest

import geomlin

ROOT = Path(geomlin.__file__).parent

#: Source patterns of a deprecation layer: a warning category, catch-all keyword collectors, tables
#: of moved names (the shape of a moved-module shim) and the former helper module.
FORBIDDEN = {
    "DeprecationWarning": re.compile(r"\bDeprecationWarning\b"),
    "**deprecated catch-all": re.compile(r"\*\*\w*deprecated"),
    "moved-name table": re.compile(r"^_MOVED\w*\s*="),
    "a deprecated name": re.compile(r"[Dd]eprecated (name|spelling|alias)"),
    "geomlin.deprecation": re.compile(r"geomlin\.deprecation|from geomlin import deprecation"),
}


def test_no_deprecation_layer_in_the_package():
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            found += [f"{path.relative_to(ROOT.parent)}:{lineno}: {what}" for what, pattern in FORBIDDEN.items()
                      if pattern.search(line)]
    assert not found, "\n".join(found)


def _old_spellings():
    from geomlin.datasets.meshes import mesh_point_cloud
    from geomlin.datasets.synthetic import NBody, nbody
    from geomlin.frames import PointCloudCanonicalizer, VNPointNet
    from geomlin.frames.images import ImageCanonicalizer
    from geomlin.gaunt import GauntConvolution
    from geomlin.gaunt import harmonics as T
    from geomlin.gaunt.layout import sphere_irreps
    from geomlin.groups import O
    from geomlin.linear import EquivariantMLP, uniform_rep
    from geomlin.models import EGNNPotential, GauntPotential
    from geomlin.reps import Scalar, V
    from geomlin.testing import equivariance_check
    from geomlin.train import AuditSpec

    return {
        "nbody(n_particles=)": lambda: nbody(2, n_particles=3),
        "NBody(n_particles=)": lambda: NBody(2, n_particles=3),
        "mesh_point_cloud(with_normals=)": lambda: mesh_point_cloud("x.off", 8, with_normals=True),
        "VNPointNet(hidden=)": lambda: VNPointNet(3, hidden=4),
        "PointCloudCanonicalizer(layers=)": lambda: PointCloudCanonicalizer("SO3", layers=1),
        "ImageCanonicalizer(hidden=)": lambda: ImageCanonicalizer("C4", hidden=4),
        "GauntConvolution(hidden=)": lambda: GauntConvolution(1, 1, 1, 2, hidden=8),
        "GauntPotential(channels=)": lambda: GauntPotential(num_species=3, channels=5),
        "EGNNPotential(layers=)": lambda: EGNNPotential(num_species=3, layers=1),
        "legendre_table(n_theta=)": lambda: T.legendre_table(3, n_theta=4),
        "sphere_irreps(parity_class=)": lambda: sphere_irreps(1, 2, parity_class=1),
        "EquivariantMLP(depth=)": lambda: EquivariantMLP(V(O(3)), Scalar, depth=1),
        "uniform_rep(group, channels)": lambda: uniform_rep(O(3), 2),
        "equivariance_check(n_samples=)": lambda: equivariance_check(lambda x: x, O(3), V, V, n_samples=2),
        "equivariance_check(reps_in=, reps_out=)": lambda: equivariance_check(lambda x: x, O(3), reps_in=V(O(3)),
                                                                              reps_out=V(O(3))),
        "AuditSpec(reps_in=, reps_out=)": lambda: AuditSpec(lambda x: x, O(3), reps_in=V(O(3)), reps_out=V(O(3)),
                                                            inputs=(), description=""),
    }


@pytest.mark.parametrize("name", sorted(_old_spellings()))
def test_former_spellings_are_type_errors(name):
    with pytest.raises(TypeError):
        _old_spellings()[name]()


@pytest.mark.parametrize("name", ["cgenn", "MVLinear", "CliffordGroup"])
def test_moved_names_are_gone_from_gatr(name):
    import geomlin.gatr

    assert not hasattr(geomlin.gatr, name)


@pytest.mark.parametrize("module, name", [
    ("geomlin.algebra", "pin_action"), ("geomlin.gatr", "pin_action"), ("geomlin.algebra", "Pin301"),
    ("geomlin.frames", "image_action"), ("geomlin.frames", "regular_action"), ("geomlin.frames", "FrameGroup"),
    ("geomlin.frames", "as_frame_group"), ("geomlin.frames.images", "ImageGroup"),
    ("geomlin.frames.images", "as_image_group"), ("geomlin.reps.types", "Images"),
    ("geomlin.reps.types", "planar_element"), ("geomlin.groups.classical", "as_group"),
])
def test_moved_and_merged_names_are_gone(module, name):
    """Issue 23: one group protocol and parser, feature types as the only language of actions."""
    import importlib

    assert not hasattr(importlib.import_module(module), name)


def test_former_methods_are_gone():
    from geomlin.algebra import CliffordAlgebra
    from geomlin.reps import Rep

    assert not hasattr(CliffordAlgebra, "versor_group") and not hasattr(Rep, "from_irreps")


def test_former_cli_flag_is_an_error(capsys):
    from geomlin.cli.main import main

    assert main(["train", "nbody", "--n-train", "16"]) != 0
    assert "--n-train" in capsys.readouterr().err
