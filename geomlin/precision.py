"""The autocast rule, once: computations that need their precision run in float32 or float64.

Geometry (eigenvectors, nearest rotations, orthogonality tests, squared distances) and products
with constant tables (Gaunt products, the complex form of the PGA product, grade norms) lose
their meaning in half precision: 8 or 11 bits of mantissa make an equivariant product
equivariant to ~1e-2 at best, and there are no complex or linear-algebra half kernels. So they
follow one rule, whatever the caller's ``torch.autocast``:

* they compute in the input's [`working_dtype`][]: float64 stays float64, everything else is
  computed in float32;
* with autocast switched off inside ([`full_precision`][]), so that autocast's lower-precision
  matmuls do not undo the cast; only the enclosed operations are affected, nothing process-wide;
* they return [`output_dtype`][]: under autocast the precision they computed in (as autocast's own
  float32 operators do), else the input's dtype.

Routes that are only defined in single or double precision (the Gaunt products) accept
half-precision input under autocast only, where a previous layer may well have produced it, and
refuse it otherwise ([`compute_dtype`][]).
"""

from __future__ import annotations

import contextlib

import torch
from torch import Tensor

#: Floating dtypes computed as they are.
DTYPES = (torch.float32, torch.float64)
#: Half precisions: computed in float32.
LOW_PRECISION = (torch.float16, torch.bfloat16)


def autocasting(x: Tensor) -> bool:
    """Whether ``torch.autocast`` is on for ``x``'s device type (False for types autocast does not know)."""
    try:
        return torch.is_autocast_enabled(x.device.type)
    except RuntimeError:  # a device type autocast does not know (meta)
        return False


def full_precision(x: Tensor):
    """A context without autocast on ``x``'s device type (a no-op where autocast is off)."""
    return torch.autocast(x.device.type, enabled=False) if autocasting(x) else contextlib.nullcontext()


def working_dtype(dtype: torch.dtype) -> torch.dtype:
    """``dtype`` for float32 / float64, float32 for the half precisions: the arithmetic type of the rule."""
    return torch.promote_types(dtype, torch.float32)


def at_least_float32(x: Tensor) -> Tensor:
    """``x`` in its [`working_dtype`][] (a copy only for half precisions)."""
    return x.to(working_dtype(x.dtype))


def output_dtype(x: Tensor) -> torch.dtype:
    """The dtype a full-precision computation on ``x`` returns: its [`working_dtype`][] under autocast
    (the precision it was computed in), ``x``'s own dtype otherwise."""
    return working_dtype(x.dtype) if autocasting(x) else x.dtype


def compute_dtype(x: Tensor, name: str) -> torch.dtype:
    """The dtype a single-or-double-precision route computes ``x`` in: its own (float32 / float64),
    float32 for half precision under autocast; ``TypeError`` (naming ``name``) for anything else."""
    if x.dtype in DTYPES:
        return x.dtype
    if x.dtype in LOW_PRECISION and autocasting(x):
        return torch.float32
    if x.dtype in LOW_PRECISION:
        raise TypeError(f"{name} must have torch.float32 or torch.float64, got {x.dtype}: Gaunt products and "
                        "spherical harmonics need single or double precision (under torch.autocast, half-precision "
                        "inputs are computed in float32)")
    raise TypeError(f"{name} must have torch.float32 or torch.float64, got {x.dtype}")
