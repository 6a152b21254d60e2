"""GauntTensorProduct is e3nn's tensor product: same constructor, weights, normalisation and outputs.

Oracle: e3nn's ``o3.TensorProduct`` / ``o3.FullyConnectedTensorProduct`` built with float64 Clebsch-Gordan
tables (e3nn takes the default dtype for them) and given the same weights; equivariance through
``geomlin.testing`` (O(3), reflections included).
"""

import copy
import io

import pytest
import torch
from e3nn import o3

from geomlin.gaunt import GauntTensorProduct
from geomlin.testing import assert_equivariant
from tests.randomized import randomized


def e3nn_twin(*args, **kwargs):
    """The e3nn module of the same arguments, with float64 Clebsch-Gordan tables."""
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        return (o3.TensorProduct if len(args) > 3 else o3.FullyConnectedTensorProduct)(*args, **kwargs).double()
    finally:
        torch.set_default_dtype(default)


def assert_same_as_e3nn(args, kwargs=None, batch=(5,), seed=0):
    kwargs = kwargs or {}
    torch.manual_seed(seed)
    e3 = e3nn_twin(*args, **kwargs)
    ga = GauntTensorProduct(*args, **kwargs).double()
    assert ga.weight_numel == e3.weight_numel
    assert [(*i[:5], i[6]) for i in ga.instructions] == [(*i[:5], i[6]) for i in e3.instructions]
    assert [i.path_weight for i in ga.instructions] == pytest.approx([i.path_weight for i in e3.instructions], rel=1e-14)
    torch.testing.assert_close(ga.output_mask, e3.output_mask)
    if e3.internal_weights and e3.weight_numel:
        with torch.no_grad():
            ga.weight.copy_(e3.weight)
    x1 = torch.randn(*batch, e3.irreps_in1.dim, dtype=torch.float64)
    x2 = torch.randn(*batch, e3.irreps_in2.dim, dtype=torch.float64)
    weight = None
    if not e3.internal_weights and e3.weight_numel:
        weight = torch.randn(*(() if e3.shared_weights else batch), e3.weight_numel, dtype=torch.float64)
    out = ga(x1, x2, weight)
    torch.testing.assert_close(out, e3(x1, x2, weight), atol=1e-12, rtol=1e-12)
    return ga, out


def _two_irreps(l1, p1, l2, p2, lo, po, mode, has_weight, **kwargs):
    """e3nn's own test layout: two irreps per input, paths 0-0-0 and 1-1-1 in ``mode`` plus two 'uvw' paths."""
    out_mul = (lambda m: m * m) if mode == "uvuv" else (lambda m: m)
    return ([(5, (l1, p1)), (3, (l1, p1))], [(5, (l2, p2)), (3, (l2, p2))], [(out_mul(5), (lo, po)), (out_mul(3), (lo, po))],
            [(0, 0, 0, mode, has_weight), (1, 1, 1, mode, has_weight), (0, 0, 1, "uvw", True, 0.5),
             (0, 1, 1, "uvw", True, 0.2)])


#: ``(l1, p1, l2, p2, l_out, p_out)``: even and odd paths (``l1 + l2 + l_out`` odd: 1-1-1, 1-2-2, 3-2-2, 2-2-3).
DEGREES = [(1, -1, 1, -1, 1, 1), (2, 1, 1, -1, 1, -1), (1, -1, 2, 1, 2, -1), (0, 1, 2, 1, 2, 1), (2, 1, 2, 1, 0, 1),
           (2, 1, 0, 1, 2, 1), (3, -1, 2, 1, 3, -1), (3, -1, 2, 1, 2, -1), (2, 1, 2, 1, 3, 1)]


@pytest.mark.parametrize("degrees", DEGREES, ids=str)
@pytest.mark.parametrize("mode,has_weight", [("uvw", True), ("uvu", True), ("uvu", False), ("uvv", True),
                                             ("uvv", False), ("uuw", True), ("uuu", True), ("uuu", False),
                                             ("uvuv", True), ("uvuv", False)])
@pytest.mark.parametrize("shared_weights", [True, False])
def test_every_mode_equals_e3nn(degrees, mode, has_weight, shared_weights):
    assert_same_as_e3nn(_two_irreps(*degrees, mode, has_weight), {"shared_weights": shared_weights})


@pytest.mark.parametrize("mode,has_weight", [("uvu<v", True), ("uvu<v", False), ("u<vw", True)])
@pytest.mark.parametrize("shared_weights", [True, False])
def test_triangular_modes_equal_e3nn(mode, has_weight, shared_weights):
    out = "6x1e" if mode == "uvu<v" else "3x1e"
    assert_same_as_e3nn(("4x1o", "4x1o", out, [(0, 0, 0, mode, has_weight)]), {"shared_weights": shared_weights})


@pytest.mark.parametrize("irrep_normalization", ["component", "norm", "none"])
@pytest.mark.parametrize("path_normalization", ["element", "path", "none"])
def test_normalisations_variances_and_path_weights_equal_e3nn(irrep_normalization, path_normalization):
    args = ("3x0e+2x1o+1x2e", "2x0e+1x1o", "2x0e+2x1o+1x1e+3x1o",
            [(0, 0, 0, "uvw", True, 2.0), (1, 1, 0, "uvw", True), (1, 0, 1, "uvu", True, 0.5), (2, 1, 3, "uvw", True),
             (1, 1, 2, "uvw", True, 3.0), (0, 1, 3, "uvw", True), (1, 1, 2, "uvv", False)])
    assert_same_as_e3nn(args, {"irrep_normalization": irrep_normalization, "path_normalization": path_normalization,
                               "in1_var": [1.0, 2.0, 0.5], "in2_var": [3.0, 1.0], "out_var": [1.0, 0.25, 4.0, 2.0]})
    assert_same_as_e3nn(args[:3], {"normalization": irrep_normalization, "path_normalization": path_normalization})


@pytest.mark.parametrize("shared_weights", [True, False])
def test_fully_connected_equals_e3nn_with_both_parities_and_empty_irreps(shared_weights):
    """Every path of both parities (the odd ones are Poisson brackets on the sphere), zero multiplicities."""
    assert_same_as_e3nn(("3x0e+2x1o+2x1e+0x2o+1x2e+1x3o", "1x0e+1x1o+1x2e+1x1e", "2x0e+2x0o+3x1o+1x1e+2x2e+1x2o+0x1o"),
                        {"shared_weights": shared_weights}, batch=(2, 3))


@pytest.mark.parametrize("args", [("4x1o", "1x1o", "4x1e"),                       # the cross product
                                  ("2x2e", "1x1o", "2x2o"),                       # l1 + l2 + l3 = 5
                                  ("16x1o", "16x1o", "16x1e", [(0, 0, 0, "uuu", False)])])
def test_odd_paths_are_non_zero_and_o3_equivariant(args):
    tp = randomized(GauntTensorProduct(*args)).double()
    x1, x2 = tp.irreps_in1.randn(4, -1, dtype=torch.float64), tp.irreps_in2.randn(4, -1, dtype=torch.float64)
    out = tp(x1, x2)
    assert out.abs().min(dim=-1).values.gt(0).all()
    assert torch.all(tp.output_mask == 1)
    assert_equivariant(tp)  # random O(3) elements, reflections included, float64


def test_cross_product_mode_uuu_is_the_cross_product():
    """Oracle: ``torch.linalg.cross``; e3nn's component normalisation divides it by sqrt(2)."""
    tp = GauntTensorProduct("16x1o", "16x1o", "16x1e", [(0, 0, 0, "uuu", False)]).double()
    a, b = torch.randn(3, 16, 3, dtype=torch.float64), torch.randn(3, 16, 3, dtype=torch.float64)
    out = tp(a.flatten(1), b.flatten(1)).view(3, 16, 3)
    torch.testing.assert_close(out, torch.linalg.cross(a, b) / 2 ** 0.5, atol=1e-12, rtol=0)


def test_external_weights_enter_linearly():
    """``out = sum_paths w_path path(x1, x2)``: the product is linear in per-row weights (a radial MLP's)."""
    tp = GauntTensorProduct("4x0e+4x1o+4x2e", o3.Irreps.spherical_harmonics(2), "4x0e+4x1o+4x1e+4x2e",
                            shared_weights=False).double()
    x1, x2 = tp.irreps_in1.randn(6, -1, dtype=torch.float64), tp.irreps_in2.randn(6, -1, dtype=torch.float64)
    w1, w2 = torch.randn(2, 6, tp.weight_numel, dtype=torch.float64)
    torch.testing.assert_close(tp(x1, x2, w1 - 3 * w2), tp(x1, x2, w1) - 3 * tp(x1, x2, w2), atol=1e-12, rtol=0)


def test_right_is_the_matrix_of_the_product_and_needs_compile_right():
    tp = randomized(GauntTensorProduct("2x0e+2x1o+1x2e", "1x0e+1x1o+1x1e", "3x0e+2x1o+2x1e+1x2o",
                                       shared_weights=False, compile_right=True)).double()
    x1, x2 = tp.irreps_in1.randn(2, 3, -1, dtype=torch.float64), tp.irreps_in2.randn(3, -1, dtype=torch.float64)
    w = torch.randn(2, 1, tp.weight_numel, dtype=torch.float64)
    torch.testing.assert_close(torch.einsum("...i,...ij->...j", x1, tp.right(x2, w)), tp(x1, x2, w), atol=1e-12, rtol=0)
    assert tp.right(x2, w).shape == (2, 3, tp.irreps_in1.dim, tp.irreps_out.dim)
    e3 = e3nn_twin("2x0e+2x1o+1x2e", "1x0e+1x1o+1x1e", "3x0e+2x1o+2x1e+1x2o", compile_right=True)
    ga = GauntTensorProduct("2x0e+2x1o+1x2e", "1x0e+1x1o+1x1e", "3x0e+2x1o+2x1e+1x2o", compile_right=True).double()
    with torch.no_grad():
        ga.weight.copy_(e3.weight)
    torch.testing.assert_close(ga.right(x2), e3.right(x2), atol=1e-12, rtol=1e-12)
    with pytest.raises(ValueError, match="compile_right=True"):
        GauntTensorProduct("1x1o", "1x1o", "1x0e").right(torch.randn(3))
    with pytest.raises(ValueError, match="compile_left_right=True"):
        GauntTensorProduct("1x1o", "1x1o", "1x0e", compile_left_right=False)(torch.randn(3), torch.randn(3))


def test_batch_axes_broadcast_like_e3nn_and_weights_come_as_a_list():
    tp = randomized(GauntTensorProduct("1e+2e+3x3o", "1e+2e+3x3o", "1e+2e+3x3o", internal_weights=False,
                                       shared_weights=False)).double()
    x1 = tp.irreps_in1.randn(2, 1, 4, -1, dtype=torch.float64)
    x2 = tp.irreps_in2.randn(2, 3, 1, -1, dtype=torch.float64)
    w = torch.randn(3, 4, tp.weight_numel, dtype=torch.float64)
    expanded = tp(x1.expand(2, 3, 4, -1).reshape(24, -1), x2.expand(2, 3, 4, -1).reshape(24, -1),
                  w[None].expand(2, 3, 4, -1).reshape(24, -1))
    torch.testing.assert_close(tp(x1, x2, w).reshape(24, -1), expanded, atol=1e-12, rtol=0)
    views = list(tp.weight_views(w))
    assert [v.shape for v in views] == [(3, 4, *ins.path_shape) for ins in tp.instructions if ins.has_weight]
    torch.testing.assert_close(tp(x1, x2, views), tp(x1, x2, w), atol=0, rtol=0)
    k = next(i for i, ins in enumerate(tp.instructions) if ins.has_weight)
    assert torch.equal(tp.weight_view_for_instruction(k, w), views[0])


def test_empty_irreps_and_empty_batches_have_e3nn_shapes():
    tp = GauntTensorProduct("0e + 1e", o3.Irreps([]), "0e + 1e")
    out = tp(torch.randn(1, 2, 4), torch.randn(2, 1, 0))
    assert out.shape == (2, 2, 4) and not out.any()
    assert not tp.output_mask.any() and tp.weight_numel == 0
    tp = GauntTensorProduct("0e + 1e", "0e + 1e", "0e + 1e", compile_right=True)
    assert tp(torch.randn(2, 1, 0, 1, 4), torch.randn(1, 2, 0, 3, 4)).shape == (2, 2, 0, 3, 4)
    assert tp.right(torch.randn(1, 2, 0, 3, 4)).shape == (1, 2, 0, 3, 4, 4)
    assert GauntTensorProduct("1x1o", "1x1o", o3.Irreps([]))(torch.randn(5, 3), torch.randn(5, 3)).shape == (5, 0)
    assert tp(torch.randn(4), torch.randn(4)).shape == (4,)  # no batch axis


def test_unreachable_outputs_are_zero_and_masked_as_in_e3nn():
    """``0e x 0e`` reaches no vector: e3nn's models (v2106's Convolution) read ``output_mask`` for it."""
    ga, out = assert_same_as_e3nn(("2x0e", "1x0e", "2x0e+2x1o"))
    assert ga.output_mask.tolist() == [1.0] * 2 + [0.0] * 6 and not out[:, 2:].any()


def test_twice_differentiable_in_inputs_and_per_row_weights():
    tp = GauntTensorProduct("2x0e+2x1o+1x2e", "1x0e+1x1o+1x2e", "2x0e+2x1o+1x1e", shared_weights=False).double()
    x1 = tp.irreps_in1.randn(3, -1, dtype=torch.float64).requires_grad_()
    x2 = tp.irreps_in2.randn(3, -1, dtype=torch.float64).requires_grad_()
    w = torch.randn(3, tp.weight_numel, dtype=torch.float64).requires_grad_()
    assert torch.autograd.gradgradcheck(tp, (x1, x2, w))


def test_every_contraction_order_equals_e3nn():
    """Each order of geomlin.gaunt.paths runs and equals e3nn: scale, dot, outer (paired), right, the transposed
    blocks of a multi-channel x2, and weights contracted first with x1 or x2."""
    cases = {"scale": ("4x0e+3x1o", "2x0e", "4x0e+3x1o"), "dot": ("3x2e", "2x2e", "2x0e"),
             "outer": ("3x2e", "3x1o", "3x2o", [(0, 0, 0, "uuu", True)]), "right": ("8x2e", "1x1o", "8x1o+8x2o+8x3o")}
    for order, args in cases.items():
        ga, _ = assert_same_as_e3nn(args)
        assert order in {group.order for group in ga._plans}, (order, [g.order for g in ga._plans])
    seen = set()
    for shared_weights in (True, False):
        ga, _ = assert_same_as_e3nn(("6x0e+5x1o+3x2e", "4x0e+4x1o+2x2e", "5x0e+4x1o+3x1e+2x2e"),
                                    {"shared_weights": shared_weights})
        seen |= {(g.transposed, p.first) for g in ga._plans for p in g.paths}
    assert {(True, 0), (True, 1), (True, 2)} <= seen, seen


def test_state_dict_is_e3nns_and_module_copies_and_pickles():
    tp = GauntTensorProduct("2x0e+2x1o", "0e+1o", "2x0e+1x1e")
    e3 = o3.FullyConnectedTensorProduct("2x0e+2x1o", "0e+1o", "2x0e+1x1e")
    assert set(tp.state_dict()) == {"weight", "output_mask"} <= set(e3.state_dict())  # e3nn adds its codegen tables
    tp.load_state_dict(e3.state_dict(), strict=False)  # an e3nn checkpoint loads
    assert torch.equal(tp.weight, e3.weight)
    x1, x2 = torch.randn(3, 8), torch.randn(3, 4)
    torch.testing.assert_close(copy.deepcopy(tp)(x1, x2), tp(x1, x2), atol=0, rtol=0)
    buffer = io.BytesIO()
    torch.save(tp, buffer)
    buffer.seek(0)
    torch.testing.assert_close(torch.load(buffer, weights_only=False)(x1, x2), tp(x1, x2), atol=0, rtol=0)
    assert repr(tp) == "GauntTensorProduct(2x0e+2x1o x 1x0e+1x1o -> 2x0e+1x1e | 10 paths | 10 weights)"


@pytest.mark.parametrize("index", [0, pytest.param(1, marks=pytest.mark.slow), 2])
def test_compiles_as_one_graph_and_exports(index):
    """Oracle: the eager call. No graph break (``torch._dynamo.explain``), ``fullgraph=True`` forward and backward,
    and ``torch.export`` (the inductor compile of every declared example is in tests/compile, slow set)."""
    from tests.gaunt.declared_examples import EXAMPLES

    for build in EXAMPLES[GauntTensorProduct][index:index + 1]:
        torch._dynamo.reset()
        tp = build().float()
        args, kwargs = tp.example_inputs(dtype=torch.float32)
        eager = tp(*args, **kwargs)
        assert torch._dynamo.explain(tp)(*args, **kwargs).graph_break_count == 0
        compiled = torch.compile(tp, fullgraph=True, backend="aot_eager")
        inputs = [x.clone().requires_grad_() for x in args]
        out = compiled(*inputs, **kwargs)
        torch.testing.assert_close(out, eager)
        out.sum().backward()
        assert all(x.grad is not None for x in inputs)
        torch.testing.assert_close(torch.export.export(tp, args, kwargs).module()(*args, **kwargs), eager)
