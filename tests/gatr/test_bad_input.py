"""Bad input to geomlin.gatr and geomlin.algebra.pga: a clear TypeError / ValueError from geomlin,
naming the argument, for each case; valid controls at the end."""

import pytest
import torch

from geomlin.algebra import pga
from geomlin.batching import batch_layout
from geomlin.gatr import EquiLayerNorm, EquiLinear, GATr, GATrBlock, GeometricAttention, GeometricBilinear
from geomlin.gatr import planes as PL
from geomlin.gatr import primitives as P
from geomlin.gatr.reference import (
    convert_reference_state_dict,
    gatr_from_reference,
    load_reference_state_dict,
)

MV = torch.randn(2, 5, 2, 16)
S = torch.randn(2, 5, 3)


def model(**kw):
    args = {"in_mv_channels": 2, "out_mv_channels": 1, "hidden_mv_channels": 4, "in_s_channels": 3,
            "out_s_channels": 1, "hidden_s_channels": 4, "num_blocks": 1, "num_heads": 2}
    args.update(kw)
    return GATr(**args)


def flat():
    return MV.reshape(10, 2, 16), S.reshape(10, 3)


def _reference_head(heads=2, rotary=False, blocks=True):
    """The first entries of a reference gatr.nets.GATr state_dict (names and shapes of v1.4): enough for
    the loader to reach its first attention block."""
    sd = {"linear_in.weight": torch.ones(4, 1, 9), "linear_out.weight": torch.ones(1, 4, 9)}
    if blocks:
        sd["blocks.0.attention.attention.log_weights"] = torch.zeros(heads, 1, 4)
    if rotary:
        sd["blocks.0.attention.pos_encoding.inv_freq"] = torch.ones(2)
    return sd


SHEAR = torch.tensor([[1.0, 0.3, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
MIRROR = torch.diag(torch.tensor([-1.0, 1.0, 1.0]))

CASES = [
    # constructors
    ("zero mv channels", lambda: EquiLinear(0, 2), ValueError, "in_mv_channels must be >= 1"),
    ("negative scalar channels", lambda: EquiLinear(2, 3, in_s_channels=-1), ValueError, "in_s_channels must be >= 0"),
    ("float channel count", lambda: EquiLinear(2.5, 3), TypeError, "in_mv_channels must be an int"),
    ("unknown initialization", lambda: EquiLinear(2, 3, initialization="xavier"), ValueError, "initialization must be one of"),
    ("zero heads", lambda: GeometricAttention(2, 2, num_heads=0), ValueError, "num_heads must be >= 1"),
    ("negative layer-norm eps", lambda: EquiLayerNorm(eps=-1.0), ValueError, "eps must be >= 0"),
    ("dropout 1.5", lambda: GATrBlock(2, dropout=1.5), ValueError, "dropout must be < 1"),
    ("scalars without hidden scalars", lambda: GATr(1, 1, 4, in_s_channels=2), ValueError, "hidden_s_channels"),
    ("negative blocks", lambda: model(num_blocks=-1), ValueError, "num_blocks must be >= 1"),
    ("unknown attention method", lambda: model(attention_method="flash"), ValueError, "attention_method must be one of"),
    # layer inputs
    ("mv last dimension 15", lambda: EquiLinear(3, 4, 2, 1)(torch.zeros(5, 3, 15), torch.zeros(5, 2)), ValueError,
     "last dimension 16"),
    ("mv channels", lambda: EquiLinear(3, 4, 2, 1)(torch.zeros(5, 2, 16), torch.zeros(5, 2)), ValueError,
     r"\(\.\.\., 3, 16\)"),
    ("integer mv", lambda: EquiLinear(3, 4)(torch.zeros(5, 3, 16, dtype=torch.long)), TypeError, "floating-point"),
    ("missing scalars", lambda: EquiLinear(3, 4, 2, 1)(torch.zeros(5, 3, 16)), ValueError, "expected scalars"),
    ("scalar shape", lambda: EquiLinear(3, 4, 2, 1)(torch.zeros(5, 3, 16), torch.zeros(5, 3)), ValueError,
     "scalars must have shape"),
    ("float attention mask", lambda: GeometricAttention(2, 2, num_heads=1)(torch.zeros(2, 4, 2, 16), None,
                                                                           torch.ones(2, 1, 1, 4)),
     TypeError, "torch.bool"),
    ("attention without items axis", lambda: GeometricAttention(2, 2, num_heads=1)(torch.zeros(2, 16)), ValueError,
     "items"),
    ("reference of 15 components", lambda: GeometricBilinear(2, 2)(torch.zeros(4, 2, 16), None, torch.zeros(15)),
     ValueError, "last dimension 16"),
    ("reference per channel", lambda: GeometricBilinear(2, 2)(torch.zeros(4, 2, 16), None, torch.zeros(4, 2, 16)),
     ValueError, "one multivector per item"),
    # model inputs
    ("NaN input", lambda: model()(torch.full_like(MV, float("nan")), S), ValueError, "NaN"),
    ("float padding mask", lambda: model()(MV, S, mask=torch.ones(2, 5)), TypeError, "torch.bool"),
    ("mask shape", lambda: model()(MV, S, mask=torch.ones(2, 4, dtype=torch.bool)), ValueError, "mask must have shape"),
    ("batch with padded mv", lambda: model()(MV, S, batch=torch.zeros(5, dtype=torch.long)), ValueError, "flat"),
    ("float batch vector", lambda: model()(*flat(), batch=torch.zeros(10)), TypeError, "integer"),
    ("unsorted batch vector", lambda: model()(*flat(), batch=torch.tensor([1, 0] * 5)), ValueError, "sorted"),
    ("negative batch index", lambda: model()(*flat(), batch=torch.full((10,), -1)), ValueError, "non-negative"),
    ("batch vector length", lambda: model()(*flat(), batch=torch.zeros(9, dtype=torch.long)), ValueError,
     "one entry per item"),
    ("unknown join reference", lambda: model()(MV, S, join_reference="mean"), ValueError,
     "join_reference must be one of"),
    ("scalars missing", lambda: model()(MV), ValueError, "scalars=None"),
    ("integer scalars", lambda: model()(MV, S.long()), TypeError, "floating-point"),
    # algebra and primitives
    ("shear as rotation", lambda: pga.embed_rigid_motion(SHEAR, torch.zeros(3)), ValueError, "orthogonal"),
    ("scaled rotation", lambda: pga.embed_rigid_motion(2 * torch.eye(3), torch.zeros(3)), ValueError, "orthogonal"),
    ("mirror as rotation", lambda: pga.matrix_to_quaternion(MIRROR), ValueError, r"rotations \(det \+1\)"),
    ("integer point", lambda: pga.embed_point(torch.zeros(4, 3, dtype=torch.long)), TypeError, "floating-point"),
    ("point threshold 0", lambda: pga.extract_point(torch.randn(16), threshold=0.0), ValueError, "threshold"),
    ("join of 15 components", lambda: pga.join(torch.randn(16), torch.randn(15)), ValueError, "y must have last dimension 16"),
    ("columns of 15 components", lambda: pga.geometric_product_columns(torch.randn(15, 4), torch.randn(15, 4)),
     ValueError, r"a must have shape \(16, \*\)"),
    ("unknown gelu approximation", lambda: P.scalar_gated_gelu(torch.randn(3, 16), approximate="erf"), ValueError,
     "approximate must be one of"),
    ("attention mask that does not broadcast",
     lambda: GeometricAttention(2, 2, num_heads=1)(torch.zeros(2, 4, 2, 16), None, torch.ones(3, 1, 4, 4).bool()),
     ValueError, "does not broadcast"),
    ("dropout probability 1", lambda: P.grade_dropout(torch.randn(3, 16), 1.0), ValueError, "dropout probability"),
    ("float attention mask (primitive)",
     lambda: P.geometric_attention(*torch.randn(3, 1, 2, 4, 1, 16), attn_mask=torch.ones(1, 1, 4, 4)),
     TypeError, "torch.bool"),
    ("float layout mask", lambda: batch_layout(torch.ones(2, 4)), TypeError, "torch.bool"),
    ("unknown layout method", lambda: batch_layout(batch=torch.zeros(3, dtype=torch.long), method="varlen"),
     ValueError, "method must be one of"),
    ("not a reference model", lambda: gatr_from_reference(torch.nn.Linear(2, 2)), TypeError, "gatr.nets.GATr"),
    ("linear weight shape", lambda: P.equi_linear(torch.randn(3, 2, 16), torch.randn(4, 3, 9)), ValueError,
     r"weight must have shape \(\*, 2, 9\)"),
    ("join reference of a padded batch with a batch vector",
     lambda: P.join_reference(torch.randn(2, 3, 1, 16), batch=torch.zeros(2, dtype=torch.long)), ValueError, "flat"),
    ("planes with 15 components", lambda: PL.equi_layer_norm_planes(torch.randn(15, 4, 2), 0.01), ValueError,
     r"planes of shape \(16, items, channels\)"),
    ("integer planes", lambda: PL.scalar_gated_gelu_planes(torch.zeros(16, 4, 2, dtype=torch.long)), TypeError,
     "floating-point"),
    ("distance features, component axis last", lambda: PL.distance_features_planes(torch.randn(4, 16), "query"), ValueError,
     r"component axis first, \(16, \.\.\.\)"),
    # side inputs get the main inputs' checks (issue 24)
    ("NaN join reference", lambda: model()(MV, S, join_reference=torch.full((2, 5, 1, 16), float("nan"))),
     ValueError, "join_reference: reference contains NaN or inf"),
    ("inf reference into a block",
     lambda: GATrBlock(2, 3, num_heads=1)(MV, S, torch.full((16,), float("inf"))), ValueError,
     "GATrBlock: reference contains NaN or inf"),
    # the reference loader: clear errors for state_dicts it cannot use (issue 22)
    ("reference state_dict as a list", lambda: convert_reference_state_dict([1, 2], 2), TypeError,
     "state_dict must be a mapping"),
    ("reference state_dict of another model", lambda: convert_reference_state_dict({"w": torch.ones(2)}, 2),
     ValueError, "no 'linear_in.\\*' entries"),
    ("reference state_dict with a missing key",
     lambda: convert_reference_state_dict({"linear_in.weight": torch.ones(4, 1, 9)}, 2), ValueError,
     "missing 'linear_out.weight'"),
    ("reference state_dict with another head count",
     lambda: convert_reference_state_dict(_reference_head(heads=3), 2), ValueError,
     r"log_weights has shape \(3, 1, 4\), but num_heads=2"),
    ("reference rotary positional encoding",
     lambda: convert_reference_state_dict(_reference_head(rotary=True), 2), ValueError,
     "rotary positional encodings .* pos_encoding=True"),
    ("reference entry that would be dropped",
     lambda: convert_reference_state_dict({**_reference_head(blocks=False), "extra.weight": torch.ones(1)}, 2),
     ValueError, "1 entries with no geomlin counterpart, e.g. 'extra.weight'"),
    ("reference head count 0", lambda: convert_reference_state_dict(_reference_head(), 0), ValueError,
     "num_heads must be >= 1"),
    # issue 34: a bias without its weight names the weight; geomlin's own state_dict is named as such
    ("reference scalar-to-mv bias without its weight",
     lambda: convert_reference_state_dict({**_reference_head(), "linear_in.s2mvs.bias": torch.ones(4)}, 2),
     ValueError, "missing 'linear_in.s2mvs.weight'"),
    ("reference mv-to-scalar bias without its weight",
     lambda: convert_reference_state_dict({**_reference_head(), "linear_out.mvs2s.bias": torch.ones(1)}, 2),
     ValueError, "missing 'linear_out.mvs2s.weight'"),
    ("reference mv bias without the weight",
     lambda: convert_reference_state_dict({"linear_in.bias": torch.ones(4, 1), "linear_out.weight": torch.ones(1, 4, 9)},
                                          2), ValueError, "missing 'linear_in.weight'"),
    ("geomlin's own state_dict into the reference loader",
     lambda: convert_reference_state_dict(GATr(1, 1, 4, in_s_channels=2, out_s_channels=1, hidden_s_channels=4,
                                               num_blocks=1).state_dict(), 1),
     ValueError, "is a geomlin GATr state_dict .* load it with GATr.load_state_dict"),
    ("geomlin's own state_dict into load_reference_state_dict",
     lambda: load_reference_state_dict(model(), model().state_dict()), ValueError, "is a geomlin GATr state_dict"),
]


@pytest.mark.parametrize("name,call,error,phrase", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_refused(name, call, error, phrase):
    with pytest.raises(error, match=phrase):
        call()


def test_valid_controls():
    out_mv, _ = model()(*flat(), batch=torch.tensor([0] * 4 + [1] * 6))
    assert out_mv.shape == (10, 1, 16) and torch.isfinite(out_mv).all()
    rot = torch.linalg.qr(torch.randn(3, 3, dtype=torch.float64))[0]
    rot = rot * torch.linalg.det(rot)  # a proper rotation
    assert pga.embed_rigid_motion(rot, torch.zeros(3, dtype=torch.float64)).shape == (16,)
    assert pga.embed_rigid_motion(-rot, torch.zeros(3, dtype=torch.float64)).shape == (16,)  # improper is fine
    at_infinity = torch.zeros(16)
    at_infinity[pga.E023] = 1.0
    assert torch.isfinite(pga.extract_point(at_infinity)).all()
    assert model()(MV, S, mask=torch.zeros(2, 5, dtype=torch.bool))[0].isfinite().all()  # all padding: finite


def test_zero_blocks_and_empty_sets_are_refused():
    with pytest.raises(ValueError, match="num_blocks must be >= 1"):
        model(num_blocks=0)
    with pytest.raises(ValueError, match="no items"):
        model()(torch.randn(2, 0, 2, 16), torch.randn(2, 0, 3))
