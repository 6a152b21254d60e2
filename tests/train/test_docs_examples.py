"""The user code of docs/new_group.md runs as printed (the tutorial is a test)."""

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "new_group.md"


@pytest.mark.skipif(not DOC.is_file(), reason="docs/ not present (installed package)")
def test_new_group_tutorial_runs(capsys):
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.DOTALL)
    assert blocks, "the tutorial has no python blocks"
    assert len(blocks[0].strip().splitlines()) <= 20, "the tutorial promises at most 20 lines of user code"
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), namespace)  # noqa: S102 - our own documentation
    assert capsys.readouterr().out.split()[:2] == ["4", "3"]
