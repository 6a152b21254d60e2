"""Fused sphere-grid Gaunt product in Triton.

One program takes ``BLOCK_B`` rows and loops over blocks of ``BLOCK_P`` grid
points: ``v = (x1 @ Y1[:, p]) * (x2 @ Y2[:, p])`` stays in registers and is
accumulated into ``out += v @ W[p, :]``, so the ``(B, P)`` grid values never
touch global memory.  Coefficient axes are padded to powers of two (>= 16, as
``tl.dot`` needs) with masked loads.  Runs on CUDA, and on CPU under
``TRITON_INTERPRET=1`` (used by the tests).
"""

from __future__ import annotations

import torch
from torch import Tensor

try:
    import triton
    import triton.language as tl
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError("the Triton Gaunt kernels need triton: pip install 'geomlin[gpu]' (or pip install triton)") from err

#: Largest padded coefficient axis the kernel keeps in registers ((L+1)**2 <= 128, i.e. L <= 10).
MAX_PADDED = 128


def _padded(n: int) -> int:
    return max(16, triton.next_power_of_2(n))


def supports(lmax1: int, lmax2: int, lmax_out: int, dtype) -> bool:
    """Whether :func:`gaunt_dense_triton` handles these sizes and dtype."""
    return dtype in (torch.float32, torch.float64) and max(
        _padded((lmax1 + 1) ** 2), _padded((lmax2 + 1) ** 2), _padded((lmax_out + 1) ** 2)) <= MAX_PADDED


@triton.jit
def _gaunt_dense_kernel(x1_ptr, x2_ptr, y1_ptr, y2_ptr, w_ptr, out_ptr, B, D1, D2, D3, P,
                        BLOCK_B: tl.constexpr, BLOCK_P: tl.constexpr,
                        PD1: tl.constexpr, PD2: tl.constexpr, PD3: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BLOCK_B + tl.arange(0, BLOCK_B)
    rmask = rows < B
    c1 = tl.arange(0, PD1)
    c2 = tl.arange(0, PD2)
    c3 = tl.arange(0, PD3)
    x1 = tl.load(x1_ptr + rows[:, None] * D1 + c1[None, :], mask=rmask[:, None] & (c1[None, :] < D1), other=0.0)
    x2 = tl.load(x2_ptr + rows[:, None] * D2 + c2[None, :], mask=rmask[:, None] & (c2[None, :] < D2), other=0.0)
    acc = tl.zeros((BLOCK_B, PD3), dtype=tl.float32 if x1_ptr.dtype.element_ty == tl.float32 else tl.float64)
    for p0 in range(0, P, BLOCK_P):
        pts = p0 + tl.arange(0, BLOCK_P)
        pmask = pts < P
        y1 = tl.load(y1_ptr + c1[:, None] * P + pts[None, :], mask=(c1[:, None] < D1) & pmask[None, :], other=0.0)
        y2 = tl.load(y2_ptr + c2[:, None] * P + pts[None, :], mask=(c2[:, None] < D2) & pmask[None, :], other=0.0)
        v = tl.dot(x1, y1, input_precision="ieee") * tl.dot(x2, y2, input_precision="ieee")
        w = tl.load(w_ptr + pts[:, None] * D3 + c3[None, :], mask=pmask[:, None] & (c3[None, :] < D3), other=0.0)
        acc += tl.dot(v.to(w.dtype), w, input_precision="ieee")
    tl.store(out_ptr + rows[:, None] * D3 + c3[None, :], acc.to(out_ptr.dtype.element_ty),
             mask=rmask[:, None] & (c3[None, :] < D3))


def gaunt_dense_triton(x1: Tensor, x2: Tensor, Y1: Tensor, Y2: Tensor, W: Tensor,
                       block_b: int = 32, block_p: int = 32) -> Tensor:
    """``((x1 @ Y1) * (x2 @ Y2)) @ W`` fused: ``x1 (B, D1)``, ``x2 (B, D2)``, ``Y1 (D1, P)``,
    ``Y2 (D2, P)``, ``W (P, D3)`` -> ``(B, D3)``; float32/float64, CUDA or TRITON_INTERPRET=1.

    Forward only; :func:`~geomlin.gaunt.gaunt_tensor_product` routes gradients
    through :class:`_GauntDenseFunction`, whose backward uses the same kernel shape
    in PyTorch.
    """
    return _GauntDenseFunction.apply(x1, x2, Y1, Y2, W, block_b, block_p)


def _launch(x1, x2, Y1, Y2, W, block_b, block_p):
    x1, x2 = x1.contiguous(), x2.contiguous()
    B, D1 = x1.shape
    D2, D3, P = x2.shape[1], W.shape[1], W.shape[0]
    out = torch.empty(B, D3, device=x1.device, dtype=x1.dtype)
    grid = (triton.cdiv(B, block_b),)
    _gaunt_dense_kernel[grid](x1, x2, Y1.contiguous(), Y2.contiguous(), W.contiguous(), out, B, D1, D2, D3, P,
                              BLOCK_B=block_b, BLOCK_P=block_p, PD1=_padded(D1), PD2=_padded(D2), PD3=_padded(D3))
    return out


class _GauntDenseFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x1, x2, Y1, Y2, W, block_b, block_p):
        ctx.save_for_backward(x1, x2, Y1, Y2, W)
        return _launch(x1, x2, Y1, Y2, W, block_b, block_p)

    @staticmethod
    def backward(ctx, grad):
        x1, x2, Y1, Y2, W = ctx.saved_tensors
        g = grad @ W.T  # (B, P)
        v1, v2 = x1 @ Y1, x2 @ Y2
        return (g * v2) @ Y1.T, (g * v1) @ Y2.T, None, None, None, None, None
