"""A compiled model serves batches of other sizes without recompiling (issue 21).

The batch and item dims that :mod:`geomlin.deploy` declares dynamic (the models' ``export_shapes`` say which
are static, and why) are marked dynamic; after the first call, a call with one more batch entry and
one item fewer must reuse the same graph (dynamo's count of compiled graphs stays at one) and give
the eager output (float32, rtol 1e-5). ``aot_eager`` compiles: recompilation is decided by dynamo's
guards, before any backend runs. The default run keeps two cheap models; the rest are slow.
"""

import pytest
import torch

from geomlin import deploy
from geomlin.train import get_task
from tests.compile.test_export import export_case, resized
from tests.compile.test_models_compile import SMALL

RTOL, ATOL = 1e-5, 1e-5
DEFAULT = {("pointcloud", "pointnet"), ("nbody", "egnn")}


def _cases():
    return [pytest.param(t, n, id=f"{t}-{n}", marks=[] if (t, n) in DEFAULT else [pytest.mark.slow])
            for t in SMALL for n in get_task(t).models]


def _mark(model, args, kwargs):
    static_items = deploy.items_range(model) is None
    for x in (*args, *kwargs.values()):
        if isinstance(x, torch.Tensor) and x.ndim >= 1:
            torch._dynamo.mark_dynamic(x, 0)
            if x.ndim >= 2 and not static_items:
                torch._dynamo.mark_dynamic(x, 1)


def _first(out):
    return out[0] if isinstance(out, tuple) else out


@pytest.mark.parametrize("task_name, name", _cases())
def test_compiled_model_takes_new_sizes_without_recompiling(task_name, name):
    model, args, kwargs = export_case(task_name, name)
    if task_name == "molecules":
        kwargs = {**kwargs, "compute_forces": False}  # the energy: forces come from autograd around it
    new_args, new_kwargs = resized(model, args, kwargs)
    with torch.no_grad():
        model(*args, **kwargs)  # fills the host-side table caches (the Gaunt tables per device and dtype) first
    _mark(model, args, kwargs)
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    with torch.no_grad():
        compiled(*args, **kwargs)
        got = _first(compiled(*new_args, **new_kwargs))
        expected = _first(model(*new_args, **new_kwargs))
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 1, "recompiled for a new batch size"
    torch.testing.assert_close(got, expected, rtol=RTOL, atol=ATOL)
