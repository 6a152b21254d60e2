"""The examples in geomlin's docstrings (``>>>`` lines, shown as code on the API pages) run and print
what they show: every module's doctests, with ``+SKIP`` only where an example needs what no test
machine has (the reference GATr package)."""

import doctest
import importlib
import pkgutil

import pytest

import geomlin

#: Doctests marked ``+SKIP``, each needing what no test machine has.
SKIPPED = {"geomlin.gatr.reference"}


def _doctests():
    found, seen = [], set()
    for info in pkgutil.walk_packages(geomlin.__path__, "geomlin."):
        module = importlib.import_module(info.name)
        for test in doctest.DocTestFinder(exclude_empty=True).find(module, info.name):
            key = (test.filename, test.lineno)
            if test.examples and key not in seen and test.filename == getattr(module, "__file__", None):
                seen.add(key)
                found.append(test)
    return found


DOCTESTS = _doctests()


def test_the_examples_are_found():
    assert len(DOCTESTS) >= 15, [t.name for t in DOCTESTS]


@pytest.mark.parametrize("test", DOCTESTS, ids=[t.name for t in DOCTESTS])
def test_docstring_example_runs(test):
    out = []
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    result = runner.run(test, out=out.append)
    assert result.failed == 0, "".join(out)
    skipped = any(doctest.SKIP in e.options for e in test.examples)
    assert not skipped or test.name in SKIPPED, f"{test.name} skips an example; run it or list why in SKIPPED"
