"""The diagram-layer example runs (--quick): its 2-IGN is invariant to relabelling the nodes, and its
one O(3) layer fits the equivariant map exactly but not a basis-dependent one."""

from tests.examples.helpers import load_example


def test_diagram_ign_quick_run():
    module = load_example("diagram_ign")
    results = module.main(["--quick"])
    graphs, orthogonal = results["graphs"], results["orthogonal"]
    assert graphs["relabelling change"] < 1e-4  # float32 round-off only
    assert 0.0 <= graphs["accuracy"] <= 1.0
    assert orthogonal["2 M^T - M + tr(M) I"] < 1e-3  # in the 3-parameter span: fitted
    assert orthogonal["M with row 0 zeroed"] > 0.05  # not equivariant: cannot be fitted
    assert orthogonal["equivariance error"] < 1e-12
