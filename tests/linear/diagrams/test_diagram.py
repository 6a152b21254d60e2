"""The Diagram type: canonical form, validation, printing and drawing."""

import pytest

from geomlin.linear.diagrams import Diagram


def test_canonical_form_makes_equal_diagrams_equal():
    a = Diagram(2, 2, [[3, 0], [1, 2]])
    b = Diagram(2, 2, ((2, 1), (0, 3)))
    assert a == b and hash(a) == hash(b)
    assert a.blocks == ((0, 3), (1, 2))


def test_vertex_helpers_and_propagating_blocks():
    # {1,1'} {2} {2'}: keep input axis 0 as output axis 0, broadcast output 1, sum input 1
    d = Diagram.from_axes(2, 2, [[("out", 0), ("in", 0)], [("out", 1)], [("in", 1)]])
    assert d.blocks == ((0, 2), (1,), (3,))
    assert d.propagating == ((0, 2),)
    assert d.is_top(1) and not d.is_top(2)
    assert d.axis(3) == 1 and d.top_part((0, 2)) == (0,) and d.bottom_part((0, 2)) == (0,)
    assert not d.is_brauer and d.num_blocks == 3


def test_str_and_draw_show_every_vertex():
    d = Diagram(2, 2, [[0, 2], [1], [3]])
    assert str(d) == "Diagram(k=2, l=2: {1,1'} {2} {2'})"
    drawing = d.draw()
    lines = drawing.splitlines()
    assert lines[0].split() == ["out", "1", "2"]
    assert lines[1].split() == ["A", "B"]
    assert lines[2].strip() == "|"
    assert lines[3].split() == ["A", "C"]
    assert lines[4].split() == ["in", "1'", "2'"]


def test_draw_marks_levi_civita_vertices():
    d = Diagram(2, 1, [], free=[0, 1, 2])
    assert "ε" in d.draw()
    assert "ε(1,1',2')" in str(d)


@pytest.mark.parametrize("blocks, free, match", [
    ([[0, 1], [1, 2]], (), "exactly once"),
    ([[0, 1]], (), "exactly once"),
    ([[0, 1], [2, 3], []], (), "non-empty"),
    ([[0, 1], [2, 5]], (), "exactly once"),
])
def test_invalid_blocks_raise(blocks, free, match):
    with pytest.raises(ValueError, match=match):
        Diagram(2, 2, blocks, free)


def test_invalid_orders_and_axis_names_raise():
    with pytest.raises(ValueError, match="k must be >= 0"):
        Diagram(-1, 2, [[0, 1]])
    with pytest.raises(ValueError, match="out of range"):
        Diagram.from_axes(1, 1, [[("out", 3), ("in", 0)]])
    with pytest.raises(ValueError, match="axis names"):
        Diagram.from_axes(1, 1, [[("top", 0), ("in", 0)]])
    with pytest.raises(TypeError, match="iterables of int"):
        Diagram(1, 1, [[0, None]])
