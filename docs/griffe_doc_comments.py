"""Griffe extension for the API pages: ``#:`` comments document the attribute assigned below them.

geomlin documents its module constants and class attributes the way Sphinx autodoc reads them::

    #: Products the engine knows, each a masked Cayley table.
    PRODUCTS = ("geometric", "outer", ...)

griffe only reads a string literal after the assignment, so this extension turns the ``#:`` lines
just above an assignment (or a trailing ``#:`` comment on its line) into the attribute's docstring.
Loaded from ``mkdocs.yml`` (``plugins.mkdocstrings.handlers.python.options.extensions``).
"""

from __future__ import annotations

import ast

import griffe

#: The marker of a documentation comment.
MARKER = "#:"


class DocComments(griffe.Extension):
    """Set an attribute's docstring from the ``#:`` comments above (or beside) its assignment."""

    def on_attribute_instance(self, *, node, attr: griffe.Attribute, agent, **kwargs) -> None:
        if attr.docstring is not None or not isinstance(node, ast.AST) or not hasattr(agent, "code"):
            return
        lines = agent.code.splitlines()
        first = node.lineno - 1
        text = []
        i = first - 1
        while i >= 0 and lines[i].strip().startswith(MARKER):
            text.insert(0, lines[i].strip()[len(MARKER):].removeprefix(" "))
            i -= 1
        start = i + 2
        if not text and MARKER in lines[first]:
            code, _, comment = lines[first].partition("  " + MARKER)
            if comment:
                text, start = [comment.strip()], node.lineno
        if text:
            attr.docstring = griffe.Docstring("\n".join(text), lineno=start, endlineno=start + len(text) - 1,
                                              parent=attr)
