"""Equivariant MLPs for any group: linear -> bilinear -> gated nonlinearity.

The block follows EMLP (Finzi et al. 2021, Sec. 6): an equivariant linear map
into the hidden rep plus one gate scalar per non-scalar block, an equivariant
bilinear layer (so that groups without linear invariants, like the Lorentz
group, still produce invariants such as ``x^T eta x``), and gated
nonlinearities (scalars: SiLU; every other block: multiplied by the sigmoid of
its gate).

The bilinear layer here is channel-wise: for every triple of block types
``(a, b, c)`` whose product space ``Hom(a (x) b, c)`` is non-zero, channels of
type ``a`` and ``b`` are mixed down to a few product channels, multiplied as
tensors, mapped to ``c`` with the solved basis and mixed back up.
"""

from __future__ import annotations

import itertools
import math

import torch
from torch import Tensor, nn

from geomlin.groups.base import Group
from geomlin.linear.layers import BlockLayout, EquivariantLinear, _BasisCache, check_features
from geomlin.linear.solver import block_basis
from geomlin.reps.base import Rep, Scalar, SumRep, TensorRep, V, common_group

#: Triples ``(a, b, c)`` whose ``Hom(a (x) b, c)`` has more unknowns than this are
#: left out of the bilinear layer (keeps construction under a second).
BILINEAR_MAX_UNKNOWNS = 1024
#: Initial scale of the bilinear coefficients (products start small).
BILINEAR_INIT_SCALE = 0.1


def uniform_rep(group: Group, channels: int) -> Rep:
    """A default hidden rep: ``channels`` scalars, ``channels`` vectors and ``max(1, channels // 2)`` matrices."""
    if isinstance(channels, bool) or not isinstance(channels, int) or channels < 1:
        raise ValueError(f"channels must be a positive int, got {channels!r}")
    vec = V(group)
    return channels * Scalar + channels * vec + max(1, channels // 2) * vec ** 2


def with_gates(rep: Rep) -> Rep:
    """One gate ``Scalar`` per non-scalar block of ``rep``, followed by ``rep``.

    Gates come first so that a rep whose scalars lead (like :func:`uniform_rep`)
    stays sorted by block type, which saves a gather in every layer.
    """
    n_gates = sum(1 for b in rep.blocks if not b.is_scalar)
    return rep if n_gates == 0 else SumRep([n_gates * Scalar, rep])


class GatedNonlinearity(nn.Module):
    """Gated nonlinearity ``with_gates(rep) -> rep``.

    Shapes: ``(..., with_gates(rep).size) -> (..., rep.size)``. Scalar blocks go
    through SiLU; the i-th non-scalar block is multiplied by ``sigmoid`` of the
    i-th gate.
    """

    def __init__(self, rep: Rep):
        super().__init__()
        self.rep = rep
        gated_sizes = [b.size for b in rep.blocks if not b.is_scalar]
        self.n_gates = len(gated_sizes)
        is_scalar = torch.tensor([b.is_scalar for b in rep.blocks for _ in range(b.size)], dtype=torch.bool)
        self.register_buffer("is_scalar", is_scalar, persistent=False)
        self.register_buffer("gate_sizes", torch.tensor(gated_sizes, dtype=torch.long), persistent=False)
        scalar_idx = torch.nonzero(is_scalar)[:, 0]
        gated_idx = torch.nonzero(~is_scalar)[:, 0]
        self.register_buffer("scalar_idx", scalar_idx, persistent=False)
        self.register_buffer("gated_idx", gated_idx, persistent=False)
        self.in_size = rep.size + self.n_gates
        # fast path: all scalars lead (as in uniform_rep), so no scatter is needed
        self.scalars_lead = bool(torch.equal(scalar_idx, torch.arange(len(scalar_idx))))

    def forward(self, x: Tensor) -> Tensor:
        if x.shape[-1] != self.in_size:
            raise ValueError(f"expected (..., {self.in_size}) = gates + rep, got {tuple(x.shape)}")
        gates, h = x[..., :self.n_gates], x[..., self.n_gates:]
        if self.n_gates == 0:
            return nn.functional.silu(h)
        gate_per_coord = torch.repeat_interleave(torch.sigmoid(gates), self.gate_sizes, dim=-1)
        if self.scalars_lead:
            n_s = len(self.scalar_idx)
            return torch.cat([nn.functional.silu(h[..., :n_s]), h[..., n_s:] * gate_per_coord], dim=-1)
        out = torch.empty_like(h)
        out[..., self.scalar_idx] = nn.functional.silu(h[..., self.scalar_idx])
        out[..., self.gated_idx] = h[..., self.gated_idx] * gate_per_coord
        return out


class EquivariantBilinear(nn.Module):
    """Channel-wise equivariant bilinear map ``rep x rep -> rep`` (see module docstring).

    Shapes: ``(..., rep.size) -> (..., rep.size)``.
    """

    def __init__(self, rep: Rep, max_unknowns: int = BILINEAR_MAX_UNKNOWNS):
        super().__init__()
        self.rep = rep
        self.layout = BlockLayout(rep)
        types, mult = self.layout.types, self.layout.multiplicity
        self.triples: list[tuple[int, int, int]] = []
        bases = {}
        self.mix_a, self.mix_b = nn.ParameterList(), nn.ParameterList()
        self.coeff, self.mix_out = nn.ParameterList(), nn.ParameterList()
        for a in range(len(types)):
            for b in range(a, len(types)):
                for c in range(len(types)):
                    ta, tb, tc = types[a], types[b], types[c]
                    if ta.size * tb.size * tc.size > max_unknowns:
                        continue
                    B = block_basis(TensorRep([ta, tb]), tc)
                    if B.shape[0] == 0:
                        continue
                    ch = min(mult[a], mult[b])
                    n = len(self.triples)
                    bases[(n, 0)] = B
                    self.triples.append((a, b, c))
                    self.mix_a.append(nn.Parameter(torch.randn(ch, mult[a]) / math.sqrt(mult[a])))
                    self.mix_b.append(nn.Parameter(torch.randn(ch, mult[b]) / math.sqrt(mult[b])))
                    self.coeff.append(nn.Parameter(torch.randn(B.shape[0], ch) / math.sqrt(B.shape[0])))
                    self.mix_out.append(nn.Parameter(
                        torch.randn(mult[c], ch) * BILINEAR_INIT_SCALE / math.sqrt(ch)))
        self._bases = _BasisCache(bases)

    def forward(self, x: Tensor) -> Tensor:
        lay = self.layout
        xs = lay.sort(x)
        parts = []
        for t, m, sl in zip(lay.types, lay.multiplicity, lay.type_slices()):
            parts.append(xs[..., sl].reshape(*x.shape[:-1], m, t.size))
        outs = [torch.zeros_like(p) for p in parts]
        bases = self._bases.get(x.device, x.dtype)
        for n, (a, b, c) in enumerate(self.triples):
            u = torch.einsum("cm,...mi->...ci", self.mix_a[n].to(x.dtype), parts[a])
            v = torch.einsum("cm,...mj->...cj", self.mix_b[n].to(x.dtype), parts[b])
            prod = (u[..., :, None] * v[..., None, :]).flatten(-2)  # (..., ch, |a||b|)
            W = torch.einsum("rkp,rc->ckp", bases[(n, 0)], self.coeff[n].to(x.dtype))
            y = (prod.unsqueeze(-2) @ W.transpose(-1, -2)).squeeze(-2)  # (..., ch, |c|)
            outs[c] = outs[c] + torch.einsum("mc,...ck->...mk", self.mix_out[n].to(x.dtype), y)
        ys = torch.cat([o.flatten(-2) for o in outs], dim=-1)
        return lay.unsort(ys)


class EquivariantBlock(nn.Module):
    """``rep_in -> rep_out``: linear into ``with_gates(rep_out)``, residual bilinear, gated nonlinearity."""

    def __init__(self, rep_in: Rep, rep_out: Rep):
        super().__init__()
        gated = with_gates(rep_out)
        self.linear = EquivariantLinear(rep_in, gated)
        self.bilinear = EquivariantBilinear(gated)
        self.nonlinearity = GatedNonlinearity(rep_out)

    def forward(self, x: Tensor) -> Tensor:
        h = self.linear(x)
        h = h + self.bilinear(h)
        return self.nonlinearity(h)


class EquivariantMLP(nn.Module):
    """An equivariant MLP for any group (EMLP-style), ``(..., rep_in.size) -> (..., rep_out.size)``.

    Parameters
    ----------
    rep_in, rep_out: representations of one group.
    hidden: a hidden Rep, or an int number of channels for :func:`uniform_rep`.
    depth: number of hidden blocks (``>= 1``).
    """

    def __init__(self, rep_in: Rep, rep_out: Rep, hidden: Rep | int = 16, depth: int = 2):
        super().__init__()
        group = common_group([rep_in, rep_out])
        if isinstance(hidden, int):
            if group is None:
                raise ValueError("hidden=int needs a group; pass a hidden Rep for scalar-only models")
            hidden = uniform_rep(group, hidden)
        if not isinstance(hidden, Rep):
            raise TypeError(f"hidden must be a Rep or an int, got {type(hidden).__name__}")
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
            raise ValueError(f"depth must be a positive int, got {depth!r}")
        self.rep_in, self.rep_out, self.hidden = rep_in, rep_out, hidden
        reps = [rep_in] + [hidden] * depth
        self.blocks = nn.ModuleList(EquivariantBlock(a, b) for a, b in itertools.pairwise(reps))
        self.head = EquivariantLinear(hidden, rep_out)

    def forward(self, x: Tensor) -> Tensor:
        check_features(x, self.rep_in.size)
        for block in self.blocks:
            x = block(x)
        return self.head(x)
