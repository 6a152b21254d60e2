"""geomlin.algebra on the simulated accelerator: every method and function a forward pass uses runs
there with no host sync and no per-call upload (a cache may be filled once), with the CPU's numbers.

Oracle: the same call on the CPU (tests/device/checks.py).
"""

from __future__ import annotations

import pytest
import torch

from geomlin.algebra import CliffordAlgebra, pga
from geomlin.linalg import MAX_SQUARINGS
from geomlin.tables import ConstantTables
from geomlin.validation import deferred_checks
from tests.device import simulated as sim
from tests.device.checks import assert_runs_on_device

METRICS = [(1, 1, 1), (0, 1, 1, 1), (1, -1, -1, -1)]


def _mv(alg: CliffordAlgebra, *shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, alg.dim, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("metric", METRICS, ids=str)
def test_clifford_algebra_methods_on_the_device(metric):
    alg = CliffordAlgebra(metric)
    x, y = _mv(alg, 4, 3), _mv(alg, 4, 3, seed=1)
    for kind in ("geometric", "outer", "fat_dot", "left_contraction", "right_contraction", "regressive"):
        for method in ("sparse", "dense"):
            assert_runs_on_device(lambda a, b, k=kind, m=method: alg.product(a, b, k, m), x, y, warm=True)
    unary = [alg.reverse, alg.grade_involution, alg.clifford_conjugate, alg.norm_squared, alg.norm, alg.grade_norms,
             alg.grade_quadratic_forms, alg.complement, alg.uncomplement, alg.dual,
             lambda a: alg.grade_projection(a, [0, 2]), lambda a: alg.quaternion_projection(a, 1),
             lambda a: alg.exp(alg.grade_projection(a, 2)), lambda a: alg.parity(a).to(a.dtype)]
    for fn in unary:
        assert_runs_on_device(fn, x, warm=True)
    assert_runs_on_device(alg.scalar_product, x, y, warm=True)
    versor = alg.embed_vector(torch.tensor([2.0, 1.0, 0.5] + [0.3] * (alg.n - 3)))
    assert_runs_on_device(alg.sandwich, versor, x, warm=True)
    assert_runs_on_device(alg.inverse_versor, versor, warm=True)
    assert_runs_on_device(alg.act, versor, x, warm=True)
    assert_runs_on_device(lambda v: alg.embed_vector(v), torch.randn(5, alg.n), warm=True)
    A = torch.eye(alg.n) + 0.1 * torch.randn(alg.n, alg.n, generator=torch.Generator().manual_seed(2))
    assert_runs_on_device(alg.outermorphism, A, warm=True)


@pytest.mark.parametrize("metric", METRICS, ids=str)
def test_methods_with_tables_read_no_cache(metric):
    """With ``tables=`` (a module's buffers) not even the first call uploads."""
    alg = CliffordAlgebra(metric)
    tables = sim.to_sim(alg.tables("geometric", "sparse:outer", "square", "quadratic_form"))
    assert isinstance(tables, ConstantTables)
    x, y = sim.to_sim((_mv(alg, 2, 3, seed=5), _mv(alg, 2, 3, seed=6)))
    with deferred_checks(), sim.watch(strict=True):
        alg.geometric_product(x, y, tables=tables)
        alg.outer_product(x, y, "sparse", tables=tables)
        alg.scalar_product(x, y, tables=tables)
        alg.grade_norms(x, tables=tables)
        alg.exp(alg.grade_projection(x, 2), tables=tables)
    with pytest.raises(KeyError, match="regressive"):
        alg.regressive_product(x, y, tables=tables)


def test_tables_are_not_in_the_state_dict_and_are_read_in_the_dtype_asked_for():
    tables = CliffordAlgebra((1, 1, 1)).tables("geometric", "quadratic_form")
    assert tables.state_dict() == {}
    assert tables.get("quadratic_form").dtype == torch.float64
    assert tables.float().get("quadratic_form").dtype == torch.float64  # a module cast does not round them
    assert tables.get("quadratic_form", dtype=torch.bfloat16).dtype == torch.bfloat16


def test_exp_needs_no_host_read_and_matches_any_scale():
    """Every multivector has its own scaling; on a device the squarings are masked, not counted."""
    g3 = CliffordAlgebra((1, 1, 1))
    theta = torch.tensor([1e-3, 0.3, 2.0, 7.0, 300.0], dtype=torch.float64)
    b = torch.zeros(5, 8, dtype=torch.float64)
    b[:, 4] = theta
    expected = torch.zeros(5, 8, dtype=torch.float64)
    expected[:, 0], expected[:, 4] = torch.cos(theta), torch.sin(theta)
    torch.testing.assert_close(g3.exp(b), expected, rtol=1e-10, atol=1e-10)
    on_device = assert_runs_on_device(g3.exp, b, warm=True)
    torch.testing.assert_close(sim.to_cpu(on_device), expected, rtol=1e-10, atol=1e-10)
    assert 0.5 * 2 ** MAX_SQUARINGS > 1e5


def test_parity_reads_no_boolean_mask():
    g3 = CliffordAlgebra((1, 1, 1))
    even = g3.geometric_product(g3.embed_vector(torch.tensor([1.0, 2.0, 0.0])), g3.embed_vector(torch.randn(3)))
    odd = g3.embed_vector(torch.tensor([0.0, 1.0, 3.0]))
    v = torch.stack([even, odd])
    assert g3.parity(v).tolist() == [False, True]
    out = assert_runs_on_device(lambda a: g3.parity(a), v, warm=True, grads=False)
    assert sim.to_cpu(out).tolist() == [False, True]


def test_pga_functions_on_the_device():
    gen = torch.Generator().manual_seed(3)
    x, y = torch.randn(5, 16, generator=gen), torch.randn(5, 16, generator=gen)
    pos, t = torch.randn(5, 3, generator=gen), torch.randn(5, 3, generator=gen)
    for fn in (pga.geometric_product, pga.outer_product, pga.join):
        assert_runs_on_device(fn, x, y, warm=True)
    for fn in (pga.geometric_product_columns, pga.join_columns):
        assert_runs_on_device(fn, x.T.contiguous(), y.T.contiguous(), warm=True)
    for fn in (pga.dual, pga.reverse, pga.grade_involution, pga.extract_point, pga.extract_scalar,
               pga.extract_pseudoscalar, pga.extract_translation, pga.extract_rotation, pga.extract_pluecker_ray,
               pga.plane_closest_point, lambda a: pga.extract_oriented_plane(a), lambda a: pga.extract_line(a)):
        assert_runs_on_device(fn, x, warm=True)
    for fn in (pga.embed_point, pga.embed_translation):
        assert_runs_on_device(fn, pos, warm=True)
    for fn in (pga.embed_reflection, pga.embed_oriented_plane, pga.embed_line):
        assert_runs_on_device(fn, pos, t, warm=True)
    assert_runs_on_device(pga.embed_scalar, pos[:, :1], warm=True)
    assert_runs_on_device(pga.embed_pseudoscalar, pos[:, :1], warm=True)
    assert_runs_on_device(pga.embed_rotation, torch.nn.functional.normalize(torch.randn(5, 4, generator=gen), dim=-1),
                          warm=True)
    assert_runs_on_device(pga.embed_pluecker_ray, torch.randn(5, 6, generator=gen), warm=True)
    R = torch.linalg.qr(torch.randn(5, 3, 3, generator=gen, dtype=torch.float64))[0]
    R = R * torch.linalg.det(R)[:, None, None]  # proper
    assert_runs_on_device(pga.matrix_to_quaternion, R, warm=True, grads=False)
    assert_runs_on_device(pga.embed_rigid_motion, R, t.double(), warm=True, grads=False)
    versor = pga.embed_rigid_motion(R[0], t[0].double())
    assert_runs_on_device(pga.sandwich, versor, x.double(), warm=True)
    assert_runs_on_device(pga.versor_matrix, versor, warm=True)


def test_deferred_checks_on_the_device_raise_the_cpu_message():
    """A non-invertible versor is refused on the CPU at once, on the device at once outside a
    deferred-checks scope, and at the scope's end inside one (with no sync before)."""
    zero = torch.zeros(16)
    with pytest.raises(ValueError, match="zero norm"):
        pga.PGA.inverse_versor(zero)
    dev = sim.to_sim(zero)
    with pytest.raises(ValueError, match="zero norm"):
        pga.PGA.inverse_versor(dev)
    with pytest.raises(ValueError, match="zero norm"), deferred_checks(), sim.watch(strict=True):
        pga.PGA.inverse_versor(dev)
