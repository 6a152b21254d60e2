"""``python -m geomlin`` / ``geomlin``: the command-line entry point."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Entry point; the training commands arrive with the CLI issue."""
    import geomlin

    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in ("--version", "version"):
        print(geomlin.__version__)
        return 0
    print("geomlin", geomlin.__version__, "- run examples/emlp_inertia.py for the main example")
    return 0


if __name__ == "__main__":
    sys.exit(main())
