"""Exporting and packaging models: ``torch.export`` programs with dynamic sizes and AOTInductor packages.

[`export`][] turns a model into a ``torch.export.ExportedProgram`` whose batch and item sizes
are symbolic ([`dynamic_shapes`][] declares which dims are free), [`package`][] compiles one
with AOTInductor into a ``.pt2`` file that runs without Python model code (and without geomlin),
with geomlin's metadata stored inside, and [`load`][] / [`read_metadata`][] read it back.

Which sizes are dynamic
    Every tensor input's dim 0 is the batch (``Dim("batch", 1..MAX_BATCH)``) and dim 1 of every
    tensor with two or more dims is the items (points, atoms, bodies:
    ``Dim("items", 2..MAX_ITEMS)``); feature dims (``3``, channels) stay static. Exceptions are
    listed in [`SHAPE_RULES`][], one place, with the reason for each.

Potentials (energy and forces)
    A module with an ``energy(pos, species)`` method (the molecule models of ``geomlin train
    molecules``) is exported as ``(pos, species) -> (energy (B,), forces (B, N, 3))`` with
    ``forces = -dE/dpos``. ``torch.export`` of a ``forward`` that calls ``torch.autograd.grad``
    fails in PyTorch 2.13 (fake tensors left among the lifted constants, or symbolic sizes not
    tracked; pytorch/pytorch#125984, #187907). The documented workaround (the one NequIP uses):
    first trace the forward *and* its backward with ``make_fx(tracing_mode="symbolic")``, which
    runs the autograd engine under the tracer and records the backward's ATen ops into one plain
    graph, then ``torch.export`` that graph. Duck shaping is off while tracing (a batch that
    happens to equal a feature size would otherwise be tied to it), and the tracing runs with
    ``torch.compiler.is_compiling()`` true, so geomlin takes the same sync-free paths as under
    ``torch.compile`` (no value reads on the host).

What is checked where
    At the eager boundary (the model's own ``forward`` in Python) every check of
    [`geomlin.validation`][] runs. Inside an exported program or package: the tensor layouts
    (ranks, static sizes, dtypes) and the declared size ranges are checked by the runtime
    before the graph runs (a wrong shape is refused); value checks made with
    [`geomlin.validation.check_condition`][] (species in range, batch vectors) become
    ``torch._assert_async`` ops of the graph and raise ``RuntimeError`` with their message when
    they fail. Checks made on the host with Python reads (NaN in positions, "is this a
    rotation") are skipped while tracing: a package does not check them.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from geomlin.io_atomic import atomic_write
from geomlin.models.md import EnergyAndForces

#: Largest batch (dim 0) an exported program accepts.
MAX_BATCH = 1024
#: Largest number of items (dim 1: points, atoms, bodies) an exported program accepts.
MAX_ITEMS = 4096
#: Smallest number of items (PyTorch specialises sizes 0 and 1, so a dynamic dim starts at 2).
MIN_ITEMS = 2
#: Key of geomlin's metadata (one JSON string) in a package's AOTInductor metadata.
METADATA_KEY = "geomlin"
#: Format marker of a geomlin package.
PACKAGE_FORMAT = "geomlin-aoti-package"


@dataclass(frozen=True)
class ShapeRule:
    """How a model's items dim departs from the default (dynamic in ``MIN_ITEMS..MAX_ITEMS``).

    Parameters
    ----------
    static_items : bool
        The items dim is fixed to the example's size.
    min_items : int
        Smallest items size.
    max_items_attr : str or None
        Name of a model attribute bounding the items size from above.
    reason : str
        Why (shown by [`describe_dims`][] and in the package metadata).
    """

    static_items: bool = False
    min_items: int = MIN_ITEMS
    max_items_attr: str | None = None
    reason: str = ""


#: The models whose items dim is not the default, by class name, with the reason.
SHAPE_RULES: dict[str, ShapeRule] = {
    "MLPDynamics": ShapeRule(
        static_items=True,
        reason="a Linear layer reads all bodies flattened (in_features = 7 num_particles): the body count "
               "is part of the weights"),
    "MoleculeEnergyModel": ShapeRule(
        min_items=3,
        reason="the dense pair list has N - 1 neighbours per atom; PyTorch specialises a size of 1, so a "
               "program for any N >= 3 cannot also take N = 2 (pad a diatomic molecule to 3 atoms)"),
}


def is_potential(model: nn.Module) -> bool:
    """Whether ``model`` is exported as energy and forces: it has an ``energy(pos, species)`` method."""
    return callable(getattr(model, "energy", None))


def _bind(model: nn.Module, args: tuple, kwargs: dict) -> inspect.BoundArguments:
    return inspect.signature(model.forward).bind(*args, **kwargs)


def dynamic_shapes(model: nn.Module, args: tuple, kwargs: dict | None = None) -> dict:
    """The ``dynamic_shapes`` of ``torch.export.export`` for ``model(*args, **kwargs)``.

    Parameters
    ----------
    model : nn.Module
        The model; its class name selects a rule of [`SHAPE_RULES`][].
    args, kwargs
        Example inputs. Tensors ``(B, ...)`` get ``{0: batch}``, tensors ``(B, N, ...)``
        ``{0: batch, 1: items}``; other values ``None``.

    Returns
    -------
    dict
        Keyed by the ``forward`` parameters given (a ``**kwargs`` parameter maps to a dict), as
        ``torch.export.export`` expects.
    """
    kwargs = dict(kwargs or {})
    rule = SHAPE_RULES.get(type(model).__name__, ShapeRule())
    batch = torch.export.Dim("batch", min=1, max=MAX_BATCH)
    max_items = MAX_ITEMS if rule.max_items_attr is None else int(getattr(model, rule.max_items_attr))
    items = None if rule.static_items else torch.export.Dim("items", min=rule.min_items, max=max_items)

    def spec(x):
        if not isinstance(x, Tensor) or x.ndim == 0:
            return None
        dims = {0: batch}
        if x.ndim >= 2 and items is not None:
            dims[1] = items
        return dims

    bound = _bind(model, args, kwargs)
    params = inspect.signature(model.forward).parameters
    out = {}
    for name, value in bound.arguments.items():
        kind = params[name].kind
        if kind is inspect.Parameter.VAR_KEYWORD:
            out[name] = {k: spec(v) for k, v in value.items()}
        elif kind is inspect.Parameter.VAR_POSITIONAL:
            out[name] = tuple(spec(v) for v in value)
        else:
            out[name] = spec(value)
    return out


def describe_dims(model: nn.Module) -> dict:
    """The dynamic dims of ``model`` in words: ``{"batch": "1..1024", "items": "2..4096", "reason": ...}``."""
    rule = SHAPE_RULES.get(type(model).__name__, ShapeRule())
    max_items = MAX_ITEMS if rule.max_items_attr is None else int(getattr(model, rule.max_items_attr))
    items = "static" if rule.static_items else f"{rule.min_items}..{max_items}"
    out = {"batch": f"1..{MAX_BATCH}", "items": items}
    if rule.reason:
        out["reason"] = rule.reason
    return out


@contextlib.contextmanager
def _tracing_like_compile():
    """``torch.compiler.is_compiling()`` true and duck shaping off, for ``make_fx`` (see the module docstring)."""
    config = torch.fx.experimental._config
    duck = config.use_duck_shape
    config.use_duck_shape = False
    try:
        with torch.compiler._compile_session_context():
            yield
    finally:
        config.use_duck_shape = duck


def _forces_graph(model: nn.Module, args: tuple) -> torch.fx.GraphModule:
    """The forward and backward of the eager [`EnergyAndForces`][geomlin.models.md.EnergyAndForces] step
    as one ATen graph (``make_fx``)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    wrapper = EnergyAndForces(model, backend=None).eval()
    with _tracing_like_compile():
        return make_fx(wrapper, tracing_mode="symbolic", _allow_non_fake_inputs=True,
                       _error_on_data_dependent_ops=True)(*[a.clone() for a in args])


def export(model: nn.Module, args: tuple, kwargs: dict | None = None, *,
           dynamic: bool = True) -> torch.export.ExportedProgram:
    """``torch.export`` of ``model(*args, **kwargs)`` with the dims of [`dynamic_shapes`][] free.

    Parameters
    ----------
    model : nn.Module
        Put in eval mode (in place). Run once on ``args`` first, which fills the host-side tables
        that are built once (tracing must not build them). A potential ([`is_potential`][])
        is exported as ``(pos (B, N, 3), species (B, N)) -> (energy (B,), forces (B, N, 3))``;
        pass ``kwargs={"compute_forces": False}`` for the energy alone.
    args, kwargs
        Example inputs (float32 for a float32 program).
    dynamic : bool
        Free the batch and items dims; ``False`` exports for the example's sizes only.

    Returns
    -------
    torch.export.ExportedProgram
        ``program.module()(*args, **kwargs)`` runs it; [`package`][] compiles it.
    """
    kwargs = dict(kwargs or {})
    model.eval()
    args = tuple(args)
    with torch.no_grad():
        model(*args, **kwargs)
    forces = is_potential(model) and kwargs.get("compute_forces", True)
    if forces:
        extra = set(kwargs) - {"compute_forces"}
        if extra or len(args) != 2:
            raise ValueError(f"a potential is exported as (pos, species) -> (energy, forces); got {len(args)} "
                             f"positional inputs and keyword inputs {sorted(kwargs)}")
        graph = _forces_graph(model, args)
        shapes = dynamic_shapes(model, args) if dynamic else None
        shapes = None if shapes is None else (shapes["pos"], shapes["species"])
        return torch.export.export(graph, args, dynamic_shapes=shapes)
    shapes = dynamic_shapes(model, args, kwargs) if dynamic else None
    params = inspect.signature(model.forward).parameters.values()
    if kwargs and any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        # torch.export 2.13 cannot match dynamic shapes to a ``**kwargs`` parameter: the keyword
        # inputs become positional ones after ``args``, in the order given
        wrapper = KeywordsAsPositional(model, len(args), tuple(kwargs))
        flat = (*args, *kwargs.values())
        shapes = None if shapes is None else {"inputs": tuple(_flat_specs(shapes))}
        return torch.export.export(wrapper, flat, dynamic_shapes=shapes)
    return torch.export.export(model, args, kwargs, dynamic_shapes=shapes)


def program_inputs(model: nn.Module, args: tuple, kwargs: dict | None = None) -> tuple[tuple, dict]:
    """The ``(args, kwargs)`` that the program of [`export`][] (and a package) takes for ``model(*args, **kwargs)``.

    The same, except for a potential (``(pos, species)``, ``compute_forces`` dropped) and for a
    ``forward(..., **kwargs)`` model, whose keyword inputs come after ``args`` by position.
    """
    kwargs = dict(kwargs or {})
    if is_potential(model) and kwargs.get("compute_forces", True):
        return tuple(args), {}
    params = inspect.signature(model.forward).parameters.values()
    if kwargs and any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return (*args, *kwargs.values()), {}
    return tuple(args), kwargs


def fit_inputs(model: nn.Module, args: tuple, kwargs: dict | None = None) -> tuple[tuple, dict]:
    """Example inputs cut to the items a program of ``model`` takes (a [`SHAPE_RULES`][] bound), else unchanged."""
    kwargs = dict(kwargs or {})
    rule = SHAPE_RULES.get(type(model).__name__, ShapeRule())
    if rule.max_items_attr is None:
        return tuple(args), kwargs
    top = int(getattr(model, rule.max_items_attr))

    def cut(x):
        return x[:, :top].contiguous() if isinstance(x, Tensor) and x.ndim >= 2 else x

    return tuple(cut(a) for a in args), {k: cut(v) for k, v in kwargs.items()}


def _flat_specs(shapes: dict) -> list:
    out = []
    for value in shapes.values():
        if isinstance(value, dict) and not all(isinstance(k, int) for k in value):
            out.extend(value.values())
        elif isinstance(value, tuple):
            out.extend(value)
        else:
            out.append(value)
    return out


class KeywordsAsPositional(nn.Module):
    """``model(*inputs[:num_args], **dict(zip(names, inputs[num_args:])))``: keyword inputs passed by position.

    The exported form of a model whose ``forward`` takes ``**kwargs`` (the frames wrappers).
    """

    def __init__(self, model: nn.Module, num_args: int, names: tuple[str, ...]):
        super().__init__()
        self.model = model
        self.num_args = num_args
        self.names = names

    def forward(self, *inputs: Tensor):
        n = self.num_args
        return self.model(*inputs[:n], **dict(zip(self.names, inputs[n:])))


def _describe(x) -> dict | str:
    if isinstance(x, Tensor):
        return {"shape": list(x.shape), "dtype": str(x.dtype).removeprefix("torch.")}
    return repr(x)


def _types(model: nn.Module, attr: str) -> str:
    value = getattr(model, attr, None)
    return "" if value is None else repr(value)


def build_metadata(model: nn.Module, args: tuple, kwargs: dict | None = None, extra: dict | None = None) -> dict:
    """geomlin's metadata of a package of ``model``: version, class, feature types, inputs, dims.

    ``extra`` (``{"task": "nbody", "model": "gatr"}``) is added as is (JSON values).
    """
    extra = dict(extra or {})
    import geomlin

    kwargs = dict(kwargs or {})
    potential = is_potential(model) and kwargs.get("compute_forces", True)
    bound = _bind(model, tuple(args), kwargs)
    inputs = {}
    for name, value in bound.arguments.items():
        if isinstance(value, dict):
            inputs.update({k: _describe(v) for k, v in value.items()})
        else:
            inputs[name] = _describe(value)
    return {"format": PACKAGE_FORMAT, "geomlin_version": geomlin.__version__, "torch_version": torch.__version__,
            "class": type(model).__name__, "type_in": _types(model, "type_in"), "type_out": _types(model, "type_out"),
            "outputs": "energy, forces" if potential else "", "inputs": inputs, "dynamic_dims": describe_dims(model),
            **extra}


def package(model: nn.Module, path: str | Path, args: tuple, kwargs: dict | None = None, *,
            metadata: dict | None = None, dynamic: bool = True) -> dict:
    """Compile ``model`` with AOTInductor into the package ``path`` (``.pt2``), written atomically.

    Parameters
    ----------
    model, args, kwargs, dynamic
        As for [`export`][].
    path : str or Path
        The ``.pt2`` file (replaced if it exists; its folder must exist).
    metadata : dict, optional
        Extra entries (``task``, ``model``, the run's config), JSON values, for [`build_metadata`][].

    Returns
    -------
    dict
        The metadata stored in the package, with ``export_seconds`` and ``compile_seconds``.
    """
    start = time.perf_counter()
    program = export(model, args, kwargs, dynamic=dynamic)
    exported = time.perf_counter()
    meta = build_metadata(model, args, kwargs, extra=metadata)
    configs = {"aot_inductor.metadata": {METADATA_KEY: json.dumps(meta, sort_keys=True, default=str)}}
    atomic_write(path, lambda fh: torch._inductor.aoti_compile_and_package(
        program, package_path=fh, inductor_configs=configs), hint="pass another --out")
    return {**meta, "export_seconds": exported - start, "compile_seconds": time.perf_counter() - exported}


class LoadedPackage:
    """A package loaded by [`load`][]: call it like the exported program.

    A compiled program assumes the strides it was traced with (contiguous) and does not check
    them: a transposed view gives wrong numbers without an error (measured with PyTorch 2.13). So
    every tensor input is made contiguous here; call ``torch._inductor.aoti_load_package``'s
    model directly only with contiguous tensors of the exported dtype.
    """

    def __init__(self, compiled):
        self.compiled = compiled

    def __call__(self, *args, **kwargs):
        def contiguous(x):
            return x.contiguous() if isinstance(x, Tensor) else x

        return self.compiled(*map(contiguous, args), **{k: contiguous(v) for k, v in kwargs.items()})

    def get_metadata(self) -> dict[str, str]:
        """The package's AOTInductor metadata (string to string; geomlin's under [`METADATA_KEY`][])."""
        return self.compiled.get_metadata()


def load(path: str | Path) -> LoadedPackage:
    """The compiled model of a package (``torch._inductor.aoti_load_package``), see [`LoadedPackage`][]."""
    return LoadedPackage(torch._inductor.aoti_load_package(str(path)))


def read_metadata(loaded) -> dict:
    """geomlin's metadata of a package loaded by [`load`][] (``{}`` for a package geomlin did not write)."""
    text = loaded.get_metadata().get(METADATA_KEY)
    return json.loads(text) if text else {}
