"""Smoke tests of the Clifford examples: tiny runs by default, the documented ``--quick`` runs marked slow."""

import pytest

from tests.examples.helpers import load_example as load


def check_glgenn(results):
    for (name, size), r in results.items():
        assert name in ("CGENN", "GLGENN") and r["equivariance error"] < 1e-9
        assert 0 < r["test MSE"] < 1e3
    sizes = {size for _, size in results}
    for size in sizes:  # the GLGENN part is the lighter one
        assert results[("GLGENN", size)]["clifford params"] < results[("CGENN", size)]["clifford params"]


def check_nbody(results, budget_tolerance=1.1):
    assert set(results) == {"GATr", "CGENN", "GLGENN", "GCAN"}
    params = [r["params"] for r in results.values()]
    assert max(params) < budget_tolerance * min(params)  # one parameter budget
    for name in ("GATr", "CGENN", "GLGENN"):  # equivariant: E(3)-moved test error unchanged
        r = results[name]
        assert abs(r["test_mse"] - r["test_mse_E3"]) < 1e-3 * max(r["test_mse"], 1e-3)


def test_glgenn_o5_tiny():
    check_glgenn(load("glgenn_o5").main(["--sizes", "40", "--steps", "15", "--test", "50"]))


def test_gcan_nbody_tiny():
    check_nbody(load("gcan_nbody").main(["--train", "20", "--test", "20", "--epochs", "1", "--batch", "10",
                                         "--hidden-mv", "2", "--hidden-s", "4"]), budget_tolerance=1.3)


def test_ga_attention_tiny():
    results = load("ga_attention_chirality").main(["--train", "64", "--test", "64", "--steps", "5", "--no-timing"])
    # an O(3)-invariant layer cannot tell a helix from its mirror image
    for name in ("rank 3, parity_invariant (O(3))", "rank 2 (O(3))"):
        assert results[name]["mirror flips"] == 0.0


@pytest.mark.slow
def test_quick_runs():
    check_glgenn(load("glgenn_o5").main(["--quick"]))
    check_nbody(load("gcan_nbody").main(["--quick"]))
    results = load("ga_attention_chirality").main(["--quick"])
    assert results["rank 3 (SO(3), chiral)"]["accuracy"] > 0.9
    assert results["rank 3 (SO(3), chiral)"]["mirror flips"] > 0.9
