"""The e3nn-swap example runs (quick mode): both models train, report, and the Gaunt one is equivariant."""

import importlib.util
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "e3nn_swap.py"


def test_e3nn_swap_quick_run():
    spec = importlib.util.spec_from_file_location("e3nn_swap", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    results = module.main(["--quick"])
    assert results["equivariance error"] < 1e-9
    for name in ("e3nn FullyConnectedTensorProduct", "geomlin GauntTensorProduct"):
        r = results[name]
        assert r["s/epoch"] > 0 and r["parameters"] > 0
        assert 0 < r["force MAE"] < 3 * results["zero-force MAE"]
