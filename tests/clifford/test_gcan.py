"""GCAN group action layers: learned versors move G(3,0,1) points rigidly, before and after training."""

import pytest
import torch

from geomlin.algebra import CliffordAlgebra, pga
from geomlin.clifford import GCAMLP, GCAGate, GCAGroupNorm, GroupActionLinear
from geomlin.groups import Pin301
from geomlin.testing import equivariance_error

DT = torch.float64
VERSORS = [("exp", None), ("even", None), ("reflections", 3), ("reflections", 4)]


def rigidity_error(layer, pts: torch.Tensor) -> float:
    """Largest change of a pairwise distance, over every output channel (one input channel)."""
    y = layer(pga.embed_point(pts)[:, None, :])
    d0 = torch.cdist(pts, pts)
    return max((torch.cdist(q, q) - d0).abs().max().item()
               for q in (pga.extract_point(y[:, o]) for o in range(y.shape[1])))


def unit_error(alg, a: torch.Tensor) -> float:
    """``|<a ~a>_0| - 1`` and the other grades of ``a ~a`` (a versor has a scalar norm)."""
    aa = alg.geometric_product(a, alg.reverse(a))
    return max((aa[..., 0].abs() - 1).abs().max().item(), aa[..., 1:].abs().max().item())


@pytest.mark.parametrize("versor,k", VERSORS)
def test_points_move_rigidly_before_and_after_training(versor, k):
    torch.manual_seed(0)
    layer = GroupActionLinear(pga.PGA, 1, 4, versor=versor, num_reflections=k, init_scale=1.0).double()
    pts = torch.randn(24, 3, dtype=DT) * 2
    assert rigidity_error(layer, pts) < 1e-9
    assert unit_error(pga.PGA, layer.versors()) < 1e-9
    # 50 optimiser steps towards other poses of the points: the versors stay on the group
    motions = Pin301().sample(4, generator=torch.Generator().manual_seed(1))
    target = torch.stack([pga.sandwich(m, pga.embed_point(pts)) for m in motions], 1)
    target = target + 0.1 * torch.randn_like(target)
    opt = torch.optim.Adam(layer.parameters(), lr=0.05)
    before = [p.detach().clone() for p in layer.parameters()]
    for _ in range(50):
        loss = (layer(pga.embed_point(pts)[:, None, :]) - target).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert any((p - b).abs().max() > 1e-2 for p, b in zip(layer.parameters(), before))
    assert rigidity_error(layer, pts) < 1e-9
    assert unit_error(pga.PGA, layer.versors()) < 1e-9


def test_parities():
    alg = pga.PGA
    odd_mask = alg.grades % 2 == 1
    for versor, k, odd in [("exp", None, False), ("even", None, False), ("reflections", 4, False),
                           ("reflections", 3, True)]:
        a = GroupActionLinear(alg, 2, 2, versor=versor, num_reflections=k).double().versors()
        wrong = a[..., ~odd_mask] if odd else a[..., odd_mask]
        assert wrong.abs().max() < 1e-12, versor
    # an odd versor acts as an improper motion: it reverses the orientation of a tetrahedron
    layer = GroupActionLinear(alg, 1, 1, versor="reflections", num_reflections=3).double()
    pts = torch.tensor([[0.0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], dtype=DT)
    q = pga.extract_point(layer(pga.embed_point(pts)[:, None])[:, 0])
    assert torch.linalg.det(q[1:] - q[0]) < 0


@pytest.mark.parametrize("metric", [(1, 1, 1), (1, 1, 1, 1), (1, -1, -1, -1), (0, 1, 1, 1), (1, 1, -1)])
def test_even_renormalisation_gives_unit_versors(metric):
    alg = CliffordAlgebra(metric)
    torch.manual_seed(1)
    layer = GroupActionLinear(alg, 3, 3, versor="even", init_scale=0.3).double()
    assert unit_error(alg, layer.versors()) < 1e-10
    # it is a versor: its sandwich keeps grades and the quadratic form of vectors
    v = alg.embed_vector(torch.randn(5, alg.n, dtype=DT))
    out = GroupActionLinear(alg, 1, 1, versor="even").double()
    with torch.no_grad():
        out.weight.fill_(1.0)
    y = out(v[:, None])[:, 0]
    assert alg.grade_projection(y, [0, 2, 3, 4][: alg.n]).abs().max() < 1e-10
    torch.testing.assert_close(alg.norm_squared(y), alg.norm_squared(v))


def test_gate_is_not_equivariant_and_group_norm_is():
    alg = pga.PGA
    x = torch.randn(5, 3, 16, dtype=DT)
    gate = GCAGate(alg, 3).double()
    act = alg.act
    assert equivariance_error(gate, Pin301(), act, act, inputs=x) > 1e-3
    assert equivariance_error(GCAGroupNorm(alg, 3).double(), Pin301(), act, act, inputs=x) < 1e-12


def test_gcamlp_learns_a_rigid_motion():
    """Targets are one fixed rigid motion of the inputs: a one-layer GCA-MLP can fit them exactly."""
    torch.manual_seed(0)
    motion = Pin301(parity="even").sample(1)[0]
    pts = torch.randn(64, 3, dtype=DT)
    x = pga.embed_point(pts)[:, None]
    target = pga.extract_point(pga.sandwich(motion, x[:, 0]))
    model = GCAMLP(pga.PGA, 1, 1, hidden_channels=4, num_blocks=1).double()
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    first = None
    for _ in range(150):
        loss = (pga.extract_point(model(x)[:, 0]) - target).square().mean()
        first = first if first is not None else loss.item()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.05 * first
    deep = GCAMLP(pga.PGA, 2, 3, hidden_channels=4, num_blocks=3, num_groups=2)
    assert deep(torch.randn(7, 2, 16)).shape == (7, 3, 16)
