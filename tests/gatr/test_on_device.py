"""geomlin.gatr on the simulated accelerator: primitives, planes kernels and attention layouts with
no host sync and no per-call upload, flat batches planned at the data boundary, and mixed precision.

Oracles: the same call on the CPU (tests/device/checks.py); attention per set computed one set at
a time; the float32 model for autocast.
"""

from __future__ import annotations

import pytest
import torch

from geomlin.algebra import pga
from geomlin.batching import BatchLayout, batch_layout
from geomlin.gatr import EquiLinear, GATr, GATrBlock, orientations
from geomlin.gatr import planes as PL
from geomlin.gatr import primitives as P
from geomlin.gatr.attention import attend
from geomlin.validation import deferred_checks
from tests.device import simulated as sim
from tests.device.checks import assert_runs_on_device

SIZES = [3, 7, 1, 12, 7, 30]


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _batch(sizes=SIZES) -> torch.Tensor:
    return torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes))


def test_primitives_on_the_device():
    g = _gen(1)
    x, y = torch.randn(2, 5, 3, 16, generator=g), torch.randn(2, 5, 3, 16, generator=g)
    w, bias = torch.randn(4, 3, 9, generator=g), torch.randn(4, generator=g)
    assert_runs_on_device(P.equi_linear, x, w, bias, warm=True)
    for fn in (P.geometric_product, P.outer_product, P.join):
        assert_runs_on_device(fn, x, y, warm=True)
    assert_runs_on_device(P.equivariant_join, x, y, P.join_reference(x), warm=True)
    for fn in (P.norm_squared, P.equi_layer_norm, P.scalar_gated_gelu, lambda a: P.grade_dropout(a, 0.3, False),
               lambda a: P.distance_features(a, "query"), lambda a: P.distance_features(a, "key"),
               P.join_reference, orientations.both_orientations, orientations.mean_over_orientations):
        assert_runs_on_device(fn, x, warm=True)
    assert_runs_on_device(P.inner_product, x, y, warm=True)
    mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    assert_runs_on_device(lambda a, m: P.join_reference(a, m), x, mask, warm=True)
    flat, batch = x.reshape(10, 3, 16), torch.tensor([0, 0, 0, 1, 1, 1, 1, 1, 2, 4])
    assert_runs_on_device(lambda a, b: P.join_reference(a, batch=b), flat, batch, warm=True)
    assert_runs_on_device(lambda a, b: P.join_reference(a, batch=batch_layout(batch=b, num_graphs=5)), flat, batch, warm=True)
    with deferred_checks(), sim.watch(strict=True):
        P.canonical_reference(torch.float32, sim.DEVICE)
    dev = sim.to_sim(x)
    with sim.allowed():
        P.grade_dropout(dev, 0.3)
    with deferred_checks(), sim.watch(strict=True):  # random draws on the device
        assert P.grade_dropout(dev, 0.3).shape == x.shape


def test_attention_primitives_on_the_device():
    g = _gen(2)
    q, k, v = (torch.randn(2, 2, 6, 3, 16, generator=g) for _ in range(3))
    qs, ks, vs = (torch.randn(2, 2, 6, 4, generator=g) for _ in range(3))
    weights = torch.rand(2, 1, 3, generator=g)  # (heads, items, channels)-broadcastable
    assert_runs_on_device(lambda *a: P.attention_features(*a[:6], distance_weights=a[6])[:3],
                          q, k, v, qs, ks, vs, weights, warm=True)
    keep = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
    assert_runs_on_device(lambda *a: P.geometric_attention(*a[:6], attn_mask=a[6]), q, k, v, qs, ks, vs,
                          P.attention_mask(batch_layout(keep)), warm=True)
    assert_runs_on_device(lambda *a: P.geometric_attention(*a[:6], attn_mask=batch_layout(a[6])),
                          q, k, v, qs, ks, vs, keep, warm=True)


def test_planes_kernels_on_the_device():
    g = _gen(3)
    a, b = torch.randn(16, 7, 4, generator=g), torch.randn(16, 7, 4, generator=g)
    w = torch.randn(5, 4, 9, generator=g)
    for fn in (PL.geometric_product_planes, PL.join_planes, PL.inner_product_planes):
        assert_runs_on_device(fn, a, b, warm=True)
    assert_runs_on_device(PL.equivariant_join_planes, a, b, torch.rand(7, 1, generator=g), warm=True)
    for fn in (lambda t: PL.equi_layer_norm_planes(t, 0.01), PL.scalar_gated_gelu_planes, lambda t: PL.from_planes(t, (7,)),
               lambda t: PL.to_planes(PL.from_planes(t, (7,))), lambda t: PL.distance_features_planes(t, "query")):
        assert_runs_on_device(fn, a, warm=True)
    assert_runs_on_device(PL.equi_linear_planes, a, w, torch.randn(5, generator=g), warm=True)
    q, kv = torch.randn(16, 7, 2, 2, generator=g), torch.randn(16, 7, 1, 2, generator=g)
    qs, kvs = torch.randn(7, 2, 3, generator=g), torch.randn(7, 1, 3, generator=g)
    assert_runs_on_device(lambda *t: PL.attention_features_planes(*t, distance_weights=torch.ones(2, 2, device=t[0].device))[:3],
                          q, kv, kv, qs, kvs, kvs, warm=True)


def _per_set(q, k, v, sizes):
    out, start = [], 0
    for size in sizes:
        sl = slice(start, start + size)
        out.append(attend(q[:, sl], k[:, sl], v[:, sl], None, 0.3))
        start += size
    return torch.cat(out, 1)


@pytest.mark.parametrize("method", ["bucketed", "chunked", "masked"])
def test_host_plans_move_to_the_device(method):
    """A plan made on the CPU (a data loader's collation) and moved: attention needs nothing from the host."""
    batch = _batch()
    n = len(batch)
    g = _gen(4)
    q, k, v = torch.randn(1, n, 2, 8, generator=g), torch.randn(1, n, 1, 8, generator=g), torch.randn(1, n, 1, 8, generator=g)
    layout = batch_layout(batch=batch, method=method)
    moved = layout.to(sim.DEVICE)
    assert isinstance(moved, BatchLayout) and moved.device == sim.DEVICE and layout.device == torch.device("cpu")
    out = assert_runs_on_device(lambda a, b, c: attend(a, b, c, moved if a.device == sim.DEVICE else layout, 0.3),
                                q, k, v)
    torch.testing.assert_close(sim.to_cpu(out), _per_set(q, k, v, SIZES), rtol=1e-5, atol=1e-6)


def test_padded_plan_is_made_on_the_device_without_a_host_read():
    batch = _batch()
    n = len(batch)
    g = _gen(5)
    q, k, v = torch.randn(1, n, 2, 8, generator=g), torch.randn(1, n, 1, 8, generator=g), torch.randn(1, n, 1, 8, generator=g)
    dev = sim.to_sim((batch, q, k, v))
    with deferred_checks(), sim.watch(strict=True):
        layout = batch_layout(batch=dev[0], num_graphs=8, max_items=32)  # upper bounds
        out = attend(*dev[1:], layout, 0.3)
    assert layout.method == "padded" and layout.device == sim.DEVICE
    torch.testing.assert_close(sim.to_cpu(out), _per_set(q, k, v, SIZES), rtol=1e-5, atol=1e-6)
    on_cpu = attend(q, k, v, batch_layout(batch=batch, num_graphs=6, max_items=30), 0.3)
    torch.testing.assert_close(on_cpu, _per_set(q, k, v, SIZES), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="max_items=29"):
        batch_layout(batch=batch, num_graphs=6, max_items=29)
    with pytest.raises(ValueError, match="needs num_graphs and max_items"):
        batch_layout(batch=batch, method="padded")
    with pytest.raises(ValueError, match="max_items=5"):  # outside a deferred-checks scope: at once
        batch_layout(batch=dev[0], num_graphs=8, max_items=5)
    # inside a scope: at the scope's end, no read before
    with pytest.raises(ValueError, match="max_items=5"), deferred_checks(), sim.watch(strict=True):
        batch_layout(batch=dev[0], num_graphs=8, max_items=5)


def test_a_device_batch_vector_without_bounds_is_read_once_when_planned():
    """The documented fallback: ``batch_layout`` (at the data boundary, not in a forward pass) reads it."""
    batch = sim.to_sim(_batch())
    with deferred_checks(), sim.watch() as log:  # the batch vector's checks stay on the device
        layout = batch_layout(batch=batch)
    assert layout.device == sim.DEVICE and layout.sizes == tuple(SIZES)
    assert {e.kind for e in log.events} <= {"sync", "upload"}
    assert all("batching.py" in e.where for e in log.events)


def _flat_model():
    torch.manual_seed(6)
    model = GATr(2, 1, 4, in_s_channels=2, out_s_channels=1, hidden_s_channels=4, num_blocks=2, num_heads=2)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.4)
    return model


def test_gatr_on_a_flat_device_batch():
    model = _flat_model()
    batch = _batch([3, 5, 1, 4])
    g = _gen(7)
    mv, s = torch.randn(len(batch), 2, 16, generator=g), torch.randn(len(batch), 2, generator=g)
    want = model(mv, s, batch=batch)
    dev_model, dmv, ds, db = sim.to_sim((_flat_model(), mv, s, batch))
    with pytest.raises(ValueError, match="without a plan"):
        dev_model(dmv, ds, batch=db)
    with pytest.raises(ValueError, match="inside the planned layout"):
        dev_model(dmv, ds, mask=torch.ones(len(batch), dtype=torch.bool, device=sim.DEVICE),
                  batch=batch_layout(batch=db, num_graphs=4, max_items=5))
    with pytest.raises(ValueError, match="no attention plan"):
        dev_model(dmv, ds, batch=batch_layout(batch=db, num_graphs=4))
    for layout in (batch_layout(batch=batch).to(sim.DEVICE), None):
        with deferred_checks(), sim.watch(strict=True):
            layout = layout or batch_layout(batch=db, num_graphs=4, max_items=5)
            out = dev_model(dmv, ds, batch=layout)
            (out[0].square().mean() + out[1].square().mean()).backward()
        for a, b in zip(out, want):
            torch.testing.assert_close(sim.to_cpu(a), b.detach(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("device", ["cpu", "sim"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_gatr_under_autocast(device, dtype):
    """Autocast runs the matrix products in half precision and keeps norms, distance features and the
    geometric product in float32; outputs stay close to float32 and finite, gradients finite."""
    if device == "cpu" and dtype == torch.float16:
        pytest.skip("CPU autocast is for bfloat16")
    torch.manual_seed(8)
    model = GATr(1, 1, 8, in_s_channels=1, out_s_channels=1, hidden_s_channels=8, num_blocks=2, num_heads=2)
    pos = torch.randn(2, 16, 3, generator=_gen(9))
    mv, s = pga.embed_point(pos)[..., None, :], torch.randn(2, 16, 1, generator=_gen(10))
    mask = torch.ones(2, 16, dtype=torch.bool)
    mask[1, 12:] = False
    want = [t.detach() for t in model(mv, s, mask=mask)]
    if device == "sim":
        model, mv, s, mask = sim.to_sim((model, mv, s, mask))
    with deferred_checks(), sim.watch(strict=True), torch.autocast(device if device == "cpu" else sim.DEVICE_TYPE, dtype=dtype):
        out = model(mv.requires_grad_(), s, mask=mask)
        (out[0].float().square().mean() + out[1].float().square().mean()).backward()
    tolerance = {torch.bfloat16: 0.05, torch.float16: 0.01}[dtype]
    for a, b in zip(out, want):
        a = sim.to_cpu(a).detach().float()
        assert torch.isfinite(a).all()
        assert float((a - b).norm() / b.norm()) < tolerance
    assert torch.isfinite(sim.to_cpu(mv.grad)).all()


@pytest.mark.parametrize("device,low", [("cpu", torch.bfloat16), ("sim", torch.float16)], ids=["cpu-bf16", "sim-fp16"])
def test_block_under_autocast_step_by_step(device, low):
    """The reference GATr's block-under-autocast test (``test_gatr_block_autocast``), step by step: a
    linear layer gives half-precision outputs, the layer norm float32 multivectors (and scalars in
    float32 only under CUDA's policy), attention, MLP and the residuals half precision. Oracle for
    the values: the float32 block (relative error below 5%), and the block's own forward equal to
    the steps; gradients through the checkpointed block are finite."""
    torch.manual_seed(13)
    linear = EquiLinear(4, 4, 6, 6)
    block = GATrBlock(4, 6, num_heads=2, checkpoint=True)
    mv_in, s_in = torch.randn(3, 4, 16, generator=_gen(14)), torch.randn(3, 6, generator=_gen(15))
    reference = P.canonical_reference(torch.float32)
    with torch.no_grad():
        want = block(*linear(mv_in, s_in), reference)
    if device == "sim":
        linear, block, mv_in, s_in, reference = sim.to_sim((linear, block, mv_in, s_in, reference))
    high = torch.float32
    with deferred_checks(), sim.watch(strict=True), torch.autocast(device if device == "cpu" else sim.DEVICE_TYPE, dtype=low):
        assert mv_in.dtype == s_in.dtype == high
        mv, s = linear(mv_in.requires_grad_(), s_in)
        assert mv.dtype == s.dtype == low
        h_mv, h_s = block.norm(mv, s)
        assert h_mv.dtype == high
        assert h_s.dtype == (low if device == "cpu" else high)  # torch's layer_norm follows the device's policy
        h_mv, h_s = block.attention(h_mv, h_s)
        assert h_mv.dtype == h_s.dtype == low
        out_mv, out_s = mv + h_mv, s + h_s
        assert out_mv.dtype == out_s.dtype == low
        h_mv, h_s = block.mlp(*block.norm(out_mv, out_s), reference)
        assert h_mv.dtype == h_s.dtype == low
        out_mv, out_s = out_mv + h_mv, out_s + h_s
        assert out_mv.dtype == out_s.dtype == low
        got = block(mv, s, reference)
        (got[0].float().square().mean() + got[1].float().square().mean()).backward()
    for step, whole, full in zip((out_mv, out_s), got, want):
        step, whole = sim.to_cpu(step).detach().float(), sim.to_cpu(whole).detach().float()
        torch.testing.assert_close(whole, step, rtol=0, atol=0)
        assert float((whole - full).norm() / full.norm()) < 0.05
    assert torch.isfinite(sim.to_cpu(mv_in.grad)).all()


def test_reductions_stay_in_float32_under_half_precision():
    """Oracle: the float32 computation. Outside autocast a result comes back in the input's dtype;
    under autocast in the float32 it was computed in (as torch's own layer norm under CUDA autocast
    and the reference GATr's ``equi_layer_norm``)."""
    x = torch.randn(4, 3, 16, generator=_gen(11)) * 300  # squares overflow float16
    want = P.equi_layer_norm(x)
    got = P.equi_layer_norm(x.half())
    assert got.dtype == torch.float16 and torch.isfinite(got).all()
    torch.testing.assert_close(got.float(), want, rtol=2e-3, atol=2e-3)
    planes = PL.to_planes(x)
    got = PL.equi_layer_norm_planes(planes.half(), 0.01)
    assert got.dtype == torch.float16
    torch.testing.assert_close(got.float(), PL.equi_layer_norm_planes(planes, 0.01), rtol=2e-3, atol=2e-3)
    gp = PL.geometric_product_planes(planes.bfloat16(), planes.bfloat16())
    assert gp.dtype == torch.bfloat16
    with torch.autocast("cpu", dtype=torch.bfloat16):
        gp = PL.geometric_product_planes(planes, planes)
        norm = PL.equi_layer_norm_planes(planes.bfloat16())
    assert gp.dtype == torch.float32 and norm.dtype == torch.float32


def test_padded_plan_with_padding_items_inside_a_flat_batch():
    """Real items attend as in the host plan; padding items (mask False) are never attended to."""
    batch = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2])
    mask = torch.tensor([1, 1, 0, 1, 1, 1, 0, 1, 1]).bool()
    g = _gen(12)
    q, k, v = torch.randn(1, 9, 2, 8, generator=g), torch.randn(1, 9, 1, 8, generator=g), torch.randn(1, 9, 1, 8, generator=g)
    padded = attend(q, k, v, batch_layout(mask=mask, batch=batch, num_graphs=3, max_items=4), 0.3)
    host = attend(q, k, v, batch_layout(mask=mask, batch=batch), 0.3)
    torch.testing.assert_close(padded[0, mask], host[0, mask], rtol=1e-5, atol=1e-6)


def test_layer_tables_are_buffers_outside_the_state_dict():
    """The tables move with the model and leave its state_dict (and reference weight loading) alone."""
    model = GATr(2, 1, 4, in_s_channels=2, out_s_channels=1, hidden_s_channels=4, num_blocks=1)
    assert not any("table" in key for key in model.state_dict())
    assert {b.device for b in sim.to_sim(model).buffers()} == {sim.DEVICE}
