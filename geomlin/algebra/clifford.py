"""Clifford (geometric) algebras of any signature, with sparse Cayley-table products.

An algebra is given by the squares of its basis vectors, ``metric = (m_0, ..., m_{n-1})``
with ``m_i`` in ``{1, -1, 0}`` (``(0, 1, 1, 1)`` is projective G(3,0,1), ``(1, -1, -1, -1)``
spacetime, ``(1, 1, 1)`` Euclidean G(3)). Multivectors are plain tensors of shape
``(..., 2**n)`` in the *grade-lexicographic* basis order of [`geomlin.algebra.blades`][]
(for ``n = 4``: ``[1, e0, e1, e2, e3, e01, ..., e123, e0123]``, the order of the reference GATr
implementation), whose tables (Cayley tables from the blade product rule, signs, complements)
this algebra reads.

Products have two implementations:

* ``method="dense"``: ``einsum("...i,...j,ijk->...k")`` with the full ``(d, d, d)`` table;
  it is the test oracle.
* ``method="sparse"``: only the ``nnz`` non-zero ``(i, j)`` pairs of the table are formed,
  ``((a @ S_a) * (b @ S_b)) @ R`` with signed selection matrices ``S_a, S_b (d, nnz)`` and
  the scatter matrix ``R (nnz, d)``. The outer and regressive products of a 4D algebra have
  ``nnz = 81`` of ``256`` pairs, a degenerate geometric product ``192``.

``method="auto"`` picks ``sparse`` when at most half the pairs are non-zero, else ``dense``.
[`geomlin.algebra.pga`][] adds a faster G(3,0,1) geometric product.

Subspaces. Besides the ``n + 1`` grades, the algebra splits into the four subspaces of
*quaternion type* (Filimoshina and Shirokov, GLGENN, ICML 2025, Sec. 3): type ``t`` holds the
grades ``k = t (mod 4)``, the subspace on which (grade involution, reversion) act as
``(+, +)``, ``(-, +)``, ``(+, -)``, ``(-, -)`` for ``t = 0, 1, 2, 3``. Every orthogonal
transformation of the quadratic form preserves each grade, hence each type.

Group actions. [`CliffordAlgebra.act`][] applies one element of a group acting on
multivectors: a versor ``v (dim,)`` by the twisted sandwich ``v x^ v^-1``, or an ``(n, n)``
matrix ``A`` that preserves the quadratic form (``A^T diag(metric) A = diag(metric)``) by its
outermorphism ``e_{i1} ^ ... ^ e_{ik} -> A e_{i1} ^ ... ^ A e_{ik}``, an algebra automorphism
([`CliffordAlgebra.outermorphism`][]). For degenerate metrics the matrices include maps no
versor realises, e.g. the similarities ``p -> lambda R p + t`` of G(3,0,1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from geomlin.algebra import blades
from geomlin.algebra.blades import NUM_QUATERNION_TYPES, PRODUCTS
from geomlin.linalg import scaling_and_squaring
from geomlin.precision import at_least_float32, full_precision
from geomlin.tables import ConstantTables, device_cache, table_on
from geomlin.validation import (
    check_broadcastable,
    check_choice,
    check_condition,
    check_finite,
    check_int,
    check_positive_int,
    check_same_device,
    check_tensor,
    defers,
    tolerance,
)

#: Largest supported number of basis vectors (dense tables are ``4**n * 2**n`` entries).
MAX_DIM = 8
METHODS = ("auto", "sparse", "dense")
#: ``sparse`` is preferred by ``auto`` when this fraction of (i, j) pairs or fewer is non-zero.
SPARSE_DENSITY = 0.5
#: Ways to group the components of a multivector into subspaces that share weights.
SUBSPACES = ("grade", "quaternion")
#: A versor ``v`` is refused as non-invertible when ``|<v ~v>_0| <= ZERO_VERSOR_EPS * eps(dtype) * |v|^2``.
ZERO_VERSOR_EPS = 16.0


def quaternion_type(grade: int) -> int:
    """The quaternion type ``grade mod 4`` of a grade (GLGENN, Sec. 3)."""
    return check_int(grade, "grade", minimum=0) % NUM_QUATERNION_TYPES


def _as_metric(metric) -> tuple[float, ...]:
    if isinstance(metric, Tensor):
        metric = metric.tolist()
    if not isinstance(metric, Sequence) or isinstance(metric, str):
        raise TypeError(f"metric must be a sequence of basis-vector squares such as (0, 1, 1, 1), "
                        f"got {type(metric).__name__}")
    out = tuple(float(m) for m in metric)
    if not 1 <= len(out) <= MAX_DIM:
        raise ValueError(f"metric must have between 1 and {MAX_DIM} entries, got {len(out)}")
    if any(m not in (-1.0, 0.0, 1.0) for m in out):
        raise ValueError(f"metric entries must be 1, -1 or 0 (squares of an orthonormal basis), got {out}")
    return out


def _safe_sqrt(q: Tensor) -> Tensor:
    """``sqrt(q)`` for ``q >= 0`` with gradient 0 (instead of inf * 0 = NaN) at ``q = 0``."""
    positive = q > 0
    return torch.where(positive, torch.where(positive, q, torch.ones_like(q)).sqrt(), torch.zeros_like(q))


class CliffordAlgebra:
    """The Clifford algebra with basis-vector squares ``metric``.

    Parameters
    ----------
    metric : Sequence[float]
        sequence of ``n`` numbers in ``{1, -1, 0}``, ``1 <= n <= 8``.
    first_index : int
        label of the first basis vector in ``blade_names`` (``e0`` or ``e1``);
        naming only.

    Attributes
    ----------
    n : int
        number of basis vectors; ``dim = 2**n`` components per multivector.
    blades : tuple of tuple of int
        index tuples of the basis blades in storage order.
    grades : Tensor of shape (dim,)
        long, the grade of each component.
    grade_slices : tuple of slice
        ``slice`` of the components of each grade ``0..n``.
    quaternion_types : Tensor of shape (dim,)
        long, the quaternion type ``grade mod 4`` of each component.

    Notes
    -----
    All methods take multivectors ``(..., dim)`` of a floating dtype and broadcast their
    leading dimensions.

    Tables on devices. Methods that read constant tables (products, involutions, norms) take
    ``tables=``: a [`ConstantTables`][geomlin.tables.ConstantTables] from [`tables`][] held by the calling module (its
    buffers move with ``module.to(device)``). Without it they read a per-(device, dtype) cache,
    filled on the first call for each device and dtype (one upload). No method synchronises with
    the device.
    """

    def __init__(self, metric: Sequence[float], first_index: int = 1):
        self.metric = _as_metric(metric)
        self.n = len(self.metric)
        self.dim = 2 ** self.n
        self.blades, self.bitmaps = blades.basis(self.n)
        self.first_index = check_int(first_index, "first_index", minimum=0)
        self.blade_names = tuple("1" if not b else "e" + "".join(str(i + self.first_index) for i in b)
                                 for b in self.blades)
        # copies: the cached table must not be reachable (and mutable) through an instance
        self.grades = blades.component_tables(self.metric)["grade"].clone()
        self.quaternion_types = self.grades % NUM_QUATERNION_TYPES
        counts = [math.comb(self.n, g) for g in range(self.n + 1)]
        starts = [sum(counts[:g]) for g in range(self.n + 1)]
        self.grade_slices = tuple(slice(s, s + c) for s, c in zip(starts, counts))

    def __repr__(self) -> str:
        return f"CliffordAlgebra(metric={self.metric})"

    def __eq__(self, other) -> bool:
        return isinstance(other, CliffordAlgebra) and other.metric == self.metric

    def __hash__(self) -> int:
        return hash(self.metric)

    @property
    def degenerate(self) -> bool:
        """True when some basis vector squares to zero."""
        return 0.0 in self.metric

    @property
    def signature(self) -> tuple[int, int, int]:
        """``(p, q, r)``: the numbers of basis vectors squaring to ``+1``, ``-1`` and ``0``."""
        return self.metric.count(1.0), self.metric.count(-1.0), self.metric.count(0.0)

    # ------------------------------------------------------------------ subspaces
    def quaternion_type_dims(self) -> tuple[int, int, int, int]:
        """Dimensions of the four subspaces of quaternion type (sums of ``C(n, k)`` over ``k = t mod 4``)."""
        return tuple(sum(math.comb(self.n, k) for k in range(t, self.n + 1, NUM_QUATERNION_TYPES))
                     for t in range(NUM_QUATERNION_TYPES))

    def quaternion_projection(self, x: Tensor, types: int | Sequence[int]) -> Tensor:
        """Keep only the components of the given quaternion type(s) ``0..3``; ``(..., dim) -> (..., dim)``."""
        self.check(x)
        types = list(types) if isinstance(types, (list, tuple, range, Tensor)) else [types]
        for t in types:
            check_int(t, "quaternion type", minimum=0, maximum=NUM_QUATERNION_TYPES - 1)
        keep = torch.zeros(self.dim, dtype=x.dtype, device=x.device)
        for g, sl in enumerate(self.grade_slices):
            if g % NUM_QUATERNION_TYPES in types:
                keep[sl] = 1.0
        return x * keep

    def num_subspaces(self, subspaces: str = "grade") -> int:
        """``n + 1`` grades, or the 4 quaternion types (fewer when ``n < 3``)."""
        check_choice(subspaces, "subspaces", SUBSPACES)
        return self.n + 1 if subspaces == "grade" else min(self.n + 1, NUM_QUATERNION_TYPES)

    def subspace_index(self, subspaces: str = "grade") -> Tensor:
        """``(dim,)`` long: the subspace (grade, or quaternion type) of each component.

        Layers that share one weight per subspace expand their ``(..., num_subspaces)`` weights to
        ``(..., dim)`` with this index.
        """
        check_choice(subspaces, "subspaces", SUBSPACES)
        return (self.grades if subspaces == "grade" else self.quaternion_types).clone()

    def product_paths(self, kind: str = "geometric", subspaces: str = "grade") -> Tensor:
        """``(S, S, S)`` bool: True where some component of subspace ``a`` times one of ``b`` has a
        non-zero part in subspace ``c`` (``S = num_subspaces``). ``.sum()`` is the number of paths:
        56 / 84 / 165 grade paths and 32 quaternion-type paths for Euclidean ``n = 5 / 6 / 8``."""
        self._check_kind(kind)
        check_choice(subspaces, "subspaces", SUBSPACES)
        return blades.product_paths(self.metric, kind, subspaces).clone()

    # ------------------------------------------------------------------ tables
    def table(self, kind: str = "geometric") -> Tensor:
        """The dense float64 product table ``(dim, dim, dim)``: ``(a b)_k = sum_ij a_i b_j T_ijk`` (a copy)."""
        self._check_kind(kind)
        return blades.product_table(self.metric, kind).clone()

    def nnz(self, kind: str = "geometric") -> int:
        """Number of non-zero ``(i, j)`` pairs of a product table."""
        kind = self._check_kind(kind)
        # through the dictionary cache: a compiled forward (``method="auto"`` asks) reads the count as a
        # constant instead of tracing the table's ``nonzero``
        return device_cache(("clifford:nnz", self.metric, kind), lambda: blades.sparse_product(self.metric, kind)[0].shape[1])

    def _check_kind(self, kind: str) -> str:
        if kind not in PRODUCTS:
            raise ValueError(f"unknown product {kind!r}; expected one of {PRODUCTS}")
        return kind

    def tables(self, *keys: str) -> ConstantTables:
        """The tables that methods called with ``tables=`` read, as buffers of a module.

        ``keys``: product kinds ([`PRODUCTS`][]: the table ``method="auto"`` uses;
        ``"sparse:" + kind`` or ``"dense:" + kind`` for the other one) and per-component tables
        (``"square"``, ``"quadratic_form"``, ``"complement"``, ``"uncomplement"``). Which method
        reads which: [`product`][] and its named forms the product kind; [`scalar_product`][]
        ``"square"``; [`norm_squared`][], [`norm`][], [`grade_quadratic_forms`][],
        [`grade_norms`][], [`inverse_versor`][] ``"quadratic_form"``; [`complement`][] /
        [`uncomplement`][] theirs. The involutions ([`reverse`][], ...) and [`parity`][]
        read no table (grades are contiguous slices).
        """
        return ConstantTables(self.table_entries(*keys))

    def table_entries(self, *keys: str) -> dict[str, Tensor | tuple[Tensor, ...]]:
        """``{key a method reads: float64 / long CPU table}`` of the requested [`tables`][] keys, for
        a module that gathers tables of several sources into one [`ConstantTables`][geomlin.tables.ConstantTables]."""
        return {self._table_key(key): self._table_parts(self._table_key(key)) for key in keys}

    def _table_key(self, key: str) -> str:
        """The key a method reads for a requested table (a product kind: the one ``method="auto"`` uses)."""
        if key.startswith("dense:"):
            return self._check_kind(key[len("dense:"):])
        return self._product_key(key, "auto") if key in PRODUCTS else key

    def _table_parts(self, key: str) -> Tensor | tuple[Tensor, ...]:
        """The float64 CPU table (or sparse triple) of a key ``_tab`` reads."""
        if key.startswith("sparse:"):
            self._check_kind(key[len("sparse:"):])
            return blades.table_parts(self.metric, key)
        if key not in PRODUCTS and key not in blades.component_tables(self.metric):
            raise ValueError(f"unknown table {key!r}; expected a product kind {PRODUCTS}, 'sparse:' + kind, "
                             f"or one of {sorted(blades.component_tables(self.metric))}")
        return blades.table_parts(self.metric, key)[0]

    def _product_key(self, kind: str, method: str) -> str:
        if method == "auto":
            method = "sparse" if self.nnz(kind) <= SPARSE_DENSITY * self.dim ** 2 else "dense"
        return kind if method == "dense" else "sparse:" + kind

    def _tab(self, key: str, like: Tensor, index: int = 0, tables: ConstantTables | None = None) -> Tensor:
        if tables is not None:  # a module's tables are keyed by name (one algebra per module)
            return tables.get(key, like.dtype, index)
        return table_on(("clifford", self.metric, key), lambda: blades.table_parts(self.metric, key), like.device, like.dtype, index)

    def check(self, x: Tensor, name: str = "x") -> Tensor:
        """Validate a multivector: a real floating tensor with last dimension ``dim``."""
        if not isinstance(x, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
        if x.ndim == 0 or x.shape[-1] != self.dim:
            raise ValueError(f"{name} must have last dimension {self.dim} (a multivector of "
                             f"{self}), got shape {tuple(x.shape)}")
        if not x.is_floating_point():
            raise TypeError(f"{name} must have a floating dtype (a real multivector), got {x.dtype}")
        return x

    # ------------------------------------------------------------------ products
    def product(self, a: Tensor, b: Tensor, kind: str = "geometric", method: str = "auto", *,
                tables: ConstantTables | None = None) -> Tensor:
        """Bilinear product ``kind`` of ``a (..., dim)`` and ``b (..., dim)`` -> ``(..., dim)``.

        ``kind`` is one of [`PRODUCTS`][]; ``method`` one of ``auto``, ``sparse``, ``dense``
        (see the module docstring); ``tables`` see the class docstring. The leading axes broadcast;
        ``b`` is cast to ``a``'s dtype; both must be on one device.
        """
        self._check_kind(kind)
        self.check(a, "a")
        self.check(b, "b")
        check_choice(method, "method", METHODS)
        check_same_device("a", a, "b", b)
        check_broadcastable(("a", a.shape[:-1]), ("b", b.shape[:-1]), what="leading shapes")
        key = self._product_key(kind, method)
        a, b = torch.broadcast_tensors(a, b.to(a.dtype))
        if not key.startswith("sparse:"):
            return torch.einsum("...i,...j,ijk->...k", a, b, self._tab(key, a, tables=tables))
        sa, sb, r = (self._tab(key, a, i, tables) for i in range(3))
        return ((a @ sa) * (b @ sb)) @ r

    def geometric_product(self, a: Tensor, b: Tensor, method: str = "auto", *,
                          tables: ConstantTables | None = None) -> Tensor:
        """``a b`` for ``(..., dim)`` tensors."""
        return self.product(a, b, "geometric", method, tables=tables)

    def outer_product(self, a: Tensor, b: Tensor, method: str = "auto", *,
                      tables: ConstantTables | None = None) -> Tensor:
        """Wedge ``a ^ b`` (grade ``r + s`` part of the product of an r- and an s-blade)."""
        return self.product(a, b, "outer", method, tables=tables)

    def fat_dot_product(self, a: Tensor, b: Tensor, method: str = "auto", *,
                        tables: ConstantTables | None = None) -> Tensor:
        """Hestenes' symmetric inner product, the "fat dot" of Dorst, Fontijne and Mann (*Geometric
        Algebra for Computer Science*, sec. B.1): the grade ``|r - s|`` part of blade products.

        Not to be confused with the invariant bilinear form ``<~x y>_0`` that GATr calls its inner
        product ([`geomlin.gatr.primitives.inner_product`][]).
        """
        return self.product(a, b, "fat_dot", method, tables=tables)

    def left_contraction(self, a: Tensor, b: Tensor, method: str = "auto", *,
                         tables: ConstantTables | None = None) -> Tensor:
        """Left contraction ``a _| b``: grade ``s - r`` part."""
        return self.product(a, b, "left_contraction", method, tables=tables)

    def regressive_product(self, a: Tensor, b: Tensor, method: str = "auto", *,
                           tables: ConstantTables | None = None) -> Tensor:
        """Regressive product (join in PGA) ``a v b = uncomplement(complement(a) ^ complement(b))``.

        Uses the metric-free right complement, so it is defined for degenerate metrics.
        """
        return self.product(a, b, "regressive", method, tables=tables)

    def scalar_product(self, a: Tensor, b: Tensor, *, tables: ConstantTables | None = None) -> Tensor:
        """``<a b>_0`` as a ``(..., 1)`` tensor."""
        self.check(a, "a")
        self.check(b, "b")
        return (a * b * self._tab("square", a, tables=tables)).sum(-1, keepdim=True)

    # ------------------------------------------------------------------ unary maps
    def _signs(self, x: Tensor, key: str) -> Tensor:
        """``x`` with each grade times its sign in ``_GRADE_SIGNS[key]``: slices of the runs of equal
        sign, negated where the sign is -1 (grades are contiguous, so no sign table is needed)."""
        self.check(x)
        parts = [x[..., a:b] if sign > 0 else -x[..., a:b] for a, b, sign in blades.sign_runs(self.n, key)]
        return parts[0] if len(parts) == 1 else torch.cat(parts, -1)

    def reverse(self, x: Tensor) -> Tensor:
        """Reversion ``~x``: grade ``k`` times ``(-1)^(k(k-1)/2)``."""
        return self._signs(x, "reverse")

    def grade_involution(self, x: Tensor) -> Tensor:
        """Main involution ``x^``: grade ``k`` times ``(-1)^k``."""
        return self._signs(x, "involute")

    def clifford_conjugate(self, x: Tensor) -> Tensor:
        """Clifford conjugate: reverse of the grade involution."""
        return self._signs(x, "conjugate")

    def grade_projection(self, x: Tensor, grades: int | Sequence[int]) -> Tensor:
        """Keep only the components of the given grade(s); ``(..., dim) -> (..., dim)``."""
        self.check(x)
        grades = list(grades) if isinstance(grades, (list, tuple, range, Tensor)) else [grades]
        for g in grades:
            check_int(g, "grade", minimum=0)
            if not 0 <= g <= self.n:
                raise ValueError(f"grade must be in 0..{self.n}, got {g}")
        mask = torch.zeros(self.dim, dtype=x.dtype, device=x.device)
        for g in grades:
            mask[self.grade_slices[g]] = 1.0
        return x * mask

    def complement(self, x: Tensor, *, tables: ConstantTables | None = None) -> Tensor:
        """Right complement (Poincare dual, metric free): ``e_A ^ complement(e_A) = I``."""
        return self.check(x) @ self._tab("complement", x, tables=tables)

    def uncomplement(self, x: Tensor, *, tables: ConstantTables | None = None) -> Tensor:
        """Inverse of [`complement`][]."""
        return self.check(x) @ self._tab("uncomplement", x, tables=tables)

    def pseudoscalar(self, dtype=torch.float64, device=None) -> Tensor:
        """The unit pseudoscalar ``I = e_0 e_1 ... e_{n-1}`` as a ``(dim,)`` tensor."""
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
        out = torch.zeros(self.dim, dtype=dtype, device=device)
        out[-1] = 1.0
        return out

    def dual(self, x: Tensor, *, tables: ConstantTables | None = None) -> Tensor:
        """Dual: ``x I^-1`` (Hodge-type) for non-degenerate metrics, the right complement otherwise."""
        if self.degenerate:
            return self.complement(x, tables=tables)
        ps = self.pseudoscalar(x.dtype, x.device)
        rev = self.reverse(ps)
        inv = rev / self.scalar_product(ps, rev, tables=tables)
        return self.geometric_product(x, inv, tables=tables)

    def norm_squared(self, x: Tensor, *, tables: ConstantTables | None = None) -> Tensor:
        """``<x ~x>_0`` as ``(..., 1)``; may be negative or zero in indefinite/degenerate metrics."""
        self.check(x)
        return (x * x * self._tab("quadratic_form", x, tables=tables)).sum(-1, keepdim=True)

    def norm(self, x: Tensor, *, tables: ConstantTables | None = None) -> Tensor:
        """``sqrt(|<x ~x>_0|)`` as ``(..., 1)`` (gradient 0, not NaN, where it vanishes)."""
        return _safe_sqrt(self.norm_squared(x, tables=tables).abs())

    def grade_quadratic_forms(self, x: Tensor, *, tables: ConstantTables | None = None) -> Tensor:
        """Per-grade ``<x_k ~x_k>_0`` as ``(..., n + 1)`` (signed in indefinite metrics).

        Half-precision inputs are summed in float32 (the result is float32 then).
        """
        x = at_least_float32(self.check(x))
        sq = x * x * self._tab("quadratic_form", x, tables=tables)
        return torch.stack([sq[..., s].sum(-1) for s in self.grade_slices], -1)

    def grade_norms(self, x: Tensor, eps: float = 0.0, *, tables: ConstantTables | None = None) -> Tensor:
        """Per-grade ``sqrt(|<x_k ~x_k>_0| + eps)`` as ``(..., n + 1)`` (CGENN gating features).

        Differentiable everywhere: where a grade vanishes the gradient is 0, not NaN. Half-precision
        inputs give float32 norms ([`grade_quadratic_forms`][]).
        """
        return _safe_sqrt(self.grade_quadratic_forms(x, tables=tables).abs() + eps)

    def inverse_versor(self, v: Tensor, *, tables: ConstantTables | None = None) -> Tensor:
        """``v^-1 = ~v / <v ~v>_0`` for a versor ``v (..., dim)``.

        Raises ``ValueError`` for null versors: ``|<v ~v>_0| <= 16 eps(dtype) |v|^2`` (the zero
        multivector, null vectors, ideal elements), with the threshold taken in ``v``'s own dtype
        (so float32 refuses what float64 refuses). On accelerators the test is deferred (no host
        synchronisation, see [`geomlin.validation.check_condition`][]).
        """
        self.check(v, "v")
        nsq = self.norm_squared(v, tables=tables)
        info = torch.finfo(v.dtype)
        scale = (v * v).sum(-1, keepdim=True).clamp_min(info.tiny)
        invertible = nsq.abs() > ZERO_VERSOR_EPS * info.eps * scale
        message = "versor has zero norm (a null vector, an ideal element or zero) and cannot be inverted"
        check_condition(invertible, message)
        return self.reverse(v) / nsq

    def parity(self, v: Tensor) -> Tensor:
        """``(...,)`` bool, True where ``v`` is odd (more weight on odd than on even grades)."""
        self.check(v, "v")
        w = v * v
        weight = [w[..., s].sum(-1) for s in self.grade_slices]
        return sum(weight[1::2]) > sum(weight[0::2])

    def sandwich(self, v: Tensor, x: Tensor, method: str = "auto", *,
                 tables: ConstantTables | None = None) -> Tensor:
        """Versor action ``rho_v(x) = v x^ v^-1`` (grade involution of ``x`` when ``v`` is odd).

        This twisted adjoint makes odd versors act as reflections on every grade
        (Pin group action). ``v (..., dim)`` broadcasts against ``x (..., dim)``; a ``v`` that is
        not finite or not invertible is refused.
        """
        self.check(x, "x")
        self.check(v, "v")
        check_finite(v, "v")
        odd = self.parity(v)[..., None]
        xs = torch.where(odd, self.grade_involution(x), x)
        vx = self.geometric_product(v, xs, method, tables=tables)
        return self.geometric_product(vx, self.inverse_versor(v, tables=tables), method, tables=tables)

    def act(self, g: Tensor, x: Tensor) -> Tensor:
        """The action of one group element ``g`` on multivectors ``x (..., dim)``.

        * ``g (dim,)``: a versor, acting by [`sandwich`][] (Clifford / Pin group);
        * ``g (n, n)``: an orthogonal transformation of the quadratic form
          (``g^T diag(metric) g = diag(metric)``, checked to
          [`geomlin.validation.tolerance`][]), acting by its [`outermorphism`][]
          (the full group O(p,q,r), e.g. [`geomlin.groups.PseudoOrthogonalGroup`][geomlin.groups.versor.PseudoOrthogonalGroup]).

        The ``(dim, dim)`` matrix of the map is built once, so ``x`` of any leading shape costs one
        matrix product.
        """
        self.check(x, "x")
        if isinstance(g, Tensor) and g.ndim == 2 and tuple(g.shape) == (self.n, self.n):
            self.check_orthogonal(g, "g")
            return x @ self.outermorphism(g.to(dtype=x.dtype, device=x.device)).transpose(-1, -2)
        if not isinstance(g, Tensor):
            raise TypeError(f"g must be a torch.Tensor (a versor ({self.dim},) or an ({self.n}, {self.n}) "
                            f"orthogonal matrix), got {type(g).__name__}")
        if g.ndim != 1 or g.shape[0] != self.dim:
            raise ValueError(f"g must be one versor of shape ({self.dim},) or one ({self.n}, {self.n}) matrix "
                             f"of the quadratic form, got shape {tuple(g.shape)}")
        eye = torch.eye(self.dim, dtype=x.dtype, device=x.device)
        return x @ self.sandwich(g.to(dtype=x.dtype, device=x.device), eye)

    def check_orthogonal(self, A: Tensor, name: str = "A") -> Tensor:
        """Refuse ``A (..., n, n)`` unless ``A^T G A = G`` for ``G = diag(metric)`` and ``A`` is
        invertible, to [`geomlin.validation.tolerance`][] of its dtype (tested by
        [`geomlin.precision`][]'s rule: float32 at least, autocast off); returns ``A``.

        For degenerate metrics this leaves the radical free: in G(3,0,1) ``A`` may scale ``e0``
        by any ``lambda != 0`` and add ``e0`` parts to ``e1, e2, e3`` (similarities). On
        accelerators inside a [`geomlin.validation.deferred_checks`][] scope the test is deferred.
        """
        check_tensor(A, name, shape=(..., self.n, self.n), what=f"a linear map of the {self.n} basis vectors")
        if A.numel() == 0:
            return A
        tol = tolerance(A.dtype)
        with full_precision(A):  # by geomlin.precision's rule, whatever the caller's autocast
            wide = at_least_float32(A.detach())
            G = device_cache(("clifford:metric", self.metric), lambda: torch.diag(torch.tensor(self.metric, dtype=torch.float64)),
                             A.device, wide.dtype)
            size = wide.abs().amax().clamp_min(1.0)
            err = (wide.transpose(-1, -2) @ G @ wide - G).abs().amax() / size ** 2
            det = torch.linalg.det(wide.to(torch.float64) if A.device.type == "cpu" else wide).abs()
        if defers(A):
            ok = torch.isfinite(wide).all() & (err <= tol) & (det > tol * size ** self.n).all()
            check_condition(ok, f"{name} must be finite, preserve the quadratic form diag{self.metric} "
                                f"(A^T G A = G to {tol:.0e}) and be invertible")
            return A
        check_finite(A, name)
        if float(err) > tol:
            raise ValueError(f"{name} must preserve the quadratic form diag{self.metric} "
                             f"(A^T G A = G), but |A^T G A - G| = {float(err):.2e} > {tol:.0e} (relative)")
        if bool((det <= tol * size ** self.n).any()):
            raise ValueError(f"{name} must be invertible, got |det| = {float(det.min()):.2e}")
        return A

    def outermorphism(self, A: Tensor) -> Tensor:
        """The ``(..., dim, dim)`` matrix ``M`` of the outermorphism of ``A (..., n, n)``.

        ``M[B, C] = det(A[B, C])`` for blades ``B, C`` of equal grade (the ``k``-th compound
        matrix, Cauchy-Binet), so ``x -> x @ M^T`` maps ``e_{i1} ^ ... ^ e_{ik}`` to
        ``A e_{i1} ^ ... ^ A e_{ik}`` (column ``j`` of ``A`` is the image of ``e_j``). Grade
        preserving; an algebra automorphism when ``A`` preserves the quadratic form.
        """
        check_tensor(A, "A", shape=(..., self.n, self.n), what=f"a linear map of the {self.n} basis vectors")
        lead = A.shape[:-2]
        out = A.new_zeros(*lead, self.dim, self.dim)
        out[..., 0, 0] = 1.0
        for k in range(1, self.n + 1):
            s = self.grade_slices[k]
            # (m, k) basis-vector indices of each blade, cached on A's device
            idx = device_cache(("clifford:grade-index", self.n, k), lambda k=k: blades.grade_index(self.n, k), A.device)
            sub = A[..., idx[:, None, :, None], idx[None, :, None, :]]  # (..., m, m, k, k)
            out[..., s, s] = torch.linalg.det(sub) if k > 1 else sub[..., 0, 0]
        return out

    def exp(self, x: Tensor, terms: int = 14, *, tables: ConstantTables | None = None) -> Tensor:
        """Exponential of a multivector (typically a bivector) ``(..., dim)``.

        Scaling and squaring with a Taylor polynomial ([`scaling_and_squaring`][geomlin.linalg.scaling_and_squaring]):
        ``exp(x) = exp(x / 2^s)^(2^s)`` with ``s`` chosen per multivector so that
        ``|x|_1 / 2^s <= 1/2``; exact to float64 round-off for sizes up to ``5e5``. No host
        synchronisation. ``x`` must be finite (``ValueError``, deferred on accelerators): the
        exponential of an infinite multivector is not defined.
        """
        self.check(x)
        check_finite(x, "x")
        terms = check_positive_int(terms, "terms")
        one = torch.zeros(self.dim, dtype=x.dtype, device=x.device)
        one[0] = 1.0

        def gp(a: Tensor, b: Tensor) -> Tensor:
            return self.geometric_product(a, b, tables=tables)

        return scaling_and_squaring(x, x.detach().abs().sum(-1, keepdim=True), gp, one, terms)

    def embed_vector(self, v: Tensor) -> Tensor:
        """``(..., n)`` coefficients of the basis vectors -> grade-1 multivector ``(..., dim)``."""
        check_tensor(v, "v", shape=(..., self.n), what=f"coefficients of the {self.n} basis vectors")
        out = v.new_zeros(*v.shape[:-1], self.dim)
        out[..., self.grade_slices[1]] = v
        return out
