"""Enumerators of the diagrams that span equivariant maps between tensor powers.

* [`set_partitions`][] - all set partitions of ``m`` items (Bell(m) of them);
* [`partition_diagrams`][] - S_n: set partitions of the ``k + l`` vertices;
* [`brauer_diagrams`][] - O(n), Sp(n): perfect matchings of the ``k + l`` vertices;
* [`levi_civita_diagrams`][] - SO(n): ``(l+k)\\n`` diagrams, ``n`` free vertices
  joined to the Levi-Civita symbol and a perfect matching of the rest;
* [`spanning_diagrams`][] - the spanning set of each group family.

Pearce-Crump, "Connecting Permutation Equivariant Neural Networks and
Partition Diagrams" (2022) and "Brauer's Group Equivariant Neural Networks"
(ICML 2023), Theorems on the spanning sets of Hom_G((R^n)^{⊗k}, (R^n)^{⊗l}).
All orders are deterministic (restricted growth strings / lexicographic).
"""

from __future__ import annotations

import math
from functools import lru_cache
from itertools import combinations

from geomlin.linear.diagrams.diagram import Diagram
from geomlin.linear.diagrams.families import check_n, group_name
from geomlin.validation import check_nonnegative_int

#: Largest number of diagrams an enumerator builds (each is a small Python object; beyond this
#: the problem cannot fit in memory or be applied in reasonable time).
MAX_DIAGRAMS = 500_000


def stirling2(m: int, j: int) -> int:
    """Stirling number of the second kind: partitions of ``m`` items into exactly ``j`` blocks."""
    if j < 0 or j > m:
        return 0
    return sum((-1) ** i * math.comb(j, i) * (j - i) ** m for i in range(j + 1)) // math.factorial(j)


def count_set_partitions(m: int, max_blocks: int | None = None) -> int:
    """Number of set partitions of ``m`` items with at most ``max_blocks`` blocks (Bell(m) if None)."""
    top = m if max_blocks is None else min(m, max_blocks)
    return 1 if m == 0 else sum(stirling2(m, j) for j in range(1, top + 1))


def _refuse_large(count: int, what: str) -> None:
    if count > MAX_DIAGRAMS:
        raise ValueError(f"{what} has {count:,} diagrams, more than geomlin enumerates "
                         f"({MAX_DIAGRAMS:,}); use smaller tensor orders or, for S(n), a smaller n")


@lru_cache(maxsize=64)
def _set_partitions(m: int, max_blocks: int | None = None) -> tuple[tuple[tuple[int, ...], ...], ...]:
    """Restricted growth strings with labels below ``max_blocks``: only the partitions kept are built."""
    out = []
    cap = m if max_blocks is None else max_blocks

    def grow(i: int, labels: list[int], count: int) -> None:
        if i == m:
            blocks = [[] for _ in range(count)]
            for v, b in enumerate(labels):
                blocks[b].append(v)
            out.append(tuple(tuple(b) for b in blocks))
            return
        for b in range(min(count + 1, cap)):
            labels.append(b)
            grow(i + 1, labels, max(count, b + 1))
            labels.pop()

    grow(0, [], 0)
    return tuple(out)


def set_partitions(m: int, max_blocks: int | None = None) -> list[tuple[tuple[int, ...], ...]]:
    """All set partitions of ``{0, .., m-1}`` (restricted growth string order).

    Returns a list of Bell(m) partitions (those with at most ``max_blocks`` blocks when given),
    each a tuple of sorted blocks sorted by their smallest element. ``m = 0`` has one (empty)
    partition. Raises ``ValueError`` when there are more than [`MAX_DIAGRAMS`][].
    """
    m = check_nonnegative_int(m, "set_partitions: m")
    if max_blocks is not None:
        max_blocks = check_nonnegative_int(max_blocks, "set_partitions: max_blocks")
    _refuse_large(count_set_partitions(m, max_blocks), f"the set of partitions of {m} items")
    return list(_set_partitions(m, max_blocks))


@lru_cache(maxsize=64)
def _matchings(items: tuple[int, ...]) -> tuple[tuple[tuple[int, int], ...], ...]:
    if not items:
        return ((),)
    if len(items) % 2:
        return ()
    first, rest = items[0], items[1:]
    out = []
    for i, partner in enumerate(rest):
        remaining = rest[:i] + rest[i + 1:]
        for m in _matchings(remaining):
            out.append(((first, partner),) + m)
    return tuple(out)


def perfect_matchings(items) -> list[tuple[tuple[int, int], ...]]:
    """All perfect matchings of the sequence ``items`` ((m-1)!! of them; none when odd)."""
    return list(_matchings(tuple(items)))


def partition_diagrams(k: int, l: int, max_blocks: int | None = None) -> list[Diagram]:
    """All partition diagrams with ``k`` bottom and ``l`` top vertices (Bell(k+l) of them).

    ``max_blocks`` keeps only partitions with at most that many blocks (the S_n
    orbit basis keeps ``max_blocks = n``).
    """
    k = check_nonnegative_int(k, "k")
    l = check_nonnegative_int(l, "l")
    if max_blocks is not None:
        max_blocks = check_nonnegative_int(max_blocks, "max_blocks")
    _refuse_large(count_set_partitions(k + l, max_blocks),
                  f"the set of ({k}, {l}) partition diagrams" + (f" with at most {max_blocks} blocks"
                                                                if max_blocks is not None else ""))
    return [Diagram(k, l, p) for p in _set_partitions(k + l, max_blocks)]


def brauer_diagrams(k: int, l: int) -> list[Diagram]:
    """All Brauer diagrams (perfect matchings) on ``k + l`` vertices; ``(k+l-1)!!`` or none if odd."""
    k = check_nonnegative_int(k, "k")
    l = check_nonnegative_int(l, "l")
    _refuse_large(matching_count(k + l), f"the set of ({k}, {l}) Brauer diagrams")
    return [Diagram(k, l, m) for m in _matchings(tuple(range(k + l)))]


def matching_count(m: int) -> int:
    """``(m-1)!!`` perfect matchings of ``m`` items (0 when ``m`` is odd)."""
    return 0 if m % 2 else math.prod(range(m - 1, 0, -2))


def levi_civita_diagrams(k: int, l: int, n: int) -> list[Diagram]:
    """All ``(l+k)\\n`` diagrams of SO(n): ``n`` free vertices plus a perfect matching of the rest.

    There are ``C(k+l, n) (k+l-n-1)!!`` of them when ``k + l - n`` is even and
    none when it is odd.

    Raises
    ------
    ValueError
        When ``n > k + l`` (a determinant diagram needs ``n`` vertices)
        or ``n < 1``.
    """
    k = check_nonnegative_int(k, "k")
    l = check_nonnegative_int(l, "l")
    check_n("SO", n)
    if n > k + l:
        raise ValueError(f"an SO(n) determinant ((l+k)\\n) diagram joins n vertices to the Levi-Civita "
                         f"symbol, so it needs k + l >= n; got k + l = {k + l} < n = {n}")
    _refuse_large(math.comb(k + l, n) * matching_count(k + l - n),
                  f"the set of ({k}, {l}) Levi-Civita diagrams of SO({n})")
    out = []
    for free in combinations(range(k + l), n):
        rest = tuple(v for v in range(k + l) if v not in free)
        for m in _matchings(rest):
            out.append(Diagram(k, l, m, free))
    return out


def spanning_diagrams(group, k: int, l: int, n: int) -> list[Diagram]:
    """The spanning set of ``Hom_G((R^n)^{⊗k}, (R^n)^{⊗l})`` for ``group`` in ``{"S","O","SO","Sp"}``.

    S: all partition diagrams (diagram basis, linearly independent iff
    ``n >= k + l``); O and Sp: Brauer diagrams; SO: Brauer diagrams followed by
    the ``(l+k)\\n`` diagrams (none when ``n > k + l``). For a *basis* use
    [`geomlin.linear.diagrams.diagram_basis`][geomlin.linear.diagrams.basis.diagram_basis].
    """
    name = group_name(group, n)
    check_n(name, n)
    if name == "S":
        return partition_diagrams(k, l)
    out = brauer_diagrams(k, l)
    if name == "SO" and n <= k + l:
        out += levi_civita_diagrams(k, l, n)
    return out
