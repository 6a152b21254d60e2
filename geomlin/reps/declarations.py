"""Module declarations: how a module says what its inputs and outputs are.

Every equivariant module in geomlin has two attributes:

* ``type_in`` — one [`FeatureType`][] per positional input of ``forward`` (a single type or
  a tuple; ``None`` marks an input that is not acted on);
* ``type_out`` — likewise for the outputs (a tuple when ``forward`` returns a tuple);

and may define ``example_inputs(generator=None, dtype=torch.float64) -> (args, kwargs)`` when
random tensors of the declared shapes are not valid inputs (masks, batch vectors, edge indices).
With these, [`geomlin.testing.assert_equivariant(module)`][geomlin.testing.assert_equivariant],
``geomlin audit`` and [`EquivariantSequential`][] need nothing else. e3nn modules' ``irreps_in`` /
``irreps_out`` are read as [`IrrepsRep`][] of O(3).

A model whose items dim (dim 1 of its inputs: points, atoms, bodies) cannot take any size says so
in a class attribute ``export_shapes`` ([`ExportShapes`][]), which [`geomlin.deploy`][] reads when
it exports the model with dynamic sizes.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch

from geomlin.reps.feature_type import EXAMPLE_BATCH, FeatureType, merge_groups
from geomlin.reps.irreps import IrrepsRep


@dataclass(frozen=True)
class ExportShapes:
    """How far a model's items dim (dim 1 of its inputs) may vary in an exported program.

    The default: any size in ``min_items..`` [`geomlin.deploy.MAX_ITEMS`][geomlin.deploy.export.MAX_ITEMS]. A model
    that departs from it declares its own as the class attribute ``export_shapes``.

    Parameters
    ----------
    static_items : bool
        The items dim is fixed to the example's size (a layer reads all items flattened).
    min_items : int
        Smallest items size (PyTorch specialises sizes 0 and 1, so a dynamic dim starts at 2).
    max_items_attr : str or None
        Name of an instance attribute bounding the items size from above.
    reason : str
        Why, in words (shown by [`geomlin.deploy.describe_dims`][geomlin.deploy.export.describe_dims] and stored in
        a package's metadata).
    """

    static_items: bool = False
    min_items: int = 2
    max_items_attr: str | None = None
    reason: str = ""


def _as_type_tuple(value, owner: str, attr: str) -> tuple:
    if is_irreps(value):
        return (IrrepsRep(value),)
    items = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    out = []
    for t in items:
        if is_irreps(t):
            t = IrrepsRep(t)
        if t is not None and not isinstance(t, FeatureType):
            raise TypeError(f"{owner}.{attr} must hold geomlin feature types (or None), got {type(t).__name__}")
        out.append(t)
    return tuple(out)


def is_irreps(x) -> bool:
    """True for e3nn ``Irreps``; never imports e3nn (an Irreps object means it is loaded already)."""
    o3 = sys.modules.get("e3nn.o3")
    return o3 is not None and isinstance(x, o3.Irreps)


def declared_types(module) -> tuple[tuple, tuple]:
    """``(types_in, types_out)`` of a module, as tuples with one entry per input / output.

    Reads ``type_in`` / ``type_out``; e3nn modules' ``irreps_in`` (or ``irreps_in1``,
    ``irreps_in2``) / ``irreps_out`` count as representations of O(3).
    """
    owner = type(module).__name__
    if hasattr(module, "type_in") and hasattr(module, "type_out"):
        return (_as_type_tuple(module.type_in, owner, "type_in"),
                _as_type_tuple(module.type_out, owner, "type_out"))
    if hasattr(module, "irreps_out"):
        if hasattr(module, "irreps_in1") and hasattr(module, "irreps_in2"):
            tin = _as_type_tuple((module.irreps_in1, module.irreps_in2), owner, "irreps_in")
        elif hasattr(module, "irreps_in"):
            tin = _as_type_tuple(module.irreps_in, owner, "irreps_in")
        else:
            tin = None
        if tin is not None:
            return tin, _as_type_tuple(module.irreps_out, owner, "irreps_out")
    raise TypeError(f"{owner} declares no feature types: give it type_in / type_out attributes "
                    "(geomlin.reps feature types), or pass the group and actions explicitly")


def declared_group(module):
    """The group a module is equivariant to: the smallest group acting on its declared types.

    ``None`` when every declared type is invariant.
    """
    types_in, types_out = declared_types(module)
    group = None
    for t in types_in + types_out:
        if t is not None:
            group = merge_groups(group, t.group, f"the feature types of {type(module).__name__}")
    return group


def example_inputs(module, generator: torch.Generator | None = None, dtype: torch.dtype = torch.float64,
                   batch: int = EXAMPLE_BATCH) -> tuple[tuple, dict]:
    """Valid random inputs ``(args, kwargs)`` for ``module``.

    The module's own ``example_inputs(generator=..., dtype=...)`` when it defines one (returning
    ``args`` or ``(args, kwargs)``), else one [`FeatureType.random`][] tensor per declared input.
    """
    own = getattr(module, "example_inputs", None)
    if callable(own):
        out = own(generator=generator, dtype=dtype)
        if isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], dict) and isinstance(out[0], tuple):
            return out
        return (out if isinstance(out, tuple) else (out,)), {}
    types_in, _ = declared_types(module)
    args = []
    for i, t in enumerate(types_in):
        if t is None:
            raise ValueError(f"{type(module).__name__}: input {i} has no declared type; define "
                             "example_inputs() or pass inputs=")
        args.append(t.random((batch,), generator=generator, dtype=dtype))
    return tuple(args), {}
