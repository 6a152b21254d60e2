"""Triton kernel: correctness on CPU under TRITON_INTERPRET=1 (small sizes), against the direct method.

The interpreter must be switched on before Triton is first imported, and other
test modules may already have imported it (torch-geometric does), so the
checks run in a fresh interpreter.
"""

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("triton", reason="triton is the optional 'gpu' extra")

SCRIPT = textwrap.dedent("""
    import torch
    from geomlin.gaunt import gaunt_tensor_product
    from geomlin.gaunt.kernels import triton_supports

    torch.manual_seed(0)
    assert triton_supports(3, 3, 3, torch.float32) and not triton_supports(12, 12, 12, torch.float32)
    for dtype, tol in ((torch.float64, 1e-12), (torch.float32, 1e-5)):
        x1 = torch.randn(37, 9, dtype=dtype)
        x2 = torch.randn(37, 16, dtype=dtype)
        ref = gaunt_tensor_product(x1.double(), x2.double(), 3, method="direct")
        out = gaunt_tensor_product(x1, x2, 3, method="triton")
        assert out.dtype == dtype
        torch.testing.assert_close(out.double(), ref, atol=tol, rtol=tol)
    x1 = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    x2 = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    g = torch.randn(5, 9, dtype=torch.float64)
    ga = torch.autograd.grad(gaunt_tensor_product(x1, x2, 2, method="triton"), (x1, x2), g)
    gb = torch.autograd.grad(gaunt_tensor_product(x1, x2, 2, method="dense"), (x1, x2), g)
    for a, b in zip(ga, gb):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=0)
    print("TRITON-OK")
""")


def test_triton_dense_kernel_in_interpreter():
    env = dict(os.environ, TRITON_INTERPRET="1")
    result = subprocess.run([sys.executable, "-c", SCRIPT], check=False, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and "TRITON-OK" in result.stdout, result.stdout + result.stderr
