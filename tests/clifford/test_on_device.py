"""geomlin.clifford on the simulated accelerator, beyond the declared examples
(tests/device/test_modules_on_device.py): the GCAN modules, which make no equivariance claim, and the
public functions the layers' forward passes use. No host sync, no upload (modules: not even on the
first call; functions: after one call fills their cache), the CPU's numbers.

Oracle: the same call on the CPU (tests/device/checks.py); for :func:`matrix_exp`,
``torch.linalg.matrix_exp`` on the CPU.
"""

from __future__ import annotations

import pytest
import torch

from geomlin.algebra import CliffordAlgebra, pga
from geomlin.clifford import GCAMLP, GCAGate, GroupActionLinear
from geomlin.clifford.cgenn import weighted_geometric_product
from geomlin.clifford.gcan import matrix_exp, sandwich_matrices, versor_exp
from geomlin.clifford.neighbor_search import neighborhoods
from geomlin.clifford.tuple_products import (
    G3,
    bivector_dual,
    embed_vectors,
    multivector_invariants,
    product_covariant,
    product_invariants,
    tuple_products,
    vector_product,
)
from geomlin.validation import deferred_checks
from tests.device import simulated as sim
from tests.device.checks import assert_runs_on_device


def _seeded(module: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn_like(p) * 0.5)
    return module


@pytest.mark.parametrize("versor,metric", [("exp", (0, 1, 1, 1)), ("even", (0, 1, 1, 1)), ("even", (1, -1, -1, -1)),
                                           ("reflections", (1, 1, 1)), ("exp", (1, 1, 1, 1, 1))], ids=str)
def test_group_action_linear_on_the_device(versor, metric):
    torch.manual_seed(1)
    layer = _seeded(GroupActionLinear(CliffordAlgebra(metric), 2, 3, versor=versor))
    assert_runs_on_device(layer, torch.randn(4, 2, layer.algebra.dim))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_gcan_mlp_on_the_device_and_under_autocast(dtype):
    torch.manual_seed(2)
    model = _seeded(GCAMLP(pga.PGA, 2, 1, hidden_channels=4, num_blocks=3, num_groups=2))
    x = torch.randn(5, 2, 16)
    assert_runs_on_device(model, x)
    assert_runs_on_device(_seeded(GCAGate(pga.PGA, 2)), x)
    reference = model(x).detach()
    dev, xd = sim.to_sim((model, x))
    with deferred_checks(), sim.watch(strict=True), torch.autocast(sim.DEVICE_TYPE, dtype=dtype):
        out = dev(xd.requires_grad_())
        out.float().square().mean().backward()
    out = sim.to_cpu(out).detach().float()
    assert torch.isfinite(out).all()
    assert float((out - reference).norm() / reference.norm()) < 0.1


def test_module_tables_are_buffers_outside_the_state_dict():
    layer = GroupActionLinear(pga.PGA, 2, 3)
    assert set(layer.state_dict()) == {"weight", "bivectors"}
    assert all(b.device == sim.DEVICE for b in sim.to_sim(layer).buffers())


def test_matrix_exp_matches_torch_without_reading_the_device():
    gen = torch.Generator().manual_seed(3)
    A = torch.randn(6, 5, 5, generator=gen, dtype=torch.float64) * torch.tensor([1e-4, 0.1, 1, 5, 30, 200.0],
                                                                               dtype=torch.float64)[:, None, None]
    torch.testing.assert_close(matrix_exp(A), torch.linalg.matrix_exp(A), rtol=1e-9, atol=1e-9)
    small = A[:4].float()  # beyond, float32 overflows
    torch.testing.assert_close(matrix_exp(small), torch.linalg.matrix_exp(small), rtol=1e-4, atol=1e-4)
    assert_runs_on_device(matrix_exp, A[:4], warm=True)
    # the backward pass is sync-free too, and agrees with torch's
    B = A[:3].clone().requires_grad_()
    g = torch.autograd.grad(matrix_exp(B).sum(), B)[0]
    h = torch.autograd.grad(torch.linalg.matrix_exp(B).sum(), B)[0]
    torch.testing.assert_close(g, h, rtol=1e-8, atol=1e-8)


def test_gcan_functions_on_the_device():
    alg = CliffordAlgebra((0, 1, 1, 1))
    B = alg.grade_projection(torch.randn(3, 16, generator=torch.Generator().manual_seed(4)), 2)
    assert_runs_on_device(lambda b: versor_exp(alg, b), B, warm=True)
    assert_runs_on_device(lambda a: sandwich_matrices(alg, a, False), versor_exp(alg, B).detach(), warm=True)
    g3 = CliffordAlgebra((1, 1, 1))
    odd = g3.embed_vector(torch.randn(3, 3, generator=torch.Generator().manual_seed(5)))
    assert_runs_on_device(lambda a: sandwich_matrices(g3, a, True), odd, warm=True)


def test_cgenn_and_attention_functions_on_the_device():
    alg = CliffordAlgebra((1, 1, 1, 1))
    gen = torch.Generator().manual_seed(6)
    x, y = torch.randn(4, 3, 16, generator=gen), torch.randn(4, 3, 16, generator=gen)
    w = torch.randn(3, 5, 5, 5, generator=gen)
    assert_runs_on_device(lambda a, b, c: weighted_geometric_product(alg, a, b, c), x, y, w, warm=True)
    r = torch.randn(2, 6, 3, generator=gen)
    p = embed_vectors(r)
    assert_runs_on_device(embed_vectors, r, warm=True)
    assert_runs_on_device(bivector_dual, torch.randn(5, 8, generator=gen), warm=True)
    for rank in (1, 2, 3):
        prod = tuple_products([p] * rank, vectors=True)["single"][0][1]
        assert_runs_on_device(lambda a, m=rank: product_invariants(a, m), prod.detach(), warm=True)
        assert_runs_on_device(lambda a, m=rank: product_covariant(a, m), prod.detach(), warm=True)
        assert_runs_on_device(lambda a, b, m=rank: vector_product(a, m, b), prod.detach(), p, warm=True)
    assert_runs_on_device(multivector_invariants, torch.randn(5, 8, generator=gen), warm=True)

    def products(a, b):
        out = tuple_products([a, b], vectors=False)
        return [q for _, q in out["full"]]
    assert_runs_on_device(products, torch.randn(3, 8, generator=gen), torch.randn(3, 8, generator=gen), warm=True)
    assert_runs_on_device(lambda a: G3.geometric_product(a, a), torch.randn(3, 8, generator=gen), warm=True)
    pos = torch.randn(2, 7, 3, generator=gen)
    nb = assert_runs_on_device(lambda q: neighborhoods(q, k=4, cutoff=1.5), pos, warm=True, grads=False)
    want = neighborhoods(pos, k=4, cutoff=1.5)
    assert torch.equal(sim.to_cpu(nb.index), want.index) and torch.equal(sim.to_cpu(nb.mask), want.mask)
    with pytest.raises(ValueError, match="needs k"):
        neighborhoods(sim.to_sim(pos), cutoff=1.5)
