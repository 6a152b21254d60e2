"""GauntConvolution: E(3) equivariance from its declared types, a per-edge loop oracle, the shared edge harmonics."""

import pytest
import torch

from geomlin.gaunt import GauntConvolution, gaunt_tensor_product, spherical_harmonics
from geomlin.radial import bessel_basis, polynomial_cutoff
from geomlin.testing import assert_equivariant


def _graph(n=6):
    pos = torch.randn(n, 3, dtype=torch.float64)
    src, dst = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
    keep = src != dst
    return pos, torch.stack([src[keep], dst[keep]])


def _conv(**kwargs):
    conv = GauntConvolution(2, 2, 3, channels=3, cutoff=10.0, avg_degree=2.0, **kwargs).double()
    with torch.no_grad():
        for p in conv.parameters():
            p.copy_(torch.randn_like(p))
    return conv


def test_conv_equivariant_e3_from_declarations():
    assert_equivariant(_conv())


def test_conv_matches_edge_loop():
    """Oracle: the message formula evaluated edge by edge with the direct Gaunt contraction."""
    conv = _conv()
    pos, edge_index = _graph(4)
    x = torch.randn(4, 3, 9, dtype=torch.float64)
    out = conv(x, pos, edge_index)
    ref = torch.zeros_like(out)
    deg_in = torch.tensor([0, 1, 1, 1, 2, 2, 2, 2, 2])
    deg_out = torch.repeat_interleave(torch.arange(4), 2 * torch.arange(4) + 1)
    for j, i in edge_index.T.tolist():
        vec = pos[i] - pos[j]
        r = vec.norm()[None]
        radial = conv.radial(bessel_basis(r, conv.num_basis, conv.cutoff))[0].view(3, 3 + 4)
        radial = radial * polynomial_cutoff(r, conv.cutoff)
        w_in, w_out = radial[:, :3][:, deg_in], radial[:, 3:][:, deg_out]
        sh = spherical_harmonics(2, vec)
        for c in range(3):
            ref[i, c] += w_out[c] * gaunt_tensor_product(x[j, c] * w_in[c], sh, 3, method="direct")
    torch.testing.assert_close(out, ref / 2.0, atol=1e-10, rtol=0)


@pytest.mark.parametrize("method", ["grid", "dense", "fft"])
def test_conv_methods_agree_and_backprop(method):
    pos, edge_index = _graph(5)
    x = torch.randn(5, 3, 9, dtype=torch.float64, requires_grad=True)
    conv = _conv()
    ref = conv(x, pos, edge_index)
    on_route = GauntConvolution(2, 2, 3, channels=3, cutoff=10.0, avg_degree=2.0, method=method).double()
    on_route.load_state_dict(conv.state_dict())  # the same weights; the tables of its own route
    out = on_route(x, pos, edge_index)
    torch.testing.assert_close(out, ref, atol=1e-11, rtol=0)
    (g,) = torch.autograd.grad(out.sum(), x)
    assert torch.isfinite(g).all()


