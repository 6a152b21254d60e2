"""Every test on the simulated device starts and ends with no deferred input check pending.

Deferred checks (:mod:`geomlin.validation`) live in a thread-local table until
:func:`geomlin.validation.raise_deferred` reads them; a test that leaves some behind would change
what the next test sees. Raising them after each test also proves that the valid example inputs
of every module pass the checks their forward deferred.
"""

import pytest

from geomlin import validation


@pytest.fixture(autouse=True)
def _no_deferred_checks_left():
    validation.raise_deferred()
    yield
    validation.raise_deferred()
