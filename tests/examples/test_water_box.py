"""The condensed-phase example (examples/water_box.py) runs its whole path at its quick size: training on the
bundled periodic water frames, Langevin NVT of the periodic box through the ASE calculator, the plot and the
metrics (about 15 s)."""

import json

from tests.examples.helpers import load_example
from tests.oracles import require


def test_water_box_example_quick(tmp_path):
    require("ase")
    results = load_example("water_box").main(["--quick", "--out", str(tmp_path)])
    assert (tmp_path / "water_box.png").stat().st_size > 10_000
    assert json.loads((tmp_path / "metrics.json").read_text())["atoms"] == results["atoms"] == 81
    assert 100 < results["mean temperature K (second half)"] < 600   # the thermostat holds 300 K over 20 steps
    assert abs(results["potential energy change eV per molecule"]) < 0.1   # a barely trained, nearly flat potential
