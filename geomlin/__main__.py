"""``python -m geomlin`` / ``geomlin``: the command-line entry point (see [`geomlin.cli`][])."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Run the ``geomlin`` command; returns the exit status (0 on success, 2 for user errors)."""
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] in (["--version"], ["version"]):
        import geomlin

        print(f"geomlin {geomlin.__version__}")
        return 0
    from geomlin.cli import main as cli_main

    return cli_main(args)


if __name__ == "__main__":
    sys.exit(main())
