"""GauntTensorProduct, the e3nn drop-in: its map written out (oracle below), equivariance, e3nn's call pattern."""

import pytest
import torch
from e3nn import o3

from geomlin.gaunt import (
    GauntTensorProduct,
    gaunt_tensor,
    gaunt_tensor_product,
    irreps_to_sphere,
    sphere_irreps,
    sphere_to_irreps,
)
from geomlin.testing import assert_equivariant
from tests.randomized import randomized


def _natural(ir) -> bool:
    return ir.p == (-1) ** ir.l


def drop_in_oracle(tp, x1, x2, weight=None):
    """The drop-in's map written out with einsums over e3nn's flat layout (float64 oracle).

    Each input irrep block ``u x l`` is mixed into ``C`` functions of its degree and parity class, the
    per-(channel, degree) weights scale ``x1``'s functions and the products, the Gaunt product of every
    class pair (``natural = n n + p p``, ``pseudo = n p + p n``) is an einsum with the Gaunt tensor, and
    every output block is a channel mix of its degree and class. A multiplicity-1 ``x2`` with distinct
    degrees is used unmixed, one function for every channel.
    """
    C, L1, L2, Lo = tp.channels, tp.lmax_in1, tp.lmax_in2, tp.lmax_out
    w = tp.weight if weight is None else weight
    batch = torch.broadcast_shapes(x1.shape[:-1], x2.shape[:-1], w.shape[:-1])
    x1, x2 = x1.expand(*batch, x1.shape[-1]), x2.expand(*batch, x2.shape[-1])
    w = w.expand(*batch, w.shape[-1])
    n1 = C * (L1 + 1)
    w1 = w[..., :n1].unflatten(-1, (C, L1 + 1))
    wo = w[..., n1:].unflatten(-1, (C, Lo + 1))

    def classes(x, irreps, mixes, L, channels):
        out = {}
        offset = 0
        for k, (mul, ir) in enumerate(irreps):
            block = x[..., offset:offset + mul * ir.dim].unflatten(-1, (mul, ir.dim))
            offset += mul * ir.dim
            f = out.setdefault(_natural(ir), x.new_zeros(*batch, channels, (L + 1) ** 2))
            mixed = block if mixes is None else torch.einsum("...ud,uc->...cd", block, mixes[k])
            f[..., ir.l ** 2:(ir.l + 1) ** 2] += mixed.expand(*batch, channels, ir.dim)
        return out

    f1 = classes(x1, tp.irreps_in1, tp.mix1, L1, C)
    for f in f1.values():
        for l in range(L1 + 1):
            f[..., l ** 2:(l + 1) ** 2] *= w1[..., l, None]
    f2 = classes(x2, tp.irreps_in2, None if tp.shared_in2 else tp.mix2, L2, 1 if tp.shared_in2 else C)
    G = gaunt_tensor(L1, L2, Lo).to(x1.dtype)
    prods = {}
    for p1, a in f1.items():
        for p2, b in f2.items():
            term = torch.einsum("...ci,...cj,ijk->...ck", a, b.expand(*batch, C, b.shape[-1]), G)
            prods[p1 == p2] = prods.get(p1 == p2, 0) + term
    pieces = []
    for k, (mul, ir) in enumerate(tp.irreps_out):
        if _natural(ir) not in prods:
            pieces.append(x1.new_zeros(*batch, mul * ir.dim))
            continue
        p = prods[_natural(ir)][..., ir.l ** 2:(ir.l + 1) ** 2] * wo[..., ir.l, None]
        pieces.append(torch.einsum("...cd,cu->...ud", p, tp.mix_out[k]).flatten(-2))
    return torch.cat(pieces, dim=-1)


CASES = [
    # (irreps_in1, irreps_in2, irreps_out, shared_weights)
    ("4x0e+4x1o+4x2e", "1x0e+1x1o+1x2e", "4x0e+4x1o+4x2e", True),      # x (x) spherical harmonics
    ("4x0e+4x1o+4x2e", "1x0e+1x1o+1x2e", "4x0e+4x1o+4x2e", False),     # a convolution: per-edge weights
    ("3x0e+3x1o+3x2e+3x3o", "1x0e+1x1o+1x2e+1x3o", "2x0e+5x1o+1x3o", False),
    ("4x0e+4x1o+4x2e", "4x0e+4x1o+4x2e", "4x0e+4x1o+4x2e", True),      # features (x) features
    ("3x0e+2x1o+1x1e+2x2e+1x2o", "1x0e+1x1o+1x2e+1x1e", "2x0e+2x0o+3x1o+1x1e+2x2e", False),  # both classes
    ("2x1o+3x0e+1x1o", "1x2e+1x0e", "1x1o+2x0e+1x1o", True),          # repeated and unordered degrees
    ("2x0e+2x2e", "2x1o", "3x1o+1x3o", True),                          # missing degrees, x2 mixed
    ("2x0o+2x1e", "1x0e+1x1o", "2x0e+2x1o+2x0o+2x1e", True),           # pseudo x natural -> pseudo only
]


@pytest.mark.parametrize("method", ["auto", "direct", "dense", "grid"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}|{c[1]}|{c[2]}|{c[3]}")
def test_drop_in_matches_the_map_written_out(case, method):
    torch.manual_seed(0)
    ir1, ir2, iro, shared_weights = case
    tp = randomized(GauntTensorProduct(ir1, ir2, iro, shared_weights=shared_weights, method=method)).double()
    x1 = tp.irreps_in1.randn(6, -1, dtype=torch.float64)
    x2 = tp.irreps_in2.randn(6, -1, dtype=torch.float64)
    weight = None if shared_weights else torch.randn(6, tp.weight_numel, dtype=torch.float64)
    torch.testing.assert_close(tp(x1, x2, weight), drop_in_oracle(tp, x1, x2, weight), atol=1e-12, rtol=0)


def test_drop_in_broadcasts_leading_axes_and_gradients_match_the_oracle():
    torch.manual_seed(1)
    tp = randomized(GauntTensorProduct("3x0e+3x1o+3x2e", "1x0e+1x1o+1x2e", "2x0e+2x1o+2x2e",
                                       shared_weights=False)).double()
    x1 = tp.irreps_in1.randn(2, 3, -1, dtype=torch.float64).requires_grad_()
    x2 = tp.irreps_in2.randn(1, 3, -1, dtype=torch.float64).requires_grad_()  # broadcast over the first axis
    weight = torch.randn(2, 1, tp.weight_numel, dtype=torch.float64).requires_grad_()
    out, ref = tp(x1, x2, weight), drop_in_oracle(tp, x1, x2, weight)
    assert out.shape == (2, 3, tp.irreps_out.dim)
    torch.testing.assert_close(out, ref, atol=1e-12, rtol=0)
    g = torch.randn_like(out)
    params = [x1, x2, weight, *tp.mix1, *tp.mix_out]
    for a, b in zip(torch.autograd.grad(out, params, g), torch.autograd.grad(ref, params, g)):
        torch.testing.assert_close(a, b, atol=1e-11, rtol=0)


@pytest.mark.parametrize("method", ["auto", "grid"])
def test_drop_in_is_twice_differentiable(method):
    """Force training differentiates the product twice (gradgradcheck, float64)."""
    tp = randomized(GauntTensorProduct("2x0e+2x1o", "1x0e+1x1o+1x2e", "2x0e+2x1o", shared_weights=False,
                                       method=method)).double()
    x1 = tp.irreps_in1.randn(3, -1, dtype=torch.float64).requires_grad_()
    x2 = tp.irreps_in2.randn(3, -1, dtype=torch.float64).requires_grad_()
    w = torch.randn(3, tp.weight_numel, dtype=torch.float64).requires_grad_()
    assert torch.autograd.gradcheck(tp, (x1, x2, w))
    assert torch.autograd.gradgradcheck(tp, (x1, x2, w))


def test_drop_in_gaunt_paths_equal_e3nn_tensor_product():
    """Oracle: e3nn's ``o3.TensorProduct`` (mode uuu, every Gaunt path weighted by its coefficient) equals
    the drop-in with identity channel mixing and unit weights."""
    import math

    C, L = 3, 2
    ir = sphere_irreps(L, C)
    instructions = []
    for i1, (_, a) in enumerate(ir):
        for i2, (_, b) in enumerate(ir):
            for i3, (_, c) in enumerate(ir):
                if (a.l + b.l + c.l) % 2 or not abs(a.l - b.l) <= c.l <= a.l + b.l:
                    continue
                J = a.l + b.l + c.l
                g = J // 2
                f = math.factorial
                w3j000 = math.sqrt(f(J - 2 * a.l) * f(J - 2 * b.l) * f(J - 2 * c.l) / f(J + 1)) * f(g) / (
                    f(g - a.l) * f(g - b.l) * f(g - c.l))
                coef = math.sqrt((2 * a.l + 1) * (2 * b.l + 1) * (2 * c.l + 1) / (4 * math.pi)) * w3j000
                instructions.append((i1, i2, i3, "uuu", False, coef * coef))
    e3 = o3.TensorProduct(ir, ir, ir, instructions, irrep_normalization="none", path_normalization="none").double()
    tp = GauntTensorProduct(ir, ir, ir).double()
    with torch.no_grad():
        for p in list(tp.mix1) + list(tp.mix2) + list(tp.mix_out):
            p.copy_(torch.eye(C))
    x1, x2 = ir.randn(5, -1, dtype=torch.float64), ir.randn(5, -1, dtype=torch.float64)
    torch.testing.assert_close(tp(x1, x2), e3(x1, x2), atol=1e-6, rtol=0)  # e3nn keeps float32 3j tables


def test_irreps_drop_in_equals_sphere_product_for_natural_irreps():
    """Identity channel mixing and unit weights: the e3nn-layout module is the channel-wise Gaunt product."""
    C = 3
    tp = GauntTensorProduct(sphere_irreps(2, C), sphere_irreps(2, C), sphere_irreps(3, C)).double()
    assert isinstance(tp, GauntTensorProduct) and tp.channels == C
    with torch.no_grad():
        for p in list(tp.mix1) + list(tp.mix2) + list(tp.mix_out):
            p.copy_(torch.eye(C))
    x1, x2 = torch.randn(4, C, 9, dtype=torch.float64), torch.randn(4, C, 9, dtype=torch.float64)
    out = tp(sphere_to_irreps(x1), sphere_to_irreps(x2))
    ref = gaunt_tensor_product(x1, x2, 3, method="direct")
    torch.testing.assert_close(irreps_to_sphere(out, sphere_irreps(3, C)), ref, atol=1e-12, rtol=0)


def test_irreps_drop_in_pseudo_parity_goes_to_pseudo_outputs():
    tp = GauntTensorProduct("0o+1e+2o", "0e+1o+2e", "0e+1o+0o+1e").double()
    with torch.no_grad():
        for p in list(tp.mix1) + list(tp.mix_out):
            p.fill_(1.0)
    assert tp.shared_in2  # multiplicity-1 harmonics: used as they are, shared by the channels
    x1, x2 = torch.randn(3, 9, dtype=torch.float64), torch.randn(3, 9, dtype=torch.float64)
    out = tp(x1, x2)
    ref = gaunt_tensor_product(x1, x2, 1, method="direct")  # pseudo x natural -> pseudo, numerically the product
    assert out[:, :4].abs().max() == 0  # no natural path
    torch.testing.assert_close(out[:, 4:], ref, atol=1e-12, rtol=0)


@pytest.mark.parametrize("shared_weights", [True, False])
def test_irreps_drop_in_is_o3_equivariant_for_any_parities(shared_weights):
    tp = randomized(GauntTensorProduct("3x0e+2x1o+1x1e+2x2e+1x2o", "1x0e+1x1o+1x2e+1x1e", "2x0e+2x0o+3x1o+1x1e+2x2e",
                                       channels=4, shared_weights=shared_weights)).double()
    assert tp.weight_numel == 4 * 3 + 4 * 3
    assert_equivariant(tp)
    x1 = torch.randn(5, tp.irreps_in1.dim, dtype=torch.float64)
    x2 = torch.randn(5, tp.irreps_in2.dim, dtype=torch.float64)
    if not shared_weights:
        with pytest.raises(ValueError, match="weight"):
            tp(x1, x2)
        assert tp(x1, x2, weight=torch.randn(5, tp.weight_numel, dtype=torch.float64)).shape == (5, tp.irreps_out.dim)


def test_irreps_drop_in_swaps_for_e3nn_in_one_line():
    """The e3nn call pattern of a convolution: per-edge weights from a radial MLP, same shapes out."""
    irreps_node, irreps_sh, irreps_out = o3.Irreps("8x0e+4x1o"), o3.Irreps.spherical_harmonics(2), o3.Irreps("8x0e+4x1o")
    for tp in (o3.FullyConnectedTensorProduct(irreps_node, irreps_sh, irreps_out, shared_weights=False),
               GauntTensorProduct(irreps_node, irreps_sh, irreps_out, shared_weights=False)):
        x = irreps_node.randn(10, -1)
        sh = o3.spherical_harmonics(irreps_sh, torch.randn(10, 3), True)
        weight = torch.randn(10, tp.weight_numel)
        assert tp(x, sh, weight).shape == (10, irreps_out.dim)


def test_module_deep_copies_and_pickles_as_the_irreps_form():
    import copy
    import io

    tp = GauntTensorProduct("2x0e+2x1o", "0e+1o", "2x0e")
    clone = copy.deepcopy(tp)
    assert isinstance(clone, GauntTensorProduct) and clone.irreps_out == tp.irreps_out
    buffer = io.BytesIO()
    torch.save(tp, buffer)
    buffer.seek(0)
    assert isinstance(torch.load(buffer, weights_only=False), GauntTensorProduct)
