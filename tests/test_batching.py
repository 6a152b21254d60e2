"""The one batch layout (geomlin.batching). Oracles: PyG itself (``Batch.num_graphs``, ``to_dense_batch``,
a ``DataLoader``'s collation), per-set loops written out, and the simulated accelerator for syncs."""

import pytest
import torch
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten
from torch_geometric.data import Data
from torch_geometric.loader import DataLoader
from torch_geometric.utils import to_dense_batch

from geomlin.batching import (
    BatchLayout,
    as_layout,
    batch_layout,
    broadcast_pooled,
    layout_of,
    num_graphs,
    pool_max,
    pool_mean,
    pool_softmax,
    pool_sum,
    scatter_sum,
    to_flat,
    to_padded,
)
from geomlin.validation import deferred_checks
from tests.device import simulated as sim

F64 = torch.float64
SIZES = [3, 1, 5, 2]


def _loader_batch(sizes=SIZES, seed: int = 0):
    """A PyG batch of clouds of ``sizes`` points, straight from a torch_geometric DataLoader."""
    g = torch.Generator().manual_seed(seed)
    items = [Data(pos=torch.randn(n, 3, generator=g, dtype=F64), x=torch.randn(n, 2, generator=g, dtype=F64))
             for n in sizes]
    return next(iter(DataLoader(items, batch_size=len(items)))), items


def test_num_graphs_is_pygs_count():
    batch, _ = _loader_batch()
    assert num_graphs(batch.batch) == batch.num_graphs == len(SIZES)
    assert num_graphs(torch.zeros(0, dtype=torch.long)) == 0
    with pytest.raises(TypeError, match="integer dtype"):
        num_graphs(torch.zeros(3))


def test_a_host_plan_knows_every_size():
    batch, _ = _loader_batch()
    layout = batch_layout(batch=batch.batch)
    assert layout.is_flat and layout.num_graphs == 4 and layout.sizes == tuple(SIZES) and layout.max_items == 5
    assert layout.method == "bucketed" and layout_of(batch).sizes == layout.sizes
    # a count given beyond the vector's last set: trailing empty sets
    assert batch_layout(batch=batch.batch, num_graphs=6).sizes == (*SIZES, 0, 0)
    with pytest.raises(ValueError, match="refers to graph 3 but there are 3 graphs"):
        batch_layout(batch=batch.batch, num_graphs=3)
    with pytest.raises(ValueError, match="needs num_graphs and max_items"):
        batch_layout(batch=batch.batch, method="padded")
    one = layout_of(Data(pos=torch.randn(4, 3)))  # a single graph
    assert one.num_graphs == 1 and one.sizes == (4,)


def test_padded_layouts():
    mask = torch.tensor([[True, True, False], [False, False, False]])
    layout = batch_layout(mask)
    assert not layout.is_flat and torch.equal(layout.mask, mask)
    # a row without real items attends to all its items (finite outputs) instead of none (NaN)
    assert torch.equal(layout.key_mask, torch.tensor([[True, True, False], [True, True, True]]))
    none = as_layout()
    assert not none.is_flat and none.mask is None and none.key_mask is None
    with pytest.raises(TypeError, match="bool"):
        batch_layout(mask.float())


@pytest.mark.parametrize("bound", [None, 7])
def test_to_padded_is_pygs_dense_batch_and_to_flat_its_inverse(bound):
    batch, _ = _loader_batch()
    layout = batch_layout(batch=batch.batch, num_graphs=4, max_items=bound)
    padded, mask = to_padded(batch.pos, layout)
    want, want_mask = to_dense_batch(batch.pos, batch.batch, max_num_nodes=bound)
    assert torch.equal(padded, want) and torch.equal(mask, want_mask)
    assert torch.equal(to_flat(padded, layout), batch.pos)
    with pytest.raises(ValueError, match="needs a flat layout"):
        to_padded(batch.pos, batch_layout())


def _per_set(values: torch.Tensor, sizes, reduce):
    return torch.stack([reduce(part) for part in values.split(sizes)])


def test_pools_equal_per_set_reductions_in_both_layouts():
    batch, _ = _loader_batch()
    layout = batch_layout(batch=batch.batch)
    padded, mask = to_padded(batch.x, layout)
    dense = batch_layout(mask)
    for pool, reduce in ((pool_sum, lambda p: p.sum(0)), (pool_mean, lambda p: p.mean(0)),
                         (pool_max, lambda p: p.amax(0))):
        want = _per_set(batch.x, SIZES, reduce)
        torch.testing.assert_close(pool(batch.x, layout), want, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(pool(padded, dense), want, rtol=1e-12, atol=1e-12)
    scores = batch.x[:, :1] * 3
    vectors = batch.pos[:, None, :]
    want = _per_set(torch.cat([scores, vectors[:, 0]], -1), SIZES,
                    lambda p: (torch.softmax(p[:, :1], 0) * p[:, 1:]).sum(0))[:, None, None]
    torch.testing.assert_close(pool_softmax(scores, vectors, layout), want, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(pool_softmax(to_padded(scores, layout)[0], to_padded(vectors, layout)[0], dense),
                               want, rtol=1e-12, atol=1e-12)
    pooled = pool_mean(batch.x, layout)
    assert torch.equal(broadcast_pooled(pooled, batch.x, layout), pooled.repeat_interleave(torch.tensor(SIZES), 0))
    assert torch.equal(to_flat(broadcast_pooled(pooled, padded, dense), layout), pooled[batch.batch])


def test_empty_sets_pool_to_zeros():
    x = torch.randn(2, 3, dtype=F64)
    layout = batch_layout(batch=torch.tensor([0, 0]), num_graphs=3)
    for pool in (pool_sum, pool_mean, pool_max):
        assert not pool(x, layout)[1:].any()
        assert not pool(x[None].expand(2, 2, 3), batch_layout(torch.tensor([[True, True], [False, False]])))[1].any()


def test_scatter_sum_accumulates_in_float32():
    values = torch.full((512, 2), 1.0 + 2 ** -7, dtype=torch.bfloat16)  # representable in bfloat16
    out = scatter_sum(values, torch.zeros(512, dtype=torch.int64), 3)
    assert out.dtype == torch.float32 and out[0].tolist() == [512 * (1 + 2 ** -7)] * 2 and not out[1:].any()
    assert scatter_sum(values.double(), torch.zeros(512, dtype=torch.int64), 1).dtype == F64


def test_a_layout_is_a_pytree_that_moves_with_its_batch():
    batch, _ = _loader_batch()
    for layout in (batch_layout(batch=batch.batch), batch_layout(batch=batch.batch, method="chunked"),
                   batch_layout(torch.ones(2, 3, dtype=torch.bool))):
        leaves, spec = tree_flatten(layout)
        assert all(t is None or isinstance(t, torch.Tensor) for t in leaves) and any(t is not None for t in leaves)
        again = tree_unflatten(leaves, spec)
        assert again.sizes == layout.sizes and len(again.groups) == len(layout.groups)
        doubled = tree_map(lambda t: None if t is None else t * 1, layout)
        assert isinstance(doubled, BatchLayout) and doubled.method == layout.method
    moved = batch_layout(batch=batch.batch).to(sim.DEVICE)
    assert moved.device == sim.DEVICE and moved.sizes == tuple(SIZES)


def test_planning_on_the_device():
    """From num_graphs and max_items (or num_graphs alone) nothing is read; as_layout counts the graphs of a
    device vector (one read) and plans no attention; a plan from bounds checks them, deferred."""
    batch, _ = _loader_batch()
    dev = sim.to_sim(batch.batch)
    with deferred_checks(), sim.watch(strict=True):
        bounded = batch_layout(batch=dev, num_graphs=4, max_items=6)
        counted = batch_layout(batch=dev, num_graphs=4)
        padded, _ = to_padded(sim.to_sim(batch.pos), bounded)
    assert bounded.method == "padded" and counted.method is None and padded.shape == (4, 6, 3)
    with deferred_checks(), sim.watch() as log:
        layout = as_layout(batch=dev)
    assert layout.num_graphs == 4 and layout.method is None
    assert [e.kind for e in log.events] == ["sync"], log.report()
    with pytest.raises(ValueError, match="max_items=4"):  # outside a deferred-checks scope: at once
        batch_layout(batch=dev, num_graphs=4, max_items=4)
    # inside a scope: at the scope's end, nothing read before
    with pytest.raises(ValueError, match="max_items=4"), deferred_checks(), sim.watch(strict=True):
        batch_layout(batch=dev, num_graphs=4, max_items=4)


def test_scatter_messages_in_chunks_is_the_one_pass_sum_and_twice_differentiable():
    """Oracle: scatter_sum of every message at once (messages built in one pass), values and first and
    second derivatives, with chunks of 5 edges recomputed in the backward pass."""
    from geomlin.batching import scatter_messages, scatter_sum

    g = torch.Generator().manual_seed(0)
    h = torch.randn(6, 4, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.randn(4, 4, generator=g, dtype=torch.float64, requires_grad=True)
    src, dst = torch.randint(6, (2, 23), generator=g)
    r = torch.rand(23, 1, generator=g, dtype=torch.float64)

    def message(h_j, r):
        return torch.tanh(h_j @ w) * r

    def derivatives(out):
        (gh,) = torch.autograd.grad(out.pow(2).sum(), h, create_graph=True)
        return out, gh, torch.autograd.grad(gh.pow(3).sum(), w)[0]

    want = derivatives(scatter_sum(message(h.index_select(0, src), r), dst, 6))
    got = derivatives(scatter_messages(message, dst, 6, (h.index_select(0, src), r), chunk=5))
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    with torch.no_grad():                                         # inference: chunked, nothing recomputed
        torch.testing.assert_close(scatter_messages(message, dst, 6, (h.index_select(0, src), r), chunk=5), want[0])
