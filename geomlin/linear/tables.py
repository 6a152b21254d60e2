"""Constant tables of layers (solved bases, index maps, quadrature tables) held as module buffers.

A layer's tables are built once, in float64 on the CPU, when the layer is built. Held in a
[`ConstantTables`][] they

* are non-persistent buffers: ``module.to(device)`` moves them with the parameters, so no forward
  or backward ever copies a table from the host, and state dicts do not contain them;
* stay float64 whatever dtype the module is cast to (``.float()``, ``.half()``,
  ``.to(torch.bfloat16)`` move them but do not round them), so a float32 model cast back to
  float64 is as exact as a freshly built one;
* are read in a compute dtype through [`ConstantTables.get`][]: cast on their device once per
  dtype and kept until the module moves again (no per-call cast, no host round trip).

They are copies of whatever was handed in (a cached table can never be corrupted through a module).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor, nn


class ConstantTables(nn.Module):
    """Named constant tensors of a layer, as float64 (or integer) non-persistent buffers.

    Parameters
    ----------
    tables : Mapping[str, Tensor] | None
        mapping of buffer names to tensors; floating ones are stored in float64, integer and
        boolean ones as they are. More can be added with [`add`][].
    """

    def __init__(self, tables: Mapping[str, Tensor] | None = None):
        super().__init__()
        self._cast: dict = {}
        for name, table in (tables or {}).items():
            self.add(name, table)

    def add(self, name: str, table: Tensor) -> None:
        """Store a copy of ``table`` (float64 if floating) under ``name``."""
        table = table.detach()
        table = table.to(torch.float64, copy=True) if table.is_floating_point() else table.clone()
        self.register_buffer(name, table, persistent=False)

    def get(self, name: str, dtype: torch.dtype | None = None) -> Tensor:
        """The table ``name`` in ``dtype`` (integer tables and ``dtype=None``: as stored), on the tables' device.

        Read-only: the result may be shared with later calls.
        """
        table = self._buffers[name]
        if dtype is None or not table.is_floating_point() or table.dtype == dtype:
            return table
        key = (name, dtype)
        cast = self._cast.get(key)
        if cast is None or cast.device != table.device:
            with torch.inference_mode(False):  # a copy made under inference mode could not be saved for backward
                cast = table.to(dtype)
            self._cast[key] = cast
        return cast

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
