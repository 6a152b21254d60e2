"""The one parser of group names: [`as_group`][] turns every name a geomlin group prints back
into the group.

Grammar (spaces ignored, family names case-insensitive)::

    name    := factor ("x" factor)*          a direct product, G1 x G2 x ...
    factor  := family ["+"] ["(" n ("," n)* ")" | n]

| name | group |
|---|---|
| ``SO(n)``, ``O(n)``, ``SL(n)``, ``Sp(m)`` | [`SO`][], [`O`][], [`SL`][], [`Sp`][] (``SO3`` = ``SO(3)``) |
| ``GL(n)``, ``U(n)``, ``SU(n)`` | [`GL`][], [`U`][], [`SU`][] (the unitary groups realified on ``R^2n``) |
| ``S(n)``, ``C(k)``, ``D(k)``, ``Z(n)``, ``Trivial(n)`` | [`S`][], [`C`][], [`D`][], [`Z`][], [`Trivial`][] |
| ``RubiksCube`` | [`RubiksCube`][] |
| ``O(1,3)`` or ``Lorentz``, ``SO+(1,3)`` | [`Lorentz`][], [`SO13p`][] |
| ``E(d)``, ``SE(d)`` | [`Euclidean`][] (``E3`` = ``E(3)``) |
| ``Pin(3,0,1)``, ``Spin(3,0,1)`` | [`Pin301`][] |
| ``CliffordGroup(1,1,1)``, ``CliffordGroup+(...)`` | [`CliffordGroup`][] of the metric (``+``: even part) |
| ``PseudoOrthogonalGroup(0,1,1,1)``, ``...+(...)`` | [`PseudoOrthogonalGroup`][] of the metric |
| ``O(3)xS(4)`` | [`DirectProduct`][] |

A group given by its generators alone (``Group(lie_algebra=..., name="mine")``) prints the name it
was given, which is a label, not something this parser can rebuild.
"""

from __future__ import annotations

import re

from geomlin.groups.base import Group, SymmetryGroup
from geomlin.groups.classical import (
    GL,
    SL,
    SO,
    SU,
    C,
    D,
    DirectProduct,
    Lorentz,
    O,
    RubiksCube,
    S,
    SO13p,
    Sp,
    Trivial,
    U,
    Z,
)
from geomlin.groups.euclidean import Euclidean
from geomlin.groups.versor import CliffordGroup, Pin301, PseudoOrthogonalGroup

#: One factor of a name: a family, an optional ``+`` (even part / identity component) and its
#: arguments, parenthesised or (one integer) written right after the family.
_FACTOR = re.compile(r"^(?P<family>[A-Za-z]+)(?P<plus>\+?)(?:\((?P<args>[-+0-9.,]*)\)|(?P<bare>\d+))?$")
#: Families taking one positive integer.
_ONE_INT = {"so": SO, "o": O, "sl": SL, "gl": GL, "su": SU, "u": U, "sp": Sp, "s": S, "c": C, "d": D, "z": Z,
            "trivial": Trivial,
            "e": lambda d: Euclidean(d, reflections=True), "se": lambda d: Euclidean(d, reflections=False)}
#: Examples for error messages.
EXAMPLES = ("'SO(3)'", "'O(3)'", "'E(3)'", "'SE3'", "'C4'", "'D(4)'", "'S(4)'", "'Sp(2)'", "'GL(3)'", "'U(2)'",
            "'Z(4)'", "'O(1,3)'",
            "'SO+(1,3)'", "'Pin(3,0,1)'", "'CliffordGroup(1,1,1)'", "'O(3)xS(4)'")


def _split_product(text: str) -> list[str]:
    """The factors of ``text`` at the ``x`` characters outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch == "("
        depth -= ch == ")"
        if ch == "x" and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _numbers(args: str | None, bare: str | None) -> tuple[float, ...] | None:
    if bare is not None:
        return (float(bare),)
    if args is None:
        return None
    try:
        return tuple(float(a) for a in args.split(",")) if args else ()
    except ValueError:
        return ()


def _factor(text: str, original: str) -> SymmetryGroup:
    match = _FACTOR.match(text)
    if match is None:
        raise _unknown(original)
    family, plus = match.group("family").lower(), match.group("plus") == "+"
    nums = _numbers(match.group("args"), match.group("bare"))
    ints = None if nums is None or any(v != int(v) for v in nums) else tuple(int(v) for v in nums)
    if not plus and ints is not None and len(ints) == 1 and family in _ONE_INT:
        return _ONE_INT[family](ints[0])
    if ints == (1, 3) and (family, plus) in (("o", False), ("so", True)):
        return Lorentz() if family == "o" else SO13p()
    if family == "lorentz" and not plus and nums in (None, ()):
        return Lorentz()
    if family == "rubikscube" and not plus and nums in (None, ()):
        return RubiksCube()
    if family in ("pin", "spin") and not plus and ints == (3, 0, 1):
        return Pin301(parity="even" if family == "spin" else None)
    if family in ("cliffordgroup", "pseudoorthogonalgroup") and nums and set(nums) <= {-1.0, 0.0, 1.0}:
        cls = CliffordGroup if family == "cliffordgroup" else PseudoOrthogonalGroup
        return cls(nums, parity="even" if plus else None)
    raise _unknown(original)


def _unknown(name: str) -> ValueError:
    return ValueError(f"unknown group {name!r}; expected a geomlin group or a name such as {', '.join(EXAMPLES)}")


def as_group(group, name: str = "group", kind: type = SymmetryGroup) -> SymmetryGroup:
    """The geomlin group ``group`` names: a [`SymmetryGroup`][] is returned as it is, a string parsed
    (see the module docstring for the grammar).

    Parameters
    ----------
    group : SymmetryGroup or str
        a group, or a name such as ``"SO(3)"``, ``"SE3"``, ``"C4"``, ``"Pin(3,0,1)"``.
    name : str
        the argument's name in error messages.
    kind : type
        the kind of group the caller needs, e.g. [`Group`][] (matrix groups acting on ``R^d``).

    Returns
    -------
    SymmetryGroup
        the group; ``as_group(str(g)) == g`` for every group geomlin builds.

    Raises
    ------
    ValueError
        for a string that names no group.
    TypeError
        for anything else, or a group that is not a ``kind``.
    """
    out = _parse(group, name)
    if not isinstance(out, kind):
        what = "a matrix group acting on R^d (geomlin.groups.Group)" if kind is Group else kind.__name__
        hint = " (E(d) and SE(d) act by rigid motions, not by matrices on R^d)" if isinstance(out, Euclidean) else ""
        raise TypeError(f"{name} must be {what} here, got {out} ({type(out).__name__}){hint}")
    return out


def _parse(group, name: str) -> SymmetryGroup:
    if isinstance(group, SymmetryGroup):
        return group
    if not isinstance(group, str):
        raise TypeError(f"{name} must be a geomlin group or a group name such as 'SO(3)' or 'E3', got "
                        f"{type(group).__name__}")
    text = group.replace(" ", "")
    factors = [_factor(part, group) for part in _split_product(text)]
    out = factors[0]
    for factor in factors[1:]:
        if not (isinstance(out, Group) and isinstance(factor, Group)):
            raise TypeError(f"{name} {group!r}: only matrix groups (geomlin.groups.Group) form direct products")
        out = DirectProduct(out, factor)
    return out
