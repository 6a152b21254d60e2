"""The diagram-layer example runs (--quick): its 2-IGN is invariant to relabelling the nodes, and its
one O(3) layer fits the equivariant map exactly but not a basis-dependent one."""

import importlib.util
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "diagram_ign.py"


def test_diagram_ign_quick_run():
    spec = importlib.util.spec_from_file_location("diagram_ign", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    results = module.main(["--quick"])
    graphs, orthogonal = results["graphs"], results["orthogonal"]
    assert graphs["relabelling change"] < 1e-4  # float32 round-off only
    assert 0.0 <= graphs["accuracy"] <= 1.0
    assert orthogonal["2 M^T - M + tr(M) I"] < 1e-3  # in the 3-parameter span: fitted
    assert orthogonal["M with row 0 zeroed"] > 0.05  # not equivariant: cannot be fitted
    assert orthogonal["equivariance error"] < 1e-12
