"""Precision rules of the Gaunt routes: float32 or float64, and float32 under ``torch.autocast``.

The routes contract coefficients with tables built in float64; in half precision (8 or 11 bits of
mantissa) a product would be equivariant to ~1e-2 at best and the ``fft`` route would meet complex
half tensors. So every route computes in float32 or float64: explicit float16 / bfloat16 inputs are
refused with a ``TypeError`` that says so, while under ``torch.autocast`` (where a previous layer
may well have produced them) they are computed in float32 with autocast switched off inside the
route, as autocast's own float32 operators do.
"""

from __future__ import annotations

import contextlib

import torch
from torch import Tensor

#: Floating dtypes the products compute in (tables are built in float64 and cast).
DTYPES = (torch.float32, torch.float64)
#: Dtypes accepted only under ``torch.autocast``, where they are computed in float32.
LOW_PRECISION = (torch.float16, torch.bfloat16)


def autocasting(x: Tensor) -> bool:
    """Whether ``torch.autocast`` is on for ``x``'s device type."""
    return torch.is_autocast_enabled(x.device.type)


def full_precision(x: Tensor):
    """A context that switches autocast off for ``x``'s device type where it is on (else does nothing)."""
    if autocasting(x):
        return torch.autocast(x.device.type, enabled=False)
    return contextlib.nullcontext()


def compute_dtype(x: Tensor, name: str) -> torch.dtype:
    """The dtype a route computes ``x`` in: its own (float32 / float64), float32 for half precision
    under autocast; ``TypeError`` (naming ``name``) for anything else."""
    if x.dtype in DTYPES:
        return x.dtype
    if x.dtype in LOW_PRECISION and autocasting(x):
        return torch.float32
    if x.dtype in LOW_PRECISION:
        raise TypeError(f"{name} must have torch.float32 or torch.float64, got {x.dtype}: Gaunt products and "
                        "spherical harmonics need single or double precision (under torch.autocast, half-precision "
                        "inputs are computed in float32)")
    raise TypeError(f"{name} must have torch.float32 or torch.float64, got {x.dtype}")
