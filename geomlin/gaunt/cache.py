"""The Gaunt routes' tables on devices: built once in float64 on the CPU, cached per (key, device, dtype).

Every table a route reads is named by a key ``(kind, *integers)``. [`table_builder`][] registers
the builder of a kind: a function of the integers that returns a tuple of CPU tensors (float64
tables, integer index maps), itself cached. [`device_tables`][] returns a key's tables on a
device in a floating dtype (integer tables keep theirs), filled once per ``(key, device, dtype)``
and shared by every later call; routes only read them.

A module holds the tables of the routes it may run in a [`RouteTables`][]: non-persistent
buffers ([`ConstantTables`][]) that move with ``module.to(device)``.
Its forward calls [`RouteTables.prime`][], which fills the cache for the input's device and
dtype from those buffers (a cast on the device, no copy from the host), so a module that was
moved never uploads a table in its forward or backward. A plain function call on a device uploads
each table it needs once, on the first call there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
from torch import Tensor

from geomlin.linear.tables import ConstantTables

_BUILDERS: dict[str, Callable[..., tuple[Tensor, ...]]] = {}
_HOST: dict = {}
_CACHE: dict = {}


def table_builder(kind: str):
    """Register ``fn(*ints) -> tuple of CPU tensors`` as the builder of the tables of ``kind``."""

    def register(fn):
        _BUILDERS[kind] = fn
        return fn

    return register


def host_tables(key: tuple) -> tuple[Tensor, ...]:
    """The CPU tables of ``key``, built once (never write to them).

    Cached in a plain dictionary rather than by the builders' ``functools`` caches: ``torch.compile``
    ignores those and would trace the builders (numpy code) again, while it reads a dictionary
    entry as a constant. A module's [`RouteTables`][] builds its keys at construction, so a
    compiled forward only finds them here.
    """
    hit = _HOST.get(key)
    if hit is None:
        hit = _HOST[key] = _BUILDERS[key[0]](*key[1:])
    return hit


def _convert(tables: Iterable[Tensor], device: torch.device, dtype: torch.dtype) -> tuple[Tensor, ...]:
    with torch.inference_mode(False):  # cached tensors must be usable outside inference mode too
        return tuple(t.to(device=device, dtype=dtype, copy=True) if t.is_floating_point() else
                     t.to(device=device, copy=True) for t in tables)


def device_tables(key: tuple, device, dtype: torch.dtype) -> tuple[Tensor, ...]:
    """The tables of ``key`` on ``device`` in ``dtype``, cached (the first call on a device uploads them)."""
    device = torch.device(device)
    full = (key, device, dtype)
    hit = _CACHE.get(full)
    if hit is None:
        hit = _CACHE[full] = _convert(host_tables(key), device, dtype)
    return hit


class RouteTables(ConstantTables):
    """The tables of a list of keys as buffers of a module; [`prime`][] fills the device cache from them.

    Parameters
    ----------
    keys : Iterable[tuple]
        table keys (see the module docstring); repeats are dropped.
    """

    def __init__(self, keys: Iterable[tuple]):
        super().__init__()
        self.keys = tuple(dict.fromkeys(keys))
        self._counts = []
        for i, key in enumerate(self.keys):
            tables = host_tables(key)
            self._counts.append(len(tables))
            for j, table in enumerate(tables):
                self.add(f"table{i}_{j}", table)

    def prime(self, device: torch.device, dtype: torch.dtype) -> None:
        """Make [`device_tables`][] find every key on ``device`` in ``dtype`` without an upload.

        On the CPU the cache is filled from the host tables, for every key (also those only a
        compiled graph reads): an eager call before ``torch.compile`` traces then leaves the trace
        nothing to insert, since an insertion while tracing fails the first graph's guards and
        compiles a second one. Nothing to do when the module's buffers are on another device than
        ``device`` (the routes then upload as a plain call does).
        """
        for i, key in enumerate(self.keys):
            full = (key, device, dtype)
            if full in _CACHE:
                continue
            if device.type == "cpu":
                device_tables(key, device, dtype)
                continue
            tables = [self._buffers[f"table{i}_{j}"] for j in range(self._counts[i])]
            if any(t.device != device for t in tables):
                return
            _CACHE[full] = _convert(tables, device, dtype)

    def extra_repr(self) -> str:
        return f"{len(self.keys)} table set(s)"
