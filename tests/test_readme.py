"""The README's Python snippets run as written, and its two commands are the ones CI reads."""

import re
import runpy
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_python_snippets_run(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    assert blocks, "the README has no Python snippet"
    for i, code in enumerate(blocks):
        snippet = tmp_path / f"readme_snippet_{i}.py"
        snippet.write_text(code)
        runpy.run_path(str(snippet), run_name="__main__")


def test_the_two_commands_come_first():
    blocks = re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.DOTALL)
    setup, tests = blocks[0].strip(), blocks[1].strip()
    assert "pip install torch==2.13.0" in setup and setup.endswith("geomlin train pointcloud")
    assert "pytest" in tests
