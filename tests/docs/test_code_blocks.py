"""Every ```python block of docs/*.md runs as written (as the README's do, tests/test_readme.py).

The blocks of one page run in order in one namespace, as a reader pastes them, from an empty
folder outside the clone (so no block may read or write the clone's files). A block that cannot run
here is preceded by ``<!-- no-run: reason -->``: only for what no test machine has (a GPU-only
call, a user's own data folder); such blocks are listed in ``NO_RUN`` so that the list stays short.
"""

import re
from pathlib import Path

import matplotlib
import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
BLOCK = re.compile(r"(<!--\s*no-run:(?P<reason>[^>]*?)-->\s*\n)?```python\n(?P<code>.*?)```", re.DOTALL)
#: (page, block index) of the blocks marked no-run, each with its reason in the page.
NO_RUN: set[tuple[str, int]] = {("deployment", 3)}


def _blocks(page: Path):
    return [(i, m.group("code"), m.group("reason")) for i, m in enumerate(BLOCK.finditer(page.read_text()))]


PAGES = sorted(p for p in DOCS.glob("*.md") if _blocks(p))


def test_pages_with_code_are_found():
    assert len(PAGES) >= 10, [p.name for p in PAGES]


def test_no_run_marks_are_few_and_justified():
    marked = {(p.stem, i): reason for p in PAGES for i, _, reason in _blocks(p) if reason is not None}
    assert set(marked) == NO_RUN, f"no-run blocks {sorted(marked)} differ from NO_RUN {sorted(NO_RUN)}"
    assert all(reason.strip() for reason in marked.values()), marked


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_page_blocks_run(page, tmp_path, monkeypatch):
    matplotlib.use("Agg")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))  # blocks with cache_dir="~/..." must not write the real home
    namespace = {"__name__": "__main__"}
    for i, code, reason in _blocks(page):
        if reason is not None:
            continue
        exec(compile(code, f"{page.name} (python block {i})", "exec"), namespace)  # noqa: S102
