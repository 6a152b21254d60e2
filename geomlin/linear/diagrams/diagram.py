"""The diagram type: a set partition of ``l`` top and ``k`` bottom vertices.

A diagram ``d`` with ``k`` bottom vertices and ``l`` top vertices names a linear
map ``(R^n)^{⊗k} -> (R^n)^{⊗l}`` (Pearce-Crump, "Connecting Permutation
Equivariant Neural Networks and Partition Diagrams", 2022; "Brauer's Group
Equivariant Neural Networks", ICML 2023). Bottom vertices are the input tensor
axes, top vertices the output tensor axes.

**Vertex labels**

``0 .. l-1`` are the top vertices (output axes, left to right) and
``l .. l+k-1`` the bottom vertices (input axes, left to right): bottom
vertex ``l + j`` is input axis ``j``. This is Pearce-Crump's labelling
(``1..l`` on top, ``l+1..l+k`` below) shifted to start at 0. Printed
notation writes top vertices as ``1 .. l`` and bottom vertices as
``1' .. k'``.

**Blocks**

``blocks`` is the partition of the non-free vertices; every block is a
sorted tuple and the blocks are sorted by their smallest vertex, so equal
diagrams compare and hash equal. Brauer diagrams have only blocks of size 2.

**Free vertices (SO(n) only)**

An ``(l+k)\\n`` diagram additionally has ``n`` *free* vertices joined to the
Levi-Civita symbol; ``free`` lists them in increasing label order, which
is also the order of the indices of ``ε`` (top free vertices come first).
"""

from __future__ import annotations

import string
from dataclasses import dataclass

from geomlin.validation import check_nonnegative_int

#: Prefix used when a block letter runs out (more than 52 blocks).
_LETTERS = string.ascii_uppercase + string.ascii_lowercase
#: Marker for a vertex joined to the Levi-Civita symbol in drawings.
FREE_MARK = "ε"


@dataclass(frozen=True)
class Diagram:
    """A partition diagram with ``k`` bottom (input) and ``l`` top (output) vertices.

    Parameters
    ----------
    k : int
        number of bottom vertices = input tensor order.
    l : int
        number of top vertices = output tensor order.
    blocks : tuple[tuple[int, ...], ...]
        the blocks of the partition of the non-free vertices, as
        iterables of vertex labels (``0..l-1`` top, ``l..l+k-1`` bottom).
    free : tuple[int, ...]
        vertices joined to the Levi-Civita symbol (SO(n) diagrams), any order.

    Notes
    -----
    Use [`from_blocks`][] to build one from unsorted blocks; the constructor
    canonicalises too, so ``Diagram(2, 2, [[3, 0], [1, 2]])`` is valid.
    """

    k: int
    l: int
    blocks: tuple[tuple[int, ...], ...]
    free: tuple[int, ...] = ()

    def __post_init__(self):
        k = check_nonnegative_int(self.k, "Diagram: k")
        l = check_nonnegative_int(self.l, "Diagram: l")
        try:
            blocks = tuple(sorted((tuple(sorted(int(v) for v in b)) for b in self.blocks),
                                  key=lambda b: b[0] if b else -1))
            free = tuple(sorted(int(v) for v in self.free))
        except TypeError as err:
            raise TypeError("Diagram blocks must be iterables of int vertex labels and free an iterable "
                            f"of ints, got blocks={self.blocks!r}, free={self.free!r}") from err
        if any(len(b) == 0 for b in blocks):
            raise ValueError(f"Diagram blocks must be non-empty, got {self.blocks!r}")
        seen = [v for b in blocks for v in b] + list(free)
        if sorted(seen) != list(range(k + l)):
            raise ValueError(f"the blocks and free vertices of a ({k}, {l}) diagram must cover the "
                             f"vertices 0..{k + l - 1} exactly once, got blocks={self.blocks!r}, "
                             f"free={self.free!r}")
        object.__setattr__(self, "blocks", blocks)
        object.__setattr__(self, "free", free)

    # ------------------------------------------------------------------ vertices
    @property
    def size(self) -> int:
        """Total number of vertices ``k + l``."""
        return self.k + self.l

    def is_top(self, v: int) -> bool:
        """Whether vertex ``v`` is a top (output) vertex."""
        return v < self.l

    def axis(self, v: int) -> int:
        """The tensor axis of vertex ``v``: output axis for top vertices, input axis for bottom ones."""
        return v if v < self.l else v - self.l

    def top_part(self, block) -> tuple[int, ...]:
        """Output axes of the top vertices of ``block``."""
        return tuple(v for v in block if v < self.l)

    def bottom_part(self, block) -> tuple[int, ...]:
        """Input axes of the bottom vertices of ``block``."""
        return tuple(v - self.l for v in block if v >= self.l)

    # ------------------------------------------------------------------ kinds
    @property
    def is_brauer(self) -> bool:
        """All blocks are pairs (a Brauer diagram, possibly with free vertices)."""
        return all(len(b) == 2 for b in self.blocks)

    @property
    def num_blocks(self) -> int:
        """Number of blocks (free vertices not counted)."""
        return len(self.blocks)

    @property
    def propagating(self) -> tuple[tuple[int, ...], ...]:
        """Blocks with vertices in both rows, ordered by their smallest top vertex."""
        return tuple(b for b in self.blocks if b[0] < self.l <= b[-1])

    def __str__(self) -> str:
        def name(v: int) -> str:
            return f"{v + 1}" if v < self.l else f"{v - self.l + 1}'"

        parts = ["{" + ",".join(name(v) for v in b) + "}" for b in self.blocks]
        if self.free:
            parts.append(FREE_MARK + "(" + ",".join(name(v) for v in self.free) + ")")
        return f"Diagram(k={self.k}, l={self.l}: " + " ".join(parts) + ")"

    def draw(self) -> str:
        """A text drawing: one letter per block on each vertex, ``ε`` on free vertices.

        Example, the (2, 2) diagram ``{1,1'} {2} {2'}`` (keep input axis 1 as
        output axis 1, sum out input axis 2, broadcast along output axis 2)::

            out  1  2
                 A  B
                 |
                 A  C
            in   1' 2'

        A ``|`` joins a top and a bottom vertex in the same column when they
        share a block (other joins are read off the letters).
        """
        letter = {}
        for i, b in enumerate(self.blocks):
            tag = _LETTERS[i] if i < len(_LETTERS) else f"B{i}"
            for v in b:
                letter[v] = tag
        for v in self.free:
            letter[v] = FREE_MARK
        width = max([len(letter[v]) for v in letter] + [len(f"{max(self.k, self.l)}'")]) + 1
        cols = max(self.k, self.l)

        def row(cells) -> str:
            return "".join(c.ljust(width) for c in cells).rstrip()

        top_names = [str(i + 1) for i in range(self.l)]
        bot_names = [f"{j + 1}'" for j in range(self.k)]
        top_tags = [letter[i] for i in range(self.l)]
        bot_tags = [letter[self.l + j] for j in range(self.k)]
        bars = []
        for c in range(cols):
            joined = (c < self.l and c < self.k and letter[c] == letter[self.l + c]
                      and letter[c] != FREE_MARK)
            bars.append("|" if joined else "")
        lines = ["out  " + row(top_names), "     " + row(top_tags)]
        bar_line = row(bars)
        lines.append("     " + bar_line if bar_line else "")
        lines += ["     " + row(bot_tags), "in   " + row(bot_names)]
        return "\n".join(line.rstrip() for line in lines)

    @classmethod
    def from_blocks(cls, k: int, l: int, blocks, free=()) -> Diagram:
        """Build a diagram from blocks given as vertex labels (see the module docstring)."""
        return cls(k, l, tuple(tuple(b) for b in blocks), tuple(free))

    @classmethod
    def from_axes(cls, k: int, l: int, blocks, free=()) -> Diagram:
        """Build a diagram from blocks of ``("out", i)`` / ``("in", j)`` axis names.

        Example: ``Diagram.from_axes(2, 2, [[("out", 0), ("in", 0)], [("out", 1)], [("in", 1)]])``.
        """
        def label(item) -> int:
            side, i = item
            if side == "out":
                if not 0 <= i < l:
                    raise ValueError(f"output axis {i} out of range for l = {l}")
                return i
            if side == "in":
                if not 0 <= i < k:
                    raise ValueError(f"input axis {i} out of range for k = {k}")
                return l + i
            raise ValueError(f"axis names must be ('out', i) or ('in', j), got {item!r}")

        return cls(k, l, tuple(tuple(label(v) for v in b) for b in blocks),
                   tuple(label(v) for v in free))
