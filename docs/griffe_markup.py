"""Griffe extension for the API pages: docstring examples render as code and TeX math as MathML.

Two kinds of docstring markup that Markdown would otherwise mangle:

* **Examples** (doctest blocks): a run of lines starting with ``>>>`` up to the next blank line is
  read by Markdown as a nested block quote (``>>>`` = three levels) with the code run together. Each
  such run outside a fenced block becomes a fenced ``pycon`` block, in every part of a docstring
  (numpy ``Examples`` sections keep working: griffe leaves fenced text alone there).
* **Math**: ``$$ ... $$`` (display) and ``$ ... $`` (inline, no space just inside the dollars)
  outside code are TeX, converted at build time to MathML with ``latex2mathml`` (the ``docs``
  extra), which browsers render with no JavaScript and no network, as the hand-written MathML of
  the pages. A dollar inside a code span (``$$$$``) is left alone.

Loaded from ``mkdocs.yml`` (``plugins.mkdocstrings.handlers.python.options.extensions``);
``tests/docs/test_docs_build.py`` checks the rendered pages.
"""

from __future__ import annotations

import re

import griffe

#: The prompt that starts a doctest example.
PROMPT = ">>>"
#: Fenced blocks and code spans (left alone), display math, inline math; in this order of precedence.
TOKENS = re.compile(
    r"(?P<fence>^[ \t]*```.*?^[ \t]*```[ \t]*$)"
    r"|(?P<code>(?P<ticks>`+).+?(?P=ticks))"
    r"|\$\$(?P<display>.+?)\$\$"
    r"|(?<![\\$\w])\$(?P<inline>[^\s$](?:[^$\n]*?[^\s$\\])?)\$(?![\w$])",
    flags=re.DOTALL | re.MULTILINE)


def fence_doctests(text: str) -> str:
    """``text`` with every doctest run outside a fenced block wrapped in a ``pycon`` fence."""
    lines = text.split("\n")
    out: list[str] = []
    in_fence = False
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped.startswith("```"):
            in_fence = not in_fence
        if in_fence or not stripped.startswith(PROMPT):
            out.append(line)
            i += 1
            continue
        indent = line[: len(line) - len(line.lstrip())]
        run = []
        while i < len(lines) and lines[i].strip():
            run.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i].strip())
            i += 1
        if out and out[-1].strip():
            out.append("")
        out += [indent + "```pycon", *(indent + r for r in run), indent + "```"]
        if i < len(lines) and lines[i].strip():
            out.append("")
    return "\n".join(out)


def tex_to_mathml(text: str) -> str:
    """``text`` with ``$$ ... $$`` and ``$ ... $`` outside code replaced by MathML."""
    from latex2mathml.converter import convert

    def replace(m: re.Match) -> str:
        if m.group("display") is not None:
            # on the line of the dollars, so that it stays in the list item or section it is indented in
            return convert(" ".join(m.group("display").split()), display="block")
        if m.group("inline") is not None:
            return convert(m.group("inline"))
        return m.group(0)

    return TOKENS.sub(replace, text)


class DocstringMarkup(griffe.Extension):
    """Fence doctest examples and turn TeX math into MathML in every docstring."""

    def on_object(self, *, obj, loader, **kwargs) -> None:
        self._convert(obj)

    def on_package(self, *, pkg, loader, **kwargs) -> None:
        self._convert(pkg)

    @staticmethod
    def _convert(obj) -> None:
        docstring = getattr(obj, "docstring", None)
        if docstring is None or not docstring.value:
            return
        value = docstring.value
        if PROMPT in value:
            value = fence_doctests(value)
        if "$" in value:
            value = tex_to_mathml(value)
        if value != docstring.value:
            docstring.value = value
            docstring.__dict__.pop("parsed", None)  # parsed lazily; drop a parse of the old text
