"""The keys of the Gaunt routes' tables and their builders.

Every table a route reads is named by a key ``(kind, *integers)``. [`table_builder`][] registers
the builder of a kind (at import): a function of the integers that returns a tuple of float64 /
integer CPU tensors. A route reads a key's tables through [`device_tables`][], which follows
[`geomlin.tables`][]: from the module's [`route_tables`][] when given (``tables=``), else from
the process-wide device cache. A module holds the tables of every route it may run in
[`route_tables`][] (non-persistent buffers that move with ``module.to(device)``) and passes them
to the routes, so its forward never uploads a table nor writes a cache.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import torch
from torch import Tensor

from geomlin.tables import ConstantTables, device_cache, table_on

#: The builder of each kind of table, registered by the modules that define the kinds (filled at import).
_BUILDERS: dict[str, Callable[..., tuple[Tensor, ...]]] = {}


def table_builder(kind: str):
    """Register ``fn(*ints) -> tuple of CPU tensors`` as the builder of the tables of ``kind``."""

    def register(fn):
        _BUILDERS[kind] = fn
        return fn

    return register


def host_tables(key: tuple) -> tuple[Tensor, ...]:
    """The CPU tables of ``key``, built once ([`geomlin.tables.device_cache`][]; never write to them)."""
    return device_cache(("gaunt", *key), lambda: _BUILDERS[key[0]](*key[1:]))


def device_tables(key: tuple, device, dtype: torch.dtype, tables: ConstantTables | Mapping | None = None
                  ) -> tuple[Tensor, ...]:
    """The tables of ``key`` on ``device``, floating ones in ``dtype``: from ``tables`` (a module's
    [`route_tables`][], or the tables a custom operator received) when given, else from the device
    cache (the first call on a device uploads them)."""
    return table_on(("gaunt", *key), lambda: host_tables(key), device, dtype, None, tables)


def route_tables(keys: Iterable[tuple]) -> ConstantTables:
    """The tables of ``keys`` (repeats dropped) as a module's buffers, for the routes' ``tables=``."""
    return ConstantTables({("gaunt", *key): host_tables(key) for key in dict.fromkeys(keys)})


def resolved_tables(keys: Iterable[tuple], device, dtype: torch.dtype,
                    tables: ConstantTables | Mapping | None = None) -> list[Tensor]:
    """Every tensor of ``keys``' tables in order, flat: the ``Tensor[]`` argument of a custom operator
    (which passes ``dict(zip(keys, ...))`` of them on as ``tables``, see [`unflatten_tables`][])."""
    return [t for key in keys for t in device_tables(key, device, dtype, tables)]


def unflatten_tables(keys: Iterable[tuple], flat: Iterable[Tensor]) -> dict:
    """The ``tables`` mapping of [`resolved_tables`][]'s flat list (its keys' part counts from the host tables)."""
    out, flat = {}, list(flat)
    for key in keys:
        n = len(host_tables(key))
        out[("gaunt", *key)], flat = tuple(flat[:n]), flat[n:]
    return out
