"""Importing an oracle package for a test: skipped locally when missing, a failure under ``CI=true``.

The oracle packages are in the ``dev`` extra, so CI always has them; a CI run where one is missing
must fail loudly instead of going green with the oracle test skipped::

    from tests.oracles import require
    rdkit = require("rdkit")
"""

from __future__ import annotations

import importlib
import os

import pytest

#: Environment variable that turns a missing oracle into a failure (set by CI services).
CI_VARIABLE = "CI"


def in_ci() -> bool:
    """True when the ``CI`` environment variable is set to a true value."""
    return os.environ.get(CI_VARIABLE, "").strip().lower() in ("1", "true", "yes")


def require(module: str, extra: str = "dev"):
    """Import ``module`` or skip (fail under ``CI=true``), naming the extra that brings it."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        message = f"oracle package {module!r} is missing (pip install -e '.[{extra}]'): {err}"
        if in_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
