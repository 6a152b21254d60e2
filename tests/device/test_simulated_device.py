"""The stand-ins catch what a GPU would punish: each rule of the simulated device and process group is
shown to fire on a small offender (a detector that cannot fail proves nothing)."""

from __future__ import annotations

import pytest
import torch

from geomlin import validation
from tests.device import simulated as sim

D = sim.DEVICE


def _kinds(fn) -> list[str]:
    with sim.watch() as log:
        fn()
    return [e.kind for e in log.events]


def test_values_match_the_cpu_and_stay_on_the_device():
    x = torch.randn(5, 4)
    w = torch.randn(4, 3, requires_grad=True)
    xs, ws = sim.to_sim((x, w.detach()))
    ws.requires_grad_()
    (xs @ ws).tanh().sum().backward()
    (x @ w).tanh().sum().backward()
    assert ws.grad.device == D
    torch.testing.assert_close(sim.to_cpu(ws.grad), w.grad)


def test_complex_products_and_their_gradients_match_the_cpu():
    """Complex multiplication's backward conjugates lazily (a conj bit the wrapper does not carry)."""
    a, b = torch.randn(2, 6), torch.randn(2, 6)

    def f(x, y):
        return torch.view_as_real(torch.complex(x, y) * torch.complex(y, x)).square().sum()
    want = torch.autograd.grad(f(a.requires_grad_(), b.requires_grad_()), (a, b))
    xs, ys = (t.detach().requires_grad_() for t in sim.to_sim((a, b)))
    got = torch.autograd.grad(f(xs, ys), (xs, ys))
    for g, h in zip(got, want):
        torch.testing.assert_close(sim.to_cpu(g), h)


def test_to_sim_moves_objects_that_move_themselves():
    class Plan:
        def __init__(self, t):
            self.t = t

        def to(self, device):
            return Plan(self.t.to(device))

    moved = sim.to_sim({"plan": Plan(torch.ones(3)), "n": 3})
    assert moved["plan"].t.device == D and moved["n"] == 3


def test_a_cpu_operand_is_refused_as_cuda_refuses_it():
    x = torch.randn(3, 4, device=D)
    with pytest.raises(sim.DeviceMixError, match="same device"):
        x + torch.ones(4)
    x + torch.tensor(2.0)  # a 0-d CPU tensor is a scalar, as on CUDA
    with pytest.raises(sim.DeviceMixError, match="generator"):
        torch.randn(3, device=D, generator=torch.Generator())


@pytest.mark.parametrize("offender,kind", [
    (lambda x: x.sum().item(), "sync"),
    (lambda x: bool(x.sum() > 0), "sync"),
    (lambda x: x.tolist(), "sync"),
    (lambda x: x.cpu(), "sync"),
    (lambda x: x[x > 0], "sync"),
    (lambda x: torch.nonzero(x), "sync"),
    (lambda x: torch.unique(x), "sync"),
    (lambda x: torch.repeat_interleave(torch.arange(3, device=D), torch.ones(3, dtype=torch.long, device=D)), "sync"),
    (lambda x: torch.linalg.eigh(x @ x.T), "sync"),
    (lambda x: torch.linalg.svd(x), "sync"),
    (lambda x: torch.linalg.inv(x @ x.T + torch.eye(3, device=D)), "sync"),
    (lambda x: torch.linalg.matrix_exp(x[:, :3]), "sync"),
    (lambda x: x[[0, 2]], "upload"),
    (lambda x: x + torch.tensor([1.0, 2.0, 3.0, 4.0], device=D), "upload"),
    (lambda x: torch._assert_async(x.isfinite().all()), "assert"),
])
def test_every_rule_fires(offender, kind):
    x = torch.randn(3, 4, device=D)
    assert kind in _kinds(lambda: offender(x))


def test_sync_free_code_records_nothing():
    x = torch.randn(3, 4, device=D)
    idx = torch.tensor([0, 2], device=D)
    assert _kinds(lambda: (x[idx].softmax(-1) * 2.0 + x.mean()).sum()) == []
    assert _kinds(lambda: torch.repeat_interleave(x, torch.ones(3, dtype=torch.long, device=D), dim=0,
                                                  output_size=3)) == []


def test_strict_mode_raises_at_the_operator():
    x = torch.randn(3, device=D)
    with pytest.raises(sim.HostSyncError, match="_local_scalar_dense"), sim.watch(strict=True):
        x.sum().item()


def test_autocast_follows_cudas_policy():
    lin = torch.nn.Linear(4, 2).to(D)
    x = torch.randn(3, 4, device=D)
    with torch.autocast(sim.DEVICE_TYPE, dtype=torch.bfloat16):
        y = lin(x)
        assert y.dtype == torch.bfloat16  # matmuls in the lower precision
        assert y.exp().dtype == torch.float32  # exp, sums, softmax and norms in float32
        assert y.sum().dtype == torch.float32
        with pytest.raises(RuntimeError, match="same scalar type"):  # the clash CUDA reports
            torch.zeros(3, 2, device=D).index_add_(0, torch.tensor([0, 1, 0], device=D), y)


def test_deferred_checks_raise_later_with_the_cpu_message():
    """Inside a scope the checks stay on the device (no sync), the index is clamped, and the scope's end
    raises the CPU's error."""
    bad = torch.tensor([1.0, float("nan")])
    with pytest.raises(ValueError, match="x contains NaN") as on_cpu:
        validation.check_finite(bad, "x")
    bad, index = sim.to_sim((bad, torch.tensor([0, 5, -1])))
    with pytest.raises(ValueError) as deferred, validation.deferred_checks():
        with sim.watch() as log:
            validation.check_finite(bad, "x")
            index = validation.check_index(index, "index", 3)
        assert log.events == []  # no sync, no device assert
        assert sim.to_cpu(index).tolist() == [0, 2, 0]  # clamped: no kernel reads out of bounds
        assert validation.pending_checks() == 2
    assert str(on_cpu.value) in str(deferred.value)
    assert validation.pending_checks() == 0
    with validation.deferred_checks():  # a clean block raises nothing
        validation.check_finite(torch.ones(3, device=D), "y")


def test_outside_a_scope_checks_raise_at_once_and_never_clamp():
    """No scope, no deferral: the value is read (a host sync, recorded) and the CPU's error raised at the call."""
    index = sim.to_sim(torch.tensor([0, 5, -1]))
    with sim.watch() as log, pytest.raises(ValueError, match=r"in \[0, 3\), got entries from -1 to 5"):
        validation.check_index(index, "index", 3)
    assert [e.kind for e in log.events] and {e.kind for e in log.events} == {"sync"}
    with pytest.raises(ValueError, match="x contains NaN"):
        validation.check_finite(sim.to_sim(torch.tensor([float("nan")])), "x")
    good = sim.to_sim(torch.tensor([0, 2]))
    assert validation.check_index(good, "index", 3) is good
    assert validation.pending_checks() == 0


def test_a_bad_species_index_outside_a_training_loop_raises_and_never_computes():
    """A user's own loop on an accelerator (no scope): the species check raises before any atom is embedded."""
    from geomlin.models import EGNNPotential

    model = EGNNPotential(num_species=3, hidden_channels=8, num_blocks=1)
    (pos, species), _ = model.example_inputs(generator=torch.Generator().manual_seed(0), dtype=torch.float32)
    species = species.clone()
    species[0, 0] = 0
    species[0, 1] = 7  # no such atom type
    model, pos, species = sim.to_sim((model, pos, species))
    embedded = []
    for m in model.modules():
        if isinstance(m, torch.nn.Embedding):
            m.register_forward_hook(lambda *_: embedded.append(1))
    with pytest.raises(ValueError, match=r"species must index atom types in \[0, 3\), got entries from 0 to 7"):
        model(pos, species)
    assert not embedded


def test_a_block_that_raised_leaks_no_check_into_the_next():
    bad = sim.to_sim(torch.tensor([float("nan")]))
    with pytest.raises(RuntimeError, match="the block failed"), validation.deferred_checks():
        validation.check_finite(bad, "x")
        raise RuntimeError("the block failed")
    assert validation.pending_checks() == 0
    with validation.deferred_checks():  # valid: raises nothing
        validation.check_finite(sim.to_sim(torch.ones(2)), "y")


def test_a_nested_scope_hands_its_checks_to_the_enclosing_one():
    bad = sim.to_sim(torch.tensor([float("nan")]))
    with pytest.raises(ValueError, match="x contains NaN"), validation.deferred_checks():
        with sim.watch() as log, validation.deferred_checks():
            validation.check_finite(bad, "x")
        assert not log.events  # the inner scope read nothing
        assert validation.pending_checks() == 1


def test_resize_grows_a_tensor_in_place():
    """``resize_`` beyond the storage (``all_gather_object`` pads its bytes so) keeps the values, as on CUDA."""
    x = torch.arange(4, dtype=torch.uint8).to(D)
    x.resize_(10)
    assert x.shape == (10,) and x.device == D
    assert sim.to_cpu(x)[:4].tolist() == [0, 1, 2, 3]
