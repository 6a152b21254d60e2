"""The ``geomlin`` command: argument parsing (:mod:`~geomlin.cli.main`), ``geomlin bench``
(:mod:`~geomlin.cli.bench`) and ``geomlin audit`` (:mod:`~geomlin.cli.audit`).

The training loop it drives lives in :mod:`geomlin.train`; this package only turns command
lines into calls and errors into one-line messages with exit status 2.
"""

from geomlin.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
