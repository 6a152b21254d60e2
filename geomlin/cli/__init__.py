"""The ``geomlin`` command: argument parsing ([`main`][]), ``geomlin bench``
([`bench`][]) and ``geomlin audit`` ([`audit`][]).

The training loop it drives lives in [`geomlin.train`][]; this package only turns command
lines into calls and errors into one-line messages with exit status 2.
"""

from geomlin.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
