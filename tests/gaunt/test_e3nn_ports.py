"""e3nn's own tensor-product tests, re-expressed against the drop-in.

The properties of e3nn's ``tests/o3/tensor_product_test.py`` and ``tensor_product_sub_test.py`` (e3nn/e3nn):
bilinearity, ``right()``, unit output variance, equivariance for every connection mode; the ``component`` /
``norm`` normalisations; empty irreps and empty batches; weights given as a list, required when not internal,
refused when of the wrong shape, broadcast over odd batch shapes; deep copies; the fully connected product
on un-batched inputs. Equivariance goes through ``geomlin.testing`` (O(3), reflections included).
"""

import copy
import itertools

import pytest
import torch
from e3nn import o3

from geomlin.gaunt import GauntTensorProduct
from geomlin.testing import assert_equivariant
from tests.randomized import randomized

MODES = ("uvw", "uvu", "uvv", "uuw", "uuu", "uvuv")


def make_tp(l1, p1, l2, p2, lo, po, mode, has_weight, **kwargs):
    """e3nn's test layout (multiplicities 25 and 19), or None when the path cannot exist."""
    mul_out = (lambda m: m * m) if mode == "uvuv" else (lambda m: m)
    try:
        return GauntTensorProduct(
            [(25, (l1, p1)), (19, (l1, p1))], [(25, (l2, p2)), (19, (l2, p2))],
            [(mul_out(25), (lo, po)), (mul_out(19), (lo, po))],
            [(0, 0, 0, mode, has_weight), (1, 1, 1, mode, has_weight), (0, 0, 1, "uvw", True, 0.5),
             (0, 1, 1, "uvw", True, 0.2)], **kwargs)
    except ValueError:
        return None


def _params():
    """Every mode with and without weights, over degrees <= 2 of both parities (a fixed sample of e3nn's
    random draw: 20 configurations, odd paths among them)."""
    rng = torch.Generator().manual_seed(0)
    found = []
    grid = [g for g in itertools.product(range(3), (-1, 1), range(3), (-1, 1), range(3), (-1, 1))
            if o3.Irrep(g[4], g[5]) in o3.Irrep(g[0], g[1]) * o3.Irrep(g[2], g[3])]  # the paths that exist
    for mode, has_weight in itertools.product(MODES, (True, False)):
        if mode in ("uvw", "uuw") and not has_weight:
            continue  # refused, as by e3nn: without weights these need one output channel
        order = torch.randperm(len(grid), generator=rng).tolist()
        hits = [grid[i] for i in order][:2]
        found += [(*degrees, mode, has_weight) for degrees in hits]
    return found


PARAMS = _params()


def test_sample_covers_every_mode_and_both_kinds_of_path():
    assert {p[6] for p in PARAMS} == set(MODES) and len(PARAMS) == 20
    assert any((p[0] + p[2] + p[4]) % 2 for p in PARAMS) and any((p[0] + p[2] + p[4]) % 2 == 0 for p in PARAMS)


@pytest.mark.parametrize("params", PARAMS, ids=str)
def test_bilinear_right_variance_and_equivariance(params):
    torch.manual_seed(0)
    m = make_tp(*params, compile_right=True).double()
    x1, x2 = torch.randn(2, 2, m.irreps_in1.dim, dtype=torch.float64)
    y1, y2 = torch.randn(2, 2, m.irreps_in2.dim, dtype=torch.float64)
    z = m(x1 + x2, y1 + y2)
    torch.testing.assert_close(z, m(x1, y1 + y2) + m(x2, y1 + y2), atol=1e-12, rtol=0)
    torch.testing.assert_close(z, m(x1 + x2, y1) + m(x1 + x2, y2), atol=1e-12, rtol=0)
    torch.testing.assert_close(torch.einsum("zi,zij->zj", x1, m.right(y1)), m(x1, y1), atol=1e-12, rtol=0)
    n = 1_500  # unit-variance inputs and weights give unit-variance outputs (within a factor 3, as e3nn asks)
    variance = m(torch.randn(n, m.irreps_in1.dim, dtype=torch.float64),
                 torch.randn(n, m.irreps_in2.dim, dtype=torch.float64)).var(0).mean()
    assert 1 / 3 < variance < 3
    assert_equivariant(randomized(m), num_samples=2, batch_size=2)


@pytest.mark.parametrize("normalization", ["component", "norm"])
@pytest.mark.parametrize("mode", ["uvw", "uvu", "uvv"])
def test_normalizations_with_scalar_and_higher_paths_equal_e3nn(normalization, mode):
    """e3nn's specialised-code test: paths through l = 0 (scalings and dot products) and general ones,
    compared with e3nn's general code (``_specialized_code=False``) on the same weights."""
    irreps_in1, irreps_in2 = o3.Irreps("4x0e + 4x1e + 4x2e"), o3.Irreps("5x0e + 5x1e + 5x2e")
    irreps_out = {"uvu": irreps_in1, "uvv": irreps_in2}.get(mode, o3.Irreps("6x0e + 6x1e + 6x2e"))
    ins = [(0, 0, 0, mode, True, 1.0), (0, 1, 1, mode, True, 1.0), (1, 0, 1, mode, True, 1.0),
           (1, 1, 0, mode, True, 1.0), (1, 1, 1, mode, True, 1.0), (0, 2, 2, mode, True, 1.0),
           (2, 0, 2, mode, True, 1.0), (2, 2, 0, mode, True, 1.0), (2, 1, 1, mode, True, 1.0)]
    ga = GauntTensorProduct(irreps_in1, irreps_in2, irreps_out, ins, normalization=normalization)
    e3 = o3.TensorProduct(irreps_in1, irreps_in2, irreps_out, ins, irrep_normalization=normalization,
                          _specialized_code=False)
    with torch.no_grad():
        ga.weight.copy_(e3.weight)
    x, y = irreps_in1.randn(3, -1), irreps_in2.randn(3, -1)
    torch.testing.assert_close(ga(x, y), e3(x, y), atol=1e-5, rtol=1e-5)  # e3nn's float32 tables


def test_norm_normalization_keeps_unit_norms():
    """e3nn's TensorSquare property for ``irrep_normalization="norm"``: inputs of unit norm per irrep give
    outputs of unit squared norm per irrep on average."""
    irreps = o3.Irreps("0e + 1e + 2e")
    tp = GauntTensorProduct(irreps, irreps, "0e + 1e + 2e + 3e", [
        (i1, i2, io, "uuu", False) for i1, (_, a) in enumerate(irreps) for i2, (_, b) in enumerate(irreps)
        for io, c in enumerate(["0e", "1e", "2e", "3e"]) if o3.Irrep(c) in a * b], irrep_normalization="norm",
        path_normalization="none").double()
    x = irreps.randn(20_000, -1, normalization="norm", dtype=torch.float64)
    y = irreps.randn(20_000, -1, normalization="norm", dtype=torch.float64)
    out = tp(x, y)
    for k, ((_, ir), s) in enumerate(zip(tp.irreps_out, tp.irreps_out.slices())):
        paths = sum(1 for ins in tp.instructions if ins.i_out == k)  # independent paths: their squares add up
        norm = out[:, s].pow(2).sum(-1).mean() / paths
        assert 0.9 < norm < 1.1, (ir, norm)


def test_weights_as_a_list_are_accepted_for_shared_and_per_row_weights():
    for shared_weights in (False, True):
        m = GauntTensorProduct("1e + 2e + 3x3o", "1e + 2e + 3x3o", "1e + 2e + 3x3o", internal_weights=False,
                               shared_weights=shared_weights)
        batch = 3
        x1, x2 = m.irreps_in1.randn(batch, -1), m.irreps_in2.randn(batch, -1)
        w = [torch.randn((() if shared_weights else (batch,)) + ins.path_shape) for ins in m.instructions
             if ins.has_weight]
        flat = torch.cat([v.reshape(*(() if shared_weights else (batch,)), -1) for v in w], dim=-1)
        torch.testing.assert_close(m(x1, x2, w), m(x1, x2, flat))


def test_external_weights_are_required_and_checked():
    m = GauntTensorProduct("1e + 2e + 3x3o", "1e + 2e + 3x3o", "1e + 2e + 3x3o", internal_weights=False,
                           shared_weights=False)
    x1, x2 = m.irreps_in1.randn(2, -1), m.irreps_in2.randn(2, -1)
    with pytest.raises(ValueError, match="weight is required"):
        m(x1, x2)
    with pytest.raises(ValueError, match="with a batch axis"):
        m(x1, x2, torch.randn(m.weight_numel))  # per-row weights need their batch axis
    shared = GauntTensorProduct("1e + 2e + 3x3o", "1e + 2e + 3x3o", "1e + 2e + 3x3o", internal_weights=False)
    with pytest.raises(ValueError, match="weight is required"):
        shared(x1, x2)
    with pytest.raises(ValueError, match=rf"shape \({shared.weight_numel},\)"):
        shared(x1, x2, torch.randn(2, shared.weight_numel))  # too many weights


def test_odd_batch_shapes_broadcast_for_forward_and_right():
    f = GauntTensorProduct("1e + 2e + 3x3o", "1e + 2e + 3x3o", "1e + 2e + 3x3o", internal_weights=False,
                           shared_weights=False, compile_right=True)
    x1, x2 = f.irreps_in1.randn(2, 1, 4, -1), f.irreps_in2.randn(2, 3, 1, -1)
    w = torch.randn(3, 4, f.weight_numel)
    flat = (x1.expand(2, 3, 4, -1).reshape(24, -1), x2.expand(2, 3, 4, -1).reshape(24, -1),
            w[None].expand(2, 3, 4, -1).reshape(24, -1))
    torch.testing.assert_close(f(x1, x2, w).reshape(24, -1), f(*flat))
    torch.testing.assert_close(f.right(x2, w).reshape(24, -1), f.right(*flat[1:]).reshape(24, -1))


def test_empty_irreps_and_empty_batches():
    tp = GauntTensorProduct("0e + 1e", o3.Irreps([]), "0e + 1e")
    assert tp(torch.randn(1, 2, 4), torch.randn(2, 1, 0)).shape == (2, 2, 4)
    tp = GauntTensorProduct("0e + 1e", "0e + 1e", "0e + 1e", compile_right=True)
    assert tp(torch.randn(2, 1, 0, 1, 4), torch.randn(1, 2, 0, 3, 4)).shape == (2, 2, 0, 3, 4)
    assert tp.right(torch.randn(1, 2, 0, 3, 4)).shape == (1, 2, 0, 3, 4, 4)


@pytest.mark.parametrize("params", PARAMS[:1], ids=str)
def test_deep_copy_gives_the_same_outputs(params):
    tp = make_tp(*params)
    x1, x2 = torch.randn(2, tp.irreps_in1.dim), torch.randn(2, tp.irreps_in2.dim)
    torch.testing.assert_close(copy.deepcopy(tp)(x1, x2), tp(x1, x2))


def test_fully_connected_on_unbatched_inputs_is_equivariant():
    irreps = o3.Irreps("1e + 2e + 3x3o")
    m = GauntTensorProduct(irreps, irreps, irreps)
    assert m(torch.randn(irreps.dim), torch.randn(irreps.dim)).shape == (irreps.dim,)
    assert_equivariant(randomized(m))


def test_fully_connected_normalization_does_not_depend_on_how_irreps_are_split():
    """10x0e and 3x0e + 7x0e with unit weights are the same product."""
    m = GauntTensorProduct("10x0e", "10x0e", "0e")
    n = GauntTensorProduct("3x0e + 7x0e", "3x0e + 7x0e", "0e")
    for p in (*m.parameters(), *n.parameters()):
        p.data.fill_(1.0)
    x1, x2 = torch.randn(2, 3, 10)
    torch.testing.assert_close(m(x1, x2), n(x1, x2))
