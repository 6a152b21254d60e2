"""GauntConvolution: E(3) equivariance, a per-edge loop oracle, input validation."""

import pytest
import torch

from geomlin.gaunt import GauntConvolution, gaunt_tensor_product, sphere_irreps, spherical_harmonics
from geomlin.gaunt.conv import bessel_basis, polynomial_cutoff
from geomlin.groups import E3
from geomlin.testing import assert_equivariant


def _graph(n=6):
    pos = torch.randn(n, 3, dtype=torch.float64)
    src, dst = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
    keep = src != dst
    return pos, torch.stack([src[keep], dst[keep]])


def _conv():
    conv = GauntConvolution(2, 2, 3, channels=3, cutoff=10.0, avg_degree=2.0).double()
    with torch.no_grad():
        for p in conv.parameters():
            p.copy_(torch.randn_like(p))
    return conv


def test_conv_equivariant_e3():
    conv = _conv()
    pos, edge_index = _graph()
    x = torch.randn(6, 3, 9, dtype=torch.float64)
    assert_equivariant(lambda p, f: conv(f, p, edge_index), E3(), ("position", sphere_irreps(2, 1)),
                       sphere_irreps(3, 1), inputs=(pos, x))


def test_conv_matches_edge_loop():
    conv = _conv()
    pos, edge_index = _graph(4)
    x = torch.randn(4, 3, 9, dtype=torch.float64)
    out = conv(x, pos, edge_index)
    ref = torch.zeros_like(out)
    for j, i in edge_index.T.tolist():
        vec = pos[i] - pos[j]
        r = vec.norm()[None]
        radial = conv.radial(bessel_basis(r, conv.num_radial, conv.cutoff))[0].view(3, 3)
        radial = radial * polynomial_cutoff(r, conv.cutoff)
        sh = spherical_harmonics(2, vec)
        edge = sh[None, :] * radial[:, [0, 1, 1, 1, 2, 2, 2, 2, 2]]
        ref[i] += gaunt_tensor_product(x[j], edge, 3, method="direct")
    torch.testing.assert_close(out, ref / 2.0, atol=1e-10, rtol=0)


def test_conv_errors():
    conv = _conv()
    pos, edge_index = _graph(3)
    x = torch.randn(3, 3, 9, dtype=torch.float64)
    with pytest.raises(ValueError, match="pos must have shape"):
        conv(x, pos[:2], edge_index)
    with pytest.raises(ValueError, match="edge_index"):
        conv(x, pos, edge_index.float())
    with pytest.raises(ValueError, match="zero-length"):
        conv(x, torch.zeros(3, 3, dtype=torch.float64), edge_index)
