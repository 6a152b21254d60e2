"""Neighbour lists of atoms in periodic cells: PyG edges with integer cell shifts, as ASE and matscipy give them.

[`neighbor_list`][] finds every pair ``(j, i, S)`` with ``|pos[j] - pos[i] + S @ cell| <= cutoff``
for a flat PyG batch of free molecules or of orthorhombic or triclinic cells, periodic along any
subset of the three lattice vectors; [`edge_vectors`][] computes those vectors inside a model's
forward, differentiable in ``pos`` and ``cell``.

**Method.** Every atom is wrapped into its cell along the periodic axes; the periodic images that lie
within ``cutoff`` of the cell are added (fractional coordinates within ``[-cutoff / h_k, 1 + cutoff /
h_k]`` along every periodic lattice vector ``a_k``, with ``h_k`` the cell's height across ``a_k``,
so triclinic cells are exact); one cell-list search
([`geomlin.neighbors.cell_list.search_pairs`][]) with the original atoms as targets finds the
pairs. The images kept are those near the cell's faces, so the cost stays linear in the number of
atoms at a fixed density. A cutoff longer than half a cell height gives several images of one
neighbour, and the atom's own images, as ASE's ``neighbor_list`` does.

**Refused, with the numbers**: a cell whose height across a periodic lattice vector is below
``cutoff /`` [`MAX_CELL_IMAGES`][] (too small for the cutoff: the images to search grow as
``(cutoff / h)^3``), a cell whose periodic lattice vectors are linearly dependent, non-finite
positions or cells, and graphs without a cell.

**Host syncs on accelerators**: those of the radius search (two or three) and two more: the range of
images (read back with the checks of positions and cells) and the number of images kept.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from geomlin.neighbors import cell_list
from geomlin.neighbors.cell_list import (
    check_batch,
    check_points,
    compact_blocks,
    pair_order,
    refuse_nonfinite,
    search_pairs,
)
from geomlin.validation import (
    check_bool,
    check_float,
    check_memory,
    check_same_device,
    check_tensor,
    shape_str,
)

#: Periodic images searched on each side of a cell along a periodic lattice vector, at most: a cell
#: whose height across one is below ``cutoff / MAX_CELL_IMAGES`` is too small for the cutoff (refused).
MAX_CELL_IMAGES = 8
#: Smallest accepted ``det(Gram) / prod |a_k|^2`` of a cell's periodic lattice vectors ``a_k`` (the squared
#: volume over the squared product of lengths; 1 for orthogonal vectors): below it they are linearly dependent.
MIN_CELL_SHAPE = 1e-20
#: Bytes per periodic image of an atom that [`neighbor_list`][] may hold (float64 position, int64 shift
#: and index), for the memory estimate of the images.
IMAGE_BYTES = 64


def neighbor_list(pos: Tensor, cutoff: float, batch: Tensor | None = None, cell: Tensor | None = None,
                  pbc=None, loop: bool = False) -> tuple[Tensor, Tensor]:
    """The pairs of atoms within ``cutoff``, free or in periodic cells, as a PyG ``edge_index`` and cell shifts.

    An edge ``(j, i, S)`` says that the image of atom ``j`` shifted by the integer lattice vector
    ``S`` lies within ``cutoff`` of atom ``i``: ``|pos[j] - pos[i] + S @ cell| <= cutoff``, with
    ``i, j, S`` as ASE's ``neighbor_list("ijS", ...)`` and matscipy give them. Atoms may lie outside
    their cell (unwrapped trajectories): the shifts refer to the positions as given.

    Parameters
    ----------
    pos : Tensor of shape (N, 3)
        float atom positions, finite.
    cutoff : float
        the distance, finite and > 0.
    batch : Tensor of shape (N,), optional
        int graph index of every atom, sorted (PyG's ``batch``; default: one graph).
    cell : Tensor of shape (G, 3, 3) or (3, 3), optional
        float lattice vectors of every graph's cell as rows (``cell[g, k]`` is ``a_k``; PyG's per-graph
        ``Data.cell (1, 3, 3)`` batches to ``(G, 3, 3)``). Orthorhombic or triclinic. ``None``: free
        space, every shift 0.
    pbc : bool, sequence of 3 bools, or Tensor of shape (3,) or (G, 3), optional
        which lattice vectors are periodic (default: all three, with a cell). Along a non-periodic
        axis atoms are not wrapped and have no images; the lattice vectors of non-periodic axes are
        not used (they may be zero).
    loop : bool
        include ``(i, i, 0)``. An atom's own periodic images ``(i, i, S != 0)`` are neighbours either way.

    Returns
    -------
    edge_index : Tensor of shape (2, E)
        int64, rows (source ``j``, target ``i``); ordered by target, then distance, then source (the
        images of one source at equal distance in a fixed order).
    shift : Tensor of shape (E, 3)
        int64 ``S`` of every edge (zeros without a cell); [`edge_vectors`][] gives ``r_ij``.

    Notes
    -----
    Linear in the number of atoms at a fixed density. A cutoff longer than half a cell height gives
    several images of one neighbour; a cell whose height along a periodic lattice vector is below
    ``cutoff /`` [`MAX_CELL_IMAGES`][] is refused with the height and the cutoff, and so is a cell
    whose periodic lattice vectors are linearly dependent (see the module docstring). Distances are
    computed in float64. Host syncs on accelerators: those of
    [`geomlin.neighbors.cell_list.radius_pairs`][] (two or three), and two more with a cell; run it once
    per batch at the data boundary.
    """
    pos = check_points(pos, dim=3 if cell is not None else None)
    cutoff = check_float(cutoff, "cutoff", minimum=0.0, strict_minimum=True)
    check_bool(loop, "loop")
    if cell is None:
        if pbc is not None:
            raise ValueError("pbc needs the cell it makes periodic: pass cell (G, 3, 3) as well")
        src, dst, _ = search_pairs(pos, cutoff, check_batch(batch, pos), loop, None)
        return torch.stack([src, dst]), src.new_zeros(src.shape[0], pos.shape[1])
    cell, pbc = _check_cell(cell, pbc, pos)
    batch = check_batch(batch, pos, num_graphs=cell.shape[0])
    if batch is None and cell.shape[0] != 1:
        raise ValueError(f"cell holds {cell.shape[0]} cells but there is one graph (no batch); pass batch (N,) "
                         "or one cell (1, 3, 3)")
    src, dst, shift = _periodic_pairs(pos, cutoff, cell, pbc, batch, loop)
    return torch.stack([src, dst]), shift


def edge_vectors(pos: Tensor, edge_index: Tensor, shift: Tensor | None = None, cell: Tensor | None = None,
                 batch: Tensor | None = None) -> Tensor:
    """The vector of every edge ``j -> i``, from target ``i`` to the image of source ``j``: ``pos[j] - pos[i] + S @ cell``.

    Differentiable in ``pos`` and ``cell`` (forces, and stress from the cell derivative), with no
    host sync: meant for a model's forward, after [`neighbor_list`][] at the data boundary. Checks
    shapes only (index values are the caller's).

    Parameters
    ----------
    pos : Tensor of shape (N, 3)
        float positions.
    edge_index : Tensor of shape (2, E)
        int rows (source ``j``, target ``i``).
    shift : Tensor of shape (E, 3), optional
        integer (or integral float) cell shifts ``S``; with ``cell``.
    cell : Tensor of shape (G, 3, 3), optional
        lattice vectors as rows per graph; ``G > 1`` needs ``batch``.
    batch : Tensor of shape (N,), optional
        int graph index of every atom (the cell of edge ``j -> i`` is ``cell[batch[i]]``).

    Returns
    -------
    Tensor of shape (E, 3)
        in ``pos``'s dtype.
    """
    check_tensor(pos, "pos", shape=(None, 3), what="N atoms")
    check_tensor(edge_index, "edge_index", shape=(2, None), dtype="index")
    vec = pos.index_select(0, edge_index[0]) - pos.index_select(0, edge_index[1])
    if shift is None and cell is None:
        return vec
    if shift is None or cell is None:
        raise ValueError("edge_vectors needs shift and cell together (the shifts count lattice vectors of the cell)")
    check_tensor(shift, "shift", shape=(edge_index.shape[1], 3), dtype=("int", "float"), what="one per edge")
    check_tensor(cell, "cell", shape=(None, 3, 3), what="lattice vectors as rows, one cell per graph")
    s, c = shift.to(pos.dtype), cell.to(pos.dtype)
    if c.shape[0] == 1:
        return vec + s @ c[0]
    if batch is None:
        raise ValueError(f"cell holds {c.shape[0]} cells: pass batch (N,) to say which cell each edge is in")
    check_tensor(batch, "batch", shape=(pos.shape[0],), dtype="int")
    return vec + torch.einsum("ek,ekc->ec", s, c.index_select(0, batch.index_select(0, edge_index[1])))


def _check_cell(cell, pbc, pos: Tensor) -> tuple[Tensor, Tensor]:
    """``cell (G, 3, 3)`` float and ``pbc (G, 3)`` bool on ``pos``'s device (finiteness: at the first sync)."""
    check_tensor(cell, "cell", finite=cell.device.type == "cpu" if isinstance(cell, Tensor) else False,
                 what="lattice vectors as rows, one cell per graph")
    if cell.shape == (3, 3):
        cell = cell[None]
    if cell.ndim != 3 or cell.shape[1:] != (3, 3):
        raise ValueError(f"cell must have shape (G, 3, 3) or (3, 3) (lattice vectors as rows, one cell per graph), "
                         f"got {shape_str(cell.shape)}")
    check_same_device("pos", pos, "cell", cell)
    G = cell.shape[0]
    if pbc is None:
        pbc = True
    if isinstance(pbc, bool):
        pbc = (pbc,) * 3
    if isinstance(pbc, (tuple, list)):
        if len(pbc) != 3 or not all(isinstance(p, bool) for p in pbc):
            raise TypeError(f"pbc must be a bool, three bools or a bool tensor (3,) / (G, 3), got {pbc!r}")
        return cell, torch.stack([torch.full((G,), p, dtype=torch.bool, device=pos.device) for p in pbc], dim=1)
    check_tensor(pbc, "pbc", dtype="bool", what="which lattice vectors are periodic")
    if pbc.shape not in ((3,), (G, 3)):
        raise ValueError(f"pbc must have shape (3,) or (G, 3) = (G, 3) for the {G} cell(s), got {shape_str(pbc.shape)}")
    check_same_device("pos", pos, "pbc", pbc)
    return cell, pbc.expand(G, 3)


def _reciprocal(cell: Tensor, pbc: Tensor) -> tuple[Tensor, Tensor]:
    """Dual vectors ``b_k (G, 3, 3)`` of the periodic lattice vectors and whether those are independent ``(G,)``.

    For periodic ``k`` and ``l``, ``b_k . a_l = delta_kl`` and ``b_k`` lies in the span of the periodic
    ``a``'s (so fractional coordinates ``pos . b_k`` ignore the non-periodic axes); ``b_k = 0`` for a
    non-periodic ``k``. From the Gram matrix of the periodic vectors, completed by the identity on
    the non-periodic axes, inverted in closed form (adjugate over determinant: no host sync). The
    height of the cell along ``a_k`` (the distance between its faces spanned by the other two) is
    ``1 / |b_k|``.
    """
    a = cell * pbc[..., None]
    gram = a @ a.transpose(-1, -2) + torch.diag_embed((~pbc).to(cell.dtype))
    r0, r1, r2 = gram.unbind(-2)
    cof = torch.stack([torch.linalg.cross(r1, r2), torch.linalg.cross(r2, r0), torch.linalg.cross(r0, r1)], -1)
    det = (r0 * cof[..., 0]).sum(-1)
    scale = torch.diagonal(gram, dim1=-2, dim2=-1).prod(-1)
    ok = det > MIN_CELL_SHAPE * scale
    inverse = cof / torch.where(ok, det, torch.ones_like(det))[:, None, None]
    return torch.where(ok[:, None, None], inverse @ a, torch.zeros_like(a)), ok


def _cell_checks(pos: Tensor, cell: Tensor, ok_shape: Tensor, images: Tensor, cutoff: float) -> list[int]:
    """Read the image range per axis ``(3,)`` back (one host sync) with the checks of positions and cells;
    refuse non-finite values, dependent lattice vectors and cells too small for the cutoff with their numbers."""
    flags = torch.stack([torch.isfinite(pos).all(), torch.isfinite(cell).all(), ok_shape.all()]).long()
    summary = torch.cat([flags, images.amax(dim=0)]).tolist()
    refuse_nonfinite(summary[0])
    refuse_nonfinite(summary[1], "cell")
    if not summary[2]:
        g = int(torch.argmin(ok_shape.long()))
        raise ValueError(f"cell of graph {g} has linearly dependent periodic lattice vectors "
                         f"{cell[g].tolist()}; a periodic axis needs a lattice vector independent of the others")
    worst = summary[3:]
    if max(worst) > MAX_CELL_IMAGES:
        g, k = divmod(int(torch.argmax(images.reshape(-1))), 3)
        raise _too_small(cell, g, k, cutoff)
    return worst


def _too_small(cell: Tensor, g: int, k: int, cutoff: float) -> ValueError:
    """The refusal of a cell too small for the cutoff, with its height and the cutoff."""
    a = cell[g].tolist()
    u, v = a[(k + 1) % 3], a[(k + 2) % 3]
    normal = [u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2], u[0] * v[1] - u[1] * v[0]]
    height = abs(sum(n * x for n, x in zip(normal, a[k]))) / math.sqrt(sum(n * n for n in normal))
    return ValueError(
        f"the periodic cell of graph {g} is too small for the cutoff {cutoff:g}: its height along lattice vector "
        f"{k} is {height:.4g}, below cutoff / MAX_CELL_IMAGES = {cutoff / MAX_CELL_IMAGES:.4g} (the search would "
        f"visit more than {MAX_CELL_IMAGES} images on each side); use a supercell or a smaller cutoff")


def _periodic_pairs(pos: Tensor, cutoff: float, cell: Tensor, pbc: Tensor, batch: Tensor | None,
                    loop: bool) -> tuple[Tensor, Tensor, Tensor]:
    """``src, dst, shift`` of [`neighbor_list`][] in cells, on checked input.

    The atoms are wrapped into their cells along the periodic axes (``w``: integer cell of each atom),
    the periodic images within ``cutoff`` of a cell are added (fractional coordinates within
    ``[-cutoff |b_k|, 1 + cutoff |b_k|]`` along every periodic axis), and the original atoms are the
    targets of one cell-list search over atoms and images. A pair of wrapped positions with image
    shift ``S`` has ``S - w_j + w_i`` in the positions as given.
    """
    n, device = pos.shape[0], pos.device
    x, c = pos.detach().to(torch.float64), cell.detach().to(torch.float64)
    graph = batch if batch is not None else torch.zeros(n, dtype=torch.long, device=device)
    recip, ok_shape = _reciprocal(c, pbc)
    reach = cutoff * recip.norm(dim=-1)                                      # (G, 3) fractional reach, 0 if free
    images = torch.ceil(torch.nan_to_num(reach, nan=0.0, posinf=0.0)).long()
    span = _cell_checks(x, c, ok_shape, images, cutoff)                      # host sync: the image range
    cell_of, recip_of, periodic = c[graph], recip[graph], pbc[graph]          # (N, 3, 3), (N, 3, 3), (N, 3)
    frac = torch.einsum("nc,nkc->nk", x, recip_of)
    wrap = torch.where(periodic, torch.floor(frac), torch.zeros_like(frac))
    frac, x = frac - wrap, x - torch.einsum("nk,nkc->nc", wrap, cell_of)
    steps = torch.cartesian_prod(*(torch.arange(-m, m + 1, device=device) for m in span)).reshape(-1, 3)
    middle = steps.shape[0] // 2                                              # the shift (0, 0, 0)
    steps = torch.cat([steps[:middle], steps[middle + 1:]])
    check_memory(n * steps.shape[0] * IMAGE_BYTES, f"the periodic images of {n} atoms ({steps.shape[0]} cell "
                 f"images for cutoff {cutoff:g})", "use a larger cell or a smaller cutoff")
    low, high = -reach[graph], 1.0 + reach[graph]
    rows = max(1, cell_list.CANDIDATE_BUDGET // max(n, 1))

    def candidates(start):
        s = steps[start:start + rows].to(x.dtype)[:, None, :]                # (m, 1, 3)
        f = frac[None] + s                                                   # (m, N, 3)
        keep = torch.where(periodic[None], (f >= low) & (f <= high), s == 0).all(dim=-1)
        return start, [keep.reshape(-1)]

    atoms, shifts = [torch.arange(n, device=device)], [torch.zeros(n, 3, dtype=torch.long, device=device)]
    blocks = list(range(0, steps.shape[0], rows)) if n else []              # none without periodic axes or atoms
    for start, (flat,) in compact_blocks(blocks, candidates, device):
        atoms.append(flat % n)
        shifts.append(steps[start + flat // n])
    atom, image = torch.cat(atoms), torch.cat(shifts)
    ghost_x = x[atom[n:]] + torch.einsum("ek,ekc->ec", image[n:].to(x.dtype), cell_of[atom[n:]])
    src, dst, d2 = search_pairs(torch.cat([x, ghost_x]), cutoff, graph[atom] if batch is not None else None, loop,
                                 torch.arange(n, device=device), sort=False)
    src, shift = atom[src], image[src]
    w = wrap.long()
    shift = shift - w[src] + w[dst]
    o = pair_order(dst, d2, src)
    return src[o], dst[o], shift[o]
