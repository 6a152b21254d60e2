"""GATr model: Pin(3,0,1) equivariance in padded and flat layouts, E(3) motion of extracted points
of a trained model, masking, and input validation."""

import pytest
import torch

from geomlin.algebra import Pin301, pga, pin_action
from geomlin.gatr import GATr
from geomlin.groups import E3
from geomlin.testing import assert_equivariant

DT = torch.float64
PIN = Pin301()


def small_model(**kw) -> GATr:
    args = {"in_mv_channels": 2, "out_mv_channels": 1, "hidden_mv_channels": 4, "in_s_channels": 3,
            "out_s_channels": 2, "hidden_s_channels": 4, "num_blocks": 2, "num_heads": 2}
    args.update(kw)
    model = GATr(**args).double()
    with torch.no_grad():  # random biases too: odd functions hide bugs
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.3)
    return model


def inputs(*lead, items=5):
    return torch.randn(*lead, items, 2, 16, dtype=DT), torch.randn(*lead, items, 3, dtype=DT)


def test_padded_batch_is_equivariant_and_ignores_padding():
    model = small_model()
    mv, s = inputs(2)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    assert_equivariant(model, PIN, (pin_action, "scalar"), (pin_action, "scalar"), inputs=(mv, s),
                       kwargs={"mask": mask})
    out_mv, out_s = model(mv, s, mask=mask)
    assert out_mv.shape == (2, 5, 1, 16) and out_s.shape == (2, 5, 2)
    mv2, s2 = mv.clone(), s.clone()
    mv2[0, 3:] = 50.0
    s2[0, 3:] = 3.0
    got_mv, got_s = model(mv2, s2, mask=mask)
    torch.testing.assert_close(got_mv[0, :3], out_mv[0, :3])
    torch.testing.assert_close(got_s[0, :3], out_s[0, :3])
    # a padded set equals the same set run alone
    alone_mv, _ = model(mv[0:1, :3], s[0:1, :3])
    torch.testing.assert_close(alone_mv[0], out_mv[0, :3])


def test_flat_batch_matches_separate_sets_and_is_equivariant_per_set():
    model = small_model()
    mv, s = inputs(items=7)
    batch = torch.tensor([0, 0, 0, 1, 1, 1, 1])
    out_mv, out_s = model(mv, s, batch=batch)
    for sl in (slice(0, 3), slice(3, 7)):
        ref_mv, ref_s = model(mv[sl], s[sl])
        torch.testing.assert_close(out_mv[sl], ref_mv)
        torch.testing.assert_close(out_s[sl], ref_s)

    # each set transformed by its OWN versor: the per-set join reference keeps this equivariant
    g = PIN.sample(2, generator=torch.Generator().manual_seed(5))

    def per_set(g0, g1, x):
        return torch.cat([pin_action(g0, x[:3]), pin_action(g1, x[3:])])
    gx = per_set(g[0], g[1], mv)
    got_mv, got_s = model(gx, s, batch=batch)
    torch.testing.assert_close(got_mv, per_set(g[0], g[1], out_mv), rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(got_s, out_s, rtol=1e-9, atol=1e-9)
    assert_equivariant(model, PIN, (pin_action, "scalar"), (pin_action, "scalar"), inputs=(mv, s),
                       kwargs={"batch": batch})


def test_explicit_join_reference_transforms_with_the_input():
    model = small_model(in_s_channels=0, out_s_channels=0, hidden_s_channels=0)
    mv, _ = inputs(3)
    ref = torch.randn(16, dtype=DT)

    def fn(x, r):
        return model(x, join_reference=r)[0]
    assert_equivariant(fn, PIN, (pin_action, pin_action), pin_action, inputs=(mv, ref))
    assert model(mv)[1] is None


def test_extracted_points_of_a_trained_model_move_with_e3():
    """Train briefly to map a point cloud to its points shifted towards the centroid, then check
    that the extracted output points move exactly with random E(3) transforms (reflections included)."""
    torch.manual_seed(0)
    model = GATr(1, 1, 4, num_blocks=1, num_heads=1).double()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(15):
        pos = torch.randn(4, 6, 3, dtype=DT)
        target = 0.5 * (pos + pos.mean(-2, keepdim=True))
        pred = pga.extract_point(model(pga.embed_point(pos)[..., None, :])[0][..., 0, :])
        loss = (pred - target).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

    def points(pos):
        return pga.extract_point(model(pga.embed_point(pos)[..., None, :])[0][..., 0, :])
    pos = torch.randn(2, 6, 3, dtype=DT)
    group = E3()
    assert_equivariant(points, group, "position", "position", inputs=pos, num_samples=6)
    # the same through explicit motion versors
    g = group.sample(4)
    V = pga.rigid_motion_versor(g)
    for i in range(4):
        moved = pga.extract_point(pga.sandwich(V[i], model(pga.embed_point(pos)[..., None, :])[0][..., 0, :]))
        torch.testing.assert_close(moved, points(pos @ g.R[i].T + g.t[i]), rtol=1e-9, atol=1e-9)


def test_input_validation():
    model = small_model()
    mv, s = inputs(2)
    with pytest.raises(ValueError, match="last dimension 16"):
        model(mv[..., :15], s)
    with pytest.raises(ValueError, match=r"\(\.\.\., items, 2, 16\)"):
        model(mv[..., :1, :], s)
    with pytest.raises(ValueError, match="scalars of shape"):
        model(mv, s[..., :2])
    with pytest.raises(ValueError, match="scalars=None"):
        model(mv)
    with pytest.raises(ValueError, match="mask must have shape"):
        model(mv, s, mask=torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(TypeError, match="bool"):
        model(mv, s, mask=torch.ones(2, 5))
    bad = mv.clone()
    bad[0, 0, 0, 3] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        model(bad, s)
    with pytest.raises(ValueError, match="flat"):
        model(mv, s, batch=torch.zeros(5, dtype=torch.long))
    with pytest.raises(ValueError, match="batch must be a long tensor"):
        model(mv[0], s[0], batch=torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match="hidden_s_channels"):
        GATr(1, 1, 4, in_s_channels=2)


def test_dense_reference_path_computes_the_same_function():
    fast = small_model()
    dense = GATr(2, 1, 4, in_s_channels=3, out_s_channels=2, hidden_s_channels=4, num_blocks=2, num_heads=2,
                 method="dense").double()
    dense.load_state_dict(fast.state_dict())
    mv, s = inputs(2)
    for a, b in zip(fast(mv, s), dense(mv, s)):
        torch.testing.assert_close(a, b)
