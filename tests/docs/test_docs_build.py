"""The documentation site builds with ``mkdocs build --strict`` (needs the ``docs`` extra), and its math
renders with no JavaScript (MathML; no MathJax / KaTeX is served). The API reference parses numpy
docstrings, resolves every cross-reference (an unresolved one fails ``--strict``) and covers every
public module."""

import importlib.util
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
    if importlib.util.find_spec("latex2mathml") is None:
        pytest.skip("latex2mathml (docstring math) is not installed (pip install -e '.[docs]')")
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


def _docstring_examples() -> dict[str, str]:
    """``{module path: first example line}`` of every geomlin docstring holding a ``>>>`` example."""
    import ast

    found = {}
    for path in sorted((ROOT / "geomlin").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node) or ""
                lines = [ln.strip()[4:] for ln in doc.splitlines() if ln.strip().startswith(">>> ")]
                if lines:
                    found[f"{path.relative_to(ROOT)}:{getattr(node, 'name', 'module')}"] = lines[0]
    return found


def _code_text(html: str) -> str:
    import html as html_lib

    blocks = re.findall(r"<pre\b.*?</pre>", html, flags=re.DOTALL)
    return html_lib.unescape(re.sub(r"<[^>]+>", "", "\n".join(blocks)))


def test_docstring_examples_render_as_code_not_as_quotes(site):
    """A ``>>>`` example in a docstring is a highlighted code block on the API pages; Markdown alone
    reads it as three nested block quotes with the lines run together (docs/griffe_markup.py)."""
    pages = {p: p.read_text() for p in (site / "api").rglob("*.html")}
    quoted = [str(p.relative_to(site)) for p, html in pages.items() if re.search(r"<blockquote>\s*<blockquote>", html)]
    assert not quoted, f"docstring examples rendered as nested quotes on {quoted}"
    code = "\n".join(_code_text(html) for html in pages.values())
    examples = _docstring_examples()
    assert len(examples) >= 15, examples
    missing = {where: line for where, line in examples.items() if f">>> {line}" not in code}
    assert not missing, f"docstring examples not shown as code: {missing}"


def test_docstring_math_renders_as_mathml(site):
    """TeX in a docstring (``$...$``, ``$$...$$``) becomes MathML at build time, no dollar is left
    outside code, and no page needs a script to show it."""
    html = (site / "api" / "train" / "index.html").read_text()
    start = html.index('id="geomlin.train.tasks.molecules"')
    module = html[start:html.index('id="geomlin.train.tasks.molecules.', start)]
    display = re.findall(r'<math[^>]*display="block".*?</math>', module, flags=re.DOTALL)
    assert len(display) >= 2, "the molecules task's model and loss are not MathML"
    assert "<mfrac>" in display[0] and "&#x02207;" in display[0]  # the loss's fractions, the gradient's nabla
    for page in (site / "api").rglob("*.html"):
        text = _without_code(page.read_text())
        assert "$" not in re.sub(r"<math\b.*?</math>", "", text, flags=re.DOTALL), f"raw TeX dollars on {page}"
        assert "MathJax" not in text and "katex" not in text.lower()


def test_internal_helpers_stay_out_of_the_api_pages(site):
    """The helpers that mkdocs.yml's filters hide are neither headings nor contents entries, each of
    its patterns still hides a name geomlin has, and a class's methods stay out of the contents."""
    import ast

    yaml = pytest.importorskip("yaml")
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text().replace("!!python", ""))
    handler = next(p["mkdocstrings"] for p in config["plugins"] if isinstance(p, dict) and "mkdocstrings" in p)
    patterns = [f[1:] for f in handler["handlers"]["python"]["options"]["filters"] if f.startswith("!")]
    names = set()
    for path in (ROOT / "geomlin").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    stale = [p for p in patterns if not any(re.search(p, n) for n in names)]
    assert not stale, f"mkdocs.yml filters that hide nothing any more: {stale}"
    html = (site / "api" / "frames" / "index.html").read_text()
    toc = html[html.index("md-nav--secondary"):html.index("md-content")]
    entries = set(re.findall(r'href="#(geomlin[\w.]*)"', toc))
    assert "geomlin.frames.averaging.FrameAveraging" in entries
    assert "geomlin.frames.averaging.backbone_out_types" not in entries and 'id="geomlin.frames.averaging.backbone_out_types"' not in html
    assert "geomlin.frames.pca.check_positions" not in entries
    assert "geomlin.frames.averaging.FrameAveraging.forward" not in entries
    assert 'id="geomlin.frames.averaging.FrameAveraging.forward"' in html  # on the page, not in the contents
    validation = (site / "api" / "package" / "index.html").read_text()
    assert 'id="geomlin.validation.check_tensor"' in validation  # the validators' own page keeps them
