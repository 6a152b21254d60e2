"""The one parser of group names: every name a geomlin group prints parses back to that group."""

import importlib
import inspect
import pkgutil

import pytest

import geomlin
from geomlin.algebra import CliffordAlgebra, pga
from geomlin.groups import (
    GL,
    SL,
    SO,
    SU,
    C,
    CliffordGroup,
    D,
    DirectProduct,
    Euclidean,
    Group,
    Lorentz,
    O,
    Pin301,
    PseudoOrthogonalGroup,
    RubiksCube,
    S,
    SO13p,
    Sp,
    SymmetryGroup,
    Trivial,
    U,
    Z,
    as_group,
)
from geomlin.groups.versor import AlgebraGroup

#: Instances of every group class geomlin defines (test_every_group_class_is_in_the_catalog keeps it whole).
CATALOG = {
    SO: [SO(1), SO(2), SO(3), SO(12)],
    O: [O(1), O(3), O(5)],
    Sp: [Sp(1), Sp(3)],
    SL: [SL(2), SL(4)],
    GL: [GL(1), GL(3)],
    U: [U(1), U(3)],
    SU: [SU(2), SU(3)],
    Z: [Z(1), Z(4)],
    RubiksCube: [RubiksCube()],
    S: [S(1), S(2), S(5)],
    C: [C(1), C(4), C(12)],
    D: [D(2), D(4), D(6)],
    Trivial: [Trivial(1), Trivial(3)],
    Lorentz: [Lorentz()],
    SO13p: [SO13p()],
    DirectProduct: [DirectProduct(O(3), S(4)), DirectProduct(DirectProduct(SO(2), C(3)), Sp(1)),
                    DirectProduct(SO(2), O(1))],  # the cylinder group of docs/new_group.md
    Euclidean: [Euclidean(3), Euclidean(3, reflections=False), Euclidean(2), Euclidean(5, translation_scale=3.0)],
    Pin301: [Pin301(), Pin301(parity="even"), Pin301(parity="odd", max_planes=3)],
    CliffordGroup: [CliffordGroup((1, 1, 1)), CliffordGroup((1, -1, -1, -1), parity="even"),
                    CliffordGroup((0, 1, 1, 1)), CliffordGroup(CliffordAlgebra((1, 0, -1)))],
    PseudoOrthogonalGroup: [PseudoOrthogonalGroup((0, 1, 1, 1)), PseudoOrthogonalGroup((1, 1, -1), parity="even"),
                            PseudoOrthogonalGroup(pga.PGA)],
}


def _geomlin_group_classes() -> set[type]:
    """Every SymmetryGroup subclass defined in a geomlin module (imported to find it)."""
    found = set()
    for info in pkgutil.walk_packages(geomlin.__path__, "geomlin."):
        if info.name.endswith("__main__") or ".kernels." in info.name:
            continue
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, SymmetryGroup) and cls.__module__ == info.name:
                found.add(cls)
    return found


def test_every_group_class_is_in_the_catalog():
    """A new group class must print a name the parser reads back (add it to CATALOG). ``Group`` itself
    is a group given by its generators, whose name is a label of the user's choosing; the other two
    are the protocol's abstract bases."""
    missing = _geomlin_group_classes() - set(CATALOG) - {SymmetryGroup, Group, AlgebraGroup}
    assert not missing, f"add {sorted(c.__name__ for c in missing)} to CATALOG (and to as_group if needed)"


@pytest.mark.parametrize("group", [g for gs in CATALOG.values() for g in gs], ids=str)
def test_every_printed_name_round_trips(group):
    assert as_group(str(group)) == group
    assert as_group(repr(group)) == group
    assert str(group) == repr(group) == group.name


def _frame_and_image_groups():
    """The groups the frames, the image canonicalizer, the CLI and the transforms name."""
    from geomlin.datasets.transforms import RandomRotation
    from geomlin.frames import FrameAveraging, ImageCanonicalizer, PointCloudCanonicalizer, frame_group
    from geomlin.train.tasks.pointcloud import PointCloudTask

    choices = next(o.choices for o in PointCloudTask.options if o.name == "frame_group")
    out = [frame_group(c) for c in choices]
    out += [frame_group(n) for n in ("O(2)", "SO(4)", "E(2)", "SE(2)")]
    out += [ImageCanonicalizer(n).group for n in ("C4", "D4")]
    out += [PointCloudCanonicalizer(n).group for n in ("SO3", "E3")]
    out += [FrameAveraging(lambda p: p, n).group for n in ("SE3", "O3")]
    out += [RandomRotation(n).group for n in ("SO3", "O3")]
    return out


def test_the_names_of_frames_images_cli_and_transforms_round_trip():
    groups = _frame_and_image_groups()
    assert {str(g) for g in groups} >= {"E(3)", "SE(3)", "O(3)", "SO(3)", "C(4)", "D(4)", "E(2)", "SO(4)"}
    for g in groups:
        assert as_group(str(g)) == g, g


@pytest.mark.parametrize("alias, group", [("SO3", SO(3)), ("so(3)", SO(3)), (" O 3 ", O(3)), ("E3", Euclidean(3)),
                                          ("se3", Euclidean(3, reflections=False)), ("C4", C(4)), ("D4", D(4)),
                                          ("S4", S(4)), ("Lorentz", Lorentz()), ("Spin(3,0,1)", Pin301(parity="even")),
                                          ("O(3)xS(2)", DirectProduct(O(3), S(2)))])
def test_compact_spellings(alias, group):
    assert as_group(alias) == group


def test_a_group_is_returned_as_it_is():
    G = Group(discrete_generators=O(2).discrete_generators, name="mine")
    assert as_group(G) is G


@pytest.mark.parametrize("bad, error, phrase", [
    ("SO(3", ValueError, "unknown group 'SO\\(3'"),
    ("G2", ValueError, "unknown group 'G2'"),
    ("Pin(1,1,0)", ValueError, "unknown group"),
    ("CliffordGroup(2,1)", ValueError, "unknown group"),
    ("E(3)xO(2)", TypeError, "only matrix groups"),
    ("SO(0)", ValueError, "must be >= 1"),
    (3, TypeError, "group must be a geomlin group or a group name"),
])
def test_bad_names_are_refused(bad, error, phrase):
    with pytest.raises(error, match=phrase):
        as_group(bad)


def test_a_matrix_group_is_required_where_one_is_meant():
    from geomlin.reps import V

    with pytest.raises(TypeError, match=r"must be a matrix group acting on R\^d .*got E\(3\)"):
        V("E3")
    assert as_group("O(3)", kind=Group) == O(3)
