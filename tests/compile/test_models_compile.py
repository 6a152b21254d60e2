"""Every model ``geomlin train`` offers compiles as one graph (issue 21).

Oracle: the same model run eagerly. ``torch._dynamo.explain`` must report no graph break and
``torch.compile(model, fullgraph=True)`` must reproduce the eager output (float32, rtol 1e-5).
The default run keeps the two cheapest models; the rest are in the slow set (compiling is slow).
"""

import functools

import pytest
import torch

from geomlin.train import get_task
from geomlin.train.config import resolve_config

#: Tiny sizes per task, so building the data and compiling stay quick.
SMALL = {
    "pointcloud": {"train_per_class": 1, "test_per_class": 1, "num_points": 16, "gatr_points": 8},
    "molecules": {"num_train": 8, "num_test": 4},
    "nbody": {"num_train": 8, "num_test": 4, "burn_in_steps": 10, "horizon_steps": 20},
}
#: Models compiled in the default run (one cheap model per task family that compiles in seconds).
DEFAULT = {("nbody", "mlp"), ("pointcloud", "pointnet")}
RTOL, ATOL = 1e-5, 1e-6
#: Known graph breaks, not yet fixed: strict xfails, so a fix shows up as XPASS.
BREAKS: dict = {}


def _cases():
    cases = []
    for task_name in SMALL:
        for name in get_task(task_name).models:
            marks = [] if (task_name, name) in DEFAULT else [pytest.mark.slow]
            if (task_name, name) in BREAKS:
                marks.append(pytest.mark.xfail(reason=BREAKS[task_name, name], strict=True))
            cases.append(pytest.param(task_name, name, marks=marks, id=f"{task_name}-{name}"))
    return cases


@functools.cache
def _info(task_name: str) -> dict:
    task = get_task(task_name)
    cli = {"quick": True, "out": "unused", "progress": False, **SMALL[task_name]}
    cfg = resolve_config(task.all_options(), cli_values=cli, quick_preset=task.quick_preset)
    return cfg, task.build_data(cfg).info


def _model_and_inputs(task_name: str, name: str):
    task = get_task(task_name)
    cfg, info = _info(task_name)
    torch.manual_seed(0)
    model = task.build_model(name, cfg, info).eval()
    g = torch.Generator().manual_seed(0)
    kwargs = {}
    if hasattr(model, "example_inputs"):
        inputs = tuple(model.example_inputs(g, dtype=torch.float32))
        if len(inputs) == 2 and isinstance(inputs[0], tuple) and isinstance(inputs[1], dict):
            inputs, kwargs = inputs  # the frames' convention: (args, kwargs)
    else:
        spec = task.audit_spec(name, model, info)
        inputs = tuple(x.float() if x.is_floating_point() else x for x in spec.inputs)
    if task_name == "molecules":
        # the forces come from autograd, which dynamo does not trace in a forward: compile the energy
        kwargs = {**kwargs, "compute_forces": False}
    return model, inputs, kwargs


def _first(out):
    return out[0] if isinstance(out, tuple) else out


@pytest.mark.parametrize("task_name, name", _cases())
def test_model_compiles_as_one_graph_equal_to_eager(task_name, name):
    model, inputs, kwargs = _model_and_inputs(task_name, name)
    with torch.no_grad():
        model(*inputs, **kwargs)  # fills the cached tables (built once, on the host) before tracing
    torch._dynamo.reset()
    explained = torch._dynamo.explain(model)(*inputs, **kwargs)
    assert explained.graph_break_count == 0, explained.break_reasons
    torch._dynamo.reset()
    with torch.no_grad():
        expected = _first(model(*inputs, **kwargs))
        compiled = _first(torch.compile(model, fullgraph=True)(*inputs, **kwargs))
    torch.testing.assert_close(compiled, expected, rtol=RTOL, atol=ATOL)
