"""The frames example runs (--quick), and its invariant models are exactly invariant while the bare
PointNet is not."""

import importlib.util
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "frames_pointnet.py"


def test_frames_pointnet_quick_run():
    spec = importlib.util.spec_from_file_location("frames_pointnet", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    results = module.main(["--quick"])
    assert len(results) == 4
    for name, r in results.items():
        assert 0.0 <= r["upright"] <= 1.0 and 0.0 <= r["rotated"] <= 1.0
        if name == "PointNet (bare)":
            assert r["equivariance error"] > 1e-3
        else:
            assert r["equivariance error"] < 1e-9, name
