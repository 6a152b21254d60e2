"""The documentation site builds with ``mkdocs build --strict`` (needs the ``docs`` extra), and its math
renders with no JavaScript (MathML; no MathJax / KaTeX is served)."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MKDOCS = shutil.which("mkdocs") or str(Path(sys.executable).parent / "mkdocs")
#: TeX math delimiters, which nothing on the site would typeset.
TEX_DELIMITERS = re.compile(r"\$\$|\\\(|\\\[|\\begin\{")


def _without_code(html: str) -> str:
    return re.sub(r"<(code|pre)\b.*?</\1>", "", html, flags=re.DOTALL)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    if shutil.which("mkdocs") is None and not Path(MKDOCS).exists():
        pytest.skip("mkdocs is not installed (pip install -e '.[docs]')")
    out = tmp_path_factory.mktemp("docs") / "site"
    result = subprocess.run([MKDOCS, "build", "--strict", "--site-dir", str(out)], check=False, cwd=ROOT,
                            capture_output=True, text=True, env={"NO_MKDOCS_2_WARNING": "1",
                                                                 "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin"},
                            timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return out


def test_mkdocs_build_strict(site):
    assert (site / "index.html").exists()


def test_the_equivariance_equation_is_rendered_math(site):
    html = (site / "concepts" / "index.html").read_text()
    math = re.search(r'<math display="block".*?</math>', html, flags=re.DOTALL)
    assert math is not None, "the equivariance equation is not MathML"
    assert "<msub><mi>&rho;</mi><mtext>in</mtext></msub>" in math.group(0)
    assert not TEX_DELIMITERS.search(_without_code(html))


def test_no_page_shows_raw_tex(site):
    raw = [str(p.relative_to(site)) for p in site.rglob("*.html") if TEX_DELIMITERS.search(_without_code(p.read_text()))]
    assert not raw, f"pages with raw TeX math (write MathML instead): {raw}"
