"""geomlin's GATr against the reference implementation itself (Qualcomm's geometric-algebra-transformer).

The reference is not on the package index and not in the ``dev`` extra, so these tests skip when it
cannot be imported, in CI too. Point ``GEOMLIN_REFERENCE_GATR`` at a checkout of
https://github.com/Qualcomm-AI-research/geometric-algebra-transformer (v1.4) to run them; they need
``einops`` and register a stand-in for ``xformers`` when it is missing (padded batches never call
it). The same formulas are also checked without the package, against written-out oracles, in
``test_primitives.py`` and ``test_layers.py``.
"""

import importlib
import importlib.util
import os
import sys
import types

import pytest
import torch

from geomlin.algebra import pga
from geomlin.gatr import primitives as P
from geomlin.gatr.reference import convert_reference_state_dict, gatr_from_reference

DT = torch.float64
TOL = {"rtol": 1e-10, "atol": 1e-10}


@pytest.fixture(scope="module")
def ref():
    path = os.environ.get("GEOMLIN_REFERENCE_GATR")
    if path and path not in sys.path:
        sys.path.insert(0, path)
    if importlib.util.find_spec("einops") is None:
        pytest.skip("the reference GATr needs einops")
    try:
        importlib.import_module("xformers.ops")
    except ImportError:
        xf, ops, fmha = (types.ModuleType(n) for n in ("xformers", "xformers.ops", "xformers.ops.fmha"))
        ops.AttentionBias = type("AttentionBias", (), {})
        ops.memory_efficient_attention = None
        fmha.BlockDiagonalMask = type("BlockDiagonalMask", (ops.AttentionBias,), {})
        ops.fmha, xf.ops = fmha, ops
        sys.modules.update({"xformers": xf, "xformers.ops": ops, "xformers.ops.fmha": fmha})
    try:
        return importlib.import_module("gatr")
    except ImportError as err:
        pytest.skip(f"reference GATr not importable (set GEOMLIN_REFERENCE_GATR): {err}")


def test_primitives_agree_with_the_reference(ref):
    from gatr import primitives as R
    from gatr.interface import embed_point, embed_rotation, embed_translation, extract_point

    x, y, r = torch.randn(3, 5, 4, 16, dtype=DT)
    torch.testing.assert_close(P.geometric_product(x, y), R.geometric_product(x, y), **TOL)
    torch.testing.assert_close(P.outer_product(x, y), R.outer_product(x, y), **TOL)
    torch.testing.assert_close(P.inner_product(x, y), R.inner_product(x, y), **TOL)
    torch.testing.assert_close(P.equivariant_join(x, y, r), R.equivariant_join(x, y, r), **TOL)
    coords = torch.randn(6, 3, dtype=DT)
    torch.testing.assert_close(pga.embed_point(coords), embed_point(coords), **TOL)
    torch.testing.assert_close(pga.extract_point(x), extract_point(x), **TOL)
    torch.testing.assert_close(pga.embed_translation(coords), embed_translation(coords), **TOL)
    q = torch.nn.functional.normalize(torch.randn(6, 4, dtype=DT), dim=-1)  # (w, x, y, z)
    torch.testing.assert_close(pga.embed_rotation(q), embed_rotation(q[:, [1, 2, 3, 0]]), **TOL)
    w = torch.randn(7, 4, 9, dtype=DT)
    norms = R.linear._compute_pin_equi_linear_basis(torch.device("cpu"), DT).flatten(1).abs().amax(1)
    torch.testing.assert_close(P.equi_linear(x, w * norms), R.equi_linear(x, w), **TOL)


@pytest.mark.parametrize("multi_query", [True, False])
def test_loaded_model_computes_the_reference_function(ref, multi_query):
    torch.manual_seed(0)
    model = ref.GATr(2, 3, 8, 3, 2, 6, attention={"num_heads": 2, "multi_query": multi_query}, mlp={},
                     num_blocks=2).double()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.3)
    ours = gatr_from_reference(model)
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in model.parameters())
    mv, s = torch.randn(3, 7, 2, 16, dtype=DT), torch.randn(3, 7, 3, dtype=DT)
    for a, b in zip(model(mv, s), ours(mv, s)):
        torch.testing.assert_close(b, a, rtol=1e-10, atol=1e-10 * a.abs().max().item())
    # the same weights into an existing model of the same sizes
    again = type(ours)(2, 3, 8, 3, 2, 6, num_blocks=2, num_heads=2, multi_query=multi_query).double()
    again.load_state_dict(convert_reference_state_dict(model.state_dict(), 2, multi_query))
    torch.testing.assert_close(again(mv, s)[0], ours(mv, s)[0], rtol=0, atol=0)


def test_unsupported_reference_options_are_refused(ref):
    model = ref.GATr(1, 1, 4, 1, 1, 4, attention={"num_heads": 2, "pos_encoding": True}, mlp={}, num_blocks=1)
    with pytest.raises(ValueError, match="pos_encoding"):
        gatr_from_reference(model)
    with pytest.raises(TypeError, match="gatr.nets.GATr"):
        gatr_from_reference(torch.nn.Linear(2, 2))
