"""The tutorials of the linear-maps area run as a reader would paste them: docs/linear.md,
docs/new_group.md and docs/diagrams.md (their asserts are the checks)."""

import pytest

from geomlin.tables import clear_caches
from tests.examples.helpers import run_doc


@pytest.mark.parametrize("page", ["linear.md", "new_group.md", "diagrams.md"])
def test_tutorial_runs(page, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # the cache_dir example writes under ~/.cache
    clear_caches()  # bases solved by earlier tests in this process would skip the disk cache
    namespace = run_doc(page)
    if page == "linear.md":
        assert (tmp_path / ".cache" / "geomlin-bases").is_dir()
        assert namespace["B"].shape == (1, 3, 9)
    if page == "new_group.md":
        assert (namespace["n_cube"], namespace["n_so3"]) == (4, 3)
