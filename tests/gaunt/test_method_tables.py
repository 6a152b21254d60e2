"""The measured tables behind method="auto" (geomlin.gaunt.method_tables)."""

import torch

from geomlin.gaunt import method_tables as autotune
from geomlin.gaunt.product import resolve_method


def test_cpu_table_is_monotone_and_covers_every_size():
    bounds = [b for b, _ in autotune.CPU_TABLE]
    assert bounds == sorted(bounds)
    assert resolve_method("auto", 1, 1, 1, "cpu", torch.float32) == "dense"
    assert resolve_method("auto", 12, 12, 12, "cpu", torch.float32) == "grid"
    assert resolve_method("auto", 40, 40, 40, "cpu", torch.float32) == "grid"


def test_cuda_claims_no_measurement_it_does_not_have():
    # no GPU was available: the CUDA table is empty and auto runs the PyTorch grid route there
    assert autotune.CUDA_TABLE == ()
    for L in (1, 8, 16):
        assert autotune.choose_method(L, L, L, "cuda", torch.float32) == autotune.DEFAULT_METHOD == "grid"


def test_cuda_table_entries_are_used(monkeypatch):
    monkeypatch.setattr(autotune, "CUDA_TABLE", ((8, "triton"), (100, "grid")))
    monkeypatch.setattr("geomlin.gaunt.kernels.triton_supports", lambda *a: True)
    assert autotune.choose_method(4, 4, 4, "cuda", torch.float32) == "triton"
    assert autotune.choose_method(12, 12, 12, "cuda", torch.float32) == "grid"


def test_shared_table_is_monotone_and_direct_stays_within_the_dense_tensor():
    from geomlin.gaunt.product import DIRECT_MAX_DEGREE

    bounds = [b for b, _ in autotune.CPU_SHARED_TABLE]
    assert bounds == sorted(bounds)
    assert all(3 * b <= DIRECT_MAX_DEGREE for b, m in autotune.CPU_SHARED_TABLE if m == "direct")
    assert resolve_method("auto", 2, 2, 2, "cpu", torch.float32, shared=True) == "direct"
    assert resolve_method("auto", 2, 2, 2, "cpu", torch.float32, shared=False) == "dense"
    assert resolve_method("auto", 12, 12, 12, "cpu", torch.float32, shared=True) == "grid"
