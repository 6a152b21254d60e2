"""Smoke test of the main example: it trains, reports, and its EMLP is exactly equivariant."""

from tests.examples.helpers import load_example


def test_emlp_inertia_quick_run():
    module = load_example("emlp_inertia")
    results = module.main(["--quick"])
    assert results["EMLP"]["equivariance error"] < 1e-9
    assert set(results) == {"EMLP", "MLP"}
    for r in results.values():
        assert 0 < r["test"] < 10
