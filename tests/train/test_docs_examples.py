"""The user code of the docs runs as printed: docs/new_group.md (a tutorial) and docs/training.md."""

from tests.examples.helpers import python_blocks, run_doc


def test_new_group_tutorial_runs(capsys):
    blocks = python_blocks("new_group.md")
    assert blocks, "the tutorial has no python blocks"
    assert len(blocks[0].strip().splitlines()) <= 20, "the tutorial promises at most 20 lines of user code"
    run_doc("new_group.md")
    assert capsys.readouterr().out.split()[:2] == ["4", "3"]
