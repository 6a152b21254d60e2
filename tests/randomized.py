"""The one parameter randomiser of the tests: every parameter (biases, gates and norms included) drawn
at random, so that no zero bias or unit weight hides a bug (odd functions pass tests they should fail)."""

from __future__ import annotations

import torch
from torch import nn


def randomized(module: nn.Module, scale: float = 1.0, dtype: torch.dtype | None = None) -> nn.Module:
    """``module`` (cast to ``dtype`` first, if given) with every parameter ``~ scale * N(0, 1)``; returns it."""
    if dtype is not None:
        module = module.to(dtype)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn_like(p) * scale)
    return module
