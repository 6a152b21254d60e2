"""One check for functions and modules on the simulated accelerator (``tests/device/simulated.py``).

:func:`assert_runs_on_device` runs a callable on the CPU, then on the ``sim`` device inside
``sim.watch(strict=True)`` (the first host sync, upload or device assert raises at its line), and
compares outputs and input gradients with the CPU run. The device runs happen inside a
:func:`geomlin.validation.deferred_checks` scope, as in the training loop: value checks stay on the
device and the scope raises them when it ends (after the watch). Pure functions may fill a
per-(device, dtype) cache on their first call (one upload, allowed by the device rules):
``warm=True`` makes one unwatched call first. Modules must not need it (their tables are buffers).
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch.utils._pytree import tree_leaves, tree_map

from geomlin.validation import deferred_checks
from tests.device import simulated as sim

#: Relative distance between device and CPU results (the same CPU kernels compute both).
RTOL = 1e-5


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = sim.to_cpu(a).detach().double(), b.detach().double()
    return float((a - b).norm() / b.norm().clamp_min(1e-12))


def _floats(out) -> list[torch.Tensor]:
    return [t for t in tree_leaves(out) if isinstance(t, torch.Tensor) and t.is_floating_point()]


def _run(fn, args, kwargs, grads: bool):
    args = tree_map(lambda t: t.detach().requires_grad_() if grads and isinstance(t, torch.Tensor)
                    and t.is_floating_point() else t, args)
    out = fn(*args, **kwargs)
    floats = _floats(out)
    inputs = [t for t in tree_leaves(args) if isinstance(t, torch.Tensor) and t.requires_grad]
    params = [p for p in fn.parameters() if p.requires_grad] if isinstance(fn, torch.nn.Module) else []
    if not grads or not (inputs + params) or not any(f.requires_grad for f in floats):
        return out, []
    loss = sum((f.float() ** 2).mean() for f in floats if f.requires_grad)
    return out, torch.autograd.grad(loss, inputs + params, allow_unused=True)


def assert_runs_on_device(fn, *args, warm: bool = False, grads: bool = True, rtol: float = RTOL, **kwargs):
    """Run ``fn(*args, **kwargs)`` on the CPU and on ``sim``: no event on ``sim``, same numbers.

    ``fn`` may be an ``nn.Module`` (a copy is moved to ``sim``; parameter gradients are compared
    too). Returns the device outputs.
    """
    with sim.cpu_kernels():
        cpu_out, cpu_grads = _run(fn, args, kwargs, grads)
    # a copy of a module goes to the device (Module.to moves in place)
    dev_fn = sim.to_sim(copy.deepcopy(fn)) if isinstance(fn, torch.nn.Module) else fn
    dev_args, dev_kwargs = sim.to_sim((args, kwargs))
    if warm:
        with sim.allowed(), deferred_checks():
            _run(dev_fn, dev_args, dev_kwargs, grads)
    with deferred_checks(), sim.watch(strict=True):  # the scope reads its checks after the watch
        out, dev_grads = _run(dev_fn, dev_args, dev_kwargs, grads)
    for o in tree_leaves(out):
        if isinstance(o, torch.Tensor):
            assert o.device == sim.DEVICE, f"an output is on {o.device}"
    for a, b in zip(_floats(out), _floats(cpu_out)):
        assert _relative(a, b) <= rtol, f"output differs from the CPU's: {_relative(a, b):.2e}"
    for g, h in zip(dev_grads, cpu_grads):
        if g is not None:
            assert g.device == sim.DEVICE
            assert _relative(g, h) <= rtol, f"gradient differs from the CPU's: {_relative(g, h):.2e}"
    return out


def warm_then_watch(warm, call):
    """``warm()`` then ``call()`` on the device, each in a deferred-checks scope: the first call may only
    upload (a per-(device, dtype) cache filled once), the second records nothing. Returns ``call()``."""
    with deferred_checks(), sim.watch() as warm_up:
        warm()
    assert all(e.kind == "upload" for e in warm_up.events), warm_up.report()
    with deferred_checks(), sim.watch() as log:
        out = call()
    assert not log.events, log.report()
    return out


def assert_membership_deferred(group, member, outsider, phrase: str) -> None:
    """``group.check_element`` on the device: a member passes (after at most an upload of the group's
    tables), an outsider is refused with ``phrase`` at the end of a deferred-checks scope without a
    host read before it, and at once outside a scope."""
    member, outsider = sim.to_sim((member, outsider))
    warm_then_watch(lambda: group.check_element(member), lambda: group.check_element(member))
    with pytest.raises(ValueError, match=phrase), deferred_checks():
        with sim.watch() as log:
            group.check_element(outsider)
        assert not log.events, log.report()
    with pytest.raises(ValueError, match=phrase):
        group.check_element(outsider)
