r"""Geometric-algebra attention over tuples of points (Spellings, "Geometric algebra attention networks
for small point clouds", 2021).

For every tuple ``(i, j, k, ...)`` of ``rank`` items the layers form the geometric products of
their vectors in G(3) and read rotation invariants off them
([`geomlin.clifford.tuple_products`][]). ``invariant_mode="single"`` uses the full product only,
``"partial"`` also the partial products ``p_i, p_ij, ...``, ``"full"`` the products of every
contiguous sub-tuple; ``include_normalized_products`` appends each product divided by its norm. A
user-supplied ``value_net`` maps the invariants to values, which are joined with the merged item
values ``v``; a ``score_net`` turns them into attention logits; a softmax over the tuples (all of
them with ``reduce=True``, the tuples starting at each item with ``reduce=False``) weights the sum
([`GAAttention`][]): with ``reduce=True``, for the tuples $t$ of a cloud,

$$h_t = \mathrm{join}\big(\mathrm{value\_net}(I_t),\ \mathrm{merge}(v_{t_1}, \dots, v_{t_R})\big), \qquad
y = \sum_t \frac{\exp \mathrm{score\_net}(h_t)}{\sum_{t'} \exp \mathrm{score\_net}(h_{t'})}\, h_t,$$

with $I_t$ the invariants of tuple $t$ and $R$ the rank. [`GAVectorAttention`][] sums rotation-covariant vectors instead (the vector
parts and bivector duals of the products, scaled by ``scale_net``), and
[`GAMultivectorAttention`][] works on G(3) multivectors ``(..., N, 8)``.

The networks are the user's, as in the reference package ``geometric_algebra_attention``; the
constructor arguments (its ``n_dim`` is ``channels`` here) and the parameter names
(``merge_kernels``, ``join_kernels``, ``vector_kernels``) follow it, so its PyTorch models port by
renaming the class, and a reference layer's ``state_dict`` loads into the geomlin layer
(``tests/clifford/test_ga_attention.py`` checks them against each other).

**Chirality.** The trivector ``det[a b c]`` (odd ranks >= 3) and the bivector duals ``a x b``
(even ranks) change sign under reflections, so by default the layers are invariant (covariant)
under rotations only, SO(3). ``parity_invariant=True`` uses ``|det|`` and drops the
pseudovector covariants, making the layer O(3)-invariant (covariant). Each layer declares the
group it honours (``type_in`` / ``type_out``).

**Cost.** A layer over ``N`` items forms ``N^rank`` products (memory too): rank 3 on 1,000
points is 10^9 tuples. For larger clouds restrict the tuples to neighbourhoods
([`neighborhoods`][geomlin.clifford.neighbor_search.neighborhoods]):
``forward(r, v, neighbors=neighborhoods(pos, k=16))`` keeps the tuples ``(i, j, k, ...)`` whose
later members are neighbours of ``i``, ``O(N k^(rank - 1))``; with ``k = N`` (and
``include_self``) it is the layer over all tuples.

Shapes: ``r (..., N, 3)`` (multivectors ``(..., N, 8)``), values ``v (..., N, channels)``,
``mask (..., N)`` bool (True = keep); outputs ``(..., channels)`` / ``(..., 3)`` / ``(..., 8)``
with ``reduce=True``, ``(..., N, ...)`` otherwise.

**Empty tuple sets.** Tuples with a masked member (``mask``, or a neighbour slot outside the
radius in ``neighbors.mask``) get zero weight. Where *every* tuple of a softmax is masked (a fully
masked cloud with ``reduce=True``; with ``reduce=False`` a masked item, or an item with no
neighbour in the radius) the output there is **zero**: the layer never attends to padding. ``r``
and ``v`` must be finite (``ValueError``, deferred on accelerators), and a tuple count whose
largest tensor would exceed [`geomlin.validation.MEMORY_LIMIT_BYTES`][]
is refused up front. An empty batch (``r`` of shape ``(0, N, 3)``) gives an empty output
(``(0, channels)``, ...); a cloud of no items is refused. A ``value_net``, ``score_net`` or
``scale_net`` that cannot take its input or returns another width than documented raises a
``ValueError`` naming the network, its input shape and the widths expected.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor, nn

from geomlin.clifford.neighbor_search import Neighborhoods
from geomlin.clifford.tuple_products import (
    G3,
    INVARIANT_MODES,
    embed_vectors,
    ga_tables,
    invariant_count,
    multivector_invariants,
    product_covariant,
    product_invariants,
    tuple_products,
)
from geomlin.groups import SO, O
from geomlin.reps.types import Multivectors, Scalars, Vectors
from geomlin.validation import (
    check_choice,
    check_finite,
    check_index,
    check_mask,
    check_memory,
    check_positive_int,
    check_tensor,
)

#: How the item values of a tuple are merged (``"concat"``: one learned matrix per tuple slot).
MERGE_FUNS = ("mean", "concat")
#: How invariant values and merged values are joined (``"concat"``: one learned matrix each).
JOIN_FUNS = ("mean", "concat")
#: Products are divided by ``max(|p|, NORMALIZATION_FLOOR)`` for ``include_normalized_products``.
NORMALIZATION_FLOOR = 1e-7


def _check_net(net, name: str, optional: bool = False):
    if net is None and optional:
        return None
    if not callable(net):
        raise TypeError(f"{name} must be a callable (an nn.Module mapping (..., d_in) -> (..., d_out)), "
                        f"got {type(net).__name__}")
    return net


class _GAAttentionBase(nn.Module):
    """Shared machinery of the geometric-algebra attention layers (not public)."""

    _multivector = False
    _item_dim = 3

    def __init__(self, channels: int, score_net: Callable, value_net: Callable, rank: int,
                 invariant_mode: str, reduce: bool, merge_fun: str, join_fun: str,
                 include_normalized_products: bool, parity_invariant: bool):
        super().__init__()
        self.channels = check_positive_int(channels, "channels")
        self.score_net = _check_net(score_net, "score_net")
        self.value_net = _check_net(value_net, "value_net")
        self.rank = check_positive_int(rank, "rank")
        self.invariant_mode = check_choice(invariant_mode, "invariant_mode", INVARIANT_MODES)
        self.merge_fun = check_choice(merge_fun, "merge_fun", MERGE_FUNS)
        self.join_fun = check_choice(join_fun, "join_fun", JOIN_FUNS)
        for name, flag in (("reduce", reduce), ("include_normalized_products", include_normalized_products),
                           ("parity_invariant", parity_invariant)):
            if not isinstance(flag, bool):
                raise TypeError(f"{name} must be a bool, got {flag!r}")
        self.reduce = reduce
        self.include_normalized_products = include_normalized_products
        self.parity_invariant = parity_invariant
        self.tables = ga_tables()
        if merge_fun == "concat":
            std = math.sqrt(2.0 / self.rank / channels)
            self.merge_kernels = nn.ParameterList(
                [nn.Parameter(torch.randn(channels, channels) * std) for _ in range(self.rank)])
        if join_fun == "concat":
            std = math.sqrt(1.0 / channels)
            self.join_kernels = nn.ParameterList([nn.Parameter(torch.randn(channels, channels) * std) for _ in range(2)])

    @property
    def invariant_dims(self) -> int:
        """Width of the invariants fed to ``value_net``."""
        return invariant_count(self.rank, self.invariant_mode, self.include_normalized_products, self._multivector)

    # -- groups -----------------------------------------------------------------------------
    def _uses_pseudoscalars(self) -> bool:
        """True when some invariant changes sign under reflections."""
        if self.parity_invariant:
            return False
        if self._multivector:
            return True
        ranks = {"single": [self.rank], "partial": range(1, self.rank + 1), "full": range(1, self.rank + 1)}
        return any(m >= 3 and m % 2 for m in ranks[self.invariant_mode])

    def _group(self, pseudo: bool):
        return SO(3) if pseudo else O(3)

    # -- validation -------------------------------------------------------------------------
    def _check_inputs(self, r: Tensor, v: Tensor, mask, neighbors) -> Neighborhoods | None:
        """Validate the inputs; returns ``neighbors`` with its index checked (clamped on accelerators)."""
        name = type(self).__name__
        what = "G(3) multivectors" if self._multivector else "vectors"
        check_tensor(r, f"{name}: r", shape=(..., None, self._item_dim), what=f"(..., N, {self._item_dim}) {what}")
        check_tensor(v, f"{name}: v", shape=(*r.shape[:-1], self.channels), what="(..., N, channels) values")
        if r.shape[-2] == 0:
            raise ValueError(f"{name}: r has no items (shape {tuple(r.shape)})")
        check_finite(r, f"{name}: r")
        check_finite(v, f"{name}: v")
        if mask is not None:
            check_mask(mask, f"{name}: mask", shape=r.shape[:-1])
        self._check_memory(r, neighbors)
        if neighbors is not None:
            if not isinstance(neighbors, Neighborhoods):
                raise TypeError(f"{name}: neighbors must be a Neighborhoods (from neighborhoods()), "
                                f"got {type(neighbors).__name__}")
            check_tensor(neighbors.index, f"{name}: neighbors.index", shape=(*r.shape[:-1], None), dtype="index")
            check_mask(neighbors.mask, f"{name}: neighbors.mask", shape=neighbors.index.shape)
            # clamped on accelerators (the range check is deferred there), so the gathers stay in bounds
            return Neighborhoods(check_index(neighbors.index, f"{name}: neighbors.index", r.shape[-2]), neighbors.mask)
        return None

    def _check_memory(self, r: Tensor, neighbors) -> None:
        """Refuse a tuple count whose largest tensor would exceed [`MEMORY_LIMIT_BYTES`][geomlin.validation.MEMORY_LIMIT_BYTES]."""
        n = r.shape[-2]
        lead = math.prod(r.shape[:-2])
        if isinstance(neighbors, Neighborhoods) and neighbors.index.ndim >= 1:
            tuples, how = n * neighbors.index.shape[-1] ** (self.rank - 1), "N K^(rank-1)"
        else:
            tuples, how = n ** self.rank, "N^rank"
        width = max(8, self.channels, self.invariant_dims)
        check_memory(lead * tuples * width * r.element_size(),
                     f"{type(self).__name__}(rank={self.rank}) on {n} items ({how} = {tuples:,} tuples per cloud, "
                     f"{width} values each)",
                     "use a smaller rank or restrict the tuples with neighbors=neighborhoods(pos, k=...)")

    # -- the computation --------------------------------------------------------------------
    def _slots(self, x: Tensor, neighbors: Neighborhoods | None) -> list[Tensor]:
        """Per tuple slot, ``x (..., N, C)`` broadcast to ``(..., T_0, ..., T_{rank-1}, C)``."""
        R = self.rank
        out = []
        if neighbors is None:
            for s in range(R):
                shape = [1] * R
                shape[s] = x.shape[-2]
                out.append(x.reshape(*x.shape[:-2], *shape, x.shape[-1]))
            return out
        gathered = neighbors.gather(x)  # (..., N, K, C)
        for s in range(R):
            if s == 0:
                out.append(x.reshape(*x.shape[:-2], x.shape[-2], *([1] * (R - 1)), x.shape[-1]))
            else:
                shape = [1] * (R - 1)
                shape[s - 1] = gathered.shape[-2]
                out.append(gathered.reshape(*x.shape[:-2], x.shape[-2], *shape, x.shape[-1]))
        return out

    def _tuple_mask(self, mask: Tensor | None, neighbors: Neighborhoods | None) -> Tensor | None:
        """``(..., T_0, ..., T_{rank-1})`` bool: True where every member of the tuple is kept."""
        if mask is None and neighbors is None:
            return None
        R = self.rank
        parts = []
        if mask is not None:
            parts += [m[..., 0] for m in self._slots(mask[..., None], neighbors)]
        if neighbors is not None and R > 1:
            for s in range(1, R):
                shape = [1] * (R - 1)
                shape[s - 1] = neighbors.mask.shape[-1]
                parts.append(neighbors.mask.reshape(*neighbors.mask.shape[:-1], *shape))
        out = parts[0]
        for p in parts[1:]:
            out = out & p
        return out

    def _products(self, r: Tensor, neighbors) -> dict[str, list[tuple[int, Tensor]]]:
        items = r if self._multivector else embed_vectors(r)
        return tuple_products(self._slots(items, neighbors), vectors=not self._multivector, tables=self.tables)

    def _invariants(self, products: list[tuple[int, Tensor]]) -> list[Tensor]:
        if self._multivector:
            return [multivector_invariants(p, self.parity_invariant) for _, p in products]
        return [product_invariants(p, m, self.parity_invariant) for m, p in products]

    def _with_normalized(self, items: list[Tensor], products: list[tuple[int, Tensor]]) -> list[Tensor]:
        """``items`` followed by the same items divided by their product's norm (reference order)."""
        if not self.include_normalized_products:
            return items
        scales = [1.0 / torch.linalg.vector_norm(p, dim=-1, keepdim=True).clamp_min(NORMALIZATION_FLOOR)
                  for _, p in products]
        return items + [x * s for x, s in zip(items, scales)]

    def _joined(self, r: Tensor, v: Tensor, neighbors) -> tuple[Tensor, dict]:
        products = self._products(r, neighbors)
        chosen = products[self.invariant_mode]
        invariants = self._with_normalized(self._invariants(chosen), chosen)
        shape = torch.broadcast_shapes(*(x.shape[:-1] for x in invariants))
        invariants = torch.cat([x.expand(*shape, x.shape[-1]) for x in invariants], -1)
        invariant_values = self._run_net("value_net", invariants, "the invariants", (self.channels,))
        slots = self._slots(v, neighbors)
        if self.merge_fun == "mean":
            merged = sum(slots) / float(self.rank)
        else:
            merged = sum(torch.tensordot(x, k.to(x.dtype), 1) for x, k in zip(slots, self.merge_kernels))
        if self.join_fun == "mean":
            joined = (invariant_values + merged) / 2.0
        else:
            joined = sum(torch.tensordot(x, k.to(x.dtype), 1)
                         for x, k in zip((invariant_values, merged), self.join_kernels))
        return joined, products

    def _run_net(self, name: str, x: Tensor, meaning: str, widths: tuple[int, ...]) -> Tensor:
        """``self.<name>(x)`` for a user network; a network that does not fit gets a one-line ValueError
        naming it, its input and the widths it must return (checked in eager mode, where the
        shapes are the model's own; under ``torch.compile`` the network is called as it is)."""
        net = getattr(self, name)
        layer = type(self).__name__
        if torch.compiler.is_compiling():
            return net(x)
        try:
            out = net(x)
        except RuntimeError as exc:
            raise ValueError(f"{layer}: {name} cannot take {meaning}, shape {tuple(x.shape)} (last dimension "
                             f"{x.shape[-1]}): {str(exc).splitlines()[0]}") from exc
        if not isinstance(out, Tensor) or out.shape[:-1] != x.shape[:-1] or out.shape[-1] not in widths:
            got = f"shape {tuple(out.shape)}" if isinstance(out, Tensor) else type(out).__name__
            raise ValueError(f"{layer}: {name} must map {meaning} (..., {x.shape[-1]}) to "
                             f"(..., {' or '.join(map(str, widths))}) with the same leading shape "
                             f"{tuple(x.shape[:-1])}, got {got}")
        return out

    def _attend(self, joined: Tensor, values: Tensor, mask: Tensor | None, neighbors, item_mask) -> Tensor:
        # per-channel logits weigh the channels of invariant values; covariant values take one logit
        widths = (1, self.channels) if values is joined else (1,)
        scores = self._run_net("score_net", joined, "the joined values", widths)  # (..., T_0, ..., T_{R-1}, h)
        tuple_mask = self._tuple_mask(item_mask, neighbors)
        if tuple_mask is not None:
            scores = scores.masked_fill(~tuple_mask[..., None], torch.finfo(scores.dtype).min)
        R = self.rank
        keep = R + 1 if self.reduce else R  # trailing axes the softmax runs over
        # flatten, not reshape(*lead, -1): an empty batch (0 clouds) keeps its shape
        attention = torch.softmax(scores.flatten(scores.ndim - keep), -1).reshape(scores.shape)
        axes = tuple(range(-R - 1, -1)) if self.reduce else tuple(range(-R, -1))
        weighted = attention * values
        if tuple_mask is not None:
            # A softmax over only masked tuples (a fully masked cloud, an item with no neighbour in
            # the radius) is uniform over them; their weights are zeroed, so the output is zero.
            weighted = torch.where(tuple_mask[..., None], weighted, torch.zeros((), dtype=weighted.dtype,
                                                                                 device=weighted.device))
        out = weighted.sum(axes) if axes else weighted
        if not self.reduce and item_mask is not None:
            out = out * item_mask[..., None].to(out.dtype)
        return out

    def example_inputs(self, generator: torch.Generator | None = None, dtype: torch.dtype = torch.float64):
        """``(r (2, 5, d), v (2, 5, channels))``: two clouds of five items."""
        r = torch.randn(2, 5, self._item_dim, generator=generator, dtype=dtype)
        v = torch.randn(2, 5, self.channels, generator=generator, dtype=dtype)
        return (r, v), {}


class GAAttention(_GAAttentionBase):
    """Invariant geometric-algebra attention (the reference package's ``VectorAttention``).

    ``forward(r (..., N, 3), v (..., N, channels), mask=None, neighbors=None)`` ->
    ``(..., channels)`` (``reduce=True``) or ``(..., N, channels)``.

    Parameters
    ----------
    channels : int
        width of the item values ``v`` and of the output.
    score_net : Callable
        ``(..., channels) -> (..., 1)`` attention logits.
    value_net : Callable
        ``(..., invariant_dims) -> (..., channels)``; see ``invariant_dims``.
    rank : int
        tuple size (1, 2, 3, ...); cost ``O(N^rank)``.
    invariant_mode : str
        ``"single"``, ``"partial"`` or ``"full"`` (module docstring).
    reduce : bool
        sum over all tuples (permutation invariant) or over the tuples starting at each item
        (permutation equivariant).
    merge_fun, join_fun : str
        ``"mean"`` or ``"concat"`` (learned ``channels x channels`` matrices).
    parity_invariant : bool
        ``|det|`` instead of ``det`` for odd ranks >= 3: O(3)- instead of
        SO(3)-invariant (ranks <= 2 are O(3)-invariant anyway).
    include_normalized_products : bool
        also feed the invariants of the normalised products.
    """

    def __init__(self, channels: int, score_net: Callable, value_net: Callable, rank: int = 2,
                 invariant_mode: str = "single", reduce: bool = True, merge_fun: str = "mean",
                 join_fun: str = "mean", parity_invariant: bool = False,
                 include_normalized_products: bool = False):
        super().__init__(channels, score_net, value_net, rank, invariant_mode, reduce, merge_fun, join_fun,
                         include_normalized_products, parity_invariant)
        group = self._group(self._uses_pseudoscalars())
        self.type_in = (Vectors(3, group=group), Scalars(channels))
        self.type_out = Scalars(channels)

    def forward(self, r: Tensor, v: Tensor, mask: Tensor | None = None,
                neighbors: Neighborhoods | None = None) -> Tensor:
        """See the class docstring."""
        neighbors = self._check_inputs(r, v, mask, neighbors)
        joined, _ = self._joined(r, v, neighbors)
        return self._attend(joined, joined, mask, neighbors, mask)


class _CovariantMixin:
    """Learned combination of the covariant products (``vector_kernels``), shared by the
    vector- and multivector-valued layers."""

    def _init_covariants(self, covariant_mode: str, convex_covariants: bool):
        self.covariant_mode = check_choice(covariant_mode, "covariant_mode", INVARIANT_MODES)
        if not isinstance(convex_covariants, bool):
            raise TypeError(f"convex_covariants must be a bool, got {convex_covariants!r}")
        self.convex_covariants = convex_covariants
        ranks = self._covariant_ranks()
        if not ranks:
            raise ValueError(f"parity_invariant=True keeps only true vectors (odd-rank products), and "
                             f"covariant_mode={covariant_mode!r} at rank {self.rank} has none; use "
                             "covariant_mode='partial' or 'full', or an odd rank")
        count = len(ranks) * (2 if self.include_normalized_products else 1)
        self.input_vector_count = count
        if count > 1:
            self.vector_kernels = nn.Parameter(torch.randn(count) * 0.05)

    def _all_covariant_ranks(self) -> list[int]:
        return {"single": [self.rank], "partial": list(range(self.rank, 0, -1)),
                "full": [m for s in range(self.rank) for m in range(self.rank - s, 0, -1)]}[self.covariant_mode]

    def _covariant_ranks(self) -> list[int]:
        ranks = self._all_covariant_ranks()
        if self.parity_invariant and not self._multivector:
            ranks = [m for m in ranks if m % 2]
        return ranks

    def _combined_covariants(self, products: dict) -> Tensor:
        chosen = products[self.covariant_mode]
        if self.parity_invariant and not self._multivector:
            chosen = [(m, p) for m, p in chosen if m % 2]
        covs = [p if self._multivector else product_covariant(p, m) for m, p in chosen]
        covs = self._with_normalized(covs, chosen)
        if self.input_vector_count == 1:
            return covs[0]
        weights = self.vector_kernels
        if self.convex_covariants:
            weights = torch.softmax(torch.cat([weights, weights.new_zeros(1)]), -1)
        return sum(c * weights[i].to(c.dtype) for i, c in enumerate(covs))


class GAVectorAttention(_CovariantMixin, _GAAttentionBase):
    """Rotation-covariant vector attention (the reference package's ``Vector2VectorAttention``).

    ``forward(r (..., N, 3), v (..., N, channels), mask=None, neighbors=None)`` -> ``(..., 3)``
    (``reduce=True``) or ``(..., N, 3)``: the attention-weighted sum of
    ``scale_net(joined) * sum_n alpha_n vector(p_n)`` over the products ``p_n`` chosen by
    ``covariant_mode`` (vector parts of odd-rank products, bivector duals of even-rank ones).
    ``scale_net``: ``(..., channels) -> (..., 1)``; ``convex_covariants`` makes ``alpha`` a softmax
    that includes the origin. Other parameters as in [`GAAttention`][]; ``parity_invariant``
    also drops the pseudovector (even-rank) covariants, making the layer O(3)-covariant.
    """

    def __init__(self, channels: int, score_net: Callable, value_net: Callable, scale_net: Callable,
                 rank: int = 2, invariant_mode: str = "single", covariant_mode: str = "partial",
                 reduce: bool = True, merge_fun: str = "mean", join_fun: str = "mean",
                 parity_invariant: bool = False, include_normalized_products: bool = False,
                 convex_covariants: bool = False):
        super().__init__(channels, score_net, value_net, rank, invariant_mode, reduce, merge_fun, join_fun,
                         include_normalized_products, parity_invariant)
        self.scale_net = _check_net(scale_net, "scale_net")
        self._init_covariants(covariant_mode, convex_covariants)
        pseudo = self._uses_pseudoscalars() or any(m % 2 == 0 for m in self._covariant_ranks())
        group = self._group(pseudo)
        self.type_in = (Vectors(3, group=group), Scalars(channels))
        self.type_out = Vectors(3, group=group)

    def forward(self, r: Tensor, v: Tensor, mask: Tensor | None = None,
                neighbors: Neighborhoods | None = None) -> Tensor:
        """See the class docstring."""
        neighbors = self._check_inputs(r, v, mask, neighbors)
        joined, products = self._joined(r, v, neighbors)
        values = self._combined_covariants(products) * self._run_net("scale_net", joined, "the joined values", (1,))
        return self._attend(joined, values, mask, neighbors, mask)


class GAMultivectorAttention(_CovariantMixin, _GAAttentionBase):
    """Attention over products of G(3) multivectors ``r (..., N, 8)`` (the reference package's
    ``MultivectorAttention`` and, with ``scale_net``, ``Multivector2MultivectorAttention``).

    Invariants of each product: ``(scalar, |vector|, |bivector|, trivector)``. Without
    ``scale_net`` the output is invariant, ``(..., channels)``; with it, the attention-weighted sum
    of ``scale_net(joined) * sum_n alpha_n p_n``, a multivector ``(..., 8)`` covariant under the
    twisted adjoint action (``(..., N, ...)`` with ``reduce=False``). The trivector makes it
    SO(3)-only unless ``parity_invariant``. Multivectors use the basis
    ``(1, e1, e2, e3, e12, e13, e23, e123)``.
    """

    _multivector = True
    _item_dim = 8

    def __init__(self, channels: int, score_net: Callable, value_net: Callable, scale_net: Callable | None = None,
                 rank: int = 2, invariant_mode: str = "single", covariant_mode: str = "partial",
                 reduce: bool = True, merge_fun: str = "mean", join_fun: str = "mean",
                 parity_invariant: bool = False, include_normalized_products: bool = False,
                 convex_covariants: bool = False):
        super().__init__(channels, score_net, value_net, rank, invariant_mode, reduce, merge_fun, join_fun,
                         include_normalized_products, parity_invariant)
        self.scale_net = _check_net(scale_net, "scale_net", optional=True)
        group = self._group(self._uses_pseudoscalars())
        mv = Multivectors(G3, group=group)  # (..., items, 8): no channel axis
        self.type_in = (mv, Scalars(channels))
        if self.scale_net is None:
            self.type_out = Scalars(channels)
        else:
            self._init_covariants(covariant_mode, convex_covariants)
            self.type_out = mv

    def forward(self, r: Tensor, v: Tensor, mask: Tensor | None = None,
                neighbors: Neighborhoods | None = None) -> Tensor:
        """See the class docstring."""
        neighbors = self._check_inputs(r, v, mask, neighbors)
        joined, products = self._joined(r, v, neighbors)
        if self.scale_net is None:
            return self._attend(joined, joined, mask, neighbors, mask)
        values = self._combined_covariants(products) * self._run_net("scale_net", joined, "the joined values", (1,))
        return self._attend(joined, values, mask, neighbors, mask)
