"""The measured table behind method="auto"."""

import torch

from geomlin.gaunt import autotune
from geomlin.gaunt.product import resolve_method


def test_cpu_table_is_monotone_and_covers_every_size():
    bounds = [b for b, _ in autotune.CPU_TABLE]
    assert bounds == sorted(bounds)
    assert resolve_method("auto", 1, 1, 1, "cpu", torch.float32) == "dense"
    assert resolve_method("auto", 12, 12, 12, "cpu", torch.float32) == "grid"
    assert resolve_method("auto", 40, 40, 40, "cpu", torch.float32) == "grid"


def test_cuda_falls_back_to_grid_for_large_sizes():
    assert autotune.choose_method(16, 16, 16, "cuda", torch.float32) in ("grid", "triton")
    assert autotune.choose_method(16, 16, 16, "cuda", torch.float32) == "grid"  # (L+1)^2 > 128: kernel does not fit
