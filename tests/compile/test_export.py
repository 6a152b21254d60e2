"""Every model ``geomlin train`` offers exports with dynamic batch and items sizes (issue 21).

Oracle: the same model run eagerly. The program is exported at the example's sizes and run at
other sizes (one more example in the batch, one item fewer; the items of models that declare them
static stay), where it must reproduce the eager output (float32, rtol 1e-5). Potentials are
exported with their forces (:func:`geomlin.deploy.export`). The slower exports are in the slow set.
"""

import pytest
import torch

from geomlin import deploy
from geomlin.train import get_task
from tests.compile.test_models_compile import SMALL, _model_and_inputs

RTOL, ATOL = 1e-5, 1e-5
#: Exports that take over ~7 s on a 2-core CPU (measured 8-12 s): in the slow set.
SLOW = {("nbody", "gatr"), ("pointcloud", "canonical"), ("pointcloud", "frame_avg"), ("molecules", "gaunt"),
        ("molecules", "egnn")}


def _cases():
    return [pytest.param(t, n, id=f"{t}-{n}", marks=[pytest.mark.slow] if (t, n) in SLOW else [])
            for t in SMALL for n in get_task(t).models]


def export_case(task_name: str, name: str):
    """``(model, args, kwargs)`` of a model as it is exported: molecules with forces, items within range."""
    model, args, kwargs = _model_and_inputs(task_name, name)
    kwargs = {k: v for k, v in kwargs.items() if k != "compute_forces"}
    args, kwargs = deploy.fit_inputs(model, args, kwargs)
    return model, args, kwargs


def resized(model, args, kwargs, seed: int = 1):
    """The inputs at one more batch entry (a perturbed copy of the first) and one item fewer."""
    static_items = deploy.items_range(model) is None
    g = torch.Generator().manual_seed(seed)

    def resize(x):
        if not isinstance(x, torch.Tensor) or x.ndim == 0:
            return x
        extra = x[:1].clone()
        if x.is_floating_point():
            extra = extra + 0.1 * torch.randn(extra.shape, generator=g, dtype=x.dtype)
        x = torch.cat([x, extra])
        if x.ndim >= 2 and not static_items:
            x = x[:, : x.shape[1] - 1]
        return x.contiguous()  # a program is traced for contiguous inputs

    return tuple(resize(a) for a in args), {k: resize(v) for k, v in kwargs.items()}


def _flat(out):
    return [o for o in (out if isinstance(out, tuple) else (out,)) if o is not None]


@pytest.mark.parametrize("task_name, name", _cases())
def test_exported_program_at_other_sizes_equals_eager(task_name, name):
    model, args, kwargs = export_case(task_name, name)
    program = deploy.export(model, args, kwargs)
    new_args, new_kwargs = resized(model, args, kwargs)
    expected = _flat(model(*new_args, **new_kwargs))
    with torch.no_grad():
        p_args, p_kwargs = deploy.program_inputs(model, new_args, new_kwargs)
        got = _flat(program.module()(*p_args, **p_kwargs))
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e.detach(), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("task_name, name", [("molecules", "ponita"), ("pointcloud", "pointnet")])
def test_an_example_batch_of_one_or_too_few_items_is_refused_in_one_line(task_name, name):
    """PyTorch specialises a size of 1: without the check, torch.export fails with a constraint violation
    naming neither the input nor the fix. A program exported from two examples still takes one."""
    model, args, kwargs = export_case(task_name, name)
    one = tuple(a[:1] for a in args)
    with pytest.raises(ValueError, match=r"example batch of at least 2, got \w+ with shape \(1, "):
        deploy.export(model, one, kwargs)
    low = deploy.items_range(model)[0]
    few = tuple(a[:, : low - 1] if a.ndim >= 2 else a for a in args)
    with pytest.raises(ValueError, match=rf"at least {low} items \(dim 1\), got \w+ with shape \({args[0].shape[0]}, {low - 1}"):
        deploy.export(model, few, kwargs)
    program = deploy.export(model, args, kwargs)
    with torch.no_grad():
        p_args, p_kwargs = deploy.program_inputs(model, one, kwargs)
        got = _flat(program.module()(*p_args, **p_kwargs))
    expected = _flat(model(*one, **kwargs))
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e.detach(), rtol=RTOL, atol=ATOL)
