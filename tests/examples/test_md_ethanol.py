"""The MD example (examples/md_ethanol.py) runs its whole path at a small size: train, export, load the
package, NVE and Langevin in ASE, the plot. Slow: the export compiles with AOTInductor (~1 min)."""

import pytest

from tests.examples.helpers import load_example
from tests.oracles import require


@pytest.mark.slow
def test_md_example_quick(tmp_path):
    require("ase")
    results = load_example("md_ethanol").main(["--quick", "--model", "egnn", "--out", str(tmp_path)])
    assert (tmp_path / "md_ethanol.png").stat().st_size > 10_000
    assert abs(results["drift eV/atom/ps"]) < 1e-3   # the one-epoch potential is nearly flat
    assert 0 < results["Langevin mean temperature K"] < 1000
