"""Triton kernels for Gaunt products (optional: ``pip install geomlin[gpu]``); imported lazily."""

from __future__ import annotations


def triton_available() -> bool:
    """Whether ``triton`` can be imported."""
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


def triton_supports(lmax1: int, lmax2: int, lmax_out: int, dtype) -> bool:
    from geomlin.gaunt.kernels.dense import supports

    return supports(lmax1, lmax2, lmax_out, dtype)


def gaunt_dense_triton(x1, x2, Y1, Y2, W):
    """Fused sphere-grid Gaunt product; see :func:`geomlin.gaunt.kernels.dense.gaunt_dense_triton`."""
    from geomlin.gaunt.kernels.dense import gaunt_dense_triton as impl

    return impl(x1, x2, Y1, Y2, W)
