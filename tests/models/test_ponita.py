"""PONITA (Bekkers et al. 2024): grids, pair attributes, exact and approximate equivariance, forces.

Oracles: the order of the icosahedral rotation group (60), attributes written out by hand for
chosen pairs, brute-force edge lists, finite differences, and the continuum limit of the grid.
"""

import itertools
import math

import pytest
import torch

from geomlin.groups import E3, SE3
from geomlin.models import Ponita, PonitaDynamics, PonitaPotential, grid_symmetries, orientation_grid
from geomlin.models.ponita import (
    bundle_pair_attributes,
    complete_attributes,
    fiber_attributes,
    grid_symmetry_group,
    point_attributes,
    polynomial_features,
    spatial_attributes,
    sphere_to_scalar,
    sphere_to_vector,
    vector_to_sphere,
)
from geomlin.radial import CUTOFF_EXPONENT, polynomial_cutoff
from geomlin.reps import Positions, Vectors
from geomlin.testing import assert_equivariant, equivariance_error
from tests.models.potentials import assert_padded_batch_equals_each_alone
from tests.randomized import randomized

F64 = torch.float64


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


# ---------------------------------------------------------------------------------- grids
@pytest.mark.parametrize("method,n", [("fibonacci", 16), ("fibonacci", 50), ("repulsion", 20), ("icosahedral", 12),
                                      ("icosahedral", 20), ("icosahedral", 30)])
def test_grids_are_deterministic_unit_and_spread(method, n):
    g = orientation_grid(n, method)
    assert g.shape == (n, 3) and g.dtype == F64
    assert (g.norm(dim=-1) - 1).abs().max() < 1e-14
    assert torch.equal(g, orientation_grid(n, method))  # a pure function of its arguments
    # no two orientations coincide; the grid covers the sphere (max distance to the nearest point)
    dist = torch.cdist(g, g) + 10 * torch.eye(n, dtype=F64)
    assert dist.min() > 1.0 / math.sqrt(n)
    probe = torch.randn(2000, 3, dtype=F64, generator=_gen(1))
    probe = probe / probe.norm(dim=-1, keepdim=True)
    assert torch.cdist(probe, g).min(-1).values.max() < 4.0 / math.sqrt(n)
    g.mul_(0)  # a copy: the cached grid is untouched
    assert orientation_grid(n, method).abs().sum() > 0


def test_repulsion_lowers_the_coulomb_energy_and_depends_on_the_seed():
    def energy(x):
        d = torch.cdist(x, x) + torch.eye(len(x), dtype=F64)
        return (1 / d).triu(1).sum()

    start = torch.randn(24, 3, dtype=F64, generator=torch.Generator().manual_seed(0))
    start = start / start.norm(dim=-1, keepdim=True)
    relaxed = orientation_grid(24, "repulsion", seed=0)
    assert energy(relaxed) < energy(start) - 1.0
    # Oracle: the Thomson-problem minimum for 24 charges is 223.347 (Wales et al. table)
    assert energy(relaxed) < 223.35 * 1.002
    assert not torch.equal(relaxed, orientation_grid(24, "repulsion", seed=1))


def test_icosahedral_grids_have_the_icosahedral_group():
    """Oracle: the rotation group of the icosahedron has order 60 (120 with the inversion)."""
    for n in (12, 20, 30):
        g = orientation_grid(n, "icosahedral")
        R = grid_symmetries(g)
        assert R.shape == (60, 3, 3)
        assert (torch.linalg.det(R) - 1).abs().max() < 1e-12
        assert (R.transpose(-1, -2) @ R - torch.eye(3, dtype=F64)).abs().max() < 1e-12
        assert len(grid_symmetries(g, proper=False)) == 120
        # every element permutes the grid
        moved = g @ R[7].T
        assert (moved[:, None] - g[None]).norm(dim=-1).min(-1).values.max() < 1e-12
    # a generic grid has (almost) no symmetry
    assert len(grid_symmetries(orientation_grid(20, "repulsion"))) == 1


def test_grid_bad_input():
    with pytest.raises(ValueError, match="icosahedral grids have"):
        orientation_grid(16, "icosahedral")
    with pytest.raises(ValueError, match="method"):
        orientation_grid(16, "healpix")
    with pytest.raises(ValueError, match="num_ori"):
        orientation_grid(0)


# ----------------------------------------------------------------------------- attributes
def _random_se3(n, seed):
    return SE3().sample(n, generator=_gen(seed))


def test_attributes_are_invariant_under_random_se3():
    """Every pair attribute in float64 to 1e-12 under random rotations and translations."""
    g = _gen(2)
    p_i, p_j = torch.randn(50, 3, dtype=F64, generator=g), torch.randn(50, 3, dtype=F64, generator=g)
    o_i, o_j = torch.randn(2, 50, 3, dtype=F64, generator=g)
    o_i, o_j = o_i / o_i.norm(dim=-1, keepdim=True), o_j / o_j.norm(dim=-1, keepdim=True)
    grid = orientation_grid(12, "icosahedral")
    ref_pair = bundle_pair_attributes(p_j - p_i, o_i, o_j, complete=True)
    rel = p_j - p_i
    refs = [point_attributes(rel), spatial_attributes(rel, grid), complete_attributes(rel, grid)]
    for k in range(5):
        h = _random_se3(1, 10 + k)[0]
        R, t = h.R, h.t
        qi, qj = p_i @ R.T + t, p_j @ R.T + t
        pair = bundle_pair_attributes(qj - qi, o_i @ R.T, o_j @ R.T, complete=True)
        assert (pair - ref_pair).abs().max() < 1e-12
        # the grid rotates with the points: spatial attributes of (R x, R o) equal those of (x, o)
        rel_r = qj - qi
        outs = [point_attributes(rel_r), spatial_attributes(rel_r, grid @ R.T), complete_attributes(rel_r, grid @ R.T)]
        for a, b in zip(outs, refs):
            assert (a - b).abs().max() < 1e-12
    # a reflection flips the sign of the triple product only
    M = torch.diag(torch.tensor([1.0, -1.0, 1.0], dtype=F64))
    mirrored = bundle_pair_attributes(rel @ M, o_i @ M, o_j @ M, complete=True)
    assert (mirrored[:, :4] - ref_pair[:, :4]).abs().max() < 1e-12
    assert (mirrored[:, 4] + ref_pair[:, 4]).abs().max() < 1e-12


def test_attributes_written_out():
    """Oracle: hand-computed values for o_i = e_z, x = (3, 4, 2), o_j = e_x."""
    x = torch.tensor([3.0, 4.0, 2.0], dtype=F64)
    ez, ex = torch.eye(3, dtype=F64)[2], torch.eye(3, dtype=F64)[0]
    a = bundle_pair_attributes(x, ez, ex, complete=True)
    # o_i.x = 2, |x - 2 e_z| = 5, o_i.o_j = 0, x.o_j = 3, (e_z x x).e_x = (-4, 3, 0).e_x = -4
    assert torch.allclose(a, torch.tensor([2.0, 5.0, 0.0, 3.0, -4.0], dtype=F64))
    assert torch.allclose(point_attributes(x[None]), torch.tensor([[math.sqrt(29)]], dtype=F64))
    assert torch.allclose(fiber_attributes(torch.stack([ez, ex])).squeeze(-1), torch.eye(2, dtype=F64))


def test_complete_attributes_separate_the_documented_counterexample():
    """With o_i = e_z, x = e_x: o_j = e_x and o_j = e_y share the three PONITA attributes, but no
    rotation maps one pair onto the other; (e_x +- e_y)/sqrt 2 share four and are mirror images."""
    ex, ey, ez = torch.eye(3, dtype=F64)
    three = lambda oj: bundle_pair_attributes(ex, ez, oj, complete=False)
    five = lambda oj: bundle_pair_attributes(ex, ez, oj, complete=True)
    assert torch.equal(three(ex), three(ey))
    assert (five(ex) - five(ey)).abs().max() > 0.5
    # not related by any rotation: a rotation fixing o_i = e_z and x = e_x is the identity
    plus, minus = (ex + ey) / math.sqrt(2), (ex - ey) / math.sqrt(2)
    assert torch.equal(three(plus), three(minus))
    assert (five(plus)[:4] - five(minus)[:4]).abs().max() < 1e-15
    assert five(plus)[4] * five(minus)[4] < 0  # only the signed triple product tells them apart
    # brute force: over many rotations, none maps (e_z, e_x, e_y) onto (e_z, e_x, e_x)
    R = SE3().sample(4000, generator=_gen(3)).R
    err = (R @ ez - ez).norm(dim=-1) + (R @ ex - ex).norm(dim=-1) + (R @ ey - ex).norm(dim=-1)
    assert err.min() > 0.1


def test_polynomial_features_and_cutoff():
    a = torch.tensor([[2.0, 3.0]], dtype=F64)
    # degree 2: (a1, a2, a1 a1, a1 a2, a2 a1, a2 a2)
    assert torch.equal(polynomial_features(a, 2), torch.tensor([[2.0, 3.0, 4.0, 6.0, 6.0, 9.0]], dtype=F64))
    assert polynomial_features(a, 3).shape == (1, 2 + 4 + 8)
    d = torch.cat([torch.linspace(0, 2.5, 251, dtype=F64), torch.tensor([2.0 - 1e-3, 2.0 + 1e-3], dtype=F64)])
    d.requires_grad_(True)
    w = polynomial_cutoff(d, 2.0, CUTOFF_EXPONENT)
    (grad,) = torch.autograd.grad(w.sum(), d)
    assert w[0] == 1 and (w[:251][d[:251] >= 2.0] == 0).all() and ((w[1:251] - w[:250]) <= 1e-15).all()
    # smooth at the cutoff: value ~ (1 - u)^3 and slope ~ (1 - u)^2 vanish from both sides
    assert w[-2] < 1e-6 and grad[-2].abs() < 1e-3 and w[-1] == 0 and grad[-1] == 0


def test_sphere_readouts():
    grid = orientation_grid(12, "icosahedral")
    v = torch.randn(5, 2, 3, dtype=F64, generator=_gen(4))
    f = vector_to_sphere(v, grid)  # f(o) = v . o
    # Oracle: sum_k (v.o_k) o_k / O = v / 3 for a spherical 2-design (the icosahedron's vertices)
    assert torch.allclose(sphere_to_vector(f, grid), v / 3, atol=1e-14)
    assert sphere_to_scalar(f).abs().max() < 1e-14  # a linear function has mean 0 over the grid


# ------------------------------------------------------------------------ the model
def _points_model(**kw):
    torch.manual_seed(0)
    return Ponita(3, 16, 2, 2, in_vector_channels=1, out_vector_channels=2, mode="points", **kw).double()


def test_points_mode_is_exactly_se3_equivariant():
    model = _points_model(cutoff=2.5)
    assert_equivariant(model, SE3())
    assert_equivariant(model)  # declared: E(3), reflections included (|x| is all it sees)
    node = _points_model(task_level="node")
    assert_equivariant(node, E3())


def test_bundle_mode_is_exact_for_the_grid_symmetries():
    torch.manual_seed(1)
    model = Ponita(3, 8, 2, 1, in_vector_channels=1, out_vector_channels=2, mode="bundle", num_ori=12,
                   grid="icosahedral", cutoff=3.0).double()
    ico = grid_symmetry_group(model.grid, proper=False)
    assert_equivariant(model, ico, num_samples=6)  # the 60 rotations and the inversion
    assert model.type_in[1].group == ico  # the declared group
    # translations
    (x, pos, vec), kw = model.example_inputs()
    s0, v0 = model(x, pos, vec, **kw)
    s1, v1 = model(x, pos + torch.tensor([0.3, -1.0, 2.0], dtype=F64), vec, **kw)
    assert (s1 - s0).abs().max() < 1e-12 and (v1 - v0).abs().max() < 1e-12
    # but not to rotations off the grid
    assert equivariance_error(model, SE3(), model.type_in, model.type_out, num_samples=2) > 1e-4
    complete = Ponita(3, 8, 2, 1, in_vector_channels=1, out_vector_channels=1, num_ori=12, grid="icosahedral",
                      complete=True).double()
    assert len(grid_symmetries(complete.grid, proper=True)) == 60
    assert_equivariant(complete, num_samples=4)  # rotations only: the triple product is a pseudoscalar
    assert equivariance_error(complete, grid_symmetry_group(complete.grid, proper=False), complete.type_in,
                              complete.type_out, num_samples=8) > 1e-6


def test_bundle_equivariance_error_falls_as_the_grid_grows():
    """The same weights on finer Fibonacci grids converge to the continuous (exactly SE(3)) model."""
    torch.manual_seed(2)
    coarse = Ponita(2, 8, 1, 1, in_vector_channels=1, out_vector_channels=1, num_ori=8).double()
    state = coarse.state_dict()
    inputs, kw = coarse.example_inputs(generator=_gen(6))
    errors = []
    for n in (8, 32, 128):
        model = Ponita(2, 8, 1, 1, in_vector_channels=1, out_vector_channels=1, num_ori=n).double()
        model.load_state_dict(state)
        errors.append(equivariance_error(model, SE3(), model.type_in, model.type_out,
                                         inputs=inputs, kwargs=kw, generator=_gen(7), num_samples=4))
    assert all(b < a for a, b in itertools.pairwise(errors)), errors
    assert errors[-1] < errors[0] / 5, errors


def test_graph_and_node_levels_and_flat_batches_agree():
    model = _points_model()
    node = _points_model(task_level="node")
    node.load_state_dict(model.state_dict())
    (x, pos, vec), kw = model.example_inputs(generator=_gen(8))
    s, v = model(x, pos, vec, **kw)
    sn, vn = node(x, pos, vec, **kw)
    batch = kw["batch"].batch
    assert torch.allclose(s, torch.zeros_like(s).index_add(0, batch, sn))
    assert torch.allclose(v, torch.zeros_like(v).index_add(0, batch, vn))
    # each graph alone gives the same rows as the batch
    first = batch == 0
    s0, _ = model(x[first], pos[first], vec[first])
    assert torch.allclose(s0, s[:1], atol=1e-12)
    # outputs with no channels are None
    only = Ponita(3, 8, 2, 1, mode="points").double()
    assert only(x, pos, **kw)[1] is None


def test_forces_of_the_potential_are_equivariant_and_match_finite_differences():
    torch.manual_seed(3)
    pot = PonitaPotential(num_species=5, hidden_channels=8, num_blocks=1, mode="bundle").double()
    (pos, z), _ = pot.example_inputs(generator=_gen(9))

    def forces(p):
        p = p.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(pot(p, z).sum(), p)
        return -g

    ico = pot.net.symmetry_group()
    assert_equivariant(forces, ico, Positions(3), Vectors(3), inputs=(pos,), num_samples=4)
    p = pos[:1, :4].clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda q: pot(q, z[:1, :4]), (p,))
    pts = PonitaPotential(num_species=5, hidden_channels=8, num_blocks=1, num_basis=8).double()  # points mode
    assert_equivariant(pts)  # E(3)


def test_dynamics_is_equivariant_and_learns():
    torch.manual_seed(4)
    assert_equivariant(PonitaDynamics(hidden_channels=8, num_blocks=1, mode="points").double(), E3())
    # learning constant-velocity motion needs the velocities' directions: the bundle mode (the default)
    # sees them, points mode only their norms (it plateaus far from the target for many seeds)
    dyn = PonitaDynamics(hidden_channels=8, num_blocks=1)
    g = _gen(10)
    pos, vel = torch.randn(16, 4, 3, generator=g), torch.randn(16, 4, 3, generator=g)
    q = torch.ones(16, 4, 1)
    target = pos + 0.5 * vel  # constant-velocity motion
    opt = torch.optim.Adam(dyn.parameters(), lr=1e-2)
    first = None
    for _ in range(25):
        loss = (dyn(pos, vel, q) - target).square().mean()
        first = first if first is not None else loss.item()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.3 * first


@pytest.mark.parametrize("make,exc,phrase", [
    (lambda: Ponita(0, 8, 1, 1), ValueError, "needs input features"),
    (lambda: Ponita(2, 8, 0, 1), ValueError, "needs outputs"),
    (lambda: Ponita(2, 0, 1, 1), ValueError, "hidden_channels"),
    (lambda: Ponita(2, 8, 1, 1, mode="lifted"), ValueError, "mode"),
    (lambda: Ponita(2, 8, 1, 1, mode="points", complete=True), ValueError, "complete=True needs mode='bundle'"),
    (lambda: Ponita(2, 8, 1, 1, cutoff=-1.0), ValueError, "cutoff"),
    (lambda: Ponita(2, 8, 1, 1, grid="icosahedral", num_ori=16), ValueError, "icosahedral grids have"),
    (lambda: Ponita(2, 8, 1, 1, task_level="edge"), ValueError, "task_level"),
])
def test_bad_construction(make, exc, phrase):
    with pytest.raises(exc, match=phrase):
        make()


def test_bad_forward_input():
    model = Ponita(2, 8, 1, 1, in_vector_channels=1, mode="points").double()
    x, pos, vec = torch.randn(4, 2, dtype=F64), torch.randn(4, 3, dtype=F64), torch.randn(4, 1, 3, dtype=F64)
    with pytest.raises(ValueError, match="pos must have shape"):
        model(x, pos[:, :2], vec)
    with pytest.raises(ValueError, match="x must have shape"):
        model(x[:, :1], pos, vec)
    with pytest.raises(ValueError, match="vec must have shape"):
        model(x, pos, vec[:, :, :2])
    bad = pos.clone()
    bad[2, 1] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        model(x, bad, vec)
    with pytest.raises(ValueError, match="sorted"):
        model(x, pos, vec, batch=torch.tensor([1, 0, 0, 1]))
    with pytest.raises(ValueError, match=r"edge_index must index nodes in \[0, 4\)"):
        model(x, pos, vec, edge_index=torch.tensor([[0, 5], [1, 2]]))
    with pytest.raises(TypeError, match="edge_index"):
        model(x, pos, vec, edge_index=torch.tensor([[0.0, 1.0], [1.0, 2.0]]))
    assert model(x, pos, vec)[0].shape == (1, 1)


@pytest.mark.parametrize("kw", [{}, {"mode": "bundle"}, {"mode": "bundle", "complete": True, "num_ori": 12},
                                {"cutoff": 2.0}], ids=["points", "bundle", "complete", "points-cutoff"])
def test_padded_molecules_get_the_energy_and_forces_they_have_alone(kw):
    """Oracle: each molecule evaluated on its own, without padding or mask (float64); padded atoms are
    placed anywhere (here at random), feel no force and change nothing."""
    torch.manual_seed(0)
    net = randomized(PonitaPotential(num_species=4, hidden_channels=8, num_blocks=2, num_basis=8, **kw),
                     scale=0.5).double()
    sizes = (5, 3, 1)
    pos = 1.3 * torch.randn(3, 5, 3, dtype=torch.float64)   # padding slots hold random positions
    species = torch.randint(4, (3, 5))
    assert_padded_batch_equals_each_alone(net, pos, species, sizes)


def test_masked_potential_is_invariant():
    net = randomized(PonitaPotential(num_species=3, hidden_channels=8, num_blocks=1, num_basis=8), scale=0.5).double()
    pos = torch.randn(2, 4, 3, dtype=torch.float64)
    species = torch.randint(3, (2, 4))
    mask = torch.tensor([[True, True, True, False], [True, True, False, False]])
    assert_equivariant(net, E3(), net.type_in, net.type_out, inputs=(pos, species), kwargs={"mask": mask})
