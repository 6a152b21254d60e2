"""Importing an oracle package for a test: skipped locally when missing, a failure under ``CI=true``.

The oracle packages are in the ``dev`` extra, so CI always has them; a CI run where one is missing
must fail loudly instead of going green with the oracle test skipped::

    from tests.oracles import require
    rdkit = require("rdkit")

Peer packages outside the ``dev`` extra (EMLP and its pinned JAX, in the ``peers`` extra that the
benchmarks use) are not installed by CI, so a test that uses one as an oracle skips everywhere it
is missing, CI included, and says so: ``require("emlp", extra="peers")``. Such a test must not be
the only check of what it tests.
"""

from __future__ import annotations

import importlib
import os

import pytest

#: Environment variable that turns a missing oracle into a failure (set by CI services).
CI_VARIABLE = "CI"
#: The extra that CI installs; a missing package of any other extra is skipped, also in CI.
CI_EXTRA = "dev"


def in_ci() -> bool:
    """True when the ``CI`` environment variable is set to a true value."""
    return os.environ.get(CI_VARIABLE, "").strip().lower() in ("1", "true", "yes")


def require(module: str, extra: str = "dev"):
    """Import ``module`` or skip (fail under ``CI=true`` for the ``dev`` extra), naming the extra that brings it."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        message = f"oracle package {module!r} is missing (pip install -e '.[{extra}]'): {err}"
        if in_ci() and extra == CI_EXTRA:
            pytest.fail(message, pytrace=False)
        if extra != CI_EXTRA:
            message += f" (the '{extra}' extra is not installed by CI: this oracle runs where it is installed)"
        pytest.skip(message)
