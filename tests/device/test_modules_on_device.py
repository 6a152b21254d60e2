"""Every declared module class on the simulated accelerator: device-clean, no host syncs, mixed precision.

For each example in ``tests/*/declared_examples.py`` (the ones ``tests/test_declarations.py`` checks
for equivariance), in float32:

* forward and backward on the ``sim`` device (``tests/device/simulated.py``: CUDA's device rules on
  every operator) record no host sync, no upload of a constant and no device-side assert, and give
  the CPU's numbers;
* under ``torch.autocast("sim", dtype)`` for bfloat16 and float16 (CUDA's autocast policy), forward
  and backward run, stay finite, stay sync-free and stay close to the float32 result; a module
  that cannot run in reduced precision must refuse with a ``TypeError`` that says so.
"""

from __future__ import annotations

import pytest
import torch
from torch.utils._pytree import tree_leaves

from geomlin import validation
from tests.device import simulated as sim
from tests.test_declarations import CASES, IDS, build_case

#: Relative distance of an autocast output from the float32 output that still counts as "close".
AUTOCAST_RTOL = {torch.bfloat16: 0.1, torch.float16: 0.02}
#: Relative tolerance between the simulated device and the CPU (the same CPU kernels run both).
DEVICE_RTOL = 1e-5
#: Absolute slack of gradient comparisons, in float32 epsilons of the step's largest gradient: the
#: round-off of a gradient that vanishes in exact arithmetic (an input the output barely depends on).
GRAD_NOISE = 64


def float_outputs(out) -> list[torch.Tensor]:
    return [o for o in tree_leaves(out) if isinstance(o, torch.Tensor) and o.is_floating_point()]


def _weights(o: torch.Tensor) -> torch.Tensor:
    """Fixed weights in [-1, 1] of ``o``'s shape, made on ``o``'s device (no upload)."""
    return torch.linspace(-1.0, 1.0, o.numel(), device=o.device).reshape(o.shape).cos()


def step(module, args, kwargs):
    """Forward, a loss touching every float output, backward; returns the outputs and input gradients."""
    out = float_outputs(module(*args, **kwargs))
    # a quadratic and a fixed linear term: |o|^2 alone is constant on orthogonal outputs (frames,
    # rotations), whose gradient would then be pure rounding noise
    loss = sum((o.float() ** 2).mean() + (o.float() * _weights(o)).mean() for o in out)
    inputs = [a for a in tree_leaves(args) if isinstance(a, torch.Tensor) and a.requires_grad]
    params = [p for p in module.parameters() if p.requires_grad]
    if not loss.requires_grad:  # an inference module returns detached outputs (EnergyAndForces)
        return out, [None] * len(inputs + params)
    grads = torch.autograd.grad(loss, inputs + params, allow_unused=True)
    return out, grads


def _relative(a: torch.Tensor, b: torch.Tensor, floor: float = 1e-12) -> float:
    a, b = sim.to_cpu(a).detach().double(), sim.to_cpu(b).detach().double()
    return float((a - b).norm() / b.norm().clamp_min(floor))


@pytest.mark.parametrize("cls,index,factory", CASES, ids=IDS)
def test_forward_and_backward_on_the_simulated_device(cls, index, factory):
    module, args, kwargs = build_case(factory, index, requires_grad=True)
    with sim.cpu_kernels():
        cpu_out, cpu_grads = step(module, args, kwargs)
    module, args, kwargs = sim.to_sim((module, args, kwargs))
    # as in the training loop: the input checks stay on the device, and pass on valid inputs when read
    with validation.deferred_checks(), sim.watch() as log:
        out, grads = step(module, args, kwargs)
    assert not log.events, f"{cls.__name__} on an accelerator:\n{log.report()}"
    for o in out:
        assert o.device == sim.DEVICE, f"{cls.__name__} returned an output on {o.device}"
    for a, b in zip(out, cpu_out):
        assert _relative(a, b) <= DEVICE_RTOL
    # a gradient that vanishes in exact arithmetic is float32 rounding noise, which the two runs may
    # sum in another order (or, for frames, solve by another method: LAPACK on the CPU, Jacobi on
    # accelerators): it only has to be that small on both
    largest = max((float(h.detach().double().norm()) for h in cpu_grads if h is not None), default=0.0)
    noise = GRAD_NOISE * torch.finfo(torch.float32).eps * largest
    for g, h in zip(grads, cpu_grads):
        if g is not None:
            assert g.device == sim.DEVICE
            diff = float((sim.to_cpu(g).detach().double() - h.detach().double()).norm())
            assert diff <= DEVICE_RTOL * float(h.detach().double().norm()) + noise


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("cls,index,factory", CASES, ids=IDS)
def test_autocast_on_the_simulated_device(cls, index, factory, dtype):
    module, args, kwargs = build_case(factory, index, requires_grad=True)
    reference, _ = step(module, args, kwargs)
    module, args, kwargs = sim.to_sim((module, args, kwargs))
    with validation.deferred_checks(), sim.watch() as log, torch.autocast(sim.DEVICE_TYPE, dtype=dtype):
        try:
            out, grads = step(module, args, kwargs)
        except TypeError as err:  # a clear refusal is allowed
            assert "precision" in str(err) or "autocast" in str(err), err
            return
    assert not log.events, f"{cls.__name__} under {dtype} autocast:\n{log.report()}"
    for o, r in zip(out, reference):
        assert torch.isfinite(sim.to_cpu(o)).all()
        assert _relative(o, r) <= AUTOCAST_RTOL[dtype], f"{cls.__name__}: output far from float32"
    for g in grads:
        if g is not None:
            assert torch.isfinite(sim.to_cpu(g)).all()
