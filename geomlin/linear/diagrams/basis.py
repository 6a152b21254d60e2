"""Bases of the equivariant maps ``(R^n)^{⊗k} -> (R^n)^{⊗l}`` chosen from the diagrams.

For small ``n`` the spanning diagrams are linearly dependent. The basis used
by [`DiagramLinear`][]:

* ``"S"``: the **orbit basis** ``X_π`` for the partitions ``π`` with at most ``n``
  blocks (exact: the other ``X_π`` vanish, these have disjoint supports).
* ``"O"``, ``"SO"``, ``"Sp"``: a **rank-revealing selection** of the spanning
  diagrams (enumeration order, Brauer diagrams before ``(l+k)\\n`` diagrams):
  a diagram is kept when it is linearly independent of the diagrams kept before
  it. Independence is decided exactly, without the ``n^(k+l)`` matrices: each
  diagram tensor is evaluated on random rank-one tensors ``v_1 ⊗ .. ⊗ v_(k+l)``
  over the prime field ``F_p`` (``p = 2^31 - 1``; a pair is a bilinear form
  ``<v_u, v_w>`` or ``v_u^T J v_w``, a Levi-Civita block is ``det[v_f1 .. v_fn]``)
  and the evaluation matrix is row reduced mod ``p``. A spurious dependence has
  probability below ``(k+l) * #diagrams / p``. The classical theorems skip the
  selection where all Brauer diagrams are independent: O(n) and SO(n) without
  determinant diagrams for ``n >= (k+l)/2``, Sp(n) for ``n >= k + l``
  (Brauer 1937; Lehrer-Zhang 2012).
"""

from __future__ import annotations

import itertools
import math
from functools import lru_cache

import numpy as np

from geomlin.linear.diagrams.diagram import Diagram
from geomlin.linear.diagrams.enumerate import partition_diagrams, spanning_diagrams
from geomlin.linear.diagrams.families import check_n, group_name
from geomlin.validation import check_nonnegative_int

#: The prime of the exact rank computation.
PRIME = 2 ** 31 - 1
#: Extra random evaluation points beyond the number of diagrams.
EXTRA_SAMPLES = 8
#: Fixed seed: the selected basis is deterministic.
SELECTION_SEED = 20230723


def _bilinear_table(V: np.ndarray, symplectic: bool) -> np.ndarray:
    """``(S, m, m)`` values ``<v_u, v_w>`` (or ``v_u^T J v_w``) mod p from ``V (S, m, n)``."""
    p = PRIME
    W = V
    if symplectic:
        half = V.shape[-1] // 2
        W = np.concatenate([V[..., half:], (p - V[..., :half]) % p], axis=-1)  # J v = (p, -q)
    out = np.zeros(V.shape[:2] + (V.shape[1],), dtype=np.int64)
    for a in range(V.shape[-1]):
        out = (out + (V[:, :, None, a] * W[:, None, :, a]) % p) % p
    return out


def _det_mod_p(M: np.ndarray) -> int:
    """Determinant of a small square int64 matrix mod p (Gaussian elimination)."""
    p = PRIME
    A = [[int(x) % p for x in row] for row in M]
    n = len(A)
    det = 1
    for c in range(n):
        piv = next((r for r in range(c, n) if A[r][c]), None)
        if piv is None:
            return 0
        if piv != c:
            A[c], A[piv] = A[piv], A[c]
            det = -det
        det = det * A[c][c] % p
        inv = pow(A[c][c], p - 2, p)
        for r in range(c + 1, n):
            f = A[r][c] * inv % p
            if f:
                A[r] = [(a - f * b) % p for a, b in zip(A[r], A[c])]
    return det % p


#: Determinants of matrices up to this size are evaluated for all samples at once (Leibniz formula).
MAX_LEIBNIZ = 6


def _dets_mod_p(M: np.ndarray) -> np.ndarray:
    """Determinants mod p of ``M (S, n, n)`` int64 entries in ``[0, p)``, ``(S,)`` int64."""
    n = M.shape[-1]
    if n > MAX_LEIBNIZ:
        return np.array([_det_mod_p(m) for m in M], dtype=np.int64)
    p = PRIME
    out = np.zeros(M.shape[0], dtype=np.int64)
    for perm in itertools.permutations(range(n)):
        inversions = sum(perm[i] > perm[j] for i in range(n) for j in range(i + 1, n))
        term = np.ones(M.shape[0], dtype=np.int64)
        for row, col in enumerate(perm):
            term = term * M[:, row, col] % p  # both factors < 2^31: the product fits in int64
        out = (out - term) % p if inversions % 2 else (out + term) % p
    return out


def evaluation_matrix(diagrams, n: int, group, num_samples: int | None = None, seed: int = SELECTION_SEED):
    """``(num_samples, len(diagrams))`` int64: each diagram tensor on random rank-one tensors, mod p.

    Brauer and ``(l+k)\\n`` diagrams only (the families O, SO, Sp).
    """
    name = group_name(group)
    diagrams = list(diagrams)
    if not diagrams:
        return np.zeros((0, 0), dtype=np.int64)
    m = diagrams[0].size
    S = num_samples or len(diagrams) + EXTRA_SAMPLES
    rng = np.random.default_rng(seed)
    V = rng.integers(0, PRIME, size=(S, m, n), dtype=np.int64)
    G = _bilinear_table(V, symplectic=False)
    GJ = _bilinear_table(V, symplectic=True) if name == "Sp" else None
    dets: dict[tuple[int, ...], np.ndarray] = {}
    out = np.ones((S, len(diagrams)), dtype=np.int64)
    for j, d in enumerate(diagrams):
        if not d.is_brauer:
            raise ValueError(f"evaluation_matrix handles Brauer / Levi-Civita diagrams, got {d}")
        col = np.ones(S, dtype=np.int64)
        for u, w in d.blocks:
            same_row = (u < d.l) == (w < d.l)
            table = GJ if (GJ is not None and same_row) else G
            col = col * table[:, u, w] % PRIME
        if d.free:
            if d.free not in dets:
                dets[d.free] = _dets_mod_p(V[:, list(d.free), :])
            col = col * dets[d.free] % PRIME
        out[:, j] = col
    return out


def independent_columns(A: np.ndarray) -> list[int]:
    """Greedy maximal set of linearly independent columns of ``A`` over F_p, in column order."""
    p = PRIME
    A = A.copy() % p
    rows, cols = A.shape
    r = 0
    pivots = []
    for j in range(cols):
        if r == rows:
            break
        nz = np.nonzero(A[r:, j])[0]
        if len(nz) == 0:
            continue
        i = r + int(nz[0])
        if i != r:
            A[[r, i]] = A[[i, r]]
        inv = pow(int(A[r, j]), p - 2, p)
        A[r] = A[r] * inv % p
        below = A[r + 1:, j:j + 1].copy()
        A[r + 1:] = (A[r + 1:] - below * A[r] % p) % p
        pivots.append(j)
        r += 1
    return pivots


def all_independent(name: str, k: int, l: int, n: int) -> bool:
    if name == "O":
        return 2 * n >= k + l
    if name == "SO":
        return 2 * n >= k + l and n > k + l
    return n >= k + l  # Sp


@lru_cache(maxsize=256)
def _basis(name: str, k: int, l: int, n: int) -> tuple[Diagram, ...]:
    if name == "S":
        return tuple(partition_diagrams(k, l, max_blocks=n))
    span = spanning_diagrams(name, k, l, n)
    if all_independent(name, k, l, n):
        return tuple(span)
    keep = independent_columns(evaluation_matrix(span, n, name))
    return tuple(span[i] for i in keep)


def diagram_basis(group, k: int, l: int, n: int) -> list[Diagram]:
    """A basis of ``Hom_G((R^n)^{⊗k}, (R^n)^{⊗l})`` made of diagrams (see the module docstring).

    For ``"S"`` the diagrams stand for **orbit** basis elements (``orbit=True`` in
    [`diagram_matrix`][] / [`apply_diagram`][]); for the other groups for the
    diagrams themselves. Cached; deterministic.
    """
    name = group_name(group, n)
    check_n(name, n)
    return list(_basis(name, check_nonnegative_int(k, "k"), check_nonnegative_int(l, "l"), n))


def basis_size(group, k: int, l: int, n: int) -> int:
    """``dim Hom_G((R^n)^{⊗k}, (R^n)^{⊗l})`` = ``len(diagram_basis(group, k, l, n))``."""
    return len(diagram_basis(group, k, l, n))


def frobenius_norm_sq(diagram: Diagram, n: int, group, orbit: bool = False) -> float:
    """``||diagram_matrix(diagram, n, group, orbit)||_F^2`` by counting, without the matrix.

    Diagram basis / Brauer: ``n^#blocks`` (every block picks one index; ``J`` has
    ``n`` entries ±1); orbit basis: the falling factorial ``n (n-1) .. (n - b + 1)``;
    a Levi-Civita block multiplies by ``n!``.
    """
    b = diagram.num_blocks
    if orbit:
        return float(math.perm(n, b)) if b <= n else 0.0
    out = float(n) ** b
    if diagram.free:
        out *= math.factorial(n)
    return out
