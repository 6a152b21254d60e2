"""Smoke test of the main example: it trains, reports, and its EMLP is exactly equivariant."""

import importlib.util
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "emlp_inertia.py"


def test_emlp_inertia_quick_run():
    spec = importlib.util.spec_from_file_location("emlp_inertia", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    results = module.main(["--quick"])
    assert results["EMLP"]["equivariance error"] < 1e-9
    assert set(results) == {"EMLP", "MLP"}
    for r in results.values():
        assert 0 < r["test"] < 10
