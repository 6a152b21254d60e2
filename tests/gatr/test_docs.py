"""The GATr tutorial page (docs/gatr.md) runs: every ``python`` code block, in order, in one namespace."""

import re
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "gatr.md"
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def test_gatr_page_code_runs(tmp_path, monkeypatch, capsys):
    blocks = BLOCK.findall(PAGE.read_text())
    assert len(blocks) >= 3
    monkeypatch.chdir(tmp_path)  # the tutorial saves its figure in the current folder
    namespace = {"__name__": "gatr_docs"}
    for i, code in enumerate(blocks):
        exec(compile(code, f"{PAGE.name}[block {i}]", "exec"), namespace)  # noqa: S102 - our own documentation
    assert (tmp_path / "gatr_plane_fit.png").stat().st_size > 1000
    out = capsys.readouterr().out
    deviation = float(re.search(r"max \|f\(g x\) - g f\(x\)\| = (\S+)", out).group(1))
    assert deviation < 1e-3  # float32 round-off: the output moved with the input
    assert namespace["flat_mv"].shape == (256, 1, 16)
