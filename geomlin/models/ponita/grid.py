"""Deterministic orientation grids on the sphere S^2 for PONITA's fiber bundle, and their symmetries.

* ``"fibonacci"``: the golden-spiral lattice (near-uniform for any ``n``, no randomness);
* ``"repulsion"``: ``n`` charges on the sphere relaxed to a minimum of the Coulomb energy
  ``sum_{a<b} 1 / |o_a - o_b|`` (the Thomson problem), from a start drawn with a fixed ``seed``;
* ``"icosahedral"``: the 12 vertices (``n = 12``), 20 face centres (``n = 20``) or 30 edge
  midpoints (``n = 30``) of the regular icosahedron: grids that the 60 rotations of the
  icosahedral group (and the inversion) permute exactly.

The reference implementation (Bekkers et al., ``ebekkers/ponita``) draws a random repulsion grid
every time a model is built; here a grid is a pure function of its arguments, built once in
float64 and handed out as a copy.

[`grid_symmetries`][] finds the rotations that permute a grid: the group to which a PONITA
bundle model on that grid is *exactly* equivariant (60 rotations for the icosahedral grids, only
the identity for a generic grid).
"""

from __future__ import annotations

import math
from functools import lru_cache

import torch
from torch import Tensor

from geomlin.validation import check_choice, check_int, check_memory, check_positive_float, check_positive_int

#: Grid constructions understood by [`orientation_grid`][].
GRID_METHODS = ("fibonacci", "repulsion", "icosahedral")
#: Sizes of the icosahedral grids: vertices, face centres, edge midpoints.
ICOSAHEDRAL_SIZES = (12, 20, 30)
#: Gradient steps and initial step size of the repulsion grid.
REPULSION_STEPS, REPULSION_STEP = 300, 0.1
#: Golden ratio.
PHI = (1 + math.sqrt(5)) / 2
#: Float64 ``(n, n, 3)`` temporaries alive at once in a repulsion step (differences, forces, their product).
REPULSION_TEMPORARIES = 3
#: Tolerance for "this rotation maps the grid onto itself".
SYMMETRY_TOL = 1e-9


def _fibonacci(n: int) -> Tensor:
    i = torch.arange(n, dtype=torch.float64) + 0.5
    z = 1 - 2 * i / n
    r = (1 - z * z).clamp_min(0).sqrt()
    phi = math.pi * (3 - math.sqrt(5)) * i  # golden angle
    return torch.stack([r * phi.cos(), r * phi.sin(), z], dim=-1)


def _icosahedron_vertices() -> Tensor:
    rows = []
    for a in (-1.0, 1.0):
        for b in (-PHI, PHI):
            rows += [(0.0, a, b), (a, b, 0.0), (b, 0.0, a)]  # cyclic permutations of (0, +-1, +-phi)
    v = torch.tensor(rows, dtype=torch.float64)
    return v / v.norm(dim=-1, keepdim=True)


def _icosahedral(n: int) -> Tensor:
    v = _icosahedron_vertices()
    if n == 12:
        return v
    dots = v @ v.T
    edge = dots.masked_fill(torch.eye(12, dtype=torch.bool), -2).max()
    adjacent = (dots - edge).abs() < 1e-9
    if n == 30:
        i, j = torch.triu(adjacent, diagonal=1).nonzero().T
        mid = v[i] + v[j]
        return mid / mid.norm(dim=-1, keepdim=True)
    # n == 20: the centres of the faces, triples of mutually adjacent vertices
    faces = [(a, b, c) for a in range(12) for b in range(a + 1, 12) for c in range(b + 1, 12)
             if adjacent[a, b] and adjacent[b, c] and adjacent[a, c]]
    centre = torch.stack([v[list(f)].sum(0) for f in faces])
    return centre / centre.norm(dim=-1, keepdim=True)


def _repulsion(n: int, seed: int) -> Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 3, generator=g, dtype=torch.float64)
    x = x / x.norm(dim=-1, keepdim=True)
    if n < 2:
        return x
    eye = torch.eye(n, dtype=torch.bool)
    for step in range(REPULSION_STEPS):
        diff = x[:, None] - x[None]  # (n, n, 3)
        dist = diff.norm(dim=-1).masked_fill(eye, 1.0)
        force = (diff / dist[..., None] ** 3).masked_fill(eye[..., None], 0.0).sum(1)  # -grad of 1/r
        force = force - (force * x).sum(-1, keepdim=True) * x  # tangent part
        lr = REPULSION_STEP * (1 - step / REPULSION_STEPS) / n  # annealed, scaled by the typical force
        x = x + lr * force
        x = x / x.norm(dim=-1, keepdim=True)
    return x


@lru_cache(maxsize=64)
def _cached_grid(num_ori: int, method: str, seed: int) -> Tensor:
    if method == "fibonacci":
        return _fibonacci(num_ori)
    if method == "repulsion":
        return _repulsion(num_ori, seed)
    return _icosahedral(num_ori)


def orientation_grid(num_ori: int, method: str = "fibonacci", seed: int = 0) -> Tensor:
    """``num_ori`` unit vectors on S^2, ``(num_ori, 3)`` float64, deterministic in the arguments.

    Parameters
    ----------
    num_ori : int
        number of orientations (``12``, ``20`` or ``30`` for ``"icosahedral"``).
    method : str
        ``"fibonacci"`` (default), ``"repulsion"`` or ``"icosahedral"`` (see the module docstring).
    seed : int
        start of the repulsion grid (ignored by the other methods).

    Notes
    -----
    Returns a fresh copy (the cached grid is never handed out). ``"repulsion"`` needs
    ``O(num_ori^2)`` memory and refuses grids above
    [`geomlin.validation.MEMORY_LIMIT_BYTES`][].
    """
    num_ori = check_positive_int(num_ori, "num_ori")
    check_choice(method, "method", GRID_METHODS)
    seed = check_int(seed, "seed", minimum=0)
    if method == "icosahedral" and num_ori not in ICOSAHEDRAL_SIZES:
        raise ValueError(f"icosahedral grids have {ICOSAHEDRAL_SIZES} orientations (vertices, face centres, "
                         f"edge midpoints), got num_ori={num_ori}")
    check_memory(num_ori * 3 * 8 * 4, f"orientation_grid(num_ori={num_ori}) (float64 points and temporaries)")
    if method == "repulsion":
        check_memory(REPULSION_TEMPORARIES * num_ori**2 * 3 * 8,
                     f"orientation_grid(num_ori={num_ori}, method='repulsion') (pairwise (n, n, 3) float64 forces)",
                     "use method='fibonacci' for large grids (O(n) memory)")
    return _cached_grid(num_ori, method, seed if method == "repulsion" else 0).clone()


def _frame(a: Tensor, b: Tensor) -> Tensor:
    """Orthonormal ``(.., 3, 3)`` with columns ``a``, the part of ``b`` orthogonal to ``a``, and their cross product."""
    b = b - (a * b).sum(-1, keepdim=True) * a
    b = b / b.norm(dim=-1, keepdim=True)
    return torch.stack([a, b, torch.linalg.cross(a, b, dim=-1)], dim=-1)


def grid_symmetries(grid: Tensor, proper: bool = True, tol: float = SYMMETRY_TOL) -> Tensor:
    """The orthogonal matrices that permute the rows of ``grid (n, 3)``: ``(K, 3, 3)`` float64.

    ``proper=True``: rotations only (det +1); ``False`` also the improper ones (reflections, the
    inversion). The identity is always first. Every symmetry maps a fixed pair of grid points to
    some pair with the same angle, so the candidates are those ``O(n^2)`` pair maps, each checked
    against the whole grid. ``grid`` must hold ``n`` distinct non-zero directions (rows are
    normalised; two rows within ``tol`` of each other raise ``ValueError`` naming them).
    """
    from geomlin.validation import check_bool, check_tensor

    check_tensor(grid, "grid", shape=(None, 3), finite=True, nonempty=True)
    tol = check_positive_float(tol, "tol")
    check_bool(proper, "proper")
    check_memory(grid.shape[0] ** 2 * 3 * 8, f"grid_symmetries of {grid.shape[0]} points (pairwise (n, n, 3) float64)")
    o = grid.detach().to(torch.float64).cpu()
    norms = o.norm(dim=-1, keepdim=True)
    if bool((norms <= SYMMETRY_TOL).any()):
        row = int((norms[:, 0] <= SYMMETRY_TOL).nonzero()[0])
        raise ValueError(f"grid rows must be non-zero directions, got a zero vector in row {row}")
    o = o / norms
    n = o.shape[0]
    close = torch.cdist(o, o) < tol
    close.fill_diagonal_(False)
    if bool(close.any()):
        i, j = close.nonzero()[0].tolist()
        raise ValueError(f"grid must not repeat a direction (a permutation of repeated points is not unique, so "
                         f"the symmetries would be over-counted), got rows {i} and {j} equal to within tol={tol:g}")
    eye = torch.eye(3, dtype=torch.float64)
    if n < 2:
        return eye[None]
    a = o[0]
    cos = o @ a
    # the partner of a: the point least parallel to it (a well-conditioned pair)
    partner = int((cos.abs() + 2.0 * ((o - a).norm(dim=-1) < tol)).argmin())
    if (cos[partner].abs() - 1).abs() < 1e-9:  # all points on one axis
        return eye[None]
    target = o @ o.T
    i, j = ((target - cos[partner]).abs() < 1e-7).nonzero().T
    source = _frame(a, o[partner])  # (3, 3)
    images = _frame(o[i], o[j])  # (K, 3, 3)
    candidates = [images @ source.T]
    if not proper:
        flip = torch.diag(torch.tensor([1.0, 1.0, -1.0], dtype=torch.float64))
        candidates.append(images @ flip @ source.T)
    out = []
    for R in torch.cat(candidates):
        moved = o @ R.T
        if (moved[:, None] - o[None]).norm(dim=-1).min(-1).values.max() < tol:
            out.append(R)
    R = torch.stack(out)
    # the identity first, then the rest in a deterministic order
    is_id = (R - eye).abs().flatten(1).amax(-1) < 1e-9
    return torch.cat([eye[None], R[~is_id]])


def _generators(elements: Tensor, grid: Tensor) -> Tensor:
    """A small generating set of a finite group of grid symmetries (greedy, closures computed on the
    permutations of the grid points, which are exact)."""
    o = grid.detach().to(torch.float64).cpu()
    perms = [tuple((o @ R.T)[:, None].sub(o[None]).norm(dim=-1).argmin(-1).tolist()) for R in elements]
    identity = tuple(range(len(o)))
    chosen: list[int] = []
    closure = {identity}
    for k, p in enumerate(perms):
        if p in closure:
            continue
        chosen.append(k)
        gens = [perms[c] for c in chosen]
        frontier = list(closure)
        while frontier:  # breadth-first closure under right multiplication by the generators
            new = []
            for a in frontier:
                for g in gens:
                    ag = tuple(a[i] for i in g)
                    if ag not in closure:
                        closure.add(ag)
                        new.append(ag)
            frontier = new
    return elements[chosen] if chosen else elements[:1]


def grid_symmetry_group(grid: Tensor, proper: bool = True):
    """The symmetries of [`grid_symmetries`][] as a finite [`geomlin.groups.Group`][geomlin.groups.base.Group] (a sampler),
    given by a small set of generators."""
    from geomlin.groups import Group

    elements = grid_symmetries(grid, proper)
    name = f"symmetries of a {grid.shape[0]}-point grid ({len(elements)} {'rotations' if proper else 'elements'})"
    return Group(discrete_generators=_generators(elements, grid), d=3, name=name)
