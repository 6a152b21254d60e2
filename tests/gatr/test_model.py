"""GATr model: Pin(3,0,1) equivariance in padded and flat layouts, exact E(3) motion of extracted
points with the join active, the flat-batch attention methods, autocast, compile, checkpointing."""

import pytest
import torch

from geomlin.algebra import pga
from geomlin.batching import batch_layout
from geomlin.gatr import GATr
from geomlin.groups import E3, SE3, Pin301
from geomlin.reps import Multivectors, Positions
from geomlin.testing import assert_equivariant, equivariance_error

DT = torch.float64
PIN = Pin301()
MV = Multivectors(pga.PGA)


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
    assert_equivariant(model)  # declared types, padding mask from example_inputs
    mv, s = inputs(2)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    out_mv, out_s = model(mv, s, mask=mask)
    assert out_mv.shape == (2, 5, 1, 16) and out_s.shape == (2, 5, 2)
    mv2, s2 = mv.clone(), s.clone()
    mv2[0, 3:] = 50.0
    s2[0, 3:] = 3.0
    got_mv, got_s = model(mv2, s2, mask=mask)
    torch.testing.assert_close(got_mv[0, :3], out_mv[0, :3])
    torch.testing.assert_close(got_s[0, :3], out_s[0, :3])
    alone_mv, _ = model(mv[0:1, :3], s[0:1, :3])  # a padded set equals the same set run alone
    torch.testing.assert_close(alone_mv[0], out_mv[0, :3])


@pytest.mark.parametrize("method", ["auto", "bucketed", "chunked", "masked"])
def test_flat_batch_matches_separate_sets_and_is_equivariant_per_set(method):
    model = small_model(attention_method=method)
    mv, s = inputs(items=9)
    batch = torch.tensor([0, 0, 0, 1, 1, 1, 1, 2, 2])
    out_mv, out_s = model(mv, s, batch=batch)
    for sl in (slice(0, 3), slice(3, 7), slice(7, 9)):
        ref_mv, ref_s = model(mv[sl], s[sl])
        torch.testing.assert_close(out_mv[sl], ref_mv, rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(out_s[sl], ref_s, rtol=1e-10, atol=1e-10)
    # each set transformed by its OWN versor: the per-set join reference keeps this equivariant
    g = PIN.sample(3, generator=torch.Generator().manual_seed(5))

    def per_set(x):
        return torch.cat([MV.act(g[0], x[:3]), MV.act(g[1], x[3:7]), MV.act(g[2], x[7:])])
    got_mv, got_s = model(per_set(mv), s, batch=batch)
    torch.testing.assert_close(got_mv, per_set(out_mv), rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(got_s, out_s, rtol=1e-9, atol=1e-9)


def test_flat_batch_with_padding_items():
    model = small_model()
    mv, s = inputs(items=7)
    batch = torch.tensor([0, 0, 0, 1, 1, 1, 1])
    keep = torch.tensor([True, True, False, True, True, True, False])
    out_mv, _ = model(mv, s, batch=batch, mask=keep)
    torch.testing.assert_close(out_mv[[0, 1]], model(mv[[0, 1]], s[[0, 1]])[0], rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(out_mv[3:6], model(mv[3:6], s[3:6])[0], rtol=1e-10, atol=1e-10)


def test_explicit_join_reference_transforms_with_the_input():
    model = small_model(in_s_channels=0, out_s_channels=0, hidden_s_channels=0)
    mv, _ = inputs(3)
    ref = torch.randn(16, dtype=DT)

    def fn(x, r):
        return model(x, join_reference=r)[0]
    assert_equivariant(fn, PIN, (MV, MV), MV, inputs=(mv, ref))
    assert model(mv)[1] is None


def point_model(num_blocks=3) -> GATr:
    model = GATr(1, 1, 6, num_blocks=num_blocks, num_heads=2).double()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.5)
    return model


def test_points_follow_e3_exactly_with_the_join_active():
    """Several blocks, random weights and biases: the extracted output points move with every E(3)
    element (reflections included) when the input moves by the element's versor, and the join
    term is not zero on point clouds (the data reference has weight e123 = 1)."""
    model = point_model()

    def points(x):
        return pga.extract_point(model(x)[0][..., 0, :])

    def move(g, x):
        return pga.sandwich(pga.rigid_motion_versor(g), x)

    group = E3()
    elements = group.sample(20, generator=torch.Generator().manual_seed(1))
    assert (torch.linalg.det(elements.R) < 0).sum() >= 5
    cloud = pga.embed_point(torch.randn(2, 7, 3, dtype=DT))[..., None, :]
    assert_equivariant(points, group, move, Positions(3), inputs=cloud, num_samples=12)

    # the join is active: switching it off (a reference without e123) changes the output
    from geomlin.gatr import primitives as P
    assert P.join_reference(cloud)[..., pga.E123].eq(1).all()
    off = torch.zeros(16, dtype=DT)
    on_out, off_out = model(cloud)[0], model(cloud, join_reference=off)[0]
    assert (on_out - off_out).norm() > 1e-2 * on_out.norm()


def test_reembedded_points_follow_proper_motions_exactly():
    """Re-embedding moved coordinates (weight +1) is the versor action for proper motions."""
    model = point_model()

    def coords(pos):
        return pga.extract_point(model(pga.embed_point(pos)[..., None, :])[0][..., 0, :])
    pos = torch.randn(2, 6, 3, dtype=DT)
    assert equivariance_error(coords, SE3(), Positions(3), Positions(3), inputs=pos) < 1e-9


def test_checkpointing_gives_the_same_gradients():
    base = small_model()
    ckpt = small_model(checkpoint=True)
    ckpt.load_state_dict(base.state_dict())
    mv, s = inputs(2)
    grads = []
    for m in (base, ckpt):
        out, out_s = m(mv, s)
        (out.square().sum() + out_s.square().sum()).backward()
        grads.append([p.grad for p in m.parameters()])
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b)


def test_bfloat16_autocast_runs_and_stays_close():
    model = GATr(2, 1, 8, in_s_channels=3, out_s_channels=2, hidden_s_channels=8, num_blocks=2, num_heads=2)
    mv, s = (t.float() for t in inputs(2, items=16))
    want_mv, want_s = model(mv, s)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got_mv, got_s = model(mv, s)
        (got_mv.float().square().mean() + got_s.float().square().mean()).backward()
    assert torch.isfinite(got_mv).all() and torch.isfinite(got_s).all()
    assert (got_mv.float() - want_mv).norm() < 0.1 * want_mv.norm()
    assert (got_s.float() - want_s).norm() < 0.1 * want_s.norm()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


@pytest.mark.slow
def test_full_model_compiles():
    """torch.compile of the whole model (dynamo capture, with padding) matches eager (~40 s)."""
    model = GATr(1, 1, 4, in_s_channels=1, out_s_channels=1, hidden_s_channels=4, num_blocks=1, num_heads=2).eval()
    mv, s = torch.randn(2, 6, 1, 16), torch.randn(2, 6, 1)
    mask = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
    eager = model(mv, s, mask=mask)
    compiled = torch.compile(model, backend="eager")
    for a, b in zip(compiled(mv, s, mask=mask), eager):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_full_model_compiles_with_inductor():
    model = GATr(1, 1, 8, in_s_channels=1, out_s_channels=1, hidden_s_channels=8, num_blocks=1, num_heads=2).eval()
    mv, s = torch.randn(4, 16, 1, 16), torch.randn(4, 16, 1)
    with torch.no_grad():
        eager = model(mv, s)
        got = torch.compile(model)(mv, s)
    for a, b in zip(got, eager):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


def _export_cases():
    from geomlin.gatr import GATrBlock, GeometricAttention
    from geomlin.gatr.primitives import join_reference

    mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    mv, s = torch.randn(2, 5, 3, 16, dtype=DT), torch.randn(2, 5, 2, dtype=DT)
    flat = torch.tensor([0, 0, 0, 1, 1, 1, 1, 1, 2])
    fmv, fs = torch.randn(9, 2, 16, dtype=DT), torch.randn(9, 3, dtype=DT)
    attention = GeometricAttention(3, 3, 2, 2, num_heads=2).double()
    block = GATrBlock(3, 2, num_heads=2).double()
    yield pytest.param(attention, (mv, s), {"attn_mask": batch_layout(mask)}, id="attention")
    yield pytest.param(block, (mv, s, join_reference(mv, mask)), {"attn_mask": batch_layout(mask)}, id="block",
                       marks=pytest.mark.slow)
    for layout in (batch_layout(batch=flat), batch_layout(batch=flat, num_graphs=3, max_items=5)):
        yield pytest.param(small_model(), (fmv, fs), {"batch": layout}, id=f"gatr-{layout.method}",
                           marks=pytest.mark.slow)


@pytest.mark.parametrize("module, args, kwargs", list(_export_cases()))
def test_gatr_with_a_layout_exports(module, args, kwargs):
    """A BatchLayout is a pytree (issue 34): the blocks and the model called with one export, and the program
    reproduces the eager call (oracle)."""
    module.eval()
    program = torch.export.export(module, args, kwargs)
    for got, want in zip(program.module()(*args, **kwargs), module(*args, **kwargs)):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
