"""Feature types: actions against independent formulas, declarations, the checker, composition."""

import pytest
import torch
from torch import nn

from geomlin.algebra import CliffordAlgebra, pga
from geomlin.groups import E3, SE3, SO, CliffordGroup, O, Pin301, S
from geomlin.reps import (
    PSEUDO,
    EquivariantSequential,
    Labels,
    Multivectors,
    Positions,
    Scalars,
    SphereCoefficients,
    Tensors,
    V,
    Vectors,
    compatible,
    declared_group,
    declared_types,
    example_inputs,
)
from geomlin.testing import assert_equivariant, equivariance_error

DT = torch.float64


def test_vectors_and_positions_follow_rigid_motions():
    g = E3().sample(1, generator=torch.Generator().manual_seed(0))[0]
    x = torch.randn(5, 3, dtype=DT)
    torch.testing.assert_close(Vectors(3).act(g, x), x @ g.R.T)
    torch.testing.assert_close(Positions(3).act(g, x), x @ g.R.T + g.t)
    # under a linear group a position has no translation
    R = O(3).sample(1)[0]
    torch.testing.assert_close(Positions(3, group=O(3)).act(R, x), x @ R.T)
    assert Scalars(4).act(g, x[:, :1]) is not None and Scalars(4).is_invariant


def test_tensors_of_order_two_transform_as_g_x_gT():
    R = O(4).sample(1, generator=torch.Generator().manual_seed(1))[0]
    x = torch.randn(2, 3, 4, 4, dtype=DT)  # (batch, channels, n, n)
    torch.testing.assert_close(Tensors(O(4), 2, channels=3).act(R, x), R @ x @ R.T)
    # order 3 against the explicit index formula
    P = S(4).sample(1, generator=torch.Generator().manual_seed(2))[0]
    y = torch.randn(4, 4, 4, dtype=DT)
    want = torch.einsum("ia,jb,kc,abc->ijk", P, P, P, y)
    torch.testing.assert_close(Tensors(S(4), 3).act(P, y), want)


def test_sphere_coefficients_match_e3nn_wigner_matrices():
    from e3nn import o3

    R = O(3).sample(3, generator=torch.Generator().manual_seed(3))
    for parity in (1, PSEUDO):
        t = SphereCoefficients(3, channels=2, parity=parity)
        irreps = o3.Irreps("+".join(f"1x{l}{'e' if parity * (-1) ** l == 1 else 'o'}" for l in range(4)))
        x = torch.randn(5, 2, 16, dtype=DT)
        for g in R:
            want = x @ irreps.D_from_matrix(g).T  # e3nn goes through Euler angles in float32 tables: ~1e-6
            torch.testing.assert_close(t.act(g, x), want, atol=1e-5, rtol=1e-5)
            # and the action is a homomorphism to round-off
            h = R[0]
            torch.testing.assert_close(t.act(g @ h, x), t.act(g, t.act(h, x)), atol=1e-12, rtol=1e-12)


def test_multivectors_act_by_the_sandwich_of_their_algebra():
    g = Pin301().sample(2, generator=torch.Generator().manual_seed(4))
    x = torch.randn(3, 2, 16, dtype=DT)
    t = Multivectors(pga.PGA, 2)
    assert isinstance(t.group, Pin301)
    torch.testing.assert_close(t.act(g[0], x), pga.sandwich(g[0], x))
    alg = CliffordAlgebra((1, -1, -1, -1))
    t2 = Multivectors(alg, 2)
    assert isinstance(t2.group, CliffordGroup)
    v = t2.group.sample(1, generator=torch.Generator().manual_seed(5))[0]
    y = torch.randn(4, 2, 16, dtype=DT)
    torch.testing.assert_close(t2.act(v, y), alg.sandwich(v, y))


def test_labels_are_integer_and_range_checked():
    t = Labels(5)
    assert t.random((7,)).dtype == torch.int64
    with pytest.raises(ValueError, match=r"labels in \[0, 5\)"):
        t.check(torch.tensor([0, 5]))
    with pytest.raises(TypeError, match="integer dtype"):
        t.check(torch.tensor([0.0]))


def test_type_check_names_the_type_and_both_shapes():
    with pytest.raises(ValueError, match=r"x must have shape \(\.\.\., 8, 16\) \(Multivectors\(G\(3,0,1\), 8 "
                                         r"channels\)\), got \(4, 7, 15\)"):
        Multivectors(pga.PGA, 8).check(torch.zeros(4, 7, 15))


class _Biased(nn.Module):
    """x -> |x|-gated vector plus a position output: equivariant under E(3), with biases."""

    type_in = (Positions(3), Vectors(3))
    type_out = (Positions(3), Scalars(1))

    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(1, 8), nn.Tanh(), nn.Linear(8, 1)).double()

    def forward(self, pos, vel):
        gate = self.mlp(vel.norm(dim=-1, keepdim=True))
        return pos + gate * vel, gate


class _Broken(_Biased):
    def forward(self, pos, vel):
        out, gate = super().forward(pos, vel)
        return out + torch.tensor([0.1, 0.0, 0.0], dtype=out.dtype), gate


def test_checker_uses_declarations_alone():
    m = _Biased()
    assert isinstance(declared_group(m), type(E3()))
    assert_equivariant(m)
    assert equivariance_error(_Broken()) > 1e-3
    with pytest.raises(AssertionError, match="not equivariant"):
        assert_equivariant(_Broken())
    # a smaller group given explicitly uses the same declared actions
    assert_equivariant(m, group=SE3())


def test_module_without_declarations_is_refused_with_a_clear_message():
    with pytest.raises(TypeError, match="declares no feature types"):
        assert_equivariant(nn.Linear(3, 3))


def test_checker_refuses_empty_inputs():
    with pytest.raises(ValueError, match="empty"):
        assert_equivariant(lambda x: x, O(3), V(O(3)), V(O(3)), inputs=torch.zeros(0, 3, dtype=DT))
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        assert_equivariant(lambda x: x, O(3), V(O(3)), V(O(3)), batch_size=0)


def test_example_inputs_follow_types_or_the_module():
    args, kwargs = example_inputs(_Biased(), generator=torch.Generator().manual_seed(0))
    assert [a.shape for a in args] == [(4, 3), (4, 3)] and kwargs == {}

    class WithMask(_Biased):
        def example_inputs(self, generator=None, dtype=DT):
            pos = torch.randn(2, 5, 3, generator=generator, dtype=dtype)
            return (pos, pos.clone()), {}

    args, _ = example_inputs(WithMask())
    assert args[0].shape == (2, 5, 3)


def test_declared_types_accept_e3nn_modules():
    from e3nn import o3

    tp = o3.FullyConnectedTensorProduct("1x1o", "1x1o", "1x0e+1x1e")
    tin, tout = declared_types(tp)
    assert len(tin) == 2 and tout[0].size == 4


def test_compatibility_rules():
    assert compatible(Positions(3, SE3()), Positions(3))          # SE(3) output into an E(3) input
    assert compatible(Scalars(4), Scalars(4)) and not compatible(Scalars(4), Scalars(3))
    assert not compatible(Positions(3), Vectors(3))
    assert not compatible(Multivectors(pga.PGA, 8), SphereCoefficients(2, 4))
    assert compatible(Vectors(3, group=SO(3)), Vectors(3, group=O(3)))


class _Mv(nn.Module):
    def __init__(self, c_in, c_out):
        super().__init__()
        self.type_in = Multivectors(pga.PGA, c_in)
        self.type_out = Multivectors(pga.PGA, c_out)
        self.w = nn.Parameter(torch.randn(c_out, c_in, dtype=DT))

    def forward(self, x):
        return torch.einsum("oi,...ik->...ok", self.w, x)


class _Sphere(nn.Module):
    type_in = SphereCoefficients(2, 4)
    type_out = SphereCoefficients(2, 4)

    def forward(self, x):
        return x


def test_sequential_checks_each_pair_and_names_both_types():
    seq = EquivariantSequential(_Mv(2, 3), _Mv(3, 1))
    assert seq.type_in == (Multivectors(pga.PGA, 2),)
    assert_equivariant(seq, num_samples=4)
    with pytest.raises(ValueError, match=r"module 0 \(_Mv\) returns Multivectors\(G\(3,0,1\), 3 channels\) "
                                         r"but module 1 \(_Sphere\) expects SphereCoefficients\(lmax=2, 4 channels\)"):
        EquivariantSequential(_Mv(2, 3), _Sphere())
    with pytest.raises(ValueError, match="module 0"):
        EquivariantSequential(_Mv(2, 3), _Mv(2, 3))
