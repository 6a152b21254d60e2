"""geomlin.gaunt's public functions on the simulated accelerator (``tests/device/simulated.py``).

Oracle: the same call on the CPU. Each function is called once on the device first (its tables are
uploaded to the per-device cache then, once), after which forward and backward -- and the double
backward of force training -- record no host sync, no upload and no device assert. Under CUDA's
autocast policy (bf16 / fp16) the routes compute in float32 (the ``fft`` route included, whose
complex spectra cannot be half precision), and outside autocast half-precision inputs are refused
with a ``TypeError`` that says why.
"""

from __future__ import annotations

import copy

import pytest
import torch

from geomlin import validation
from geomlin.gaunt import (
    GauntTensorProduct,
    SphereGauntProduct,
    gaunt_bracket,
    gaunt_parity_product,
    gaunt_power,
    gaunt_tensor_product,
    irreps_to_sphere,
    sphere_to_irreps,
    spherical_harmonics,
    split_parity,
)
from tests.device import simulated as sim
from tests.device.checks import warm_then_watch

ROUTES = ("grid", "fft", "dense", "direct")


def _inputs(seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    x1 = torch.randn(5, 3, 9, generator=gen)
    x2 = torch.randn(5, 1, 16, generator=gen)  # shared by the channels
    return x1, x2


def _on_device_equals_cpu(fn, *inputs, rtol: float = 1e-5, create_graph: bool = False):
    """Run ``fn`` and its input gradients on the CPU and (after a warm-up) on the device; compare."""
    def run(args, watch: bool):
        args = [a.detach().requires_grad_() for a in args]
        out = fn(*args)
        grads = torch.autograd.grad((out ** 2).sum(), args, create_graph=create_graph)
        if create_graph:  # force training: the gradient's own gradient
            grads = torch.autograd.grad(sum((g ** 2).sum() for g in grads), args)
        return out, grads

    cpu_out, cpu_grads = run(inputs, False)
    dev_inputs = sim.to_sim(inputs)
    # the first call uploads the tables (once per device and dtype), nothing else
    out, grads = warm_then_watch(lambda: run(dev_inputs, False), lambda: run(dev_inputs, True))
    assert out.device == sim.DEVICE and out.dtype == cpu_out.dtype
    for a, b in zip((out, *grads), (cpu_out, *cpu_grads)):
        a = sim.to_cpu(a)
        assert (a - b).norm() <= rtol * b.norm() + 1e-6 * cpu_out.norm()


@pytest.mark.parametrize("method", ROUTES)
def test_gaunt_products_on_every_route(method):
    _on_device_equals_cpu(lambda a, b: gaunt_tensor_product(a, b, 3, method=method), *_inputs())


def test_gaunt_product_double_backward_on_the_grid_route():
    _on_device_equals_cpu(lambda a, b: gaunt_tensor_product(a, b, 3, method="grid"), *_inputs(1), create_graph=True)


def test_triton_route_refuses_other_devices_clearly():
    pytest.importorskip("triton")
    x1, x2 = sim.to_sim(_inputs())
    with pytest.raises(ValueError, match="CUDA"):
        gaunt_tensor_product(x1, x2, 3, method="triton")


@pytest.mark.parametrize("method", ROUTES)
def test_brackets_on_every_route(method):
    _on_device_equals_cpu(lambda a, b: gaunt_bracket(a, b, 3, method=method), *_inputs(6))


def _module_on_both(module):
    """``fn(*args)`` calling ``module`` on the CPU or its copy on the device, by the inputs' device."""
    on_device = sim.to_sim(copy.deepcopy(module))  # .to() moves a module in place
    return lambda *args: (on_device if args[0].device == sim.DEVICE else module)(*args)


def test_tensor_product_with_odd_paths_and_per_row_weights_and_its_double_backward():
    """The drop-in of a convolution (mode uvu, per-edge weights, the cross-product path included), differentiated
    twice as force training does; ``right()`` too."""
    from tests.randomized import randomized

    tp = randomized(GauntTensorProduct("3x0e+3x1o+2x2e", "0e+1o+2e", "3x0e+3x1o+3x1e+2x2e+2x2o", [
        (0, 0, 0, "uvu", True), (1, 1, 0, "uvu", True), (1, 1, 2, "uvu", True), (1, 2, 1, "uvu", True),
        (2, 2, 3, "uvu", True), (2, 1, 4, "uvu", True), (0, 1, 1, "uvu", True)], shared_weights=False,
        compile_right=True))
    gen = torch.Generator().manual_seed(7)
    x1, x2 = torch.randn(6, tp.irreps_in1.dim, generator=gen), torch.randn(6, tp.irreps_in2.dim, generator=gen)
    w = torch.randn(6, tp.weight_numel, generator=gen)
    _on_device_equals_cpu(_module_on_both(tp), x1, x2, w, create_graph=True)
    on_device = sim.to_sim(copy.deepcopy(tp))
    _on_device_equals_cpu(lambda b, v: (on_device if b.device == sim.DEVICE else tp).right(b, v), x2, w)


def test_fully_connected_product_under_autocast_computes_in_float32():
    tp = GauntTensorProduct("4x0e+2x1o+1x2e", "1x0e+1x1o", "2x0e+2x1e+1x2o")
    x1, x2 = torch.randn(5, tp.irreps_in1.dim), torch.randn(5, tp.irreps_in2.dim)
    want = tp(x1, x2)
    dev = sim.to_sim(copy.deepcopy(tp))
    a, b = sim.to_sim((x1, x2))
    dev(a, b)  # warm-up (tables)
    with validation.deferred_checks(), sim.watch() as log, torch.autocast(sim.DEVICE_TYPE, dtype=torch.bfloat16):
        out = dev(a.bfloat16(), b)
    assert not log.events, log.report()
    assert out.dtype == torch.float32
    assert (sim.to_cpu(out) - want).norm() <= 0.05 * want.norm()


@pytest.mark.parametrize("method", ("grid", "dense"))
def test_powers_and_parity_products(method):
    x, _ = _inputs(2)
    _on_device_equals_cpu(lambda a: gaunt_power(a, 3, 2, method=method), x)
    _on_device_equals_cpu(lambda a, b: sum(gaunt_parity_product((a, b), (b, a), 2, method=method)), x, x.flip(0))


def test_spherical_harmonics_and_layouts():
    vec = torch.randn(7, 3, generator=torch.Generator().manual_seed(3))
    _on_device_equals_cpu(lambda v: spherical_harmonics(4, v), vec)
    _on_device_equals_cpu(lambda v: spherical_harmonics(3, v, normalize=False), vec)
    irreps = "2x0e+2x1o+2x2e+1x1e"
    x = torch.randn(4, 21, generator=torch.Generator().manual_seed(4))
    _on_device_equals_cpu(lambda a: sphere_to_irreps(irreps_to_sphere(a[..., :18], "2x0e+2x1o+2x2e")), x)
    _on_device_equals_cpu(lambda a: sum(p.sum(-1) for p in split_parity(a, irreps)), x)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("method", ROUTES)
def test_routes_compute_in_float32_under_autocast(method, dtype):
    x1, x2 = _inputs(5)
    want = gaunt_tensor_product(x1, x2, 3, method=method)
    x1, x2 = sim.to_sim((x1, x2))
    gaunt_tensor_product(x1, x2, 3, method=method)  # warm-up (tables)
    with validation.deferred_checks(), sim.watch() as log, torch.autocast(sim.DEVICE_TYPE, dtype=dtype):
        out = gaunt_tensor_product(x1.to(dtype), x2, 3, method=method)  # a half input, as a previous layer makes
        sh = spherical_harmonics(2, x1[..., 1:4].to(dtype))
    assert not log.events, log.report()
    assert out.dtype == torch.float32 and sh.dtype == torch.float32
    ref = gaunt_tensor_product(sim.to_cpu(x1).to(dtype).float(), sim.to_cpu(x2), 3, method=method)
    assert torch.allclose(sim.to_cpu(out), ref, rtol=1e-5, atol=1e-5)
    assert (sim.to_cpu(out) - want).norm() <= 0.05 * want.norm()


def test_half_precision_outside_autocast_is_refused_naming_precision():
    x1, x2 = _inputs()
    with pytest.raises(TypeError, match="precision"):
        gaunt_tensor_product(x1.bfloat16(), x2.bfloat16())
    with pytest.raises(TypeError, match="precision"):
        spherical_harmonics(2, torch.randn(3, 3).half())
    with pytest.raises(TypeError, match="precision"):
        SphereGauntProduct(2, 3, 3, 3)(x1.half(), x2.half())


def test_module_tables_are_buffers_that_keep_float64_and_stay_out_of_the_state_dict():
    tp = SphereGauntProduct(2, 3, 3, 3, method="grid")
    keys = set(tp.state_dict())
    assert keys == {"weight1", "weight2", "weight_out"}
    tp.float()
    assert all(b.dtype == torch.float64 for b in tp.tables.buffers() if b.is_floating_point())
    x1, x2 = (x.double() for x in _inputs())
    ref = gaunt_tensor_product(x1, x2, 3, method="direct")
    torch.testing.assert_close(tp.double()(x1, x2), ref * 1.0, rtol=1e-12, atol=1e-12)
    moved = sim.to_sim(tp)
    assert all(b.device == sim.DEVICE for b in moved.buffers())
    assert set(moved.state_dict()) == keys
