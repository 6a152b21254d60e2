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




def test_chunked_messages_recomputed_for_the_backward_give_the_one_pass_numbers(monkeypatch):
    """Oracle: the same convolution with every edge in one chunk. Chunks of 7 edges (recomputed in the
    backward pass) give its output, its gradients, and the second derivatives that force training takes
    (the gradient of a loss on dE/dpos with respect to the weights)."""
    from geomlin import batching

    conv = _conv()
    pos, edge_index = _graph(6)
    x = torch.randn(6, 3, 9, dtype=torch.float64)

    def run():
        p = pos.clone().requires_grad_(True)
        out = conv(x, p, edge_index)
        (g,) = torch.autograd.grad(out.pow(2).sum(), p, create_graph=True)
        second = torch.autograd.grad(g.pow(2).sum(), list(conv.parameters()))
        return out.detach(), g.detach(), [s.detach() for s in second]

    monkeypatch.setattr(batching, "EDGE_CHUNK", edge_index.shape[1])
    want = run()
    monkeypatch.setattr(batching, "EDGE_CHUNK", 7)
    got = run()
    torch.testing.assert_close(got[0], want[0], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(got[1], want[1], rtol=1e-12, atol=1e-12)
    for a, b in zip(got[2], want[2]):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_periodic_edges_join_the_image_the_shift_names():
    """Oracle: the conv on the free images. With shifts in a cell the output at the targets equals the
    output of the same edges drawn to explicit copies of the sources moved by S @ cell."""
    conv = _conv()
    g = torch.Generator().manual_seed(0)
    pos = torch.randn(4, 3, generator=g, dtype=torch.float64)
    cell = torch.tensor([[3.0, 0.0, 0.0], [0.5, 2.8, 0.0], [0.2, -0.4, 3.3]], dtype=torch.float64)
    edge_index = torch.tensor([[0, 1, 2, 3, 1], [1, 0, 3, 2, 1]])
    shift = torch.tensor([[1, 0, 0], [0, -1, 0], [0, 0, 1], [1, 1, 0], [0, 1, 0]])
    x = torch.randn(4, 3, 9, generator=g, dtype=torch.float64)
    out = conv(x, pos, edge_index, shift=shift, cell=cell[None])
    images = pos[edge_index[0]] + shift.double() @ cell                  # one explicit copy per edge
    free_pos = torch.cat([pos, images])
    free_edges = torch.stack([torch.arange(4, 9), edge_index[1]])
    free = conv(torch.cat([x, x[edge_index[0]]]), free_pos, free_edges)
    torch.testing.assert_close(out, free[:4], rtol=1e-12, atol=1e-12)
