"""Every equivariant module class declares its feature types and passes ``assert_equivariant(module)``
with no other argument (float64, 1e-9, reflections where the group has them).

Classes are found by walking the ``geomlin`` package, so a new module without a declaration fails
:func:`test_every_module_class_is_listed`. Each test folder lists its classes in a
``declared_examples.py`` with

* ``EXAMPLES``: ``{class: [factory, ...]}``, each factory returning a module (or
  ``(module, options)`` with keyword options for :func:`assert_equivariant`, e.g. a smaller group);
* ``NOT_EQUIVARIANT``: ``{class: reason}`` for modules that make no equivariance claim
  (plain backbones, baselines, abstract bases).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils._pytree import tree_map

import geomlin
from geomlin.reps import declared_types
from geomlin.reps.declarations import example_inputs
from geomlin.testing import assert_equivariant

TESTS = Path(__file__).parent
#: Modules not imported by the walk: optional GPU kernels need triton at import time.
SKIP_IMPORT = ("geomlin.gaunt.kernels.triton",)


def _geomlin_module_classes() -> list[type]:
    found = {}
    for info in pkgutil.walk_packages(geomlin.__path__, "geomlin."):
        if info.name.startswith(SKIP_IMPORT) or info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, nn.Module) and obj.__module__ == module.__name__ and not obj.__name__.startswith("_"):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return [found[k] for k in sorted(found)]


def _registries() -> tuple[dict, dict]:
    examples, exempt = {}, {}
    for path in sorted(TESTS.rglob("declared_examples.py")):
        rel = path.relative_to(TESTS.parent).with_suffix("")
        module = importlib.import_module(".".join(rel.parts))
        examples.update(getattr(module, "EXAMPLES", {}))
        exempt.update(getattr(module, "NOT_EQUIVARIANT", {}))
    return examples, exempt


CLASSES = _geomlin_module_classes()
EXAMPLES, NOT_EQUIVARIANT = _registries()
CASES = [(cls, i, f) for cls, fs in EXAMPLES.items() for i, f in enumerate(fs)]
IDS = [f"{c.__name__}-{i}" for c, i, _ in CASES]


def _float32(tree):
    return tree_map(lambda t: t.float() if isinstance(t, torch.Tensor) and t.is_floating_point() else t, tree)


def build_case(factory, index: int, requires_grad: bool = False):
    """A declared example in float32: ``(module, args, kwargs)``, the float inputs requiring grad on request.

    The inputs are the factory's ``options["inputs"]`` / ``options["kwargs"]`` when it gives them, else
    :func:`~geomlin.reps.declarations.example_inputs` of the module (seeded by ``index``).
    """
    torch.manual_seed(index)
    made = factory()
    module, options = made if isinstance(made, tuple) else (made, {})
    module = module.float()
    if "inputs" in options:
        args = options["inputs"]
        args = args if isinstance(args, tuple) else (args,)
        kwargs = options.get("kwargs", {})
    else:
        args, kwargs = example_inputs(module, generator=torch.Generator().manual_seed(index), dtype=torch.float32)
    args, kwargs = _float32(args), _float32(kwargs)
    if requires_grad:
        args = tree_map(lambda t: t.detach().requires_grad_() if isinstance(t, torch.Tensor) and t.is_floating_point()
                        else t, args)
    return module, args, kwargs


def test_every_module_class_is_listed():
    missing = [f"{c.__module__}.{c.__qualname__}" for c in CLASSES if c not in EXAMPLES and c not in NOT_EQUIVARIANT]
    assert not missing, ("module classes with neither an equivariance example nor a NOT_EQUIVARIANT reason "
                         "(add them to tests/<area>/declared_examples.py): " + ", ".join(missing))


def test_exempt_classes_give_a_reason():
    for cls, reason in NOT_EQUIVARIANT.items():
        assert isinstance(reason, str) and len(reason) > 10, cls


@pytest.mark.parametrize("cls,index,factory", CASES, ids=IDS)
def test_declared_module_is_equivariant(cls, index, factory):
    torch.manual_seed(index)
    made = factory()
    module, options = made if isinstance(made, tuple) else (made, {})
    assert isinstance(module, cls)
    declared_types(module)  # declares type_in / type_out
    module = module.double()
    assert_equivariant(module, **options)
