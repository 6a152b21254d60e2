"""e3nn's own models with their tensor products swapped for GauntTensorProduct in one line, no shim.

``e3nn.nn.models.v2106``: the ``Convolution`` (a ``"uvu"`` product of node features and edge harmonics with
per-edge weights from a radial MLP, and four fully connected products with node attributes) and the
``SimpleNetwork`` built on it (hidden irreps of both parities, so odd paths). Oracles: e3nn's
``assert_equivariant`` (the acceptance check), ``geomlin.testing`` (the project's checker, float64), and the
unswapped e3nn model with the same weights (same outputs, float64 Clebsch-Gordan tables).
"""

import contextlib
import copy

import pytest
import torch
from e3nn import o3
from e3nn.nn.models.v2106 import gate_points_networks, points_convolution
from e3nn.util.test import assert_equivariant as e3nn_assert_equivariant

from geomlin.gaunt import GauntTensorProduct
from geomlin.testing import assert_equivariant


@contextlib.contextmanager
def swapped():
    """e3nn's model code with geomlin's product: the one line below, undone afterwards."""
    saved = points_convolution.TensorProduct, points_convolution.FullyConnectedTensorProduct
    points_convolution.TensorProduct = points_convolution.FullyConnectedTensorProduct = GauntTensorProduct
    try:
        yield
    finally:
        points_convolution.TensorProduct, points_convolution.FullyConnectedTensorProduct = saved


def _float64(build):
    """``build()`` with float64 defaults (e3nn's Clebsch-Gordan tables follow the default dtype)."""
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        return build()
    finally:
        torch.set_default_dtype(default)


def _products(model) -> list:
    """The tensor products of every convolution (the gates' element-wise products are not swapped)."""
    return [getattr(m, name) for m in model.modules() if isinstance(m, points_convolution.Convolution)
            for name in ("sc", "lin1", "tp", "lin2", "alpha")]


def _same_weights(gaunt_model, e3nn_model) -> None:
    result = gaunt_model.load_state_dict(e3nn_model.state_dict(), strict=False)
    assert not result.missing_keys and all("_compiled_main" in k for k in result.unexpected_keys)  # e3nn's codegen


def _network():
    return gate_points_networks.SimpleNetwork("3x0e + 2x1o", "4x0e + 1x1o", max_radius=2.5, num_neighbors=3.0,
                                              num_nodes=6.0, mul=6, layers=2, lmax=2)


def _convolution():
    return points_convolution.Convolution("4x0e + 2x1o + 2x1e + 1x2e", "1x0e", o3.Irreps.spherical_harmonics(2),
                                          "3x0e + 2x0o + 2x1o + 2x1e + 1x2o", fc_neurons=[5, 16], num_neighbors=3.0)


def _graph(num_nodes=6, seed=0):
    gen = torch.Generator().manual_seed(seed)
    pos = torch.randn(num_nodes, 3, generator=gen, dtype=torch.float64)
    src, dst = torch.meshgrid(torch.arange(num_nodes), torch.arange(num_nodes), indexing="ij")
    keep = src != dst
    return pos, src[keep], dst[keep]


def test_simple_network_swaps_in_one_line_and_equals_e3nns():
    torch.manual_seed(0)
    with swapped():
        net = _float64(_network)
    reference = _float64(_network)
    assert all(isinstance(m, o3.TensorProduct) for m in _products(reference))  # the oracle is e3nn's
    products = _products(net)
    assert products and all(isinstance(m, GauntTensorProduct) for m in products)
    _same_weights(net, reference)
    pos, _, _ = _graph()
    x = net.irreps_in.randn(6, -1, dtype=torch.float64)
    out = net({"pos": pos, "x": x})
    assert out.abs().max() > 0
    torch.testing.assert_close(out, reference({"pos": pos, "x": x}), atol=1e-10, rtol=1e-10)


def test_simple_network_swapped_is_equivariant_under_both_checkers_and_trains():
    torch.manual_seed(1)
    with swapped():
        net = _network()
    pos, _, _ = _graph(seed=1)
    pos, x = pos.float(), net.irreps_in.randn(6, -1)
    e3nn_assert_equivariant(lambda p, f: net({"pos": p, "x": f}), args_in=[pos, x],
                            irreps_in=["cartesian_points", net.irreps_in], irreps_out=[net.irreps_out])
    net64 = copy.deepcopy(net).double()
    assert_equivariant(lambda p, f: net64({"pos": p, "x": f}), "O3", (o3.Irreps("1o"), net.irreps_in), net.irreps_out,
                       inputs=(pos.double(), x.double()))
    target = net.irreps_out.randn(1, -1)
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
    losses = []
    for _ in range(8):
        loss = (net({"pos": pos, "x": x}) - target).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert all(torch.isfinite(torch.tensor(losses))) and losses[-1] < losses[0]


def test_convolution_swaps_in_one_line_equals_e3nns_and_is_equivariant():
    torch.manual_seed(2)
    with swapped():
        conv = _float64(_convolution)
    reference = _float64(_convolution)
    assert isinstance(conv.tp, GauntTensorProduct) and isinstance(conv.sc, GauntTensorProduct)
    assert all(isinstance(m, o3.TensorProduct) for m in _products(reference))  # the oracle is e3nn's
    _same_weights(conv, reference)
    with torch.no_grad():  # e3nn zeroes the gate of the convolution's output at start: make it count
        conv.alpha.weight.normal_()
        reference.alpha.weight.copy_(conv.alpha.weight)
    pos, src, dst = _graph(seed=2)
    vec = pos[dst] - pos[src]
    node = conv.irreps_node_input.randn(6, -1, dtype=torch.float64)
    attr = torch.ones(6, 1, dtype=torch.float64)
    sh = o3.spherical_harmonics(conv.irreps_edge_attr, vec, True, normalization="component")
    scalars = torch.randn(len(src), 5, dtype=torch.float64)
    args = (node, attr, src, dst, sh, scalars)
    torch.testing.assert_close(conv(*args), reference(*args), atol=1e-10, rtol=1e-10)
    e3nn_assert_equivariant(conv, args_in=list(args), irreps_in=[conv.irreps_node_input, conv.irreps_node_attr, None,
                                                                   None, conv.irreps_edge_attr, None],
                            irreps_out=[conv.irreps_node_output])
    assert_equivariant(lambda n, s: conv(n, attr, src, dst, s, scalars), "O3",
                       (conv.irreps_node_input, conv.irreps_edge_attr), conv.irreps_node_output, inputs=(node, sh))


def test_convolution_swapped_trains_with_forces_by_double_backward():
    """A few steps of an energy-and-forces loss: the product is differentiated twice."""
    torch.manual_seed(3)
    with swapped():
        conv = points_convolution.Convolution("2x0e", "1x0e", o3.Irreps.spherical_harmonics(2), "2x0e + 2x1o",
                                              fc_neurons=[4, 8], num_neighbors=3.0).double()
    pos0, src, dst = _graph(seed=3)
    node, attr = torch.randn(6, 2, dtype=torch.float64), torch.ones(6, 1, dtype=torch.float64)
    optimizer = torch.optim.Adam(conv.parameters(), lr=1e-2)
    losses = []
    for _ in range(5):
        pos = pos0.clone().requires_grad_()
        vec = pos[dst] - pos[src]
        sh = o3.spherical_harmonics(conv.irreps_edge_attr, vec, True, normalization="component")
        radial = torch.exp(-vec.norm(dim=-1, keepdim=True) * torch.arange(1, 5, dtype=torch.float64))
        energy = conv(node, attr, src, dst, sh, radial)[:, :2].sum()
        (forces,) = torch.autograd.grad(-energy, pos, create_graph=True)
        loss = (energy - 1.0) ** 2 + forces.pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]


@pytest.mark.parametrize("name", ["TensorProduct", "FullyConnectedTensorProduct"])
def test_every_e3nn_constructor_argument_is_accepted_by_name(name):
    """The keyword arguments of e3nn's constructors, all passed at once, build the same product as e3nn."""
    import inspect

    wanted = set(inspect.signature(getattr(o3, name).__init__).parameters) - {"self", "kwargs"}
    if name == "FullyConnectedTensorProduct":  # its **kwargs go to TensorProduct
        wanted |= set(inspect.signature(o3.TensorProduct.__init__).parameters) - {"self", "instructions"}
    accepted = set(inspect.signature(GauntTensorProduct.__init__).parameters) - {"self"}
    assert wanted <= accepted, wanted - accepted
