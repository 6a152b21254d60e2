"""Triton kernels for Gaunt products (optional: ``pip install geomlin[gpu]``); imported lazily.

[`gaunt_grid_triton`][] runs the fast route (Legendre sums, longitude transform, pointwise
product and projection per latitude, grid values kept on chip) on CUDA, or on the CPU under
``TRITON_INTERPRET=1``.
"""

from __future__ import annotations


def triton_available() -> bool:
    """Whether ``triton`` can be imported."""
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


def triton_supports(lmax_in1: int, lmax_in2: int, lmax_out: int, dtype) -> bool:
    """Whether [`gaunt_grid_triton`][] handles these degrees and dtype (False without triton)."""
    if not triton_available():
        return False
    from geomlin.gaunt.kernels.triton_grid import supports

    return supports(lmax_in1, lmax_in2, lmax_out, dtype)


def gaunt_grid_triton(x1, x2, lmax_in1, lmax_in2, lmax_out, channels=1, shared=0, reduce=False, tables=None):
    """The fast route as Triton kernels; see [`geomlin.gaunt.kernels.triton_grid.gaunt_grid_triton`][]."""
    from geomlin.gaunt.kernels.triton_grid import gaunt_grid_triton as impl

    return impl(x1, x2, lmax_in1, lmax_in2, lmax_out, channels, shared, reduce, tables)
