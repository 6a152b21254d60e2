"""The one helper for deprecated keyword spellings (geomlin.deprecation), and its use across subpackages."""

import warnings

import pytest

from geomlin.deprecation import renamed, renamed_keyword
from geomlin.gaunt import sphere_irreps
from geomlin.models import EGNNPotential, GauntPotential


def _owner(new=None, *, old=None):
    return renamed("Owner", "old", "new", old, new)


def _collecting(new=7, **deprecated):
    return renamed_keyword(deprecated, "old", "new", new, "Owner", default=7)


def test_renamed_passes_the_new_value_silently():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _owner(3) == 3


def test_renamed_takes_the_old_value_and_warns_at_the_callers_line():
    with pytest.warns(DeprecationWarning, match=r"Owner\(old=\.\.\.\) is deprecated; use new=\.\.\.") as rec:
        assert _owner(old=5) == 5
    assert rec[0].filename == __file__


def test_renamed_keyword_pops_the_old_name_and_refuses_both():
    with pytest.warns(DeprecationWarning, match=r"Owner\(old=\.\.\.\)"):
        assert _collecting(old=2) == 2
    with pytest.raises(TypeError, match="give new= or its deprecated name old=, not both"):
        _collecting(3, old=2)
    assert _collecting(4) == 4


@pytest.mark.parametrize("make,match", [
    (lambda: sphere_irreps(1, 2, parity_class=1), r"sphere_irreps\(parity_class="),
    (lambda: EGNNPotential(num_species=2, hidden=4), r"EGNNPotential\(hidden="),
    (lambda: GauntPotential(num_species=2, layers=1), r"GauntPotential\(layers="),
])
def test_subpackages_share_the_message(make, match):
    with pytest.warns(DeprecationWarning, match=match):
        make()
