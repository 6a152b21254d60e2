"""The e3nn-swap example runs (quick mode): both models train, report, and the Gaunt one is equivariant."""

from tests.examples.helpers import load_example


def test_e3nn_swap_quick_run():
    module = load_example("e3nn_swap")
    results = module.main(["--quick"])
    assert results["equivariance error"] < 1e-9
    for name in ("e3nn FullyConnectedTensorProduct", "geomlin GauntTensorProduct"):
        r = results[name]
        assert r["s/epoch"] > 0 and r["parameters"] > 0
        assert 0 < r["force MAE"] < 3 * results["zero-force MAE"]
