"""Quaternions of rotation matrices: the even subalgebra of Cl(3,0) in coordinates ``(w, x, y, z)``.

The one conversion from rotation matrices, shared by the PGA rotor embedding
([`geomlin.algebra.pga`][]) and the e3nn bridge ([`geomlin.reps.irreps`][]).
"""

from __future__ import annotations

import torch
from torch import Tensor


def shepperd_quaternion(R: Tensor) -> Tensor:
    """Unit quaternions ``(..., 4)`` as ``(w, x, y, z)``, ``w >= 0``, of rotations ``R (..., 3, 3)`` (det +1).

    No input checks: the callers check ``R`` at their boundary
    ([`geomlin.algebra.pga.matrix_to_quaternion`][] refuses non-rotations).

    Shepperd's method: pick the largest of ``w^2, x^2, y^2, z^2`` (from the
    trace and diagonal) and derive the rest from off-diagonal sums, which is
    accurate to float precision for every angle including ``pi``.
    """
    m = R
    diag = torch.diagonal(m, dim1=-2, dim2=-1)
    trace = diag.sum(-1)
    cand = torch.stack([1 + trace, 1 + 2 * diag[..., 0] - trace, 1 + 2 * diag[..., 1] - trace,
                        1 + 2 * diag[..., 2] - trace], dim=-1)
    best = cand.argmax(-1)
    # each row: 4 q_i q_j products from the matrix, for the pivot i
    s01, d01 = m[..., 1, 0] + m[..., 0, 1], m[..., 1, 0] - m[..., 0, 1]
    s02, d02 = m[..., 0, 2] + m[..., 2, 0], m[..., 0, 2] - m[..., 2, 0]
    s12, d12 = m[..., 2, 1] + m[..., 1, 2], m[..., 2, 1] - m[..., 1, 2]
    rows = torch.stack([
        torch.stack([cand[..., 0], d12, d02, d01], -1),
        torch.stack([d12, cand[..., 1], s01, s02], -1),
        torch.stack([d02, s01, cand[..., 2], s12], -1),
        torch.stack([d01, s02, s12, cand[..., 3]], -1),
    ], dim=-2)  # (..., 4, 4): row i = 4 q_i q
    row = torch.gather(rows, -2, best[..., None, None].expand(*best.shape, 1, 4))[..., 0, :]
    q = row / torch.linalg.vector_norm(row, dim=-1, keepdim=True)
    return q * torch.where(q[..., :1] < 0, -1.0, 1.0).to(q.dtype)
