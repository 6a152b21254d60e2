"""The one equivariance checker every geomlin module and test uses.

``equivariance_error(fn, group, type_in, type_out, inputs=...)`` draws random
group elements ``g`` and measures, for every output of ``fn``,

    || fn(g . x) - g . fn(x) || / max(|| g . fn(x) ||, atol)

in float64. ``assert_equivariant`` raises when the worst case exceeds ``rtol``.

For a module that declares its feature types (``type_in`` / ``type_out``, see
[`geomlin.reps.declarations`][]) everything can be left out::

    assert_equivariant(module)               # group, actions and inputs from the declarations
    assert_equivariant(module, group=G)      # the declared actions under another group

**What a group is**

A [`geomlin.groups.SymmetryGroup`][geomlin.groups.base.SymmetryGroup] (matrix groups, E(d) / SE(d)
rigid motions, Pin(3,0,1) and the other versor groups), a name
[`geomlin.groups.as_group`][geomlin.groups.names.as_group] parses (``"SO(3)"``, ``"E3"``), or
anything else with ``sample(n, generator=None, dtype=...)`` returning ``n`` elements indexable as
``elements[i]``.

**How a tensor transforms (one per positional input / per output)**

* a feature type ([`geomlin.reps.FeatureType`][geomlin.reps.feature_type.FeatureType]): its
  ``act(g, x)``. ``Scalars()`` are unchanged, ``Vectors(d)`` rotate (``R x``, the rotation of a rigid
  motion), ``Positions(d)`` move (``R x + t``), a ``Rep`` acts by ``x @ rho(g).T``,
  ``Multivectors(algebra, C)`` by ``algebra.act(g, x)``;
* e3nn ``o3.Irreps``: ``x @ D(g).T`` on the last axis (O(3) with parity);
* ``None``: the input or output is not acted on (passed through unchanged, not compared);
* a plain callable ``action(g, x) -> x'``, the escape hatch for everything else.

Strings (``"vector"``) are refused with the feature type to use instead.

Keyword inputs of ``fn`` (masks, PyG batch vectors, edge indices) go in one dictionary,
``kwargs={"batch": batch, "mask": mask}``, and are passed to ``fn`` unchanged, both for ``x``
and for ``g . x`` (floating ones cast to the checker's dtype).

**Precision**

Everything runs in ``dtype`` (float64 by default): a module whose floating parameters or
buffers have another dtype is checked on a cast deep copy (the module itself is untouched),
and floating inputs are cast.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from geomlin.groups.base import SymmetryGroup
from geomlin.groups.names import as_group
from geomlin.reps.declarations import declared_group, declared_types, example_inputs, is_irreps
from geomlin.reps.feature_type import FeatureType, name_is_not_a_type
from geomlin.reps.types import Scalars

#: Default relative tolerance of [`assert_equivariant`][] (float64).
DEFAULT_RTOL = 1e-9
#: Output norms below this are compared absolutely (avoids 0/0 for zero outputs).
DEFAULT_ATOL = 1e-12
#: Default number of random group elements.
DEFAULT_SAMPLES = 10
#: Default number of generated inputs (their leading batch size).
DEFAULT_BATCH_SIZE = 4
#: Below this relative error a failure usually means float32 arithmetic or constants inside ``fn``.
FLOAT32_LEVEL = 1e-5

Action = Callable[[Any, Tensor], Tensor]


def _as_type(spec):
    """One declared type as the checker uses it: e3nn Irreps become an
    [`IrrepsRep`][geomlin.reps.irreps.IrrepsRep] (converted here, once, at the checker's entry);
    feature types, callables and ``None`` stay; strings and anything else are refused."""
    if spec is None or isinstance(spec, FeatureType):
        return spec
    if isinstance(spec, str):
        raise name_is_not_a_type(spec, "type_in and type_out")
    if is_irreps(spec):
        from geomlin.reps.irreps import IrrepsRep

        return IrrepsRep(spec)
    if callable(spec):
        return spec
    raise TypeError(f"type_in and type_out must be feature types of geomlin.reps, e3nn Irreps, callables "
                    f"action(g, x) or None, got {type(spec).__name__}")


def _action(spec) -> Action | None:
    """``action(g, x)`` of a converted type ([`_as_type`][])."""
    return spec.act if isinstance(spec, FeatureType) else spec


def _example_input(spec, batch: int, generator, dtype) -> Tensor:
    if isinstance(spec, FeatureType):
        return spec.random((batch,), generator=generator, dtype=dtype)
    raise ValueError(f"cannot generate an example input for action {spec!r}: pass inputs=")


def _check_shape(what: str, x, spec) -> None:
    """Refuse an output whose trailing shape is not its declared type's, before any action is applied to it
    (an action on the wrong axes would report a meaningless equivariance error)."""
    if not isinstance(spec, FeatureType):
        return
    if not isinstance(x, Tensor):
        raise TypeError(f"{what} is a {type(x).__name__}, but its declared type {spec!r} needs a tensor")
    shape = tuple(spec.shape)  # None: any size (image height and width)
    trailing = tuple(x.shape[x.ndim - len(shape):]) if x.ndim >= len(shape) else None
    if trailing is None or any(want is not None and have != want for have, want in zip(trailing, shape)):
        raise ValueError(f"{what} has shape {tuple(x.shape)}, which does not match its declared type "
                         f"{spec!r} (..., {', '.join('*' if n is None else str(n) for n in shape)})")


def _resolve(fn, group, type_in, type_out, inputs, kwargs, batch_size, generator, dtype):
    """Fill in what the caller left out from ``fn``'s declared feature types."""
    if (type_in is None) != (type_out is None):
        raise ValueError("give both type_in and type_out, or neither (to use the module's declared types)")
    if type_in is None:
        type_in, type_out = declared_types(fn)
        if group is None:
            group = declared_group(fn)
            if group is None:
                raise ValueError(f"every declared type of {type(fn).__name__} is invariant; pass a group to check")
        if inputs is None:
            inputs, own_kwargs = example_inputs(fn, generator=generator, dtype=dtype, batch=batch_size)
            kwargs = {**own_kwargs, **kwargs}
    elif group is None:
        raise ValueError("group is required when type_in and type_out are given explicitly")
    if isinstance(group, str):
        group = as_group(group)
    elif not isinstance(group, SymmetryGroup) and not hasattr(group, "sample"):
        raise TypeError(f"group must be a geomlin group, a group name such as 'SO(3)', or have a "
                        f"sample(n, generator, dtype) method, got {type(group).__name__}")
    return group, type_in, type_out, inputs, kwargs


def _as_tuple(x) -> tuple:
    if isinstance(x, tuple):
        return x
    if isinstance(x, list) and not isinstance(x, Tensor):
        return tuple(x)
    return (x,)


def _as_specs(x) -> tuple:
    """One type (or action) or a sequence of them; e3nn Irreps (a tuple subclass) count as one."""
    if is_irreps(x):
        return (x,)
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _in_dtype(x, dtype: torch.dtype):
    """A floating tensor cast to ``dtype``; anything else (masks, indices, None) unchanged."""
    return x.to(dtype) if isinstance(x, Tensor) and x.is_floating_point() else x


def _module_in_dtype(fn, dtype: torch.dtype):
    """``fn`` itself, or a deep copy cast to ``dtype`` when it is a module holding other floats."""
    if not isinstance(fn, torch.nn.Module):
        return fn
    tensors = [*fn.parameters(), *fn.buffers()]
    if all(t.dtype == dtype for t in tensors if t.is_floating_point()):
        return fn
    try:
        clone = copy.deepcopy(fn)
    except Exception as err:
        found = sorted({str(t.dtype) for t in tensors if t.is_floating_point() and t.dtype != dtype})
        raise TypeError(f"{type(fn).__name__} has {', '.join(found)} parameters and cannot be copied to "
                        f"check it in {dtype}; pass module.to({dtype}) instead") from err
    return clone.to(dtype)


def _check_finite(name: str, t: Tensor) -> None:
    if not isinstance(t, Tensor):
        return
    if t.is_floating_point() and not torch.isfinite(t).all():
        raise ValueError(f"{name} contains NaN or inf values; the checker needs finite inputs")


@dataclass(repr=False)
class EquivarianceReport:
    """Result of [`equivariance_check`][]: the worst relative error and where it occurred.

    ``errors[s][o]`` is the relative error of output ``o`` under group element ``s``; the repr
    shows the summary only.
    """

    max_error: float
    output_index: int
    sample_index: int
    errors: list[list[float]]  # [sample][output]
    output_norm: float = 0.0  # largest norm among the compared outputs of fn(x)
    group: Any = None  # the group the elements were drawn from

    def __float__(self) -> float:
        return self.max_error

    def __repr__(self) -> str:
        outputs = len(self.errors[0]) if self.errors else 0
        return (f"EquivarianceReport(max_error={self.max_error:.3e} at output {self.output_index}, "
                f"sample {self.sample_index}; {len(self.errors)} samples x {outputs} outputs of "
                f"{_group_name(self.group)})")


def _group_name(group) -> str:
    return "an unnamed group" if group is None else str(group)


def equivariance_check(fn: Callable, group=None, type_in=None, type_out=None, inputs=None, *,
                       num_samples: int = DEFAULT_SAMPLES, batch_size: int = DEFAULT_BATCH_SIZE,
                       dtype: torch.dtype = torch.float64, generator: torch.Generator | None = None,
                       atol: float = DEFAULT_ATOL, kwargs: dict | None = None) -> EquivarianceReport:
    """Measure ``fn``'s equivariance error; see the module docstring.

    Parameters
    ----------
    fn : Callable
        callable taking ``len(type_in)`` positional tensors (plus ``kwargs``).
    group : SymmetryGroup or str, optional
        a group, a group name, or another sampler; default: the group of ``fn``'s declared types.
    type_in, type_out
        one feature type (or e3nn Irreps, callable action, ``None``) or a sequence of them, one per
        positional input / output (outputs may be a tuple); default: ``fn.type_in`` /
        ``fn.type_out``.
    inputs : Tensor or tuple of Tensor, optional
        a tensor or tuple of tensors; when omitted, ``fn.example_inputs()`` for a
        module with declared types, else ``(batch, ...)`` standard normals of each
        feature type.
    num_samples : int
        number of random group elements.
    batch_size : int
        leading batch size of generated inputs (ignored when ``inputs`` are given).
    dtype : torch.dtype
        dtype of the check: generated inputs, group elements, floating inputs and a module's
        floating parameters (a cast copy; float64 by default).
    atol : float
        output norms below ``atol`` are compared absolutely (> 0).
    kwargs : dict | None
        keyword inputs of ``fn`` (masks, batch vectors, edge indices) as one dictionary.

    Returns
    -------
    EquivarianceReport
        EquivarianceReport with the worst relative error over samples and outputs.
    """
    from geomlin.validation import check_positive_float, check_positive_int

    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    num_samples = check_positive_int(num_samples, "num_samples")
    batch_size = check_positive_int(batch_size, "batch_size")
    atol = check_positive_float(atol, "atol")
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    if kwargs is not None and not isinstance(kwargs, dict):
        raise TypeError(f"kwargs must be a dict of fn's keyword inputs, got {type(kwargs).__name__}")
    fn = _module_in_dtype(fn, dtype)
    kwargs = {k: _in_dtype(v, dtype) for k, v in (kwargs or {}).items()}
    group, type_in, type_out, inputs, kwargs = _resolve(fn, group, type_in, type_out, inputs, kwargs,
                                                        batch_size, generator, dtype)
    specs_in = tuple(_as_type(s) for s in _as_specs(type_in))
    specs_out = tuple(_as_type(s) for s in _as_specs(type_out))
    acts_in = [_action(s) for s in specs_in]
    acts_out = [_action(s) for s in specs_out]

    if inputs is None:
        inputs = tuple(_example_input(s, batch_size, generator, dtype) for s in specs_in)
    inputs = tuple(_in_dtype(x, dtype) for x in _as_tuple(inputs))
    kwargs = {k: _in_dtype(v, dtype) for k, v in kwargs.items()}
    for i, x in enumerate(inputs):
        if isinstance(x, Tensor) and x.numel() == 0:
            raise ValueError(f"input {i} is empty (shape {tuple(x.shape)}); an equivariance check on no "
                             "data proves nothing")
    if len(inputs) != len(acts_in):
        raise ValueError(f"got {len(inputs)} inputs but {len(acts_in)} input types")
    for i, x in enumerate(inputs):
        _check_finite(f"input {i}", x)
    for k, v in kwargs.items():
        _check_finite(f"keyword input {k!r}", v)

    y = _as_tuple(fn(*inputs, **kwargs))
    if len(y) != len(acts_out):
        raise ValueError(f"fn returned {len(y)} outputs but {len(acts_out)} output types were given")
    for o, (yy, spec) in enumerate(zip(y, specs_out)):
        _check_shape(f"output {o} of {getattr(fn, '__name__', type(fn).__name__)}", yy, spec)

    compared = [yy for a, yy in zip(acts_out, y) if a is not None]
    output_norm = max((torch.linalg.vector_norm(yy.detach().to(torch.float64)).item()
                       for yy in compared), default=0.0)
    elements = group.sample(num_samples, generator=generator, dtype=dtype)
    errors: list[list[float]] = []
    worst = (0.0, 0, 0)
    for s in range(num_samples):
        g = elements[s]
        gx = tuple(x if a is None else a(g, x) for a, x in zip(acts_in, inputs))
        y_gx = _as_tuple(fn(*gx, **kwargs))
        row = []
        for o, (a, y0, y1) in enumerate(zip(acts_out, y, y_gx)):
            if a is None:
                row.append(0.0)
                continue
            expected = a(g, y0)
            if not torch.isfinite(y1).all() or not torch.isfinite(expected).all():
                err = float("inf")
            else:
                diff = torch.linalg.vector_norm((y1 - expected).to(torch.float64))
                scale = max(torch.linalg.vector_norm(expected.to(torch.float64)).item(), atol)
                err = diff.item() / scale
            row.append(err)
            if err > worst[0] or math.isnan(err):
                worst = (err, o, s)
        errors.append(row)
    return EquivarianceReport(max_error=worst[0], output_index=worst[1], sample_index=worst[2],
                              errors=errors, output_norm=output_norm, group=group)


def equivariance_error(fn: Callable, group=None, type_in=None, type_out=None, inputs=None,
                       **options) -> float:
    """The worst relative equivariance error of ``fn`` (a float); options as in [`equivariance_check`][]."""
    return equivariance_check(fn, group, type_in, type_out, inputs, **options).max_error


def assert_equivariant(fn: Callable, group=None, type_in=None, type_out=None, inputs=None, *,
                       rtol: float = DEFAULT_RTOL, allow_zero: bool = False,
                       **options) -> EquivarianceReport:
    """Raise ``AssertionError`` when ``fn``'s relative equivariance error exceeds ``rtol``.

    Also fails when ``fn`` is trivially zero on the inputs (a test that cannot
    fail proves nothing). ``assert_equivariant(module)`` alone checks a module that declares
    ``type_in`` / ``type_out``.

    Parameters
    ----------
    fn, group, type_in, type_out, inputs
        as for [`equivariance_check`][].
    rtol : float
        the largest relative error accepted (``>= 0``).
    allow_zero : bool
        accept outputs that are all zero (norms below ``atol``).
    **options
        ``num_samples``, ``batch_size``, ``dtype``, ``atol``, ``kwargs`` of
        [`equivariance_check`][].

    Returns
    -------
    EquivarianceReport
        the report, when the check passes.

    Raises
    ------
    AssertionError
        Naming the group, the error, the output and the sample, when the error exceeds ``rtol``
        or the outputs are all zero.
    """
    from geomlin.validation import check_float

    rtol = check_float(rtol, "rtol", minimum=0.0)
    report = equivariance_check(fn, group, type_in, type_out, inputs, **options)
    name = getattr(fn, '__name__', type(fn).__name__)
    if not allow_zero and report.output_norm <= options.get("atol", DEFAULT_ATOL):
        raise AssertionError(f"{name} returned all-zero outputs; "
                             "an equivariance test on zeros proves nothing (pass allow_zero=True "
                             "if that is intended)")
    if not report.max_error <= rtol:
        hint = ""
        if report.max_error < FLOAT32_LEVEL:
            hint = ("; an error this small usually comes from float32 arithmetic or constants inside fn "
                    "(e3nn's modules keep float32-derived constants, for example): if that is expected, "
                    f"pass a looser rtol, e.g. rtol={FLOAT32_LEVEL:.0e}")
        raise AssertionError(
            f"{name} is not equivariant under {_group_name(report.group)}: "
            f"relative error {report.max_error:.3e} > {rtol:.1e} "
            f"(output {report.output_index}, sample {report.sample_index}){hint}")
    return report


def assert_invariant(fn: Callable, group, type_in, inputs=None, *, num_outputs: int = 1,
                     **options) -> EquivarianceReport:
    """Shorthand for [`assert_equivariant`][] with every output ``Scalars()`` (invariant)."""
    outs: Sequence = (Scalars(),) * num_outputs
    return assert_equivariant(fn, group, type_in, outs, inputs, **options)
