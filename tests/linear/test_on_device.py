"""geomlin.linear on the simulated accelerator (``tests/device/simulated.py``), and the tables behind it.

Oracle: the same call on the CPU. ``apply_diagram`` for every group family (the SO(n) ε table is
uploaded once per device, on the first call) and layers built from solved bases and diagram bases
record no host sync, no upload and no device assert in forward and backward once on the device.
:class:`~geomlin.tables.ConstantTables` keeps float64 through module casts, follows the
module's device and stays out of state dicts.
"""

from __future__ import annotations

import pytest
import torch

from geomlin import validation
from geomlin.groups import SO, O, S, Sp
from geomlin.linear import (
    DiagramLinear,
    EquivariantBilinear,
    EquivariantLinear,
    GatedNonlinearity,
    apply_diagram,
)
from geomlin.linear.diagrams import spanning_diagrams
from geomlin.reps import IrrepsRep, Scalar, V
from geomlin.tables import ConstantTables
from tests.device import simulated as sim
from tests.device.checks import warm_then_watch

DIAGRAM_CASES = [("S", 3, 2, 2, False), ("S", 3, 2, 1, True), ("O", 3, 3, 1, False), ("SO", 3, 2, 1, False),
                 ("SO", 3, 0, 3, False), ("Sp", 4, 2, 2, False)]


def _grad_step(fn, args):
    args = [a.detach().requires_grad_() for a in args]
    out = fn(*args)
    return out, torch.autograd.grad((out ** 2).sum(), args)


def _compare(fn, args, rtol=1e-5):
    cpu_out, cpu_grads = _grad_step(fn, args)
    dev = sim.to_sim(args)
    out, grads = warm_then_watch(lambda: _grad_step(fn, dev), lambda: _grad_step(fn, dev))
    for a, b in zip((out, *grads), (cpu_out, *cpu_grads)):
        assert a.device == sim.DEVICE
        assert (sim.to_cpu(a) - b).norm() <= rtol * b.norm() + 1e-6


@pytest.mark.parametrize("name,n,k,l,orbit", DIAGRAM_CASES)
def test_apply_diagram_on_the_device(name, n, k, l, orbit):
    x = torch.randn(4, *([n] * k), generator=torch.Generator().manual_seed(n + k))
    for d in spanning_diagrams(name, k, l, n)[:12]:
        _compare(lambda t, d=d: apply_diagram(d, t, n, name, orbit=orbit), [x])


LAYERS = [
    lambda: EquivariantLinear(2 * Scalar + V(O(3)) + V(O(3)) ** 2, V(O(3)) ** 2 + Scalar),
    lambda: EquivariantLinear(V(SO(3)) + Scalar, 3 * Scalar + V(SO(3))),  # a permuted (unsorted) layout
    lambda: EquivariantBilinear(3 * Scalar + 2 * V(S(4)) + V(S(4)) ** 2),
    lambda: GatedNonlinearity(V(SO(3)) + 2 * Scalar + V(SO(3)) ** 2),  # gated blocks before scalars
    lambda: DiagramLinear("SO", 3, 2, 1, 2, 2),
    lambda: DiagramLinear("Sp", 4, 1, 1, 2, 3),
    lambda: EquivariantLinear(IrrepsRep(""), 2 * Scalar + V(O(3))),  # an empty input: the output is the bias
    lambda: EquivariantBilinear(IrrepsRep("") + Scalar + V(O(3)) + IrrepsRep("0x1o")),  # empty blocks
]


@pytest.mark.parametrize("make", LAYERS, ids=lambda m: "")
def test_layers_move_with_their_tables(make):
    layer = make().float()
    size = layer.type_in.shape
    x = torch.randn(5, *size, generator=torch.Generator().manual_seed(1))
    cpu = layer(x)
    moved = sim.to_sim(layer)
    xs = sim.to_sim(x).requires_grad_()
    # the very first call: nothing to upload, the tables moved with the layer
    with validation.deferred_checks(), sim.watch() as log:
        out = moved(xs)
        out.square().sum().backward()
    assert not log.events, log.report()
    torch.testing.assert_close(sim.to_cpu(out), cpu.detach(), rtol=1e-5, atol=1e-6)


def test_constant_tables_keep_float64_follow_the_device_and_copy_their_input():
    source = torch.randn(3, 4, dtype=torch.float64)
    tables = ConstantTables({"basis": source, "index": torch.arange(4)})
    source.zero_()
    assert tables.get("basis").abs().sum() > 0  # a copy: the caller's tensor (often a cached one) is not aliased
    assert tables.state_dict() == {}
    first = tables.get("basis", torch.float32)
    assert first.dtype == torch.float32 and tables.get("basis", torch.float32) is first  # cast once
    tables.float()
    assert tables.get("basis").dtype == torch.float64 and tables.get("index").dtype == torch.int64
    tables.half()
    assert tables.get("basis").dtype == torch.float64
    moved = sim.to_sim(tables)
    assert moved.get("basis").device == sim.DEVICE and moved.get("basis").dtype == torch.float64
    with validation.deferred_checks(), sim.watch() as log:
        cast = moved.get("basis", torch.float32)
    assert not log.events and cast.device == sim.DEVICE
    torch.testing.assert_close(sim.to_cpu(cast), first)


def test_equivariant_linear_float32_round_trip_stays_exact():
    layer = EquivariantLinear(2 * V(O(3)) + Scalar, V(O(3)) ** 2)
    fresh = layer.weight(dtype=torch.float64)
    layer.float().double()  # a float32 model cast back for a float64 equivariance check
    assert torch.equal(layer.weight(dtype=torch.float64), fresh)


def test_group_symplectic_diagram_layer_matches_dense_group_action():
    """Sp(2) layer on the device is still equivariant (the device path runs the same diagrams)."""
    layer = DiagramLinear("Sp", 4, 1, 1, 1, 1).double()
    g = Sp(2).sample(1, generator=torch.Generator().manual_seed(2))[0]
    x = torch.randn(3, 1, 4, dtype=torch.float64)
    moved, xs, gs = sim.to_sim((layer, x, g))
    with validation.deferred_checks(), sim.watch() as log:
        lhs = moved(xs @ gs.T)
        rhs = moved(xs) @ gs.T
    assert not log.events, log.report()
    torch.testing.assert_close(sim.to_cpu(lhs), sim.to_cpu(rhs), rtol=1e-9, atol=1e-9)
