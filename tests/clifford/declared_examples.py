"""Equivariance examples of the module classes in :mod:`geomlin.clifford` (see tests/test_declarations.py).

CGENN / GLGENN layers declare O(p,q,r) of their metric acting by outermorphisms
(:class:`~geomlin.groups.PseudoOrthogonalGroup`: similarities included for degenerate metrics);
some factories also check the Clifford group. The attention layers declare O(3) or SO(3)
depending on whether a pseudoscalar enters.
"""

from torch import nn

from geomlin.algebra import CliffordAlgebra
from geomlin.clifford import (
    GCAMLP,
    CGENNBlock,
    GAAttention,
    GAMultivectorAttention,
    GAVectorAttention,
    GCAGate,
    GCAGroupNorm,
    GeometricProductLayer,
    GroupActionLinear,
    MVLayerNorm,
    MVLinear,
    MVSiLU,
)
from geomlin.clifford.tuple_products import invariant_count
from geomlin.groups import CliffordGroup
from tests.randomized import randomized

O5 = (1, 1, 1, 1, 1)
LORENTZ = (1, 1, 1, -1)
PGA = (0, 1, 1, 1)


def mlp(d_in: int, d_out: int) -> nn.Module:
    """A small backbone with biases (odd functions hide bugs)."""
    return nn.Sequential(nn.Linear(d_in, 16), nn.SiLU(), nn.Linear(16, d_out))


def _attention(cls, channels=4, **kw):
    multivector = cls is GAMultivectorAttention
    value = mlp(invariant_count(kw.get("rank", 2), kw.get("invariant_mode", "single"),
                                kw.get("include_normalized_products", False), multivector), channels)
    if cls is GAAttention or (multivector and not kw.pop("with_scale", False)):
        return cls(channels, mlp(channels, 1), value, **kw)
    return cls(channels, mlp(channels, 1), value, mlp(channels, 1), **kw)


def _clifford_group(module, metric):
    return module, {"group": CliffordGroup(CliffordAlgebra(metric))}


EXAMPLES = {
    MVLinear: [
        lambda: randomized(MVLinear(CliffordAlgebra(O5), 3, 2, subspaces="quaternion"), 0.5),
        lambda: randomized(MVLinear(CliffordAlgebra(PGA), 3, 2), 0.5),
    ],
    GeometricProductLayer: [
        lambda: randomized(GeometricProductLayer(CliffordAlgebra(LORENTZ), 3, 2, subspaces="quaternion"), 0.5),
        lambda: randomized(GeometricProductLayer(CliffordAlgebra(PGA), 2, 3), 0.5),
        lambda: _clifford_group(randomized(GeometricProductLayer(CliffordAlgebra(O5), 2, 2, "quaternion"), 0.5), O5),
    ],
    MVSiLU: [
        lambda: randomized(MVSiLU(CliffordAlgebra(PGA), 3, subspaces="quaternion"), 0.5),
        lambda: randomized(MVSiLU(CliffordAlgebra(LORENTZ), 3), 0.5),
    ],
    MVLayerNorm: [lambda: randomized(MVLayerNorm(CliffordAlgebra(O5), 3), 0.5)],
    CGENNBlock: [
        lambda: randomized(CGENNBlock(CliffordAlgebra(PGA), 2, subspaces="quaternion"), 0.5),
        lambda: _clifford_group(randomized(CGENNBlock(CliffordAlgebra(LORENTZ), 2), 0.5), LORENTZ),
    ],
    GCAGroupNorm: [lambda: randomized(GCAGroupNorm(CliffordAlgebra(PGA), 4, num_groups=2), 0.5)],
    GAAttention: [
        lambda: _attention(GAAttention, rank=2, invariant_mode="full"),
        lambda: _attention(GAAttention, rank=3, invariant_mode="partial", reduce=False),
        lambda: _attention(GAAttention, rank=3, parity_invariant=True, include_normalized_products=True),
    ],
    GAVectorAttention: [
        lambda: _attention(GAVectorAttention, rank=2, reduce=False),
        lambda: _attention(GAVectorAttention, rank=3, covariant_mode="full", parity_invariant=True),
    ],
    GAMultivectorAttention: [
        lambda: _attention(GAMultivectorAttention, rank=2, invariant_mode="partial"),
        lambda: _attention(GAMultivectorAttention, rank=2, with_scale=True, parity_invariant=True, reduce=False),
    ],
}

NOT_EQUIVARIANT = {
    GroupActionLinear: "GCAN group action layers apply learned versors a x a^-1, which do not commute with "
                       "the group: geometric templates, not equivariant maps (Ruhe et al. 2023)",
    GCAGate: "the GCAN gate is a sigmoid of a learned linear functional of all components, not of invariants",
    GCAMLP: "stacks GroupActionLinear and GCAGate, neither of which is equivariant",
}
