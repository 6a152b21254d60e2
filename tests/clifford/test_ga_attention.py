"""Geometric-algebra attention: the reference package as the oracle, invariants written out, symmetries."""

import itertools

import pytest
import torch
from torch import nn

from geomlin.algebra import CliffordAlgebra
from geomlin.clifford import GAAttention, GAMultivectorAttention, GAVectorAttention, neighborhoods
from geomlin.clifford.tuple_products import (
    invariant_count,
)
from geomlin.groups import SO, O
from geomlin.reps import Multivectors, Scalars, Vectors
from geomlin.testing import assert_equivariant, equivariance_error
from tests.oracles import require

DT = torch.float64
CHANNELS = 5


def mlp(d_in, d_out):
    return nn.Sequential(nn.Linear(d_in, 12), nn.SiLU(), nn.Linear(12, d_out))


def build(kind, rank, mode, normalized=False, **kw):
    multivector = kind.startswith("mv")
    value = mlp(invariant_count(rank, mode, normalized, multivector), CHANNELS)
    nets = (mlp(CHANNELS, 1), value) + ((mlp(CHANNELS, 1),) if kind in ("vec", "mv2") else ())
    options = dict(rank=rank, invariant_mode=mode, include_normalized_products=normalized, **kw)
    return nets, options


def test_reproduces_the_reference_package():
    """Same networks and modes as geometric_algebra_attention.pytorch: rank 1-3, reduce on and off,
    every invariant mode, normalised products, merge/join mean and concat; float32, 1e-5."""
    gaa = require("geometric_algebra_attention.pytorch")
    torch.manual_seed(0)
    worst = 0.0
    classes = {"inv": (gaa.VectorAttention, GAAttention), "vec": (gaa.Vector2VectorAttention, GAVectorAttention),
               "mv": (gaa.MultivectorAttention, GAMultivectorAttention),
               "mv2": (gaa.Multivector2MultivectorAttention, GAMultivectorAttention)}
    for kind, rank, mode, reduce, normalized in itertools.product(
            classes, [1, 2, 3], ["single", "partial", "full"], [True, False], [False, True]):
        fun = "concat" if (rank + (mode == "full")) % 2 else "mean"
        nets, options = build(kind, rank, mode, normalized, reduce=reduce, merge_fun=fun, join_fun=fun)
        ref_cls, our_cls = classes[kind]
        ref, ours = ref_cls(CHANNELS, *nets, **options), our_cls(CHANNELS, *nets, **options)
        ours.load_state_dict(ref.state_dict())
        r = torch.randn(2, 5, 8 if kind.startswith("mv") else 3)
        v = torch.randn(2, 5, CHANNELS)
        mask = torch.rand(2, 5) > 0.3
        want, got = ref((r, v)), ours(r, v)
        assert got.shape == want.shape
        worst = max(worst, ((got - want).abs().max() / want.abs().max().clamp_min(1e-6)).item())
        want, got = ref((r, v), mask=mask), ours(r, v, mask=mask)
        if not reduce:  # rows of masked items: the reference averages garbage, geomlin returns zeros
            want, got = want[mask], got[mask]
        worst = max(worst, ((got - want).abs().max() / want.abs().max().clamp_min(1e-6)).item())
    assert worst < 1e-5


@pytest.mark.parametrize("kind", ["inv", "vec", "mv", "mv2"])
@pytest.mark.parametrize("rank", [1, 2, 3])
def test_rotations_and_permutations(kind, rank):
    torch.manual_seed(rank)
    mode = "full" if rank == 2 else "partial"
    cls = {"inv": GAAttention, "vec": GAVectorAttention, "mv": GAMultivectorAttention, "mv2": GAMultivectorAttention}
    for reduce in (True, False):
        nets, options = build(kind, rank, mode, reduce=reduce, merge_fun="concat")
        layer = cls[kind](CHANNELS, *nets, **options).double()
        r = torch.randn(2, 6, 8 if kind.startswith("mv") else 3, dtype=DT)
        v = torch.randn(2, 6, CHANNELS, dtype=DT)
        assert_equivariant(layer, group=SO(3), inputs=(r, v), num_samples=5)
        perm = torch.randperm(6)
        out, out_p = layer(r, v), layer(r[:, perm], v[:, perm])
        torch.testing.assert_close(out_p, out if reduce else out[:, perm], rtol=1e-9, atol=1e-12)


def test_chirality_and_parity_invariance():
    torch.manual_seed(0)
    r, v = torch.randn(2, 6, 3, dtype=DT), torch.randn(2, 6, CHANNELS, dtype=DT)
    # ("single" with merge_fun="mean" happens to be O(3)-invariant: the sum over ordered triples pairs
    # (i, j, k) with (i, k, j), whose products have equal |vector| and opposite det; "partial" does not)
    nets, options = build("inv", 3, "partial", reduce=False)
    chiral = GAAttention(CHANNELS, *nets, **options).double()
    assert equivariance_error(chiral, O(3), inputs=(r, v)) > 1e-4  # det[a b c] flips
    assert chiral.type_out.group is None and chiral.type_in[0].group.key() == SO(3).key()
    achiral = GAAttention(CHANNELS, *nets, parity_invariant=True, **options).double()
    assert_equivariant(achiral, group=O(3), inputs=(r, v))
    # rank 2 needs nothing: its invariants are O(3) scalars
    nets, options = build("inv", 2, "full")
    assert_equivariant(GAAttention(CHANNELS, *nets, **options).double(), group=O(3), inputs=(r, v))
    # vectors: a x b is a pseudovector; parity_invariant keeps the true vectors only
    nets, options = build("vec", 3, "full")
    vec = GAVectorAttention(CHANNELS, *nets, **options).double()
    assert equivariance_error(vec, O(3), inputs=(r, v)) > 1e-4
    vec = GAVectorAttention(CHANNELS, *nets[:1], mlp(invariant_count(3, "full"), CHANNELS), nets[2], parity_invariant=True,
                            **options).double()
    assert vec.input_vector_count == 2  # ranks 3 and 1 of the partial covariant series (not 2)
    assert_equivariant(vec, group=O(3), inputs=(r, v))
    with pytest.raises(ValueError, match="true vectors"):
        GAVectorAttention(CHANNELS, *build("vec", 2, "single")[0], rank=2, covariant_mode="single",
                          parity_invariant=True)


def test_neighbourhoods():
    torch.manual_seed(0)
    pos = torch.randn(3, 9, 3, dtype=DT)
    nb = neighborhoods(pos, k=4)
    assert nb.index.shape == (3, 9, 4) and nb.mask.all()
    d = torch.cdist(pos, pos)
    for b, i in itertools.product(range(3), range(9)):  # brute force: self first, then the 3 nearest
        assert nb.index[b, i, 0] == i
        assert set(nb.index[b, i, 1:].tolist()) == set(d[b, i].argsort()[1:4].tolist())
    torch.testing.assert_close(nb.displacements(pos)[:, :, 0], torch.zeros(3, 9, 3, dtype=DT))
    within = neighborhoods(pos, cutoff=1.0, include_self=False)
    counts = ((d < 1.0).sum(-1) - 1)
    assert within.index.shape[-1] == max(int(counts.max()), 1)
    torch.testing.assert_close(within.mask.sum(-1), counts)
    # k = N reproduces the layer over all tuples; k < N is its formula restricted to the neighbours
    nets, options = build("vec", 2, "partial", reduce=False)
    layer = GAVectorAttention(CHANNELS, *nets, **options).double()
    r, v = pos - pos.mean(-2, keepdim=True), torch.randn(3, 9, CHANNELS, dtype=DT)
    torch.testing.assert_close(layer(r, v, neighbors=neighborhoods(pos, k=9)), layer(r, v), rtol=1e-10, atol=1e-12)
    got = layer(r, v, neighbors=nb)
    for b, i in [(0, 0), (2, 5)]:
        sub = torch.cat([nb.index[b, i], torch.tensor([j for j in range(9) if j not in nb.index[b, i]])])
        # item i first; the all-tuples layer on (i, neighbours, others) with the others masked out
        mask = torch.zeros(9, dtype=torch.bool)
        mask[:4] = True
        every = layer(r[b, sub], v[b, sub], mask=mask)
        torch.testing.assert_close(got[b, i], every[0], rtol=1e-10, atol=1e-12)
    assert_equivariant(lambda r_, v_: layer(r_, v_, neighbors=nb), SO(3), [Vectors(3), Scalars()], Vectors(3),
                       inputs=(r, v))


def test_multivector_inputs_under_the_clifford_group():
    """Multivector attention is covariant under the twisted adjoint action of rotations and, with
    parity_invariant, of reflections too (the pseudoscalar changes sign)."""
    torch.manual_seed(0)
    nets, options = build("mv2", 2, "partial")
    layer = GAMultivectorAttention(CHANNELS, *nets, parity_invariant=True, **options).double()
    r, v = torch.randn(2, 5, 8, dtype=DT), torch.randn(2, 5, CHANNELS, dtype=DT)
    mv = Multivectors(CliffordAlgebra((1, 1, 1)))
    assert_equivariant(layer, group=mv.group, type_in=[mv, Scalars()], type_out=mv, inputs=(r, v))
