"""The frames example runs (--quick) and shows its point: the invariant models are exactly invariant
and keep their accuracy on rotated clouds, while the bare PointNet is not and does not."""

from tests.examples.helpers import load_example


def test_frames_pointnet_quick_run():
    module = load_example("frames_pointnet")
    results = module.main(["--quick"])
    assert len(results) == 4
    for name, r in results.items():
        assert 0.0 <= r["upright"] <= 1.0 and 0.0 <= r["rotated"] <= 1.0
        if name == "PointNet (bare)":
            assert r["equivariance error"] > 1e-3
            assert r["upright"] - r["rotated"] > 0.3, r  # learned upright shapes, lost on rotated ones
        else:
            assert r["equivariance error"] < 1e-9, name
            assert r["rotated"] > 0.4 and abs(r["upright"] - r["rotated"]) < 0.15, (name, r)  # chance is 0.1
