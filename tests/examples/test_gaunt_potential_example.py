"""The Gaunt potential example runs in quick mode, shows its point (the equivariant potential learns
the forces, far below the zero-force baseline) and its forces are equivariant."""

from tests.examples.helpers import load_example


def test_gaunt_potential_quick_run():
    module = load_example("gaunt_potential")
    results = module.main(["--quick"])
    assert results["equivariance error"] < 1e-9
    assert 0 < results["Gaunt potential"] < 0.6 * results["zero-force baseline"]
