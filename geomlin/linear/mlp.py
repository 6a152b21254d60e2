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

Hidden sizes follow EMLP's ``ch``: ``hidden_channels=384`` builds a hidden rep of size 384
([`uniform_rep`][]), not 384 copies of every tensor type.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from geomlin.groups.base import Group
from geomlin.linear.layers import BlockLayout, EquivariantLinear, check_features
from geomlin.linear.solver import METHODS, basis_method, block_basis, check_cache_dir
from geomlin.reps.base import Rep, Scalar, SumRep, TensorRep, bind, common_group
from geomlin.reps.group_free import GroupFreeRep, T
from geomlin.tables import ConstantTables
from geomlin.validation import check_choice, check_positive_int

#: Triples ``(a, b, c)`` whose ``Hom(a (x) b, c)`` has more unknowns than this are left out of the
#: bilinear layer, with a warning, unless the diagram solver reads their basis off directly
#: (tensor reps of S(n), O(n), SO(n), Sp(m), Lorentz): a general solve of that size takes seconds.
BILINEAR_MAX_UNKNOWNS = 1024
#: Initial scale of the bilinear coefficients (products start small).
BILINEAR_INIT_SCALE = 0.1
#: Default size of the hidden rep of [`EquivariantMLP`][] (EMLP's default ``ch`` is 384).
DEFAULT_HIDDEN_CHANNELS = 96


# ------------------------------------------------------------------------- hidden reps
def _max_rank(channels: int, d: int) -> int:
    """The largest ``r`` with ``(r + 1) d^r <= channels`` (EMLP's rounded-down Lambert W)."""
    r = 0
    while (r + 2) * d ** (r + 1) <= channels:
        r += 1
        if d == 1 and r >= channels:
            break
    return r


def rank_counts(channels: int, d: int) -> list[int]:
    """How many tensors of each rank ``0, 1, ...`` [`uniform_rep`][] allocates for ``channels``.

    EMLP's heuristic (``emlp.nn.uniform_rep``): while channels remain, take the largest rank ``r``
    with ``(r + 1) d^r`` channels left and add ``d^(r - i)`` tensors of every rank ``i <= r``
    (each rank gets the same ``d^r`` dimensions); the total size is exactly ``channels``.
    """
    channels = check_positive_int(channels, "channels")
    d = check_positive_int(d, "d")
    counts: list[int] = []
    left = channels
    while left > 0:
        r = _max_rank(left, d)
        counts.extend([0] * (r + 1 - len(counts)))
        for i in range(r + 1):
            counts[i] += d ** (r - i)
        left -= (r + 1) * d ** r
    return counts


def _split_rank(count: int, rank: int) -> list[tuple[int, int]]:
    """``count`` tensors of rank ``r`` as ``[(p, copies), ...]`` of ``T(p, r - p)``, binomially.

    EMLP draws the remainder at random; here it goes deterministically to the most likely ``p``
    first (ties: larger ``p``), so a model is the same in every process.
    """
    per = count // 2 ** rank
    copies = {p: per * math.comb(rank, p) for p in range(rank + 1)}
    order = sorted(range(rank + 1), key=lambda p: (-math.comb(rank, p), -p))
    for i in range(count % 2 ** rank):
        copies[order[i % len(order)]] += 1
    return [(p, copies[p]) for p in sorted(copies, reverse=True) if copies[p]]


def uniform_rep(channels: int, group: Group | None = None) -> Rep | GroupFreeRep:
    """A hidden rep of size ``channels`` spread evenly over tensor ranks (EMLP's ``uniform_rep``).

    Parameters
    ----------
    channels : int
        total size of the rep (EMLP's ``ch``).
    group : Group | None
        the group (a geomlin Group or a name such as ``"O(5)"``); ``None`` returns the
        group-free rep (``T(r)`` sums, bound later by ``rep(G)``) -- then orthogonal groups are
        assumed, see below.

    Notes
    -----
    Ranks come from [`rank_counts`][] (``d = group.d``). For orthogonal groups every rank-``r``
    tensor is ``T(r)``; otherwise rank ``r`` is split binomially into ``T(p, r - p)`` (EMLP's
    ``binomial_allocation``, with a deterministic remainder). Types are grouped and sorted by
    rank, scalars first. Examples: O(5), 384 -> ``134*Scalar + 25*V + 5*V**2`` (size 384, as EMLP);
    SO(3), 100 -> ``37*Scalar + 12*V + 3*V**2``.
    """
    if isinstance(channels, Group):
        raise TypeError("uniform_rep takes (channels, group), got the group first")
    if group is None:
        raise TypeError("uniform_rep needs the group to size its tensors: uniform_rep(channels, group)")
    from geomlin.groups.names import as_group

    group = as_group(group, kind=Group)
    counts = rank_counts(channels, group.d)
    terms = []
    for rank, count in enumerate(counts):
        if count == 0:
            continue
        if rank == 0 or group.is_orthogonal:
            terms.append(count * T(rank))
        else:
            terms += [copies * T(p, rank - p) for p, copies in _split_rank(count, rank)]
    return sum(terms[1:], terms[0])(group)


def with_gates(rep: Rep) -> Rep:
    """One gate ``Scalar`` per non-scalar block of ``rep``, followed by ``rep``.

    Gates come first so that a rep whose scalars lead (like [`uniform_rep`][])
    stays sorted by block type, which saves a gather in every layer.
    """
    rep = bind(rep, None, "rep")
    n_gates = sum(1 for b in rep.blocks if not b.is_scalar)
    return rep if n_gates == 0 else SumRep([n_gates * Scalar, rep])


# ------------------------------------------------------------------------------ layers
class GatedNonlinearity(nn.Module):
    """Gated nonlinearity ``with_gates(rep) -> rep``.

    Shapes: ``(..., with_gates(rep).size) -> (..., rep.size)``. Scalar blocks go
    through SiLU; the i-th non-scalar block is multiplied by ``sigmoid`` of the
    i-th gate. Declares ``type_in = with_gates(rep)``, ``type_out = rep``.
    """

    def __init__(self, rep: Rep, *, group=None):
        super().__init__()
        rep = bind(rep, group, "rep")
        self.rep = rep
        self.type_in, self.type_out = with_gates(rep), rep
        gated_sizes = [b.size for b in rep.blocks if not b.is_scalar]
        self.n_gates = len(gated_sizes)
        is_scalar = torch.tensor([b.is_scalar for b in rep.blocks for _ in range(b.size)], dtype=torch.bool)
        self.register_buffer("is_scalar", is_scalar, persistent=False)
        self.register_buffer("gate_sizes", torch.tensor(gated_sizes, dtype=torch.long), persistent=False)
        #: the gate of every gated coordinate, in order (a gather: no data-dependent size in the forward)
        self.register_buffer("gate_index", torch.repeat_interleave(torch.arange(self.n_gates), self.gate_sizes),
                             persistent=False)
        scalar_idx = torch.nonzero(is_scalar)[:, 0]
        gated_idx = torch.nonzero(~is_scalar)[:, 0]
        self.register_buffer("scalar_idx", scalar_idx, persistent=False)
        self.register_buffer("gated_idx", gated_idx, persistent=False)
        self.in_size = rep.size + self.n_gates
        self._what = f"{self.n_gates} gates + {rep!r}"  # made once: the forward formats no rep (dynamo cannot)
        # fast path: all scalars lead (as in uniform_rep), so no scatter is needed
        self.scalars_lead = bool(torch.equal(scalar_idx, torch.arange(len(scalar_idx))))

    def forward(self, x: Tensor) -> Tensor:
        """``(..., n_gates + rep.size) -> (..., rep.size)``: gates first, then the rep."""
        check_tensor_shape(x, self.in_size, self._what)
        gates, h = x[..., :self.n_gates], x[..., self.n_gates:]
        if self.n_gates == 0:
            return nn.functional.silu(h)
        gate_per_coord = torch.sigmoid(gates).index_select(-1, self.gate_index)
        if self.scalars_lead:
            n_s = len(self.scalar_idx)
            return torch.cat([nn.functional.silu(h[..., :n_s]), h[..., n_s:] * gate_per_coord], dim=-1)
        out = torch.empty_like(h)
        out[..., self.scalar_idx] = nn.functional.silu(h[..., self.scalar_idx])
        out[..., self.gated_idx] = h[..., self.gated_idx] * gate_per_coord
        return out


def check_tensor_shape(x: Tensor, size: int, what: str, name: str = "x") -> None:
    """Floating tensor ``(..., size)`` (no finiteness pass: an inner layer of a checked model)."""
    from geomlin.validation import check_tensor

    check_tensor(x, name, shape=(..., size), what=what)


class EquivariantBilinear(nn.Module):
    """Channel-wise equivariant bilinear map ``rep x rep -> rep`` (see module docstring).

    Parameters
    ----------
    rep : Rep
        the representation (or a group-free one with ``group=``).
    max_unknowns : int
        triples ``(a, b, c)`` of block types whose ``Hom(a (x) b, c)`` has more unknowns
        are left out with a ``UserWarning`` naming them (``dropped`` lists them), unless the diagram
        or monomial solver reads their basis off directly. Raise it to include them (solved once; keep them
        with ``cache_dir=``).
    cache_dir : str or os.PathLike, optional
        as for [`EquivariantLinear`][].
    method : str
        as for [`EquivariantLinear`][].

    Shapes
    ------
    ``(..., rep.size) -> (..., rep.size)``; ``type_in = type_out = rep``.
    """

    def __init__(self, rep: Rep, max_unknowns: int = BILINEAR_MAX_UNKNOWNS, *, group=None, cache_dir=None,
                 method: str = "auto"):
        super().__init__()
        rep = bind(rep, group, "rep")
        max_unknowns = check_positive_int(max_unknowns, "max_unknowns")
        check_cache_dir(cache_dir)
        check_choice(method, "method", METHODS)
        self.rep = rep
        self._what = repr(rep)  # made once: the forward formats no rep (dynamo cannot)
        self.type_in = self.type_out = rep
        self.layout = BlockLayout(rep)
        types, mult = self.layout.types, self.layout.multiplicity
        self.triples: list[tuple[int, int, int]] = []
        #: ``(a, b, c, unknowns)`` for every product left out (see ``max_unknowns``)
        self.dropped: list[tuple[Rep, Rep, Rep, int]] = []
        bases = {}
        self.mix_a, self.mix_b = nn.ParameterList(), nn.ParameterList()
        self.coeff, self.mix_out = nn.ParameterList(), nn.ParameterList()
        #: ``(a, b, [indices of its triples])``: the products of one pair of types share their
        #: mixed-down channels, so ``u (x) v`` is formed once and mapped to every output type at once
        self.pairs: list[tuple[int, int, list[int]]] = []
        for a in range(len(types)):
            for b in range(a, len(types)):
                product = TensorRep([types[a], types[b]])
                members = []
                for c in range(len(types)):
                    tc = types[c]
                    unknowns = product.size * tc.size
                    if unknowns > max_unknowns and not _read_off(product, tc, method):
                        self.dropped.append((types[a], types[b], tc, unknowns))
                        continue
                    B = block_basis(product, tc, cache_dir, method)
                    if B.shape[0] == 0:
                        continue
                    n = len(self.triples)
                    bases[(n, 0)] = B
                    self.triples.append((a, b, c))
                    members.append(n)
                if not members:
                    continue
                ch = min(mult[a], mult[b])
                self.pairs.append((a, b, members))
                self.mix_a.append(nn.Parameter(torch.randn(ch, mult[a]) / math.sqrt(mult[a])))
                self.mix_b.append(nn.Parameter(torch.randn(ch, mult[b]) / math.sqrt(mult[b])))
                for n in members:
                    r, c = bases[(n, 0)].shape[0], self.triples[n][2]
                    self.coeff.append(nn.Parameter(torch.randn(r, ch) / math.sqrt(r)))
                    self.mix_out.append(nn.Parameter(torch.randn(mult[c], ch) * BILINEAR_INIT_SCALE / math.sqrt(ch)))
        #: the solved bases (float64) and the layout indices, moved with the module
        self.tables = ConstantTables({f"basis_{n}": B for (n, _), B in bases.items()})
        self.layout.add_to(self.tables, "layout")
        if self.dropped:
            listed = "; ".join(f"{a!r} x {b!r} -> {c!r} ({u} unknowns)" for a, b, c, u in self.dropped[:6])
            more = f" and {len(self.dropped) - 6} more" if len(self.dropped) > 6 else ""
            warnings.warn(f"EquivariantBilinear left out {len(self.dropped)} product(s) with more than "
                          f"max_unknowns={max_unknowns} unknowns: {listed}{more}. Pass a larger "
                          "max_unknowns (EquivariantMLP: bilinear_max_unknowns) to include them (solved "
                          "once; cache_dir= keeps them on disk)", UserWarning, stacklevel=2)

    def forward(self, x: Tensor) -> Tensor:
        """``(..., rep.size) -> (..., rep.size)``."""
        check_tensor_shape(x, self.rep.size, self._what)
        lay = self.layout
        lead = x.shape[:-1]
        # explicit sizes throughout, no -1: an empty rep (e3nn's Irreps("")) or an empty batch has 0 entries
        xs = lay.sort(x.flatten(0, -2) if x.ndim > 1 else x[None], self.tables.get("layout_index"))
        B = xs.shape[0]
        # channel-major parts (m, B * size): every mixing below is one plain matrix product
        parts = [xs[:, sl].reshape(B, m, t.size).transpose(0, 1).reshape(m, B * t.size)
                 for t, m, sl in zip(lay.types, lay.multiplicity, lay.type_slices())]
        outs: list[Tensor | None] = [None] * len(parts)
        for q, (a, b, members) in enumerate(self.pairs):
            sa, sb = lay.types[a].size, lay.types[b].size
            ch = self.mix_a[q].shape[0]
            u = (self.mix_a[q].to(x.dtype) @ parts[a]).view(ch, B, sa, 1)
            v = (self.mix_b[q].to(x.dtype) @ parts[b]).view(ch, B, 1, sb)
            prod = (u * v).view(ch, B, sa * sb)  # (ch, B, |a||b|)
            # the weights of every output type of this pair, stacked: (ch, sum |c|, |a||b|)
            Ws, sizes = [], []
            for n in members:
                basis = self.tables.get(f"basis_{n}", x.dtype)  # (r, |c|, |a||b|)
                Ws.append((self.coeff[n].to(x.dtype).T @ basis.reshape(basis.shape[0], basis.shape[1] * sa * sb))
                          .view(ch, basis.shape[1], sa * sb))
                sizes.append(basis.shape[1])
            W = Ws[0] if len(Ws) == 1 else torch.cat(Ws, dim=1)
            y = torch.bmm(prod, W.transpose(1, 2))  # (ch, B, sum |c|)
            for n, y_c in zip(members, torch.split(y, sizes, dim=2)):
                c = self.triples[n][2]
                term = self.mix_out[n].to(x.dtype) @ y_c.reshape(ch, B * y_c.shape[2])  # (m_c, B |c|)
                outs[c] = term if outs[c] is None else outs[c] + term
        ys = [(o if o is not None else torch.zeros_like(p)).view(m, B, t.size).transpose(0, 1).reshape(B, m * t.size)
              for o, p, t, m in zip(outs, parts, lay.types, lay.multiplicity)]
        return lay.unsort(torch.cat(ys, dim=-1), self.tables.get("layout_inverse")).reshape(*lead, self.rep.size)


def _read_off(rep_in: Rep, rep_out: Rep, method: str) -> bool:
    """True when the basis is read off rather than solved: trivial reps, the diagram solver, or the
    monomial solver (orbits of multi-indices, with at most a small reduced system left)."""
    try:
        return basis_method(rep_in, rep_out, method) in ("scalar", "diagrams", "monomial")
    except ValueError:
        return False


class EquivariantBlock(nn.Module):
    """``rep_in -> rep_out``: linear into ``with_gates(rep_out)``, residual bilinear, gated nonlinearity.

    ``cache_dir``, ``method`` as for [`EquivariantLinear`][]; ``bilinear_max_unknowns`` is the
    bilinear layer's ``max_unknowns``. Declares ``type_in = rep_in``, ``type_out = rep_out``.
    """

    def __init__(self, rep_in: Rep, rep_out: Rep, *, group=None, cache_dir=None, method: str = "auto",
                 bilinear_max_unknowns: int = BILINEAR_MAX_UNKNOWNS):
        super().__init__()
        rep_in = bind(rep_in, group, "rep_in")
        rep_out = bind(rep_out, group, "rep_out")
        common_group([rep_in, rep_out])
        self.type_in, self.type_out = rep_in, rep_out
        gated = with_gates(rep_out)
        self.linear = EquivariantLinear(rep_in, gated, cache_dir=cache_dir, method=method)
        self.bilinear = EquivariantBilinear(gated, bilinear_max_unknowns, cache_dir=cache_dir, method=method)
        self.nonlinearity = GatedNonlinearity(rep_out)

    def forward(self, x: Tensor) -> Tensor:
        """``(..., rep_in.size) -> (..., rep_out.size)``."""
        h = self.linear(x)
        h = h + self.bilinear(h)
        return self.nonlinearity(h)

    def parameter_counts(self) -> dict[str, int]:
        """Trainable parameters: ``{"linear", "bilinear", "total"}`` (linear includes the bias)."""
        lin = sum(p.numel() for p in self.linear.parameters())
        bil = sum(p.numel() for p in self.bilinear.parameters())
        return {"linear": lin, "bilinear": bil, "total": lin + bil}


class EquivariantMLP(nn.Module):
    """An equivariant MLP for any group (EMLP-style), ``(..., rep_in.size) -> (..., rep_out.size)``.

    Parameters
    ----------
    rep_in, rep_out : Rep
        representations of one group, or group-free reps (``4 * T(0) + T(1)``)
        with ``group=``.
    hidden_channels : int | Rep | Sequence
        the hidden layers, as EMLP's ``ch``: an int is the *total size* of each
        hidden rep, allocated over tensor ranks by [`uniform_rep`][] (``384`` on O(5) gives
        ``134*Scalar + 25*V + 5*V**2``); a Rep (or group-free rep) is used as it is; a sequence
        of ints / reps gives one per hidden block.
    num_blocks : int | None
        number of hidden blocks (default 2; the length of a ``hidden_channels`` sequence).
    group : Group or str, optional
        binds group-free reps (a geomlin Group or a name such as ``"O(5)"``).
    cache_dir : str or os.PathLike, optional
        folder of an on-disk cache of the solved bases, shared by every layer and process.
    method : str
        basis solver (``"auto"``, ``"dense"``, ``"sampled"``, ``"diagrams"``).
    bilinear_max_unknowns : int
        passed to every [`EquivariantBilinear`][] (products above it are
        left out with a warning, unless read off from diagrams).

    Notes
    -----
    ``parameter_counts()`` splits the parameters into linear and bilinear parts. Declares
    ``type_in = rep_in``, ``type_out = rep_out``.
    """

    def __init__(self, rep_in: Rep, rep_out: Rep, hidden_channels: int | Rep | Sequence = DEFAULT_HIDDEN_CHANNELS,
                 num_blocks: int | None = None, *, group=None, cache_dir=None, method: str = "auto",
                 bilinear_max_unknowns: int = BILINEAR_MAX_UNKNOWNS):
        super().__init__()
        rep_in = bind(rep_in, group, "rep_in")
        rep_out = bind(rep_out, group, "rep_out")
        G = common_group([rep_in, rep_out])
        if G is None and group is not None:
            from geomlin.groups.names import as_group

            G = as_group(group, kind=Group)
        hidden_list = self._hidden_layers(hidden_channels, num_blocks, G, group)
        self.rep_in, self.rep_out = rep_in, rep_out
        self._what = repr(rep_in)  # made once: the forward formats no rep (dynamo cannot)
        self.type_in, self.type_out = rep_in, rep_out
        self.hidden = hidden_list[0]
        self.hidden_reps = hidden_list
        reps = [rep_in] + hidden_list
        kwargs = {"cache_dir": cache_dir, "method": method, "bilinear_max_unknowns": bilinear_max_unknowns}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.blocks = nn.ModuleList(EquivariantBlock(a, b, **kwargs) for a, b in itertools.pairwise(reps))
        seen = set()
        for w in caught:  # one warning per distinct message, from the caller's line
            if str(w.message) not in seen:
                seen.add(str(w.message))
                warnings.warn(w.message, w.category, stacklevel=2)
        self.head = EquivariantLinear(hidden_list[-1], rep_out, cache_dir=cache_dir, method=method)

    @staticmethod
    def _hidden_layers(hidden_channels, num_blocks, G, group) -> list[Rep]:
        items = list(hidden_channels) if isinstance(hidden_channels, (list, tuple)) else None
        if items is not None:
            if not items:
                raise ValueError("hidden_channels is an empty sequence; give at least one hidden layer")
            if num_blocks is not None and check_positive_int(num_blocks, "num_blocks") != len(items):
                raise ValueError(f"hidden_channels lists {len(items)} hidden layers but num_blocks = {num_blocks}")
        else:
            num_blocks = 2 if num_blocks is None else check_positive_int(num_blocks, "num_blocks")
            items = [hidden_channels] * num_blocks
        out = []
        for i, h in enumerate(items):
            name = "hidden_channels" if len(items) == 1 or items.count(h) == len(items) else f"hidden_channels[{i}]"
            if isinstance(h, (Rep, GroupFreeRep)):
                rep = bind(h, G if isinstance(h, GroupFreeRep) else group, name)
                if G is not None and rep.group is not None and rep.group != G:
                    raise ValueError(f"{name} is a representation of {rep.group}, but rep_in / rep_out "
                                     f"belong to {G}")
                out.append(rep)
            elif isinstance(h, int) and not isinstance(h, bool):
                check_positive_int(h, name)
                if G is None:
                    raise ValueError(f"{name}={h} needs a group to size the hidden tensors; pass group= "
                                     "or a hidden Rep")
                out.append(uniform_rep(h, G))
            else:
                raise TypeError(f"{name} must be an int (the hidden size), a Rep or a sequence of them, "
                                f"got {type(h).__name__}")
        return out

    def forward(self, x: Tensor) -> Tensor:
        """``(..., rep_in.size) -> (..., rep_out.size)``, floating point, finite."""
        check_features(x, self.rep_in.size, what=self._what)
        for block in self.blocks:
            x = block(x)
        return self.head(x)

    def parameter_counts(self) -> dict[str, int]:
        """Trainable parameters by part: ``{"linear", "bilinear", "total"}``.

        ``linear`` counts the equivariant linear maps and their biases (every block and the head),
        ``bilinear`` the bilinear layers. EMLP's MLP of the same hidden reps has the same split
        in kind (its bilinear weights are in ``BiLinear``).
        """
        counts = {"linear": sum(p.numel() for p in self.head.parameters()), "bilinear": 0}
        for block in self.blocks:
            part = block.parameter_counts()
            counts["linear"] += part["linear"]
            counts["bilinear"] += part["bilinear"]
        counts["total"] = counts["linear"] + counts["bilinear"]
        return counts

    def extra_repr(self) -> str:
        c = self.parameter_counts()
        return (f"{self.rep_in!r} -> {self.rep_out!r}, hidden={self.hidden!r} (size {self.hidden.size}), "
                f"num_blocks={len(self.blocks)}, parameters: linear={c['linear']}, bilinear={c['bilinear']}")
