"""Independent oracles for G(3,0,1): blade arithmetic from first principles and the reference
GATr's formulas written out (``gatr.primitives`` / ``gatr.interface``, v1.4).

Nothing here imports geomlin's algebra code: basis blades are sorted index tuples, a product is
computed by counting the transpositions that sort the concatenated indices and contracting
repeated indices with the metric ``e0^2 = 0, e1^2 = e2^2 = e3^2 = 1``.
"""

from __future__ import annotations

import functools
import itertools

import torch

from tests.blade_oracle import brute_blade_product

#: Basis blades in the reference GATr's order.
BLADES = [(), (0,), (1,), (2,), (3,), (0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3),
          (0, 1, 2), (0, 1, 3), (0, 2, 3), (1, 2, 3), (0, 1, 2, 3)]
METRIC = {0: 0.0, 1: 1.0, 2: 1.0, 3: 1.0}
INDEX = {b: i for i, b in enumerate(BLADES)}
#: The reference's dual (``gatr.primitives.dual._compute_dualization``), written out.
REFERENCE_DUAL_FACTORS = [1, -1, 1, -1, 1, 1, -1, 1, 1, -1, 1, -1, 1, -1, 1, 1]
#: The reference's inner-product components (``_INNER_PRODUCT_IDX``) and attention components.
REFERENCE_IP = [0, 2, 3, 4, 8, 9, 10, 14]
REFERENCE_IP_WITHOUT_TRIVECTOR = [0, 2, 3, 4, 8, 9, 10]
REFERENCE_TRIVECTOR = [11, 12, 13, 14]


def blade_product(a: tuple, b: tuple) -> tuple[float, tuple]:
    """``e_a e_b = sign * e_c`` in G(3,0,1) (see :func:`tests.blade_oracle.brute_blade_product`)."""
    return brute_blade_product(a, b, METRIC)


@functools.cache
def table(kind: str = "geometric") -> torch.Tensor:
    """``T[i, j, k]`` with ``(x * y)_k = sum_ij x_i y_j T_ijk`` for ``kind`` geometric / outer (float64)."""
    t = torch.zeros(16, 16, 16, dtype=torch.float64)
    for (i, a), (j, b) in itertools.product(enumerate(BLADES), repeat=2):
        if kind == "outer" and set(a) & set(b):
            continue
        sign, c = blade_product(a, b)
        if sign != 0.0:
            t[i, j, INDEX[c]] += sign
    return t


def product(x: torch.Tensor, y: torch.Tensor, kind: str = "geometric") -> torch.Tensor:
    return torch.einsum("...i,...j,ijk->...k", x, y, table(kind))


def reversion_signs() -> torch.Tensor:
    return torch.tensor([(-1.0) ** (len(b) * (len(b) - 1) // 2) for b in BLADES], dtype=torch.float64)


def grade(i: int) -> int:
    return len(BLADES[i])


def inner_product(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``<~x y>_0`` from the full geometric product table: ``(..., 16) -> (..., 1)``."""
    return product(x * reversion_signs(), y)[..., :1]


def reference_dual(x: torch.Tensor) -> torch.Tensor:
    """The reference's ``dual``: components reversed, times its factor list."""
    return torch.tensor(REFERENCE_DUAL_FACTORS, dtype=x.dtype) * x.flip(-1)


def reference_join(x: torch.Tensor, y: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """``reference_123 * dual(dual(x) ^ dual(y))`` (the reference's ``explicit_equivariant_join``)."""
    return reference[..., 14:15] * reference_dual(product(reference_dual(x), reference_dual(y), "outer"))


def reference_embed_point(coords: torch.Tensor) -> torch.Tensor:
    """The reference's ``embed_point``: e123 = 1, e023 = -x, e013 = y, e012 = -z."""
    mv = torch.zeros(*coords.shape[:-1], 16, dtype=coords.dtype)
    mv[..., 14] = 1.0
    mv[..., 13] = -coords[..., 0]
    mv[..., 12] = coords[..., 1]
    mv[..., 11] = -coords[..., 2]
    return mv


def reference_extract_point(mv: torch.Tensor, threshold: float = 1e-3) -> torch.Tensor:
    """The reference's ``extract_point`` (its clamp replaces small weights by +threshold)."""
    coords = torch.cat([-mv[..., [13]], mv[..., [12]], -mv[..., [11]]], -1)
    w = mv[..., [14]]
    w = torch.where(w.abs() > threshold, w, torch.full_like(w, threshold))
    return coords / w


def reference_equi_linear_basis() -> torch.Tensor:
    """The reference's 9 (unnormalised) basis maps ``B[b, out, in]``, from its hard-coded index lists."""
    elements = [[0], [1, 2, 3, 4], [5, 6, 7, 8, 9, 10], [11, 12, 13, 14], [15], [(1, 0)],
                [(5, 2), (6, 3), (7, 4)], [(11, 8), (12, 9), (13, 10)], [(15, 14)]]
    basis = torch.zeros(9, 16, 16, dtype=torch.float64)
    for b, els in enumerate(elements):
        for e in els:
            i, j = e if isinstance(e, tuple) else (e, e)
            basis[b, i, j] = 1.0
    return basis


def reference_distance_vector(tri: torch.Tensor, role: str, eps: float = 1e-3) -> torch.Tensor:
    """The reference's ``_build_dist_vec`` with ``_lin_square_normalizer``: ``tri (..., 4)`` as
    (e012, e013, e023, e123) -> ``(..., 5)``, from its basis tensors written out."""
    t = tri * (tri[..., 3:] / (tri[..., 3:] ** 2 + eps))
    ideal, w = t[..., :3], t[..., 3:]
    if role == "query":
        return torch.cat([(ideal ** 2).sum(-1, keepdim=True), w ** 2, ideal * w], -1)
    return torch.cat([-(w ** 2), -(ideal ** 2).sum(-1, keepdim=True), 2.0 * ideal * w], -1)


def reference_embed_rotation(q_xyzw: torch.Tensor) -> torch.Tensor:
    """The reference's ``embed_rotation`` of a quaternion ``(x, y, z, w)`` (Hamilton):
    scalar = w, e12 = -z, e13 = y, e23 = -x."""
    mv = torch.zeros(*q_xyzw.shape[:-1], 16, dtype=q_xyzw.dtype)
    mv[..., 0] = q_xyzw[..., 3]
    mv[..., 8] = -q_xyzw[..., 2]
    mv[..., 9] = q_xyzw[..., 1]
    mv[..., 10] = -q_xyzw[..., 0]
    return mv


def reference_extract_rotation(mv: torch.Tensor) -> torch.Tensor:
    """The reference's ``extract_rotation`` (``normalize=False``): ``(-e23, e13, -e12, scalar)``."""
    return torch.stack([-mv[..., 10], mv[..., 9], -mv[..., 8], mv[..., 0]], -1)


def reference_quaternion_matrix(q_xyzw: torch.Tensor) -> torch.Tensor:
    """The rotation matrix of a quaternion ``(x, y, z, w)`` (normalised first; ``ij = k``), the
    formula of the reference's ``quaternion_to_rotation_matrix`` written out."""
    q = q_xyzw / q_xyzw.norm(dim=-1, keepdim=True)
    x, y, z, w = q.unbind(-1)
    rows = [[w * w + x * x - y * y - z * z, 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), w * w - x * x + y * y - z * z, 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), w * w - x * x - y * y + z * z]]
    return torch.stack([torch.stack(r, -1) for r in rows], -2)
