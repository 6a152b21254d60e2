"""The Gaunt potential example runs in quick mode, shows its point (the equivariant potential learns
the forces, far below the zero-force baseline) and its forces are equivariant."""

import importlib.util
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "gaunt_potential.py"


def test_gaunt_potential_quick_run():
    spec = importlib.util.spec_from_file_location("gaunt_potential_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    results = module.main(["--quick"])
    assert results["equivariance error"] < 1e-9
    assert 0 < results["Gaunt potential"] < 0.6 * results["zero-force baseline"]
