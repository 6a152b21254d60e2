"""Shared input validation for geomlin's public boundaries.

Every public function, module constructor, ``forward``, dataset reader and CLI option checks its
input with these helpers, so the same mistake gets the same message everywhere: it names the
argument, says what was expected and what was given::

    ValueError: x must have shape (..., 8, 16) (multivectors of G(3,0,1), 8 channels), got (4, 7, 15)

``TypeError`` for the wrong kind or dtype, ``ValueError`` for wrong values or shapes, [`FileFormatError`][]
for corrupt files (file and line or record). Nothing converts silently (integer, complex or boolean
tensors are refused where a real floating one is needed). Checks belong at public boundaries only.

Checks that read values (NaN, ranges, order, "is this a rotation") and accelerators
    A failed check raises at once, on every device (on an accelerator: one host sync), and never clamps,
    truncates or zeroes its input. Only inside an explicit [`deferred_checks`][] scope (the training loop,
    [`EnergyAndForces`][geomlin.models.md.EnergyAndForces] and the benchmarks open one) does a check on an
    accelerator keep its answer on the device (a device-side assert would leave a CUDA context unusable) until
    the scope raises it, and only there does [`check_index`][] clamp. Nothing is read on meta or fake tensors.

What compiled code does differently: every ``torch.compiler.is_compiling()`` branch of geomlin
    Values cannot be read while ``torch.compile`` or ``torch.export`` (and ``geomlin.deploy``) trace,
    so traced code takes these paths and only these (``tests/test_validation.py`` keeps the list complete):

    * ``validation.check_condition``, ``check_finite``, ``check_index`` become asserts of the graph
      on the CPU (``validation._values_unreadable``, ``validation._traced_check``: the program raises
      ``RuntimeError``), skipped on accelerators, as are warnings, ``check_orthogonal``,
      ``check_batch_vector``'s order, ``validation.check_memory`` and the memory check of
      ``models.graphs.dense_edge_index``; ``validation.check_index`` and ``validation.shape_str``
      print no symbolic size (it would specialise the graph);
    * ``groups.base.Group.check_element`` skips the membership test; ``frames.moments._require_points``,
      ``frames.pca._work_needed`` and ``frames.pca._report_degenerate`` take the accelerators'
      branch-free path; ``linalg.scaling_and_squaring`` runs all its masked squarings;
      ``linear.diagrams.layer.DiagramLinear`` clones its output before an in-place scatter, and
      ``clifford.ga_attention._GAAttentionBase._run_net`` calls the user's network without its width check;
    * ``models.md.require_autograd`` reads no inference-mode flag; ``batching.scatter_messages`` sums all
      messages in one pass; ``gaunt.product._gaunt_grid``, ``gaunt.product._grid_backward``,
      ``gaunt.method_tables.choose_method``, ``gaunt.method_tables.choose_power_method`` and
      ``gaunt.powers.power_sum`` take the routes that trace (the grid route as one custom operator);
      ``gaunt.paths.concat`` is a plain ``torch.cat``, ``gaunt.tensor_product._check_finite`` checks each tensor.
"""

from __future__ import annotations

import contextlib
import math
import numbers
import threading
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import torch
from torch import Tensor
from torch._subclasses.fake_tensor import FakeTensor

from geomlin.precision import at_least_float32, full_precision

#: Relative tolerance for "is this a group element / orthonormal / unit" checks, by dtype. Loose
#: enough for values that went through a few float operations, tight enough to reject a shear.
GEOMETRY_TOLERANCE = {torch.float64: 1e-6, torch.float32: 1e-3, torch.float16: 2e-2, torch.bfloat16: 5e-2}

#: Largest memory (bytes) a constructor or function may plan for one tensor: [`check_memory`][] refuses
#: more (8 GiB) with the estimate, instead of an allocator error (or an hour of swapping) later.
MEMORY_LIMIT_BYTES = 8 * 2**30

#: Readable names of the dtype families accepted by [`check_tensor`][].
DTYPE_FAMILIES = ("float", "int", "bool", "index", "any")


#: Most distinct deferred messages kept per thread; later ones share one catch-all entry.
MAX_DEFERRED_CHECKS = 256
#: Message of the catch-all entry.
MORE_CHECKS_FAILED = "further input checks failed (more than MAX_DEFERRED_CHECKS distinct checks were pending)"


class FileFormatError(ValueError):
    """A file that cannot be read as what it claims to be; the message starts with ``path:line:``."""

    def __init__(self, path, message: str, line: int | None = None, record: int | str | None = None):
        where = str(path) + (f":{line}" if line is not None else "") + (f" (record {record})" if record is not None else "")
        super().__init__(f"{where}: {message}")
        self.path = str(path)
        self.line = line
        self.record = record


#: Characters of a file's line quoted in an error message (longer lines are cut, with "...").
QUOTED_LINE_LIMIT = 80


def quote_line(line: bytes | str, limit: int = QUOTED_LINE_LIMIT) -> str:
    """A file's line for an error message: decoded (undecodable bytes replaced), cut at ``limit``, repr'd."""
    text = line.decode("utf-8", errors="replace") if isinstance(line, bytes) else line
    return repr(text if len(text) <= limit else text[:limit] + "...")


def tolerance(dtype: torch.dtype) -> float:
    """The [`GEOMETRY_TOLERANCE`][] of ``dtype`` (float32's for unknown dtypes)."""
    return GEOMETRY_TOLERANCE.get(dtype, GEOMETRY_TOLERANCE[torch.float32])


def shape_str(shape: Iterable) -> str:
    """``(4, 7, 15)`` for a shape, ``(..., 16)`` for a pattern with ``...``, ``*`` for ``None``."""
    # a torch.SymInt (torch.export) prints by name, never made an int; under torch.compile sizes print as
    # "?" (dynamo cannot trace str() of one, int() would specialise it; such messages are never shown)
    compiling = torch.compiler.is_compiling()
    parts = ["..." if s is Ellipsis else ("*" if s is None else (
        "?" if compiling else str(s if isinstance(s, torch.SymInt) else int(s))))
        for s in shape]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def _shape_matches(actual: tuple, pattern: tuple) -> bool:
    if Ellipsis in pattern:
        i = pattern.index(Ellipsis)
        head, tail = pattern[:i], pattern[i + 1:]
        if len(actual) < len(head) + len(tail):
            return False
        return (_shape_matches(actual[:len(head)], head)
                and _shape_matches(actual[len(actual) - len(tail):], tail))
    if len(actual) != len(pattern):
        return False
    return all(p is None or a == p for a, p in zip(actual, pattern))


def _dtype_ok(dtype: torch.dtype, want) -> bool:
    if want is None or want == "any":
        return True
    if isinstance(want, torch.dtype):
        return dtype == want
    if isinstance(want, (tuple, list)):
        return any(_dtype_ok(dtype, w) for w in want)
    if want == "float":
        return dtype.is_floating_point
    if want == "int":
        return not dtype.is_floating_point and not dtype.is_complex and dtype != torch.bool
    if want == "index":
        return dtype in (torch.int64, torch.int32)
    if want == "bool":
        return dtype == torch.bool
    raise ValueError(f"unknown dtype family {want!r}; expected one of {DTYPE_FAMILIES} or a torch.dtype")


def _dtype_str(want) -> str:
    if isinstance(want, (tuple, list)):
        return " or ".join(_dtype_str(w) for w in want)
    return {"float": "a floating-point dtype", "int": "an integer dtype", "index": "int64 (or int32)",
            "bool": "dtype torch.bool"}.get(want, str(want))


def check_tensor(x, name: str, *, shape: Sequence | None = None, ndim: int | None = None,
                 min_ndim: int | None = None, dtype="float", finite: bool = False,
                 nonempty: bool = False, what: str | None = None) -> Tensor:
    """Check that ``x`` is a tensor of the given layout; return it unchanged.

    Parameters
    ----------
    x : Tensor
        the value to check.
    name : str
        the argument's name, used in the message.
    shape : Sequence | None
        a pattern such as ``(..., 16)``, ``(None, 3)`` or ``(B, N, 3)``: ints must match,
        ``None`` matches any size, one ``...`` matches any number of leading/middle axes.
    ndim, min_ndim : int | None
        exact or minimum number of dimensions.
    dtype : str or torch.dtype
        ``"float"`` (real floating point; the default), ``"int"``, ``"index"`` (int64/int32),
        ``"bool"``, ``"any"``, a ``torch.dtype`` or a tuple of these.
    finite : bool
        also refuse NaN and inf (see [`check_finite`][]).
    nonempty : bool
        refuse tensors with zero elements.
    what : str | None
        a short description appended to shape errors (``"a G(3,0,1) multivector"``).
    """
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not _dtype_ok(x.dtype, dtype):
        raise TypeError(f"{name} must have {_dtype_str(dtype)}, got {x.dtype}")
    suffix = f" ({what})" if what else ""
    if ndim is not None and x.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s){suffix}, got shape {shape_str(x.shape)}")
    if min_ndim is not None and x.ndim < min_ndim:
        raise ValueError(f"{name} must have at least {min_ndim} dimension(s){suffix}, "
                         f"got shape {shape_str(x.shape)}")
    if shape is not None and not _shape_matches(tuple(x.shape), tuple(shape)):
        raise ValueError(f"{name} must have shape {shape_str(shape)}{suffix}, got {shape_str(x.shape)}")
    if nonempty and x.numel() == 0:
        raise ValueError(f"{name} is empty (shape {shape_str(x.shape)}); at least one element is needed")
    if finite:
        check_finite(x, name)
    return x


# ----------------------------------------------------------------------------- deferred checks
_scopes = threading.local()


def _stack() -> list[dict]:
    """The open [`deferred_checks`][] scopes of this thread, innermost last (each: its pending flags)."""
    return _scopes.__dict__.setdefault("stack", [])


def defers(t: Tensor) -> bool:
    """Whether a value check on ``t`` is deferred here: ``t`` is on an accelerator and a
    [`deferred_checks`][] scope is open in this thread (else the check reads the values and raises at once)."""
    return t.device.type != "cpu" and bool(_stack())


def _values_unreadable(t: Tensor) -> bool:
    """True where values cannot be read at all: meta tensors, fake tensors, and torch.compile tracing."""
    return t.device.type == "meta" or torch.compiler.is_compiling() or isinstance(t, FakeTensor)


def _traced_check(ok: Tensor, message: str) -> None:
    """While ``torch.compile`` / ``torch.export`` trace on the CPU, ``torch._assert_async(ok.all(), message)``
    (an op of the traced program, raising ``RuntimeError``); nothing on accelerators (module docstring)."""
    if torch.compiler.is_compiling() and ok.device.type == "cpu":
        torch._assert_async(ok.all(), message)


def _condition(ok) -> Tensor | bool:
    """``ok`` as a boolean tensor (NaN counts as False), or a Python bool; ``TypeError`` otherwise."""
    if isinstance(ok, (bool, np.bool_)):
        return bool(ok)
    if not isinstance(ok, Tensor):
        raise TypeError(f"a condition must be a bool or a boolean tensor, got {type(ok).__name__}")
    if ok.dtype == torch.bool:
        return ok
    if ok.is_complex():
        raise TypeError(f"a condition must be a bool or a real tensor, got dtype {ok.dtype}")
    return (ok != 0) & ~torch.isnan(ok) if ok.is_floating_point() else ok != 0


def check_condition(ok, message: str, *, error: type = ValueError) -> None:
    """Refuse unless every element of the condition ``ok`` is True.

    ``ok`` is a boolean tensor (a number tensor counts its non-zero entries as True, and NaN as
    False) or a Python bool. ``error(message)`` (``ValueError``; a ``Warning`` subclass warns
    instead) is raised at once, on every device, except on an accelerator inside a
    [`deferred_checks`][] scope, where the test stays on the device until the scope reads it
    (``message`` must then not depend on tensor values). Traced code: see the module docstring.
    """
    ok = _condition(ok)
    if isinstance(ok, bool):
        if not ok:
            _fail(error, message, stacklevel=3)
        return
    if _values_unreadable(ok):
        if not issubclass(error, Warning):
            _traced_check(ok, message)
        return
    if not defers(ok):
        if ok.numel() and not bool(ok.all()):
            _fail(error, message, stacklevel=3)
        return
    with torch.no_grad():
        failed = ~ok.all()
        flags = _stack()[-1]
        key = (ok.device, message, error)
        if key not in flags and len(flags) >= MAX_DEFERRED_CHECKS:
            key = (ok.device, MORE_CHECKS_FAILED, ValueError)
        flags[key] = failed if key not in flags else flags[key] | failed


def _fail(error: type, message: str, stacklevel: int) -> None:
    if issubclass(error, Warning):
        warnings.warn(message, error, stacklevel=stacklevel + 1)
    else:
        raise error(message)


def pending_checks() -> int:
    """Distinct deferred checks waiting in this thread's innermost [`deferred_checks`][] scope (0 outside one)."""
    return len(_stack()[-1]) if _stack() else 0


def _raise_flags(flags: dict) -> None:
    """Read ``flags`` (one host sync per device) and raise the first failure, after the warnings."""
    by_device: dict = {}
    for (device, message, error), flag in flags.items():
        by_device.setdefault(device, []).append((message, error, flag))
    first = None
    for device, entries in by_device.items():
        failed = torch.stack([f for _, _, f in entries]).cpu()
        for (message, error, _), bad in zip(entries, failed.tolist()):
            if bad and (issubclass(error, Warning) or first is None):
                text = f"{message} (checked on {device}, deferred by geomlin.validation.deferred_checks)"
                if issubclass(error, Warning):
                    _fail(error, text, stacklevel=3)
                else:
                    first = error(text)
    if first is not None:
        raise first


def raise_deferred() -> None:
    """Read the checks deferred so far in this thread's innermost [`deferred_checks`][] scope (one host
    sync per device), issue their warnings and raise the first failure (the CPU's error, saying where
    it ran); clears them either way, the scope stays open. Outside a scope nothing is pending."""
    stack = _stack()
    if not stack or not stack[-1]:
        return
    flags = dict(stack[-1])
    stack[-1].clear()
    _raise_flags(flags)


@contextlib.contextmanager
def deferred_checks():
    """A scope in which value checks on accelerators are deferred instead of read at once.

    Inside, [`check_condition`][] (and every check built on it) keeps its answer on the device and
    [`check_index`][] clamps the index it returns, so no kernel reads out of bounds before the error.
    When the block ends the scope reads every pending check (one host sync per device) and raises
    the first failure ([`raise_deferred`][] does so inside); a nested scope hands them to the
    enclosing one. A block that raises drops its pending checks: nothing leaks into the next block.
    Open one around your own loops on an accelerator to keep them free of host synchronisations.
    """
    stack = _stack()
    flags: dict = {}
    stack.append(flags)
    finished = False
    try:
        yield
        finished = True
    finally:
        stack.pop()
        if finished and flags:
            if stack:
                for key, flag in flags.items():
                    stack[-1][key] = flag | stack[-1].get(key, False)
            else:
                _raise_flags(flags)


def _all_finite(x: Tensor) -> bool:
    """Whether a non-empty tensor is free of NaN and inf (a read): for real ones the minimum and maximum, which
    propagate NaN (one fused reduction, ~20x faster than ``torch.isfinite(x).all()``)."""
    if x.is_complex():
        return bool(torch.isfinite(x).all())
    low, high = torch.aminmax(x)
    return bool(torch.isfinite(low) & torch.isfinite(high))


def check_finite(x: Tensor, name: str) -> Tensor:
    """Refuse NaN and inf in a floating tensor (deferred inside [`deferred_checks`][] on accelerators, see
    [`check_condition`][]); return ``x``."""
    if not x.is_floating_point() and not x.is_complex():
        return x
    message = f"{name} contains NaN or inf values"
    if _values_unreadable(x):
        if x.numel() and not x.is_complex():
            low, high = torch.aminmax(x)
            _traced_check(torch.isfinite(low) & torch.isfinite(high), message)
        return x
    if not defers(x):
        if x.numel() and not _all_finite(x):
            raise ValueError(message)
    elif x.numel():
        check_condition(torch.isfinite(x).all(), message)
    return x


def check_index(index: Tensor, name: str, size: int, what: str = "items") -> Tensor:
    """Integer ``index`` with every entry in ``[0, size)``; returns it.

    An out-of-range entry raises at once, naming the entries' range, on every device. Only on an
    accelerator inside a [`deferred_checks`][] scope is the test deferred and the returned index
    clamped into range, so no kernel reads out of bounds before the scope raises: use the result.
    """
    check_tensor(index, name, dtype="int")
    # dynamo sees a symbolic size as a plain int, and formatting it would specialise the graph to that size
    bound = f"the number of {what}" if torch.compiler.is_dynamo_compiling() else size
    message = f"{name} must index {what} in [0, {bound}), but has entries outside"
    if index.numel() == 0 or _values_unreadable(index):
        if index.numel():
            low, high = torch.aminmax(index)
            _traced_check((low >= 0) & (high < size), message)
        return index
    if not defers(index):
        low, high = torch.aminmax(index)
        if int(low) < 0 or int(high) >= size:
            raise ValueError(f"{name} must index {what} in [0, {size}), got entries from {int(low)} to {int(high)}")
        return index
    check_condition((index >= 0) & (index < size), message)
    return index.clamp(0, max(size - 1, 0))


def check_bool(value, name: str) -> bool:
    """A Python bool (``TypeError`` for anything else, 0/1 included)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {value!r} ({type(value).__name__})")
    return value


def check_int(value, name: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """An integer (Python or numpy, not bool) within ``[minimum, maximum]``; returns a Python int.

    A ``torch.SymInt`` (a size traced symbolically, such as a dynamic batch size) is returned as is,
    its bounds ``torch._check`` constraints of the traced program.
    """
    if isinstance(value, torch.SymInt):
        if minimum is not None:
            torch._check(value >= minimum, lambda: f"{name} must be >= {minimum}")
        if maximum is not None:
            torch._check(value <= maximum, lambda: f"{name} must be <= {maximum}")
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, Tensor) and value.ndim == 0 and not value.is_floating_point() \
                and value.dtype != torch.bool:
            value = int(value)
        else:
            raise TypeError(f"{name} must be an int, got {value!r} ({type(value).__name__})")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
    return value


def check_positive_int(value, name: str, *, maximum: int | None = None) -> int:
    """An int >= 1 (sizes, channels, counts, degrees that must not vanish)."""
    return check_int(value, name, minimum=1, maximum=maximum)


def check_nonnegative_int(value, name: str, *, maximum: int | None = None) -> int:
    """An int >= 0 (degrees ``lmax``, optional counts)."""
    return check_int(value, name, minimum=0, maximum=maximum)


def check_float(value, name: str, *, minimum: float | None = None, maximum: float | None = None,
                strict_minimum: bool = False, strict_maximum: bool = False) -> float:
    """A finite real number within the bounds (``strict_*`` excludes the bound); returns a float."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        if isinstance(value, Tensor) and value.ndim == 0 and value.is_floating_point():
            value = float(value)
        else:
            raise TypeError(f"{name} must be a real number, got {value!r} ({type(value).__name__})")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if minimum is not None and (value <= minimum if strict_minimum else value < minimum):
        raise ValueError(f"{name} must be {'>' if strict_minimum else '>='} {minimum}, got {value}")
    if maximum is not None and (value >= maximum if strict_maximum else value > maximum):
        raise ValueError(f"{name} must be {'<' if strict_maximum else '<='} {maximum}, got {value}")
    return value


def check_positive_float(value, name: str) -> float:
    """A finite real number > 0 (scales, radii, learning rates, tolerances)."""
    return check_float(value, name, minimum=0.0, strict_minimum=True)


def check_choice(value, name: str, choices: Iterable):
    """``value`` must be one of ``choices`` (compared with ``==``); returns it."""
    choices = tuple(choices)
    if not isinstance(value, (str, int, float, type(None))) or value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(repr(c) for c in choices)}, got {value!r}")
    return value


def check_mask(mask, name: str, shape: Sequence | None = None) -> Tensor:
    """A boolean mask (True = keep); float 0/1 masks are refused because they read as additive biases."""
    if not isinstance(mask, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of dtype torch.bool, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(f"{name} must have dtype torch.bool (True = keep), got {mask.dtype}; "
                        f"convert a 0/1 mask with mask.bool()")
    if shape is not None and not _shape_matches(tuple(mask.shape), tuple(shape)):
        raise ValueError(f"{name} must have shape {shape_str(shape)}, got {shape_str(mask.shape)}")
    return mask


def check_batch_vector(batch, name: str, num_items: int, *, num_graphs: int | None = None) -> Tensor:
    """A PyG batch vector: 1-D integer ``(num_items,)``, non-negative and sorted (non-decreasing).

    Returns it; on accelerators inside a [`deferred_checks`][] scope the value tests are deferred and
    the returned vector is clamped into ``[0, num_graphs)`` (see [`check_index`][]).
    """
    check_tensor(batch, name, ndim=1, dtype="int")
    if batch.shape[0] != num_items:
        raise ValueError(f"{name} must have one entry per item ({num_items}), got shape {shape_str(batch.shape)}")
    if not batch.numel() or _values_unreadable(batch):
        return batch
    sorted_message = f"{name} must be sorted (items of one graph contiguous, as PyG's Batch stores them)"
    if not defers(batch):
        if int(batch.min()) < 0:
            raise ValueError(f"{name} must be non-negative, got minimum {int(batch.min())}")
        if batch.numel() > 1 and bool((batch[1:] < batch[:-1]).any()):
            raise ValueError(sorted_message)
        if num_graphs is not None and int(batch.max()) >= num_graphs:
            raise ValueError(f"{name} refers to graph {int(batch.max())} but there are {num_graphs} graphs "
                             f"(num_graphs={num_graphs} must exceed every entry of {name})")
        return batch
    if batch.numel() > 1:
        check_condition(batch[1:] >= batch[:-1], sorted_message)
    check_condition(batch >= 0, f"{name} must be non-negative")
    if num_graphs is None:
        return batch.clamp_min(0)
    return check_index(batch, name, num_graphs, "graphs")


def check_generator(generator, name: str, device: torch.device):
    """``None`` or a ``torch.Generator`` on ``device``'s type (a random op on a device needs that
    device's generator); returns it."""
    if generator is None:
        return None
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"{name} must be a torch.Generator or None, got {type(generator).__name__}")
    if generator.device.type != torch.device(device).type:
        raise ValueError(f"{name} is a {generator.device.type} generator but the data is on {device}; "
                         f"pass torch.Generator(device=...) on the data's device")
    return generator


def check_memory(nbytes: int, what: str, hint: str = "") -> int:
    """Refuse a planned allocation of about ``nbytes`` bytes above [`MEMORY_LIMIT_BYTES`][].

    ``what`` names the tensor and the arguments that size it; ``hint`` says how to use less.
    The ``ValueError`` prints the estimate and the limit. Returns ``nbytes``.
    """
    if torch.compiler.is_compiling():
        return nbytes
    if nbytes > MEMORY_LIMIT_BYTES:
        gib = 2**30
        raise ValueError(f"{what} would need about {nbytes / gib:,.1f} GiB (estimated), above the limit of "
                         f"{MEMORY_LIMIT_BYTES / gib:.0f} GiB (geomlin.validation.MEMORY_LIMIT_BYTES)"
                         + (f"; {hint}" if hint else ""))
    return nbytes


def check_broadcastable(*named, what: str = "shapes") -> tuple[int, ...]:
    """Shapes that broadcast together; returns the broadcast shape.

    ``named`` are ``(name, shape)`` pairs; on a mismatch the ``ValueError`` names every argument
    and its shape (``what`` describes the shapes, e.g. ``"batch shapes"``).
    """
    try:
        return tuple(torch.broadcast_shapes(*(tuple(shape) for _, shape in named)))
    except RuntimeError:
        given = ", ".join(f"{name} {shape_str(shape)}" for name, shape in named)
        raise ValueError(f"the {what} of {', '.join(n for n, _ in named)} must be equal or broadcastable, "
                         f"got {given}") from None


def check_same_device(name_a: str, a: Tensor, name_b: str, b: Tensor) -> None:
    """Refuse tensors on different devices, naming both."""
    if a.device != b.device:
        raise ValueError(f"{name_a} is on {a.device} but {name_b} is on {b.device}; move them to one device")


def check_orthogonal(R, name: str, *, special: bool | None = None, atol: float | None = None) -> Tensor:
    """``R (..., d, d)`` must be orthogonal (``R R^T = I``) to a dtype tolerance.

    ``special=True`` also requires ``det R = +1`` (rotations), ``special=False`` ``det R = -1``;
    ``None`` accepts both. The test runs by [`geomlin.precision`][]'s rule (in ``R``'s dtype, float32
    for half precisions, with autocast off), so float32 rotations pass under ``torch.autocast`` and
    bfloat16 ones with bfloat16's tolerance. On accelerators inside a [`deferred_checks`][] scope the
    test is deferred ([`check_condition`][]).
    """
    check_tensor(R, name, min_ndim=2, dtype="float")
    if R.shape[-1] != R.shape[-2]:
        raise ValueError(f"{name} must be square matrices (..., d, d), got shape {shape_str(R.shape)}")
    if R.numel() == 0 or _values_unreadable(R):
        return R
    tol = tolerance(R.dtype) if atol is None else atol
    kind, want = ("rotations (det +1)", 1.0) if special else ("improper (det -1)", -1.0)
    with full_precision(R):
        work = at_least_float32(R.detach())
        gap = (work @ work.transpose(-1, -2) - torch.eye(R.shape[-1], dtype=work.dtype, device=R.device)).abs().amax()
        det = torch.linalg.det(work.to(torch.float64) if R.device.type == "cpu" else work)
    if defers(R):
        check_condition(torch.isfinite(work).all() & (gap <= tol),
                        f"{name} must be finite orthogonal matrices (R R^T = I to {tol:.0e})")
        if special is not None:
            check_condition((det - want).abs() <= 10 * tol, f"{name} must be {kind}")
        return R
    check_finite(R, name)
    if float(gap) > tol:
        raise ValueError(f"{name} must be orthogonal (R R^T = I), but |R R^T - I| = {float(gap):.2e} > {tol:.0e}")
    if special is not None and bool(((det - want).abs() > 10 * tol).any()):
        raise ValueError(f"{name} must be {kind}, got det = {float(det.flatten()[0]):+.6f}")
    return R


def check_file(path, name: str = "path", *, kind: str = "file") -> Path:
    """An existing file (``kind="file"``) or folder (``kind="dir"``); returns a ``Path``."""
    if not isinstance(path, (str, Path)):
        raise TypeError(f"{name} must be a path (str or pathlib.Path), got {type(path).__name__}")
    p = Path(path)
    if kind == "dir":
        if not p.is_dir():
            raise FileNotFoundError(f"{name}: folder not found: {p}")
    elif not p.is_file():
        raise FileNotFoundError(f"{name}: {'not a file' if p.is_dir() else 'file not found'}: {p}")
    return p
