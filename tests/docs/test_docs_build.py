"""The documentation site builds with ``mkdocs build --strict`` (needs the ``docs`` extra), and its math
renders with no JavaScript (MathML; no MathJax / KaTeX is served). The API reference parses numpy
docstrings, resolves every cross-reference (an unresolved one fails ``--strict``) and covers every
public module."""

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
#: Sphinx roles, which mkdocstrings leaves as text (write ``[`Name`][]`` or ``[`Name`][geomlin.x.Name]``).
SPHINX_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj|const):(?:`|<code)")
#: An autorefs cross-reference that was not turned into a link (inside a code block, say).
UNLINKED_CROSSREF = re.compile(r"\]\[(?:geomlin[\w.]*)?\]")
API_PAGES = ROOT / "docs" / "api"


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


def test_no_page_shows_raw_sphinx_roles_or_unlinked_crossrefs(site):
    roles = [str(p.relative_to(site)) for p in site.rglob("*.html") if SPHINX_ROLE.search(_without_code(p.read_text()))]
    assert not roles, f"pages with raw Sphinx roles (:class:`...` etc.; use autorefs cross-references): {roles}"
    unlinked = [str(p.relative_to(site)) for p in site.rglob("*.html") if UNLINKED_CROSSREF.search(p.read_text())]
    assert not unlinked, f"pages with cross-references printed as text (e.g. in a code block): {unlinked}"


def test_docstring_sections_render_as_tables(site):
    html = (site / "api" / "gatr" / "index.html").read_text()
    start = html.index('id="geomlin.gatr.model.GATr"')
    end = html.index('id="geomlin.gatr.model.GATr.forward"', start)
    cls = html[start:end]
    table = re.search(r"<table>.*?</table>", cls, flags=re.DOTALL)
    assert table is not None, "GATr's Parameters section did not render as a table"
    rows = re.findall(r"<tr class=\"doc-section-item\">(.*?)</tr>", table.group(0), flags=re.DOTALL)
    names = [re.search(r"<code>(\w+)</code>", r).group(1) for r in rows]
    assert names[:3] == ["in_mv_channels", "out_mv_channels", "hidden_mv_channels"], names
    assert "multivector channels" in rows[0] and ">int<" in rows[0]
    # cross-references in a docstring are links to the API pages
    assert re.search(r'<a class="autorefs autorefs-internal"[^>]*href="[^"]*#geomlin\.gatr\.layers\.GATrBlock"', cls)


def _public_modules() -> list[str]:
    names = []
    for path in sorted((ROOT / "geomlin").rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if not any(part.startswith("_") for part in parts):
            names.append(".".join(parts))
    return names


def test_every_public_module_is_on_an_api_page():
    documented = set()
    for page in API_PAGES.glob("*.md"):
        documented.update(re.findall(r"^::: ([\w.]+)", page.read_text(), flags=re.MULTILINE))
    modules = _public_modules()
    assert "geomlin.reps.feature_type" in modules
    missing = [m for m in modules if m not in documented]
    assert not missing, f"public modules with no ::: block in docs/api/*.md: {missing}"
    stale = sorted(documented - set(modules))
    assert not stale, f"docs/api/*.md documents modules that do not exist: {stale}"


def test_docstrings_hold_no_sphinx_roles():
    """The source check behind the rendered one (runs without mkdocs)."""
    found = []
    for path in sorted((ROOT / "geomlin").rglob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if SPHINX_ROLE.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}")
    assert not found, f"Sphinx roles (write autorefs cross-references): {found[:20]}"
