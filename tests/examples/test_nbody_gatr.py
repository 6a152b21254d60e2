"""The n-body GATr example runs in --quick mode: GATr trains (beats its untrained copy), its error
does not move under E(3), the non-equivariant transformer's does."""

from tests.examples.helpers import load_example


def test_nbody_gatr_quick_run():
    module = load_example("nbody_gatr")
    results = module.main(["--quick"])
    gatr, untrained, transformer = results["GATr"], results["GATr (untrained)"], results["Transformer"]
    assert gatr["test_mse"] < untrained["test_mse"]
    assert abs(gatr["test_mse_E3"] - gatr["test_mse"]) < 1e-3 * gatr["test_mse"]
    assert abs(untrained["test_mse_E3"] - untrained["test_mse"]) < 1e-3 * untrained["test_mse"]
    assert abs(transformer["test_mse_E3"] - transformer["test_mse"]) > 1e-2 * transformer["test_mse"]  # not equivariant
