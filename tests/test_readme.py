"""The README's Python snippets run as written, and its two commands are the ones CI reads."""

import re
import runpy
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


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


def test_ci_runs_the_first_command_whole_then_the_tests_in_the_same_clone():
    """.ci/run runs the README's first command with its main job (which writes runs/pointcloud), then
    the test command, in the clone's root folder, with no change of folder in between."""
    script = (ROOT / ".ci" / "run").read_text()
    code = [ln.strip() for ln in script.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    first = code.index('bash -c "$setup_and_main"')
    tests = code.index('bash -c "$test_command"')
    slow = code.index('bash -c "$test_command -m slow"')
    assert first < tests < slow
    assert not [ln for ln in code[first:slow] if ln.startswith(("cd ", "pushd", "rm "))]
    assert "setup=${" not in script  # the main job is no longer cut off
