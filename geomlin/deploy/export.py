"""``torch.export`` programs with dynamic sizes and AOTInductor packages of geomlin's models.

See [`geomlin.deploy`][] for which sizes are dynamic, how potentials are exported with their
forces, and what is checked where.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import time
from pathlib import Path

import torch
from torch import Tensor, nn

from geomlin.io_atomic import atomic_write
from geomlin.models.md import EnergyAndForces
from geomlin.reps.declarations import ExportShapes

#: Largest batch (dim 0) an exported program accepts.
MAX_BATCH = 1024
#: Largest number of items (dim 1: points, atoms, bodies) an exported program accepts.
MAX_ITEMS = 4096
#: Smallest number of items (PyTorch specialises sizes 0 and 1, so a dynamic dim starts at 2).
MIN_ITEMS = ExportShapes.min_items
#: Largest numbers of atoms and of edges a periodic program ([`is_periodic`][]) accepts.
MAX_ATOMS = 1_000_000
MAX_EDGES = 200_000_000
#: The inputs of a periodic program, in order (those of [`PeriodicStep`][geomlin.models.energy.PeriodicStep]).
PERIODIC_INPUTS = ("pos", "species", "edge_index", "shift", "cell")
#: What a potential's program returns, as its metadata says (``outputs``).
POTENTIAL_OUTPUTS = "energy, forces"
PERIODIC_OUTPUTS = "energy, forces, stress"
#: Key of geomlin's metadata (one JSON string) in a package's AOTInductor metadata.
METADATA_KEY = "geomlin"
#: Format marker of a geomlin package.
PACKAGE_FORMAT = "geomlin-aoti-package"


def export_shapes(model: nn.Module) -> ExportShapes:
    """The items rule of ``model``: its class attribute ``export_shapes``, else the default.

    An [`EnergyAndForces`][geomlin.models.md.EnergyAndForces] wrapper takes its potential's rule.
    """
    if isinstance(model, EnergyAndForces):
        model = model.potential
    rule = getattr(type(model), "export_shapes", None)
    return rule if isinstance(rule, ExportShapes) else ExportShapes()


def items_range(model: nn.Module) -> tuple[int, int] | None:
    """``(min, max)`` items of a program of ``model``, or None when the items dim is static."""
    rule = export_shapes(model)
    if rule.static_items:
        return None
    inner = model.potential if isinstance(model, EnergyAndForces) else model
    top = MAX_ITEMS if rule.max_items_attr is None else int(getattr(inner, rule.max_items_attr))
    return rule.min_items, top


def is_potential(model: nn.Module) -> bool:
    """Whether ``model`` is exported as energy and forces: it has an ``energy(pos, species)`` method or is an
    [`EnergyAndForces`][geomlin.models.md.EnergyAndForces] step."""
    return isinstance(model, EnergyAndForces) or callable(getattr(model, "energy", None))


def is_periodic(model: nn.Module, kwargs: dict | None) -> bool:
    """Whether ``model`` with keyword inputs ``kwargs`` is exported as a periodic program: a potential given
    ``edge_index``, ``shift`` and ``cell`` (the inputs of [`PeriodicStep`][geomlin.models.energy.PeriodicStep])."""
    return is_potential(model) and set(kwargs or {}) == set(PERIODIC_INPUTS[2:])


def _bind(model: nn.Module, args: tuple, kwargs: dict) -> inspect.BoundArguments:
    return inspect.signature(model.forward).bind(*args, **kwargs)


def check_example_sizes(model: nn.Module, args: tuple, kwargs: dict | None = None) -> None:
    """Refuse example inputs whose sizes cannot become the free dims of [`dynamic_shapes`][].

    PyTorch specialises a dim of size 1, so an example batch of one (or fewer items than the
    model's [`items_range`][]) would export a program for that size alone; ``torch.export`` then
    fails with a constraint violation that names neither the input nor the fix. The example of a
    periodic program needs at least ``MIN_ITEMS`` atoms and edges.
    """
    kwargs = dict(kwargs or {})
    if is_periodic(model, kwargs):
        pos, edge_index = (args[0] if args else None), kwargs["edge_index"]
        for name, size in (("atoms (pos.shape[0])", None if pos is None else pos.shape[0]),
                           ("edges (edge_index.shape[1])", edge_index.shape[1] if edge_index.ndim == 2 else None)):
            if size is not None and size < MIN_ITEMS:
                raise ValueError(f"export needs an example with at least {MIN_ITEMS} {name}, got {size}: PyTorch "
                                 f"specialises sizes 0 and 1, so a smaller example cannot stand for any size")
        return
    span = items_range(model)
    for name, value in _bind(model, args, kwargs).arguments.items():
        tensors = value.items() if isinstance(value, dict) else [(name, value)]
        if isinstance(value, tuple):
            tensors = [(f"{name}[{i}]", v) for i, v in enumerate(value)]
        for label, x in tensors:
            if not isinstance(x, Tensor) or x.ndim == 0:
                continue
            if x.shape[0] < 2:
                raise ValueError(f"export needs an example batch of at least 2, got {label} with shape "
                                 f"{tuple(x.shape)}: PyTorch specialises a dim of size 1, so it cannot become the "
                                 f"free batch dim (1..{MAX_BATCH}); repeat the example (torch.cat([x, x])), the "
                                 f"program still takes a batch of one")
            if span is not None and x.ndim >= 2 and x.shape[1] < span[0]:
                raise ValueError(f"export needs an example of at least {span[0]} items (dim 1), got {label} with "
                                 f"shape {tuple(x.shape)}: {export_shapes(model).reason or 'PyTorch specialises sizes 0 and 1'}")


def dynamic_shapes(model: nn.Module, args: tuple, kwargs: dict | None = None) -> dict:
    """The ``dynamic_shapes`` of ``torch.export.export`` for ``model(*args, **kwargs)``.

    Parameters
    ----------
    model : nn.Module
        The model; its [`export_shapes`][] say how far the items dim may vary.
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
    batch = torch.export.Dim("batch", min=1, max=MAX_BATCH)
    span = items_range(model)
    items = None if span is None else torch.export.Dim("items", min=span[0], max=span[1])

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
    rule, span = export_shapes(model), items_range(model)
    items = "static" if span is None else f"{span[0]}..{span[1]}"
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

    potential = model.potential if isinstance(model, EnergyAndForces) else model
    wrapper = EnergyAndForces(potential, backend=None).eval()
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
        pass ``kwargs={"compute_forces": False}`` for the energy alone. With ``kwargs`` holding
        ``edge_index``, ``shift`` and ``cell`` (one periodic cell, [`is_periodic`][]) it is exported
        as the periodic program ``(pos (N, 3), species (N,), edge_index (2, E), shift (E, 3),
        cell (1, 3, 3)) -> (energy (1,), forces (N, 3), stress (1, 3, 3))`` of
        [`PeriodicStep`][geomlin.models.energy.PeriodicStep], with ``N`` atoms and ``E`` edges free.
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
    args = tuple(args)
    if is_periodic(model, kwargs):
        if dynamic:
            check_example_sizes(model, args, kwargs)
        return _export_periodic(model, args, kwargs, dynamic)
    forces = is_potential(model) and kwargs.get("compute_forces", True)
    if forces:  # checked before the model runs, so that its own check does not answer first
        extra = set(kwargs) - {"compute_forces"}
        if extra or len(args) != 2:
            raise ValueError(f"a potential is exported as (pos, species) -> (energy, forces); got {len(args)} "
                             f"positional input(s) and keyword inputs {sorted(kwargs)}")
    try:
        _bind(model, args, kwargs)
    except TypeError as exc:
        raise TypeError(f"{type(model).__name__}.forward cannot take the example inputs ({len(args)} positional, "
                        f"keywords {sorted(kwargs)}): {exc}") from None
    if dynamic:
        check_example_sizes(model, args, kwargs)
    if isinstance(model, EnergyAndForces) and not forces:
        raise ValueError("an EnergyAndForces step always returns energy and forces; export its potential for the "
                         "energy alone")
    model.eval()
    with torch.no_grad():  # eager, also for a compiled EnergyAndForces: its potential
        (model.potential if isinstance(model, EnergyAndForces) else model)(*args, **kwargs)
    if forces:
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


def _export_periodic(model: nn.Module, args: tuple, kwargs: dict, dynamic: bool) -> torch.export.ExportedProgram:
    """The periodic program of a potential (see [`export`][]): forward and backward traced by ``make_fx``."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from geomlin.models.energy import PeriodicStep

    if len(args) != 2:
        raise ValueError(f"a periodic potential is exported with (pos, species) and the keyword inputs edge_index, "
                         f"shift and cell; got {len(args)} positional input(s)")
    step = PeriodicStep(model.potential if isinstance(model, EnergyAndForces) else model).eval()
    inputs = (*args, *(kwargs[name] for name in PERIODIC_INPUTS[2:]))
    step(*inputs)  # eager first: fills the tables built once
    with _tracing_like_compile():
        graph = make_fx(step, tracing_mode="symbolic", _allow_non_fake_inputs=True,
                        _error_on_data_dependent_ops=True)(*[a.clone() for a in inputs])
    shapes = None
    if dynamic:
        atoms = torch.export.Dim("atoms", min=MIN_ITEMS, max=MAX_ATOMS)
        edges = torch.export.Dim("edges", min=MIN_ITEMS, max=MAX_EDGES)
        shapes = ({0: atoms}, {0: atoms}, {1: edges}, {0: edges}, None)
    return torch.export.export(graph, inputs, dynamic_shapes=shapes)


def program_inputs(model: nn.Module, args: tuple, kwargs: dict | None = None) -> tuple[tuple, dict]:
    """The ``(args, kwargs)`` that the program of [`export`][] (and a package) takes for ``model(*args, **kwargs)``.

    The same, except for a potential (``(pos, species)``, ``compute_forces`` dropped) and for a
    ``forward(..., **kwargs)`` model, whose keyword inputs come after ``args`` by position.
    """
    kwargs = dict(kwargs or {})
    if is_periodic(model, kwargs):
        return (*args, *(kwargs[name] for name in PERIODIC_INPUTS[2:])), {}
    if is_potential(model) and kwargs.get("compute_forces", True):
        return tuple(args), {}
    params = inspect.signature(model.forward).parameters.values()
    if kwargs and any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return (*args, *kwargs.values()), {}
    return tuple(args), kwargs


def fit_inputs(model: nn.Module, args: tuple, kwargs: dict | None = None) -> tuple[tuple, dict]:
    """Example inputs cut to the items a program of ``model`` takes (an [`export_shapes`][] bound), else unchanged."""
    kwargs = dict(kwargs or {})
    span = items_range(model)
    if span is None or span[1] == MAX_ITEMS:
        return tuple(args), kwargs
    top = span[1]

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


def _labels(declared) -> int | None:
    """The class count of a declared ``Labels(n)`` input (species), else None."""
    return getattr(declared, "num_classes", None) if type(declared).__name__ == "Labels" else None


def input_specs(model: nn.Module, args: tuple, kwargs: dict | None = None, dynamic: bool = True) -> list[dict]:
    """What a package of ``model`` takes, input by input, in the order of [`program_inputs`][].

    Each entry: ``name``, ``dtype``, ``dims`` (per dim ``"batch"``, ``"items"`` or a static size),
    ``keyword`` (passed by name) and, for an input declared ``Labels(n)`` (species), ``labels: n``.
    [`PackagedModel`][geomlin.deploy.packaged.PackagedModel] checks every call against them.
    """
    kwargs = dict(kwargs or {})
    p_args, p_kwargs = program_inputs(model, args, kwargs)
    potential = is_potential(model) and kwargs.get("compute_forces", True)
    if is_periodic(model, kwargs):
        return _periodic_specs(model, p_args, dynamic)
    if potential:
        names = ["pos", "species"]
    else:
        positional = [n for n, v in _bind(model, tuple(args), {}).arguments.items() if not isinstance(v, tuple)]
        names = positional + [k for k in kwargs if k not in p_kwargs]
    inner = model.potential if isinstance(model, EnergyAndForces) else model
    declared = getattr(inner, "type_in", None)
    declared = declared if isinstance(declared, (tuple, list)) else (declared,)
    span = items_range(model) if dynamic else None
    specs = []
    for i, (name, value) in enumerate([*zip(names, p_args), *p_kwargs.items()]):
        if not isinstance(value, Tensor):
            continue
        dims = [int(n) for n in value.shape]
        if value.ndim >= 1 and dynamic:
            dims[0] = "batch"
        if value.ndim >= 2 and span is not None:
            dims[1] = "items"
        spec = {"name": name, "dtype": str(value.dtype).removeprefix("torch."), "dims": dims,
                "keyword": name in p_kwargs}
        labels = _labels(declared[i]) if i < len(declared) and i < len(p_args) else None
        if labels is not None:
            spec["labels"] = int(labels)
        specs.append(spec)
    return specs


def _periodic_specs(model: nn.Module, inputs: tuple, dynamic: bool) -> list[dict]:
    """The input specs of a periodic program: atoms and edges dims, species labels, edge indices in range."""
    dims = {"pos": ["atoms", 3], "species": ["atoms"], "edge_index": [2, "edges"], "shift": ["edges", 3],
            "cell": [1, 3, 3]}
    inner = model.potential if isinstance(model, EnergyAndForces) else model
    species = _labels((getattr(inner, "type_in", None) or (None, None))[1])
    specs = []
    for name, value in zip(PERIODIC_INPUTS, inputs):
        spec = {"name": name, "dtype": str(value.dtype).removeprefix("torch."), "keyword": False,
                "dims": dims[name] if dynamic else [int(n) for n in value.shape]}
        if name == "species" and species is not None:
            spec["labels"] = int(species)
        if name == "edge_index":
            spec["indexes"] = "atoms"
        specs.append(spec)
    return specs


def build_metadata(model: nn.Module, args: tuple, kwargs: dict | None = None, extra: dict | None = None,
                   dynamic: bool = True) -> dict:
    """geomlin's metadata of a package of ``model``: version, class, feature types, inputs, dims, units.

    ``extra`` (``{"task": "nbody", "model": "gatr"}``) is added as is (JSON values). A model
    loaded by [`geomlin.load`][geomlin.deploy.loading.load] brings its card's task, model name, units
    and data facts.
    """
    import geomlin

    kwargs, extra = dict(kwargs or {}), dict(extra or {})
    potential = is_potential(model) and kwargs.get("compute_forces", True)
    periodic = is_periodic(model, kwargs)
    bound = _bind(model, tuple(args), kwargs)
    inputs = {}
    for name, value in bound.arguments.items():
        if isinstance(value, dict):
            inputs.update({k: _describe(v) for k, v in value.items()})
        else:
            inputs[name] = _describe(value)
    span = items_range(model) if dynamic else None
    dims = {"batch": [1, MAX_BATCH] if dynamic else None, "items": None if span is None else list(span)}
    dynamic_dims = describe_dims(model) if dynamic else {"batch": "static", "items": "static"}
    if periodic:
        from geomlin.models.edges import neighbor_settings

        dims = {"atoms": [MIN_ITEMS, MAX_ATOMS], "edges": [MIN_ITEMS, MAX_EDGES]} if dynamic else {}
        dynamic_dims = {k: f"{a}..{b}" for k, (a, b) in dims.items()} or {"atoms": "static", "edges": "static"}
        cutoff, loop = neighbor_settings(model)
        extra.setdefault("neighbors", {"cutoff": cutoff, "loop": loop})
    specs = input_specs(model, args, kwargs, dynamic)
    card = getattr(model.potential if isinstance(model, EnergyAndForces) else model, "card", None)
    from_card = {} if card is None else card.as_metadata()
    device = next((str(a.device) for a in args if isinstance(a, Tensor)), "cpu")
    return {"format": PACKAGE_FORMAT, "geomlin_version": geomlin.__version__, "torch_version": torch.__version__,
            "class": type(model).__name__, "type_in": _types(model, "type_in"), "type_out": _types(model, "type_out"),
            "outputs": PERIODIC_OUTPUTS if periodic else POTENTIAL_OUTPUTS if potential else "", "inputs": inputs,
            "dynamic_dims": dynamic_dims,
            "program_inputs": specs, "dims": dims, "device": device, **from_card, **extra}


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
    meta = build_metadata(model, args, kwargs, extra=metadata, dynamic=dynamic)
    configs = {"aot_inductor.metadata": {METADATA_KEY: json.dumps(meta, sort_keys=True, default=str)}}
    atomic_write(path, lambda fh: torch._inductor.aoti_compile_and_package(
        program, package_path=fh, inductor_configs=configs), hint="pass another --out")
    return {**meta, "export_seconds": exported - start, "compile_seconds": time.perf_counter() - exported}
