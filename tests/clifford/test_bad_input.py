"""Bad input to geomlin.algebra (Clifford algebras, samplers) and geomlin.clifford: each case names the
exception type and a phrase of the message; a few valid-input controls at the end."""

import pytest
import torch
from torch import nn

from geomlin.algebra import CliffordAlgebra
from geomlin.clifford import (
    GCAMLP,
    GAAttention,
    GAMultivectorAttention,
    GAVectorAttention,
    GCAGroupNorm,
    GeometricProductLayer,
    GroupActionLinear,
    MVLayerNorm,
    MVLinear,
    neighborhoods,
    weighted_geometric_product,
)
from geomlin.clifford.neighbor_search import Neighborhoods
from geomlin.groups import CliffordGroup, Pin301, PseudoOrthogonalGroup

G3 = CliffordAlgebra((1, 1, 1))
PGA = CliffordAlgebra((0, 1, 1, 1))


def mlp(d_in, d_out):
    return nn.Sequential(nn.Linear(d_in, 8), nn.SiLU(), nn.Linear(8, d_out))


def attention(**kw):
    return GAAttention(4, mlp(4, 1), mlp(2, 4), **kw)


def singular_similarity():
    A = torch.eye(4, dtype=torch.float64)
    A[0, 0] = 0.0  # scales e0 by lambda = 0: keeps the quadratic form, not invertible
    return A


def shear():
    A = torch.eye(3, dtype=torch.float64)
    A[0, 1] = 0.5
    return A


CASES = [
    # ---- geomlin.algebra.clifford
    ("metric entry 2", lambda: CliffordAlgebra((1, 2)), ValueError, "1, -1 or 0"),
    ("metric as a string", lambda: CliffordAlgebra("111"), TypeError, "sequence"),
    ("nine basis vectors", lambda: CliffordAlgebra((1,) * 9), ValueError, "between 1 and 8"),
    ("negative first_index", lambda: CliffordAlgebra((1, 1), first_index=-1), ValueError, "first_index must be >= 0"),
    ("integer multivector", lambda: G3.geometric_product(torch.ones(2, 8, dtype=torch.long), torch.ones(2, 8)),
     TypeError, "floating"),
    ("wrong multivector size", lambda: G3.outer_product(torch.ones(2, 7), torch.ones(2, 8)), ValueError,
     "last dimension 8"),
    ("unknown product", lambda: G3.product(torch.ones(8), torch.ones(8), "cross"), ValueError, "unknown product"),
    ("leading shapes that do not broadcast", lambda: G3.geometric_product(torch.ones(3, 8), torch.ones(4, 8)),
     ValueError, "the leading shapes of a, b must be equal or broadcastable, got a (3,), b (4,)"),
    ("leading shapes that do not broadcast, dense, another dtype",
     lambda: G3.geometric_product(torch.ones(3, 8), torch.ones(4, 8, dtype=torch.float64), "dense"), ValueError,
     "leading shapes of a, b must be equal or broadcastable"),
    ("factors on two devices", lambda: G3.geometric_product(torch.ones(8), torch.ones(8, device="meta")), ValueError,
     "a is on cpu but b is on meta"),
    ("unknown method", lambda: G3.product(torch.ones(8), torch.ones(8), method="fft"), ValueError,
     "method must be one of"),
    ("grade out of range", lambda: G3.grade_projection(torch.ones(8), 4), ValueError, "grade must be in 0..3"),
    ("fractional grade", lambda: G3.grade_projection(torch.ones(8), 1.5), TypeError, "grade must be an int"),
    ("quaternion type 4", lambda: G3.quaternion_projection(torch.ones(8), 4), ValueError,
     "quaternion type must be <= 3"),
    ("unknown subspaces", lambda: G3.subspace_index("blade"), ValueError, "subspaces must be one of"),
    ("float32 zero versor", lambda: G3.sandwich(torch.zeros(8), torch.ones(8)), ValueError, "zero norm"),
    ("NaN versor", lambda: G3.sandwich(torch.full((8,), float("nan")), torch.ones(8)), ValueError, "NaN"),
    ("shear acting on multivectors", lambda: G3.act(shear(), torch.ones(8, dtype=torch.float64)), ValueError,
     "preserve the quadratic form"),
    ("singular similarity", lambda: PGA.act(singular_similarity(), torch.ones(16, dtype=torch.float64)), ValueError,
     "invertible"),
    ("group element of the wrong shape", lambda: G3.act(torch.ones(3, 4), torch.ones(8)), ValueError,
     "one versor of shape (8,)"),
    ("group element as a list", lambda: G3.act([1.0] * 8, torch.ones(8)), TypeError, "torch.Tensor"),
    ("outermorphism of a 2x2 matrix", lambda: G3.outermorphism(torch.eye(2)), ValueError, "must have shape"),
    ("vector with 4 coefficients", lambda: G3.embed_vector(torch.ones(4)), ValueError, "must have shape (..., 3)"),
    ("exp without terms", lambda: G3.exp(torch.ones(8), terms=0), ValueError, "terms must be >= 1"),
    ("integer pseudoscalar", lambda: G3.pseudoscalar(torch.int64), TypeError, "floating"),
    # ---- geomlin.groups.versor
    ("Clifford group of a null metric", lambda: CliffordGroup((0, 0)), ValueError, "degenerate"),
    ("no vectors", lambda: CliffordGroup(G3, max_vectors=0), ValueError, "max_vectors must be >= 1"),
    ("unknown parity", lambda: CliffordGroup(G3, parity="proper"), ValueError, "parity must be one of"),
    ("zero samples", lambda: CliffordGroup(G3).sample(0), ValueError, "n must be >= 1"),
    ("integer samples", lambda: PseudoOrthogonalGroup(G3).sample(2, dtype=torch.int32), TypeError, "dtype"),
    ("zero scale", lambda: PseudoOrthogonalGroup(PGA, scale_range=(0.0, 1.0)), ValueError,
     "scale_range[0] must be > 0"),
    ("five planes", lambda: Pin301(max_planes=5), ValueError, "max_planes must be <= 4"),
    # ---- geomlin.clifford: CGENN / GLGENN
    ("zero channels", lambda: MVLinear(G3, 0, 2), ValueError, "in_channels must be >= 1"),
    ("float channels", lambda: MVLinear(G3, 2.0, 2), TypeError, "in_channels must be an int"),
    ("unknown weight sharing", lambda: MVLinear(G3, 2, 2, subspaces="type"), ValueError, "subspaces must be one of"),
    ("algebra as a name", lambda: MVLinear("G3", 2, 2), TypeError, "algebra must be a CliffordAlgebra"),
    ("wrong channel count", lambda: MVLinear(G3, 4, 2)(torch.ones(3, 3, 8)), ValueError, "(..., 4, 8)"),
    ("integer features", lambda: GeometricProductLayer(G3, 2, 2)(torch.ones(3, 2, 8, dtype=torch.long)), TypeError,
     "floating"),
    ("negative eps", lambda: MVLayerNorm(G3, 2, eps=-1.0), ValueError, "eps must be >= 0"),
    ("path weights of the wrong shape",
     lambda: weighted_geometric_product(G3, torch.ones(2, 3, 8), torch.ones(2, 3, 8), torch.ones(3, 4, 4, 5)),
     ValueError, "path_weights must have shape"),
    # ---- GCAN
    ("unknown versor", lambda: GroupActionLinear(PGA, 2, 2, versor="rotor"), ValueError, "versor must be one of"),
    ("even versors in G(5)", lambda: GroupActionLinear(CliffordAlgebra((1,) * 5), 2, 2, versor="even"), ValueError,
     "n <= 4"),
    ("reflection count for exp", lambda: GroupActionLinear(PGA, 2, 2, num_reflections=2), ValueError,
     "num_reflections applies only"),
    ("groups that do not divide", lambda: GCAGroupNorm(PGA, 6, num_groups=4), ValueError, "divisible"),
    # ---- geometric-algebra attention
    ("zero value width", lambda: GAAttention(0, mlp(4, 1), mlp(2, 4)), ValueError, "channels must be >= 1"),
    ("score net as a string", lambda: GAAttention(4, "mlp", mlp(2, 4)), TypeError, "score_net must be a callable"),
    ("unknown invariant mode", lambda: attention(invariant_mode="most"), ValueError, "invariant_mode must be one of"),
    ("reduce as a string", lambda: attention(reduce="yes"), TypeError, "reduce must be a bool"),
    ("2-D points", lambda: attention()(torch.ones(5, 2), torch.ones(5, 4)), ValueError, "r must have shape (..., *, 3)"),
    ("values for other items", lambda: attention()(torch.ones(5, 3), torch.ones(6, 4)), ValueError,
     "v must have shape (5, 4)"),
    ("float mask", lambda: attention()(torch.ones(5, 3), torch.ones(5, 4), mask=torch.ones(5)), TypeError,
     "torch.bool"),
    ("neighbour out of range",
     lambda: attention(reduce=False)(torch.ones(5, 3), torch.ones(5, 4),
                                     neighbors=Neighborhoods(torch.full((5, 2), 7), torch.ones(5, 2, dtype=torch.bool))),
     ValueError, "neighbors.index must index items in [0, 5)"),
    ("vectors into multivector attention",
     lambda: GAMultivectorAttention(4, mlp(4, 1), mlp(4, 4))(torch.ones(5, 3), torch.ones(5, 4)), ValueError,
     "r must have shape (..., *, 8)"),
    ("neighbourhoods of nothing", lambda: neighborhoods(torch.ones(5, 3)), ValueError, "needs k, cutoff"),
    ("NaN positions", lambda: neighborhoods(torch.full((5, 3), float("nan")), k=2), ValueError, "NaN"),
    ("zero cutoff", lambda: neighborhoods(torch.randn(5, 3), cutoff=0.0), ValueError, "cutoff must be > 0"),
    # ---- silent NaN and unclear errors (issues 22, 24)
    ("exp of inf", lambda: G3.exp(torch.tensor([0, 0, 0, 0, float("inf"), 0, 0, 0])), ValueError,
     "x contains NaN or inf"),
    ("exp of NaN", lambda: G3.exp(torch.full((8,), float("nan"))), ValueError, "x contains NaN or inf"),
    ("product channels that do not broadcast",
     lambda: weighted_geometric_product(G3, torch.ones(2, 4, 8), torch.ones(2, 3, 8), torch.ones(4, 4, 4, 4)),
     ValueError, "x (2, 4), y (2, 3)"),
    ("product of a single multivector",
     lambda: weighted_geometric_product(G3, torch.ones(8), torch.ones(8), torch.ones(1, 4, 4, 4)),
     ValueError, "x must have at least 2 dimension(s)"),
    ("group norm with eps 0", lambda: GCAGroupNorm(PGA, 2, eps=0.0), ValueError, "eps must be > 0"),
    ("GCAMLP without hidden channels", lambda: GCAMLP(PGA, 2, 2, hidden_channels=0), ValueError,
     "hidden_channels must be >= 1"),
    ("GCAMLP without outputs", lambda: GCAMLP(PGA, 2, 0), ValueError, "out_channels must be >= 1"),
    ("NaN points into attention", lambda: attention()(torch.full((5, 3), float("nan")), torch.ones(5, 4)),
     ValueError, "GAAttention: r contains NaN or inf"),
    ("inf values into attention", lambda: attention()(torch.ones(5, 3), torch.full((5, 4), float("inf"))),
     ValueError, "GAAttention: v contains NaN or inf"),
    ("NaN points into vector attention",
     lambda: GAVectorAttention(4, mlp(4, 1), mlp(2, 4), mlp(4, 1))(torch.full((5, 3), float("nan")), torch.ones(5, 4)),
     ValueError, "GAVectorAttention: r contains NaN or inf"),
    ("NaN multivectors into multivector attention",
     lambda: GAMultivectorAttention(4, mlp(4, 1), mlp(4, 4))(torch.full((5, 8), float("nan")), torch.ones(5, 4)),
     ValueError, "GAMultivectorAttention: r contains NaN or inf"),
    ("neighbourhoods of 10^5 items", lambda: neighborhoods(torch.zeros(10**5, 3), k=4), ValueError,
     "nearest_neighbors of sets of 100000 points (dense (N, N) distances) would need about 121.1 GiB"),
    ("rank 5 on 64 items", lambda: attention(rank=5)(torch.randn(64, 3), torch.randn(64, 4)), ValueError,
     "would need about 32.0 GiB"),
]


@pytest.mark.parametrize("call,error,phrase", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input(call, error, phrase):
    with pytest.raises(error) as info:
        call()
    assert phrase in str(info.value), f"message {str(info.value)!r} lacks {phrase!r}"


def test_valid_controls():
    x = torch.randn(3, 2, 8, dtype=torch.float64)
    assert MVLinear(G3, 2, 4, subspaces="quaternion").double()(x).shape == (3, 4, 8)
    g = PseudoOrthogonalGroup(PGA).sample(1)[0]
    assert PGA.act(g, torch.randn(5, 16, dtype=torch.float64)).shape == (5, 16)
    assert attention(reduce=False)(torch.randn(5, 3), torch.randn(5, 4), mask=torch.ones(5, dtype=torch.bool)).shape \
        == (5, 4)
    nb = neighborhoods(torch.randn(2, 6, 3), k=3, cutoff=10.0)
    assert nb.index.shape == (2, 6, 3) and nb.mask.all()
    assert torch.isfinite(G3.inverse_versor(torch.eye(8)[1:4].float())).all()


def test_cgenn_layers_refuse_non_finite_multivectors():
    from geomlin.clifford import MVLinear

    x = torch.zeros(4, 1, 8)
    x[0, 0, 3] = float("nan")
    with pytest.raises(ValueError, match="contains NaN or inf"):
        MVLinear(CliffordAlgebra((1, 1, 1)), 1, 3)(x)


def _cloud(n=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(2, n, 3, generator=g, dtype=torch.float64), torch.randn(2, n, 4, generator=g, dtype=torch.float64)


@pytest.mark.parametrize("make", [
    lambda **kw: GAAttention(4, mlp(4, 1), mlp(2, 4), **kw),
    lambda **kw: GAVectorAttention(4, mlp(4, 1), mlp(2, 4), mlp(4, 1), **kw),
], ids=["invariant", "vector"])
def test_a_fully_masked_cloud_gives_the_documented_zero_output(make):
    torch.manual_seed(0)
    layer = make().double()
    r, v = _cloud()
    mask = torch.tensor([[True] * 5, [False] * 5])
    out = layer(r, v, mask=mask)
    # oracle: the documented output of a set with no kept tuple is exactly zero
    assert out[1].abs().max() == 0
    # the kept cloud is the same as that cloud alone (masking one set does not leak into another)
    torch.testing.assert_close(out[0], layer(r[:1], v[:1])[0], rtol=1e-12, atol=1e-12)


def test_an_item_without_neighbours_does_not_attend_to_padding():
    torch.manual_seed(0)
    layer = GAAttention(4, mlp(4, 1), mlp(2, 4), reduce=False).double()
    pos = torch.tensor([[0.0, 0, 0], [0.1, 0, 0], [5.0, 5, 5]], dtype=torch.float64)
    v = torch.randn(3, 4, dtype=torch.float64)
    nb = neighborhoods(pos, k=2, cutoff=1.0, include_self=False)
    assert not nb.mask[2].any()  # item 2 has no neighbour in the radius: only padded slots
    out = layer(pos, v, neighbors=nb)
    assert out[2].abs().max() == 0  # documented: zero update, whatever sits in the padded slots
    moved = v.clone()
    moved[2] = 1e3  # the padded slots point at item 2; changing its values must not change anything
    torch.testing.assert_close(layer(pos, moved, neighbors=nb)[:2], out[:2], rtol=0, atol=0)


# ---- user networks that do not fit, and empty batches (issue 34): named errors, documented results
NET_CASES = [
    ("value net of the wrong output width", lambda: GAAttention(4, mlp(4, 1), mlp(2, 5)), ValueError,
     "GAAttention: value_net must map the invariants (..., 2) to (..., 4)"),
    ("value net of the wrong input width", lambda: GAAttention(4, mlp(4, 1), mlp(3, 4)), ValueError,
     "GAAttention: value_net cannot take the invariants, shape (5, 5, 2) (last dimension 2)"),
    ("score net of the wrong input width", lambda: GAAttention(4, mlp(6, 1), mlp(2, 4)), ValueError,
     "GAAttention: score_net cannot take the joined values, shape (5, 5, 4)"),
    ("score net with two logits", lambda: GAAttention(4, mlp(4, 2), mlp(2, 4)), ValueError,
     "score_net must map the joined values (..., 4) to (..., 1 or 4)"),
    ("vector attention with a logit per channel", lambda: GAVectorAttention(4, mlp(4, 4), mlp(2, 4), mlp(4, 1)),
     ValueError, "GAVectorAttention: score_net must map the joined values (..., 4) to (..., 1)"),
    ("scale net of three outputs", lambda: GAVectorAttention(4, mlp(4, 1), mlp(2, 4), mlp(4, 3)), ValueError,
     "GAVectorAttention: scale_net must map the joined values (..., 4) to (..., 1)"),
    ("value net of the wrong width, multivectors", lambda: GAMultivectorAttention(4, mlp(4, 1), mlp(4, 3)),
     ValueError, "GAMultivectorAttention: value_net must map the invariants (..., 4) to (..., 4)"),
    ("a net that returns a tuple", lambda: GAAttention(4, mlp(4, 1), lambda x: (x, x)), ValueError,
     "value_net must map the invariants (..., 2) to (..., 4) with the same leading shape (5, 5), got tuple"),
    ("a net that sums over the tuples", lambda: GAAttention(4, mlp(4, 1), lambda x: mlp(2, 4)(x).sum(-2)),
     ValueError, "with the same leading shape (5, 5), got shape (5, 4)"),
]


@pytest.mark.parametrize("make,error,phrase", [c[1:] for c in NET_CASES], ids=[c[0] for c in NET_CASES])
def test_user_networks_that_do_not_fit_are_named(make, error, phrase):
    layer = make()
    d = 8 if isinstance(layer, GAMultivectorAttention) else 3
    with pytest.raises(error) as info:
        layer(torch.randn(5, d), torch.randn(5, 4))
    assert phrase in str(info.value), f"message {str(info.value)!r} lacks {phrase!r}"


@pytest.mark.parametrize("make,out", [
    (lambda: GAAttention(4, mlp(4, 1), mlp(2, 4)), (0, 4)),
    (lambda: GAAttention(4, mlp(4, 1), mlp(2, 4), reduce=False), (0, 6, 4)),
    (lambda: GAVectorAttention(4, mlp(4, 1), mlp(2, 4), mlp(4, 1)), (0, 3)),
    (lambda: GAMultivectorAttention(4, mlp(4, 1), mlp(4, 4)), (0, 4)),
    (lambda: GAMultivectorAttention(4, mlp(4, 1), mlp(4, 4), mlp(4, 1), reduce=False), (0, 6, 8)),
])
def test_no_clouds_give_the_documented_empty_output(make, out):
    """An empty batch is a batch: ``(0, N, 3)`` points give ``(0, ...)`` outputs, as torch layers do."""
    layer = make()
    d = 8 if isinstance(layer, GAMultivectorAttention) else 3
    y = layer(torch.randn(0, 6, d), torch.randn(0, 6, 4))
    assert y.shape == out
    # and one cloud of the batch alone matches the batch of one (the empty path changes nothing else)
    r, v = torch.randn(1, 6, d), torch.randn(1, 6, 4)
    torch.testing.assert_close(layer(r, v)[0], layer(r[0], v[0]))
