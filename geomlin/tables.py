"""Constant tables and the one process-wide cache: how every kernel in geomlin receives its tables.

A kernel (a pure function that reads constant tables: Cayley tables, selection matrices, index
plans, quadrature tables, solved bases) takes ``tables=``:

* a module passes its [`ConstantTables`][]: non-persistent buffers that move with
  ``module.to(device)``, so its forward and backward never copy a table from the host, never
  fill a cache, and its ``state_dict`` does not change;
* a plain call (``tables=None``) reads the process-wide [`device_cache`][], filled on the first
  request for each ``(key, device, dtype)`` (one upload per device) and shared by every later
  call.

[`table_on`][] is that choice, written once. Tables are built in float64 (integer index tables as
they are) on the CPU by a builder function and cast to the input's dtype on use.

The cache is a plain dictionary rather than ``functools`` caches: ``torch.compile`` reads a warm
entry as a constant instead of tracing the builders again. [`clear_caches`][] empties it (the
only reset). Modules never write it: a forward reads its module's buffers.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping

import torch
from torch import Tensor, nn

_CACHE: dict = {}
#: Keys of the families with a size limit, oldest first (see ``keep`` of [`device_cache`][]).
_FAMILIES: dict[str, OrderedDict] = {}


def _moved(value, device: torch.device | None, dtype: torch.dtype | None):
    """``value`` with its tensors (a tensor or a tuple of them) on ``device``, floating ones in ``dtype``."""
    if isinstance(value, Tensor):
        if dtype is not None and value.is_floating_point():
            return value.to(device=device, dtype=dtype, copy=True)
        return value.to(device=device, copy=True)
    if isinstance(value, tuple) and all(isinstance(t, Tensor) for t in value):
        return tuple(_moved(t, device, dtype) for t in value)
    return value


def device_cache(key: Hashable, build: Callable[[], object], device=None, dtype: torch.dtype | None = None, *,
                 keep: int | None = None):
    """The value ``build()`` returns, on ``device`` in ``dtype``, built once per ``(key, device, dtype)``.

    Parameters
    ----------
    key : Hashable
        names the value uniquely across geomlin; by convention a tuple whose first entry is the
        family (``("pga:join",)``, ``("gaunt", "grid.synthesis", 3, 4, 10)``).
    build : Callable[[], object]
        builds the value on the host: a tensor or a tuple of tensors (float64 / integer CPU
        tables), or any other object (a count, a plan), stored as it is.
    device : torch.device, optional
        where the tensors go (``None``: as built). Floating tensors are cast to ``dtype`` when it is
        given; integer and boolean ones keep theirs.
    keep : int, optional
        keep at most this many entries of the key's family (``key[0]``); the oldest go first (for
        large host values such as solver plans).

    Returns
    -------
    object
        the cached value, shared by every later call: read-only.
    """
    device = None if device is None else device if isinstance(device, torch.device) else torch.device(device)
    full = (key, device, dtype)
    hit = _CACHE.get(full)
    if hit is None:
        with torch.inference_mode(False):  # a cached tensor must serve autograd outside inference mode too
            hit = _moved(build(), device, dtype) if device is not None or dtype is not None else build()
        _CACHE[full] = hit
        if keep is not None:
            family = _FAMILIES.setdefault(key[0], OrderedDict())
            family[full] = None
            while len(family) > keep:
                _CACHE.pop(family.popitem(last=False)[0], None)
    return hit


def in_cache(key: Hashable, device=None, dtype: torch.dtype | None = None) -> bool:
    """Whether [`device_cache`][] holds ``(key, device, dtype)`` already (nothing is built)."""
    device = None if device is None else torch.device(device)
    return (key, device, dtype) in _CACHE


def clear_caches() -> None:
    """Forget every cached table, plan and basis (the one reset of geomlin's process-wide cache).

    Modules keep their own [`ConstantTables`][]; on-disk caches (``cache_dir=`` of the basis solver)
    are not touched.
    """
    _CACHE.clear()
    _FAMILIES.clear()


class ConstantTables(nn.Module):
    """A module's constant tables as non-persistent buffers, read in a compute dtype by kernels.

    The tables

    * move with ``module.to(device)``, so no forward or backward copies a table from the host, and
      stay out of ``state_dict`` (a checkpoint holds parameters only);
    * stay float64 whatever dtype the module is cast to (``.float()``, ``.half()``,
      ``.to(torch.bfloat16)`` move them without rounding), so a float32 model cast back to float64
      is as exact as a freshly built one;
    * are read in a compute dtype through [`get`][] / [`parts`][]: cast on their device once per
      dtype and kept until the module moves again (no per-call cast, no host round trip);
    * are copies of what was handed in (a cached table is never reachable through a module).

    Parameters
    ----------
    tables : Mapping[Hashable, Tensor | tuple[Tensor, ...]], optional
        ``{key: tensor or tuple of tensors}``; floating tables are stored in float64, integer and
        boolean ones as they are. More are added with [`add`][].
    """

    def __init__(self, tables: Mapping[Hashable, Tensor | tuple[Tensor, ...]] | None = None):
        super().__init__()
        self._names: dict = {}
        self._cast: dict = {}
        for key, value in (tables or {}).items():
            self.add(key, value)

    def add(self, key: Hashable, value: Tensor | tuple[Tensor, ...]) -> None:
        """Store a copy of ``value`` (a tensor or a tuple of tensors) under ``key``."""
        parts = value if isinstance(value, tuple) else (value,)
        names = []
        for t in parts:
            if not isinstance(t, Tensor):
                raise TypeError(f"table {key!r} must be a tensor or a tuple of tensors, got {type(t).__name__}")
            t = t.detach()
            t = t.to(torch.float64, copy=True) if t.is_floating_point() else t.clone()
            name = f"table{len(self._buffers)}"
            self.register_buffer(name, t, persistent=False)
            names.append(name)
        self._names[key] = tuple(names)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._names

    def keys(self) -> tuple:
        """The keys held, in the order they were added."""
        return tuple(self._names)

    def get(self, key: Hashable, dtype: torch.dtype | None = None, index: int = 0) -> Tensor:
        """Table ``key`` (part ``index`` of a tuple) on the tables' device; a floating one in ``dtype``
        (``None``: float64 as stored). Read-only: the result is shared with later calls."""
        names = self._names.get(key)
        if names is None:
            raise KeyError(f"these ConstantTables hold {list(self._names)}, not {key!r}; build them with "
                           "the keys the forward pass reads")
        table = self._buffers[names[index]]
        if dtype is None or not table.is_floating_point() or table.dtype == dtype:
            return table
        cast_key = (names[index], dtype)
        cast = self._cast.get(cast_key)
        if cast is None or cast.device != table.device:
            with torch.inference_mode(False):  # a copy made under inference mode could not be saved for backward
                cast = table.to(dtype)
            self._cast[cast_key] = cast
        return cast

    def parts(self, key: Hashable, dtype: torch.dtype | None = None) -> tuple[Tensor, ...]:
        """Every part of table ``key`` as a tuple, floating ones in ``dtype`` (see [`get`][])."""
        if key not in self._names:
            self.get(key)  # raises, naming the keys held
        return tuple(self.get(key, dtype, i) for i in range(len(self._names[key])))

    def _apply(self, fn, recurse: bool = True):
        # follow the module's device, keep float64: a cast of the module must not round its tables
        before = {name: t for name, t in self._buffers.items() if t is not None and t.is_floating_point()}
        self._cast = {}
        super()._apply(fn, recurse)
        for name, old in before.items():
            moved = self._buffers[name]
            if moved is not None and moved.dtype != old.dtype:
                self._buffers[name] = old.to(moved.device)
        return self

    def extra_repr(self) -> str:
        return ", ".join(map(repr, self._names))


def table_on(key: Hashable, build: Callable[[], Tensor | tuple[Tensor, ...]], device, dtype: torch.dtype | None = None,
             index: int | None = 0, tables: ConstantTables | Mapping | None = None):
    """The table a kernel reads: from ``tables`` (a module's buffers) when given, else from the
    [`device_cache`][] (filled by ``build()`` on the first request for ``device`` and ``dtype``).

    Parameters
    ----------
    key : Hashable
        the table's key, unique across geomlin (``"pga:join"``, ``("gaunt", "grid.synthesis", 3, 4, 10)``).
    build : Callable
        float64 / integer CPU tensor(s) of the table.
    device, dtype
        where the kernel computes; floating tables are cast to ``dtype`` (``None``: float64).
    index : int or None
        part of a tuple table; ``None`` returns every part as a tuple.
    tables : ConstantTables or Mapping, optional
        a module's tables, which must hold ``key``; or ``{key: tuple of tensors}`` already on the
        device in the compute dtype (the tables a custom operator received as its arguments).
    """
    if isinstance(tables, ConstantTables):
        return tables.parts(key, dtype) if index is None else tables.get(key, dtype, index)
    if tables is not None:
        value = tables[key]
    else:
        value = device_cache(key, build, device, dtype if dtype is not None else torch.float64)
    if index is None:
        return value if isinstance(value, tuple) else (value,)
    return value[index] if isinstance(value, tuple) else value
