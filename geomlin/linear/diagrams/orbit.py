"""The S_n orbit basis and its Möbius expansion in the diagram basis.

Diagram basis ``D_π``: entry 1 when the indices are constant on each block of
``π``. Orbit basis ``X_π``: additionally different blocks carry different
indices. Since every index labelling has exactly one equality pattern,
``D_π = Σ_{σ ≥ π} X_σ`` (``σ ≥ π``: ``σ`` is a coarsening of ``π``), and
Möbius inversion on the partition lattice gives

    X_π = Σ_{σ ≥ π} μ(π, σ) D_σ,   μ(π, σ) = Π_{B ∈ σ} (-1)^(b_B - 1) (b_B - 1)!

with ``b_B`` the number of blocks of ``π`` merged into ``B`` (Pearce-Crump
2022, Sec. 4; Benson-Doty-Halverson). ``X_π = 0`` exactly when ``π`` has more
than ``n`` blocks, and the nonzero ``X_π`` have disjoint supports, so the
partitions with at most ``n`` blocks give a basis of the S_n-equivariant maps.
"""

from __future__ import annotations

import math
from functools import lru_cache

import torch
from torch import Tensor

from geomlin.linear.diagrams.diagram import Diagram
from geomlin.linear.diagrams.enumerate import set_partitions


def _mobius_weight(groups) -> int:
    return math.prod((-1) ** (len(g) - 1) * math.factorial(len(g) - 1) for g in groups)


@lru_cache(maxsize=4096)
def orbit_expansion(diagram: Diagram) -> tuple[tuple[float, Diagram], ...]:
    """``X_π`` as ``((μ(π, σ), D_σ), ...)`` over all coarsenings ``σ`` of ``π`` (``π`` first)."""
    if diagram.free:
        raise ValueError(f"the orbit basis is for partition diagrams without free vertices, got {diagram}")
    blocks = diagram.blocks
    out = []
    for groups in set_partitions(len(blocks)):
        merged = [tuple(v for i in g for v in blocks[i]) for g in groups]
        out.append((float(_mobius_weight(groups)), Diagram(diagram.k, diagram.l, merged)))
    return tuple(out)


def orbit_to_diagram_matrix(orbit_diagrams, diagrams, sparse: bool = False) -> Tensor:
    """``M (len(diagrams), len(orbit_diagrams))`` float64 with ``X_j = Σ_i M[i, j] D_i``.

    ``sparse=True`` returns a coalesced sparse COO tensor (each ``X_j`` expands into Bell(#blocks)
    diagrams, so large bases are mostly zeros). Raises ValueError if a coarsening of some orbit
    diagram is missing from ``diagrams``.
    """
    index = {d: i for i, d in enumerate(diagrams)}
    rows, cols, vals = [], [], []
    for j, pi in enumerate(orbit_diagrams):
        for coeff, sigma in orbit_expansion(pi):
            if sigma not in index:
                raise ValueError(f"the coarsening {sigma} of {pi} is not among the given diagrams")
            rows.append(index[sigma])
            cols.append(j)
            vals.append(coeff)
    M = torch.sparse_coo_tensor(torch.tensor([rows, cols], dtype=torch.long).reshape(2, -1),
                                torch.tensor(vals, dtype=torch.float64),
                                (len(diagrams), len(orbit_diagrams)), check_invariants=True).coalesce()
    return M if sparse else M.to_dense()
