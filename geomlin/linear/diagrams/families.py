"""The four group families with diagram bases and their conventions.

=========  ==========================  ====================================================
name       geomlin group (on R^n)      spanning diagrams
=========  ==========================  ====================================================
``"S"``    ``S(n)`` permutations       partition diagrams (all set partitions of k+l)
``"O"``    ``O(n)``                    Brauer diagrams (pairs), pairs = Kronecker delta
``"SO"``   ``SO(n)``                   Brauer diagrams + ``(l+k)\\n`` diagrams with ``ε``
``"Sp"``   ``Sp(m)``, ``n = 2m``       Brauer diagrams, same-row pairs = symplectic form J
=========  ==========================  ====================================================

Sp convention: ``J = geomlin.groups.symplectic_form(m) = [[0, I_m], [-I_m, 0]]``
in the basis ``(q_1..q_m, p_1..p_m)``. A pair of two bottom vertices ``u < v``
(input axes ``a < b``) contributes ``J[x_a, x_b]``; a pair of two top vertices
``u < v`` contributes ``J[y_u, y_v]``; a pair joining the rows is ``δ``.
"""

from __future__ import annotations

from geomlin.groups import SO, O, S, Sp, SymmetryGroup, as_group
from geomlin.validation import check_int

#: The family names, in the order of the module table (the class names of the groups).
GROUP_NAMES = ("S", "O", "SO", "Sp")


def group_name(group, n: int | None = None) -> str:
    """The family of ``group``, one of [`GROUP_NAMES`][]: ``group`` is a family name, a geomlin
    ``S(n)/O(n)/SO(n)/Sp(m)`` or a group name [`geomlin.groups.as_group`][geomlin.groups.names.as_group]
    parses (``"S(4)"``, ``"O3"``).

    When ``group`` is a group (or names one) and ``n`` is given, checks that the group acts on R^n.
    """
    if isinstance(group, str) and group in GROUP_NAMES:
        return group
    if not isinstance(group, (str, SymmetryGroup)):
        raise TypeError(f"group must be one of {list(GROUP_NAMES)}, a geomlin S/O/SO/Sp group or its name, "
                        f"got {type(group).__name__}")
    try:
        group = as_group(group)
    except ValueError as err:
        raise ValueError(f"{err}; or a family name, one of {list(GROUP_NAMES)}") from None
    for cls, name in ((S, "S"), (O, "O"), (SO, "SO"), (Sp, "Sp")):
        if type(group) is cls:
            if n is not None and group.d != n:
                raise ValueError(f"{group} acts on R^{group.d} but n = {n} was given")
            return name
    raise TypeError(f"diagram bases exist for the geomlin S/O/SO/Sp groups, got {group}")


def check_n(name: str, n) -> int:
    """Validate the dimension ``n`` of R^n for the group family ``name``."""
    n = check_int(n, "n (the dimension of R^n)", minimum=1)
    if name == "Sp" and n % 2:
        raise ValueError(f"Sp acts on R^n with n = 2m even (symplectic basis q_1..q_m, p_1..p_m), got n = {n}")
    return n


def check_diagram_for(name: str, d, n: int) -> None:
    """Raise if diagram ``d`` is not a spanning diagram of the family ``name`` on R^n."""
    if d.free:
        if name != "SO":
            raise ValueError(f"only SO(n) diagrams may have Levi-Civita (free) vertices; {d} has "
                             f"{len(d.free)} for group {name!r}")
        if len(d.free) != n:
            raise ValueError(f"an SO(n) determinant diagram has exactly n free vertices: {d} has "
                             f"{len(d.free)}, so it needs n = {len(d.free)}, but n = {n}")
    if name != "S" and not d.is_brauer:
        raise ValueError(f"{name} diagrams are Brauer diagrams (every block a pair), got {d}")


def geomlin_group(name: str, n: int):
    """The geomlin group whose action on R^n the diagrams of ``name`` commute with."""
    name = group_name(name)
    check_n(name, n)
    return {"S": S, "O": O, "SO": SO}[name](n) if name != "Sp" else Sp(n // 2)
