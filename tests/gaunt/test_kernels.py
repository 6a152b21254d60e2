"""Triton kernel of the fast route: exact against the direct route on CPU under TRITON_INTERPRET=1.

The interpreter must be switched on before Triton is first imported, and other test modules may
already have imported it (torch-geometric does), so the checks run in a fresh interpreter.
"""

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("triton", reason="triton is the optional 'gpu' extra")

PATTERNS = textwrap.dedent("""
    import torch
    from geomlin.gaunt import gaunt_tensor_product
    from geomlin.gaunt.kernels import triton_supports
    from geomlin.gaunt.product import gaunt_rows

    torch.manual_seed(0)
    assert triton_supports(3, 3, 3, torch.float32) and not triton_supports(30, 3, 3, torch.float32)
    A, C = 3, 2
    for L1, L2, Lo in ((2, 1, 3),):
        for dtype, tol in ((torch.float64, 1e-12), (torch.float32, 1e-5)):
            x1 = torch.randn(A * C, (L1 + 1) ** 2, dtype=dtype)
            x2 = torch.randn(A * C, (L2 + 1) ** 2, dtype=dtype)
            shared = torch.randn(A, (L2 + 1) ** 2, dtype=dtype)
            cases = ((x1, x2, L1, L2, 0, False), (x1, shared, L1, L2, 2, False),
                     (shared, x1, L2, L1, 1, False), (x1, x2, L1, L2, 0, True))
            for a, b, La, Lb, sh, red in cases if dtype == torch.float64 else cases[:1]:
                ref = gaunt_rows(a.double(), b.double(), La, Lb, Lo, "direct", C, sh, red)
                out = gaunt_rows(a, b, La, Lb, Lo, "triton", C, sh, red)
                assert out.dtype == dtype
                err = (out.double() - ref).abs().max().item()
                assert err < tol * max(1.0, ref.abs().max().item()), (L1, L2, Lo, dtype, sh, red, err)
    x1 = torch.randn(2, 2, 4, dtype=torch.float64, requires_grad=True)
    x2 = torch.randn(2, 1, 9, dtype=torch.float64, requires_grad=True)
    g = torch.randn(2, 2, 9, dtype=torch.float64)
    ga = torch.autograd.grad(gaunt_tensor_product(x1, x2, 2, method="triton"), (x1, x2), g)
    gb = torch.autograd.grad(gaunt_tensor_product(x1, x2, 2, method="direct"), (x1, x2), g)
    for u, v in zip(ga, gb):
        assert (u - v).abs().max() < 1e-12
    print("TRITON-OK")
""")

EVERY_DEGREE = textwrap.dedent("""
    import sys
    import torch
    from geomlin.gaunt import gaunt_tensor_product

    torch.manual_seed(0)
    for L in [int(a) for a in sys.argv[1:]]:
        x1 = torch.randn(2, (L + 1) ** 2, dtype=torch.float64)
        x2 = torch.randn(2, (L + 1) ** 2, dtype=torch.float64)
        ref = gaunt_tensor_product(x1, x2, L, method="direct")
        err = (gaunt_tensor_product(x1, x2, L, method="triton") - ref).abs().max().item()
        assert err < 1e-12, (L, err)
    print("TRITON-OK")
""")


def _run(script, *args, timeout=600):
    env = dict(os.environ, TRITON_INTERPRET="1")
    result = subprocess.run([sys.executable, "-c", script, *args], check=False, env=env, capture_output=True,
                            text=True, timeout=timeout)
    assert result.returncode == 0 and "TRITON-OK" in result.stdout, result.stdout + result.stderr


def test_triton_kernel_every_channel_pattern_in_interpreter():
    _run(PATTERNS)


@pytest.mark.slow
def test_triton_kernel_every_degree_up_to_12_in_interpreter():
    _run(EVERY_DEGREE, *[str(L) for L in range(13)])
