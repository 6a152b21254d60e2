"""G(3,0,1): constants, the fast products against brute-force blade algebra (tests/gatr/pga_oracle.py),
embed/extract pairs (the reference GATr's interface tests, formulas written out), E(3) motions."""

import math

import pytest
import torch

from geomlin.algebra import pga
from geomlin.groups import E3, SE3, transform_positions, transform_vectors
from tests.gatr import pga_oracle as O

DT = torch.float64


def test_basis_order_and_constants():
    assert pga.BLADE_NAMES[pga.E0] == "e0" and pga.BLADE_NAMES[pga.E123] == "e123"
    assert pga.BLADE_NAMES[pga.E0123] == "e0123" and pga.BLADE_NAMES[pga.E013] == "e013"
    assert [pga.BLADE_NAMES[i] for i in pga.DEGENERATE] == [
        "e0" + (n if n != "1" else "")[1:] if n != "1" else "e0" for n in (pga.BLADE_NAMES[i] for i in pga.NONDEGENERATE)]
    assert pga.GRADE_SLICES[2] == slice(5, 11)


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-12), (torch.float32, 1e-4), (torch.bfloat16, 3e-2)])
def test_fast_products_match_brute_force_blade_algebra(dtype, tol):
    x = torch.randn(7, 3, 16, dtype=dtype)
    y = torch.randn(7, 3, 16, dtype=dtype)
    unit = torch.eye(16, dtype=DT)[pga.E123]
    for got, want in ((pga.geometric_product(x, y), O.product(x.double(), y.double())),
                      (pga.join(x, y), O.reference_join(x.double(), y.double(), unit)),
                      (pga.outer_product(x, y), O.product(x.double(), y.double(), "outer"))):
        assert got.dtype == dtype  # half precision is multiplied in float32 and comes back in its dtype
        torch.testing.assert_close(got.double(), want, rtol=tol, atol=tol * want.abs().max().item())
    # broadcasting a single multivector against a batch
    torch.testing.assert_close(pga.geometric_product(x[0, 0], y).double(),
                               O.product(x[0, 0].double().expand_as(y), y.double()), rtol=tol, atol=tol * 10)
    # the component-major kernels, over several column chunks
    a, b = torch.randn(2, 16, 2 * pga.CHUNK_COLUMNS + 3, dtype=DT)
    torch.testing.assert_close(pga.geometric_product_columns(a, b), O.product(a.T, b.T).T, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(pga.join_columns(a, b), O.reference_join(a.T, b.T, unit).T, rtol=1e-12, atol=1e-12)


def test_fast_product_gradients():
    x = torch.randn(3, 16, dtype=DT, requires_grad=True)
    y = torch.randn(3, 16, dtype=DT, requires_grad=True)
    assert torch.autograd.gradcheck(pga.geometric_product, (x, y))
    assert torch.autograd.gradcheck(pga.join, (x, y))


def test_point_plane_scalar_roundtrips():
    p = torch.randn(4, 5, 3, dtype=DT)
    mv = pga.embed_point(p)
    assert mv[..., pga.E123].eq(1).all() and torch.equal(mv[..., pga.E023], -p[..., 0])
    assert torch.equal(mv[..., pga.E013], p[..., 1]) and torch.equal(mv[..., pga.E012], -p[..., 2])
    torch.testing.assert_close(pga.extract_point(mv), p)
    torch.testing.assert_close(pga.extract_point(-2.5 * mv), p)  # homogeneous: any non-zero weight
    n = torch.randn(4, 3, dtype=DT)
    plane = pga.embed_oriented_plane(n, p[:, 0])
    normal, offset = pga.extract_oriented_plane(plane)
    torch.testing.assert_close(normal, n)
    torch.testing.assert_close((normal * p[:, 0]).sum(-1, keepdim=True) + offset, torch.zeros(4, 1, dtype=DT))
    s = torch.randn(6, 1, dtype=DT)
    torch.testing.assert_close(pga.extract_scalar(pga.embed_scalar(s)), s)
    torch.testing.assert_close(pga.extract_pseudoscalar(pga.embed_pseudoscalar(s)), s)


def test_incidence_join_and_meet():
    # join of two points is a line containing both; the join of the line with a third point on it vanishes
    a, b = torch.randn(2, 8, 3, dtype=DT)
    line = pga.join(pga.embed_point(a), pga.embed_point(b))
    mid = pga.embed_point(0.3 * a + 0.7 * b)
    assert pga.join(line, mid).abs().max() < 1e-12
    axis = pga.join(pga.embed_point(torch.zeros(3, dtype=DT)), pga.embed_point(torch.tensor([1.0, 0, 0], dtype=DT)))
    assert pga.join(axis, pga.embed_point(torch.tensor([0.0, 1, 0], dtype=DT))).abs().max() > 0.5  # not incident
    # the meet of three planes is their common point
    n = torch.randn(3, 3, dtype=DT)
    q = torch.randn(3, dtype=DT)
    planes = pga.embed_oriented_plane(n, q.expand(3, 3))
    point = pga.outer_product(pga.outer_product(planes[0], planes[1]), planes[2])
    torch.testing.assert_close(pga.extract_point(point), q)


def test_lines_and_pluecker():
    p, d = torch.randn(2, 10, 3, dtype=DT)
    line = pga.embed_line(p, d)
    closest, direction = pga.extract_line(line)
    torch.testing.assert_close(direction, d)
    # the closest point lies on the line and is orthogonal to the direction
    t = ((closest - p) * d).sum(-1, keepdim=True) / (d * d).sum(-1, keepdim=True)
    torch.testing.assert_close(closest, p + t * d)
    assert (closest * d).sum(-1).abs().max() < 1e-10
    pl = torch.cat([d, torch.linalg.cross(p, d)], -1)
    torch.testing.assert_close(pga.embed_pluecker_ray(pl), line)
    torch.testing.assert_close(pga.extract_pluecker_ray(line), pl)


def quaternion_matrix(q):
    """Textbook rotation matrix of a unit quaternion (w, x, y, z): the oracle."""
    w, x, y, z = q.unbind(-1)
    return torch.stack([
        torch.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
        torch.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
        torch.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1)], -2)


def test_rotation_translation_reflection():
    q = torch.randn(6, 4, dtype=DT)
    q = q / q.norm(dim=-1, keepdim=True)
    p = torch.randn(6, 3, dtype=DT)
    rotated = pga.extract_point(pga.sandwich(pga.embed_rotation(q), pga.embed_point(p)))
    torch.testing.assert_close(rotated, (quaternion_matrix(q) @ p[..., None])[..., 0])
    torch.testing.assert_close(pga.extract_rotation(pga.embed_rotation(q)), q)
    t = torch.randn(6, 3, dtype=DT)
    T = pga.embed_translation(t)
    torch.testing.assert_close(pga.extract_point(pga.sandwich(T, pga.embed_point(p))), p + t)
    torch.testing.assert_close(pga.extract_translation(T), t)
    # reflection in the plane x = 1: the point comes back as -P', extraction still gives P'
    mirror = pga.embed_reflection(torch.tensor([2.0, 0, 0], dtype=DT), torch.tensor([1.0, 0, 0], dtype=DT))
    image = pga.sandwich(mirror, pga.embed_point(p))
    assert torch.allclose(image[..., pga.E123], -torch.ones(6, dtype=DT))
    torch.testing.assert_close(pga.extract_point(image), torch.stack([2 - p[:, 0], p[:, 1], p[:, 2]], -1))


def test_matrix_to_quaternion_including_half_turns():
    R = SE3().sample(20).R
    half = torch.diag(torch.tensor([1.0, -1.0, -1.0], dtype=DT))
    R = torch.cat([R, half[None], torch.diag(torch.tensor([-1.0, 1.0, -1.0], dtype=DT))[None]])
    torch.testing.assert_close(quaternion_matrix(pga.matrix_to_quaternion(R)), R)


def test_rigid_motions_move_points_planes_lines_exactly():
    g = E3().sample(16)
    assert (torch.linalg.det(g.R) < 0).any() and (torch.linalg.det(g.R) > 0).any()
    V = pga.rigid_motion_versor(g)  # (16, 16)
    p, n, d = torch.randn(3, 16, 3, dtype=DT)
    P = pga.embed_point(p)
    for i in range(16):
        gi = g[i]
        torch.testing.assert_close(pga.extract_point(pga.sandwich(V[i], P)), transform_positions(gi, p))
        plane = pga.sandwich(V[i], pga.embed_oriented_plane(n, p))
        normal, offset = pga.extract_oriented_plane(plane)
        torch.testing.assert_close(normal, transform_vectors(gi, n))
        torch.testing.assert_close((normal * transform_positions(gi, p)).sum(-1, keepdim=True), -offset)
        c, direction = pga.extract_line(pga.sandwich(V[i], pga.embed_line(p, d)))
        c0, _ = pga.extract_line(pga.embed_line(transform_positions(gi, p), transform_vectors(gi, d)))
        torch.testing.assert_close(c, c0)
        torch.testing.assert_close(direction.abs(), transform_vectors(gi, d).abs())
    # parity: proper motions are even versors, improper ones odd
    assert torch.equal(pga.PGA.parity(V), torch.linalg.det(g.R) < 0)


def test_sandwich_matrix_path_equals_batched_path():
    g = pga.rigid_motion_versor(E3().sample(3))
    x = torch.randn(5, 2, 16, dtype=DT)
    for i in range(3):
        torch.testing.assert_close(pga.sandwich(g[i], x), pga.sandwich(g[i].expand_as(x), x))
        torch.testing.assert_close(x @ pga.versor_matrix(g[i]), pga.sandwich(g[i], x))


def test_bad_inputs():
    with pytest.raises(ValueError, match="last dimension 16"):
        pga.geometric_product(torch.zeros(4, 15), torch.zeros(4, 16))
    with pytest.raises(ValueError, match="last dimension 3"):
        pga.embed_point(torch.zeros(4, 2))
    with pytest.raises(ValueError, match="orthogonal"):
        pga.embed_rigid_motion(2 * torch.eye(3), torch.zeros(3))
    with pytest.raises(ValueError, match=r"\(\.\.\., 3, 3\)"):
        pga.matrix_to_quaternion(torch.eye(4))
    with pytest.raises(TypeError, match="floating"):
        pga.check_mv(torch.zeros(16, dtype=torch.long))
    assert math.isclose(float(pga.extract_point(torch.zeros(16, dtype=DT) + torch.eye(16, dtype=DT)[pga.E023])[0]),
                        -1e3)  # a point at infinity is clamped, not divided by zero


def test_rigid_motion_refuses_non_orthogonal_matrices():
    shear = torch.eye(3, dtype=DT)
    shear[0, 1] = 0.2
    for bad in (shear, 1.01 * torch.eye(3, dtype=DT), torch.zeros(3, 3, dtype=DT)):
        with pytest.raises(ValueError, match="orthogonal"):
            pga.embed_rigid_motion(bad, torch.zeros(3, dtype=DT))
    with pytest.raises(ValueError, match="det"):
        pga.matrix_to_quaternion(torch.diag(torch.tensor([1.0, 1.0, -1.0], dtype=DT)))
    # float32 rotations that went through a few operations are still accepted
    R = E3().sample(4, dtype=torch.float32).R
    assert pga.embed_rigid_motion(R, torch.zeros(4, 3)).shape == (4, 16)


def test_dual_and_join_convention():
    x = torch.randn(5, 16, dtype=DT)
    # J reverses the components with the reference's signs; J(J(x)) = +-x per grade
    jj = pga.dual(pga.dual(x))
    torch.testing.assert_close(jj.abs(), x.abs())
    # the join of two points is the line through them, with direction (b - a) in e23, -e13, e12
    a, b = torch.randn(2, 3, dtype=DT)
    line = pga.join(pga.embed_point(a), pga.embed_point(b))
    _, direction = pga.extract_line(line)
    torch.testing.assert_close(torch.linalg.cross(direction, b - a), torch.zeros(3, dtype=DT), atol=1e-12, rtol=0)
    torch.testing.assert_close(pga.join_table().abs().sum(), torch.tensor(81.0, dtype=DT))


def test_point_embedding_and_extraction_refuse_non_finite_values():
    with pytest.raises(ValueError, match="contains NaN or inf"):
        pga.embed_point(torch.tensor([[0.0, float("nan"), 1.0]]))
    with pytest.raises(ValueError, match="contains NaN or inf"):
        pga.extract_point(torch.full((2, 16), float("inf")))


# ---------------------------------------------------------------- the reference GATr's rotation tests
# Modelled on the reference's tests/gatr/interface/test_rotation.py (property tests, formulas written
# out): quaternions in geomlin's (w, x, y, z) order, the reference's (x, y, z, w) through O.


@pytest.mark.parametrize("batch", [(7, 9), ()])
def test_rotation_embedding_is_cycle_consistent(batch):
    """extract(embed(q)) = q for any quaternion, unit or not (the reference's re-encoding test)."""
    q = torch.randn(*batch, 4, dtype=DT)
    torch.testing.assert_close(pga.extract_rotation(pga.embed_rotation(q)), q, rtol=0, atol=0)
    unit = pga.extract_rotation(pga.embed_rotation(q), normalize=True)
    torch.testing.assert_close(unit, q / q.norm(dim=-1, keepdim=True))


def test_rotation_conventions_are_the_reference_ones_up_to_the_order():
    """The reference puts ``(x, y, z, w)`` into ``w - x e23 + y e13 - z e12``; geomlin takes ``(w, x, y, z)``."""
    q = torch.randn(6, 4, dtype=DT)
    xyzw = q[..., [1, 2, 3, 0]]
    torch.testing.assert_close(pga.embed_rotation(q), O.reference_embed_rotation(xyzw), rtol=0, atol=0)
    torch.testing.assert_close(pga.extract_rotation(O.reference_embed_rotation(xyzw))[..., [1, 2, 3, 0]],
                               O.reference_extract_rotation(O.reference_embed_rotation(xyzw)), rtol=0, atol=0)
    torch.testing.assert_close(O.reference_quaternion_matrix(xyzw), quaternion_matrix(q / q.norm(dim=-1, keepdim=True)))


def _rotor_sandwich(m, x):
    """``m x ~m`` with the brute-force product (the reference's test: reversion, not the inverse)."""
    return O.product(O.product(m, x), m * O.reversion_signs())


@pytest.mark.parametrize("batch", [(7, 9), ()])
def test_rotations_act_on_points_planes_scalars_and_pseudoscalars(batch):
    """A unit quaternion's rotor rotates points and plane normals as its rotation matrix (Hamilton
    convention, the reference's formula) and leaves scalars and pseudoscalars alone."""
    q = torch.randn(*batch, 4, dtype=DT)
    q = q / q.norm(dim=-1, keepdim=True)
    R = O.reference_quaternion_matrix(q[..., [1, 2, 3, 0]])
    m = pga.embed_rotation(q)
    x = torch.randn(*batch, 3, dtype=DT)
    rx = (R @ x[..., None])[..., 0]
    moved = _rotor_sandwich(m, pga.embed_point(x))
    torch.testing.assert_close(moved, pga.embed_point(rx))
    torch.testing.assert_close(pga.extract_point(moved), rx)
    torch.testing.assert_close(pga.sandwich(m, pga.embed_point(x)), moved)
    n = torch.nn.functional.normalize(torch.randn(*batch, 3, dtype=DT), dim=-1)
    origin = torch.zeros_like(n)
    plane = _rotor_sandwich(m, pga.embed_oriented_plane(n, origin))
    rn = (R @ n[..., None])[..., 0]
    torch.testing.assert_close(plane, pga.embed_oriented_plane(rn, origin))
    torch.testing.assert_close(pga.extract_oriented_plane(plane)[0], rn)
    s = torch.randn(*batch, 1, dtype=DT)
    torch.testing.assert_close(pga.extract_scalar(_rotor_sandwich(m, pga.embed_scalar(s))), s)
    torch.testing.assert_close(pga.extract_pseudoscalar(_rotor_sandwich(m, pga.embed_pseudoscalar(s))), s)
