"""geomlin.neighbors.periodic against two oracles, in float64: ASE's ``primitive_neighbor_list`` and a
brute-force sum over cell images written out here. Random orthorhombic, triclinic and rotated cells,
periodic on every subset of the axes, atoms outside their cell, cutoffs longer than half a cell (several
images of one neighbour), batches of graphs with their own cells; the edge vectors and their derivative
in the cell; invariance under lattice translations of an atom and translations of the whole system;
cells refused with their numbers; the same edges on the simulated accelerator."""

import itertools
import math

import numpy as np
import pytest
import torch

from geomlin.neighbors import cell_list, edge_vectors, neighbor_list, radius_pairs
from geomlin.neighbors.periodic import MAX_CELL_IMAGES
from geomlin.validation import deferred_checks
from tests.oracles import require
from tests.refusals import assert_refused

PBCS = list(itertools.product([False, True], repeat=3))


def _system(seed, kind, n=None):
    """Random positions (fractional coordinates in [-0.5, 1.5): many atoms outside the cell), a cell of
    ``kind`` (orthorhombic, triclinic or rotated triclinic), a periodicity pattern and a cutoff that is
    often longer than half the cell's smallest height."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 25)) if n is None else n
    cell = np.diag(rng.uniform(2.5, 8.0, 3))
    if kind != "orthorhombic":
        cell = cell + np.triu(rng.uniform(-2.0, 2.0, (3, 3)), 1)
    if kind == "rotated":
        q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
        cell = cell @ q
    pos = rng.uniform(-0.5, 1.5, (n, 3)) @ cell
    pbc = PBCS[seed % len(PBCS)]
    return pos, cell, pbc, float(rng.uniform(1.0, 6.0))


def _heights(cell):
    volume = abs(np.linalg.det(cell))
    return np.array([volume / np.linalg.norm(np.cross(cell[(k + 1) % 3], cell[(k + 2) % 3])) for k in range(3)])


def _brute_force(pos, cell, pbc, cutoff, loop=False):
    """Every ``(i, j, S)`` with ``|pos[j] + S cell - pos[i]| <= cutoff``, over every image ``S`` in a box
    that surely holds them (positions as given, not wrapped), as sorted tuples with the distance."""
    frac = pos @ np.linalg.inv(cell)
    spread = frac.max(axis=0) - frac.min(axis=0)
    reach = [math.ceil(cutoff / h + s) + 1 if p else 0 for h, s, p in zip(_heights(cell), spread, pbc)]
    out = []
    for s in itertools.product(*(range(-r, r + 1) for r in reach)):
        shifted = pos + np.array(s, dtype=float) @ cell
        d = np.linalg.norm(shifted[None, :, :] - pos[:, None, :], axis=-1)     # (i, j)
        for i, j in zip(*np.nonzero(d <= cutoff)):
            if loop or i != j or any(s):
                out.append((int(i), int(j), tuple(s), float(d[i, j])))
    return sorted(out)


def _edges(edge_index, shift):
    return sorted(zip(edge_index[1].tolist(), edge_index[0].tolist(), map(tuple, shift.tolist())))


@pytest.mark.parametrize("kind", ["orthorhombic", "triclinic", "rotated"])
@pytest.mark.parametrize("seed", range(16))
def test_neighbor_list_matches_ase(kind, seed):
    ase_nl = require("ase.neighborlist")
    pos, cell, pbc, cutoff = _system(seed, kind)
    edge_index, shift = neighbor_list(torch.tensor(pos), cutoff, cell=torch.tensor(cell), pbc=pbc)
    i, j, S, D = ase_nl.primitive_neighbor_list("ijSD", pbc, cell, pos, cutoff, self_interaction=False)
    assert _edges(edge_index, shift) == sorted(zip(i.tolist(), j.tolist(), map(tuple, S.tolist())))
    vec = edge_vectors(torch.tensor(pos), edge_index, shift, torch.tensor(cell)[None])
    want = {(a, b, tuple(s)): d for a, b, s, d in zip(i.tolist(), j.tolist(), S.tolist(), D.tolist())}
    got = {(a, b, tuple(s)): v for a, b, s, v in zip(edge_index[1].tolist(), edge_index[0].tolist(),
                                                     shift.tolist(), vec.tolist())}
    for key, v in got.items():
        np.testing.assert_allclose(v, want[key], rtol=0, atol=1e-12)


@pytest.mark.parametrize("loop", [False, True])
@pytest.mark.parametrize("seed", range(8))
def test_neighbor_list_matches_brute_force_in_a_batch(seed, loop, monkeypatch):
    """Three graphs with their own cells and periodicity (one free: pbc all False, its cell unused and
    zero), tiny candidate blocks; the edges, their order (target, distance, source) and distances."""
    monkeypatch.setattr(cell_list, "CANDIDATE_BUDGET", 97)
    systems = [_system(3 * seed + k, kind) for k, kind in enumerate(["orthorhombic", "triclinic", "rotated"])]
    systems[2] = (systems[2][0], np.zeros((3, 3)), (False, False, False), systems[2][3])
    cutoff = min(s[3] for s in systems)
    pos = np.concatenate([s[0] for s in systems])
    first = np.cumsum([0] + [len(s[0]) for s in systems])
    batch = torch.cat([torch.full((len(s[0]),), g) for g, s in enumerate(systems)])
    cells = torch.tensor(np.stack([s[1] for s in systems]))
    pbc = torch.tensor([s[2] for s in systems])
    edge_index, shift = neighbor_list(torch.tensor(pos), cutoff, batch, cells, pbc, loop=loop)
    want = []
    for (p, c, b, _), f in zip(systems, first):
        want += [(i + f, j + f, s, d) for i, j, s, d in _brute_force(p, c if any(b) else np.eye(3), b, cutoff, loop)]
    assert _edges(edge_index, shift) == sorted((i, j, s) for i, j, s, _ in want)
    dist = edge_vectors(torch.tensor(pos), edge_index, shift, cells, batch).norm(dim=-1)
    order = sorted(range(len(want)), key=lambda e: (want[e][0], want[e][3], want[e][1]))
    assert edge_index[1].tolist() == [want[e][0] for e in order]
    np.testing.assert_allclose(dist.numpy(), [want[e][3] for e in order], rtol=0, atol=1e-10)


def test_several_images_of_one_atom_in_a_small_cell():
    """One atom in a cubic cell of side 2 with cutoff 4.5: its neighbours are its own images, the lattice
    points ``2 S`` with ``0 < |2 S| <= 4.5`` (counted here by formula), each once."""
    edge_index, shift = neighbor_list(torch.zeros(1, 3, dtype=torch.float64), 4.5, cell=2.0 * torch.eye(3).double())
    lattice = [s for s in itertools.product(range(-3, 4), repeat=3) if 0 < 4 * sum(x * x for x in s) <= 4.5 ** 2]
    assert sorted(map(tuple, shift.tolist())) == sorted(lattice)
    assert edge_index.unique().tolist() == [0]


def test_free_space_is_the_radius_search():
    pos = torch.rand(60, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 4
    batch = torch.tensor([0] * 25 + [1] * 35)
    edge_index, shift = neighbor_list(pos, 1.5, batch)
    src, dst, _ = radius_pairs(pos, 1.5, batch)
    assert torch.equal(edge_index, torch.stack([src, dst])) and shift.shape == (src.numel(), 3) and not shift.any()


@pytest.mark.parametrize("seed", range(4))
def test_lattice_translations_of_an_atom_and_translations_of_the_system_keep_the_edge_vectors(seed):
    pos, cell, _, cutoff = _system(seed, "triclinic", n=12)
    pbc = (True, True, seed % 2 == 0)
    rng = np.random.default_rng(100 + seed)

    def vectors(p):
        p, c = torch.tensor(p), torch.tensor(cell)
        edge_index, shift = neighbor_list(p, cutoff, cell=c, pbc=pbc)
        vec = edge_vectors(p, edge_index, shift, c[None])
        return sorted(zip(edge_index[1].tolist(), edge_index[0].tolist(), np.round(vec.numpy(), 9).tolist()))

    base = vectors(pos)
    moved = pos.copy()
    moved[3] += np.array([2, -3, 1 if pbc[2] else 0]) @ cell           # through several cell faces
    assert vectors(moved) == base
    assert vectors(pos + rng.normal(size=3) * 7.0) == base


def test_edge_vectors_follow_the_cell():
    """Scaling positions and cell by ``s`` scales every edge vector by ``s``: ``d/ds sum |r|^2 = 2 sum |r|^2``
    at ``s = 1`` (the cell's derivative, behind stress, reaches the edge vectors)."""
    pos, cell, _, cutoff = _system(5, "rotated", n=10)
    p, c = torch.tensor(pos), torch.tensor(cell)
    edge_index, shift = neighbor_list(p, cutoff, cell=c)
    assert shift.any()
    s = torch.ones((), dtype=torch.float64, requires_grad=True)
    total = edge_vectors(p * s, edge_index, shift, (c * s)[None]).pow(2).sum()
    (grad,) = torch.autograd.grad(total, s)
    torch.testing.assert_close(grad, 2 * total.detach(), rtol=1e-12, atol=0)


def test_a_cell_too_small_for_the_cutoff_is_refused_with_the_numbers():
    cell = torch.diag(torch.tensor([10.0, 0.5, 10.0], dtype=torch.float64))
    pos = torch.zeros(2, 3, dtype=torch.float64)
    limit = 5.0 / MAX_CELL_IMAGES
    assert_refused(lambda: neighbor_list(pos, 5.0, cell=cell), ValueError,
                   f"too small for the cutoff 5: its height along lattice vector 1 is 0.5, below cutoff / "
                   f"MAX_CELL_IMAGES = {limit:.4g}")
    edge_index, _ = neighbor_list(pos, 5.0, cell=cell, pbc=(True, False, True))    # not periodic there: fine
    assert edge_index.shape[1] > 0
    flat = torch.tensor([[3.0, 0, 0], [0, 3, 0], [3, 3, 0]], dtype=torch.float64)
    assert_refused(lambda: neighbor_list(pos, 1.0, cell=flat), ValueError,
                   "cell of graph 0 has linearly dependent periodic lattice vectors")


@pytest.mark.parametrize("budget", [97, cell_list.CANDIDATE_BUDGET])
def test_neighbor_list_on_a_device_matches_the_cpu_with_bounded_syncs(budget, monkeypatch):
    """On the simulated accelerator the same edges, at most five host syncs (four with one block of
    candidates), no upload; the boundary's checks are raised there at once."""
    from tests.device import simulated as sim

    monkeypatch.setattr(cell_list, "CANDIDATE_BUDGET", budget)
    (p0, c0, _, cutoff), (p1, c1, _, _) = _system(7, "triclinic", n=30), _system(8, "rotated", n=20)
    pos = torch.tensor(np.concatenate([p0, p1]))
    batch = torch.tensor([0] * 30 + [1] * 20)
    cells = torch.tensor(np.stack([c0, c1]))
    pbc = torch.tensor([[True, True, True], [True, False, True]])
    want = neighbor_list(pos, cutoff, batch, cells, pbc)
    args = sim.to_sim((pos, batch, cells, pbc))
    with deferred_checks(), sim.watch() as log:
        got = neighbor_list(args[0], cutoff, *args[1:])
    assert len(log.events) == len(log.of("sync")) <= (4 if budget > 1000 else 5), log.report()
    for a, b in zip(got, want):
        assert a.device == sim.DEVICE and torch.equal(sim.to_cpu(a), b)
    bad = pos.clone()
    bad[4, 2] = math.nan
    assert_refused(lambda: neighbor_list(sim.to_sim(bad), cutoff, *args[1:]), ValueError, "pos contains NaN")
    small = cells.clone()
    small[1, 2] *= 0.05
    assert_refused(lambda: neighbor_list(args[0], cutoff, args[1], sim.to_sim(small), args[3]), ValueError,
                   "the periodic cell of graph 1 is too small for the cutoff")


def test_no_atoms_and_no_periodic_axis_on_the_cpu_and_a_device():
    """Edge cases that make no periodic image: no atoms, and a cell periodic along no axis (the
    free-space pairs, brute force)."""
    from tests.device import simulated as sim

    pos = torch.rand(15, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64) * 3
    want = sorted((i, j, (0, 0, 0)) for i, j, _, _ in _brute_force(pos.numpy(), np.eye(3), (False,) * 3, 1.2))
    for move in (lambda t: t, sim.to_sim):
        edge_index, shift = neighbor_list(move(torch.zeros(0, 3)), 2.0, cell=move(3 * torch.eye(3)))
        assert edge_index.shape == (2, 0) and shift.shape == (0, 3)
        edge_index, shift = neighbor_list(move(pos), 1.2, cell=move(3 * torch.eye(3, dtype=torch.float64)), pbc=False)
        assert _edges(sim.to_cpu(edge_index), sim.to_cpu(shift)) == want
