"""Clifford (geometric) algebras of any signature, with sparse Cayley-table products.

An algebra is given by the squares of its basis vectors, ``metric = (m_0, ..., m_{n-1})``
with ``m_i`` in ``{1, -1, 0}`` (``(0, 1, 1, 1)`` is projective G(3,0,1), ``(1, -1, -1, -1)``
spacetime, ``(1, 1, 1)`` Euclidean G(3)). Multivectors are plain tensors of shape
``(..., 2**n)`` in the *grade-lexicographic* basis order: grade 0 first, then the
blades of each grade in lexicographic order of their index tuples. For ``n = 4`` with
indices ``0..3`` this is ``[1, e0, e1, e2, e3, e01, e02, e03, e12, e13, e23, e012, e013,
e023, e123, e0123]``, the order of the reference GATr implementation.

Blades are bitmaps (bit ``i`` set when ``e_i`` is a factor). The product of two blades is
``e_A e_B = sign(A, B) * prod_{i in A & B} m_i * e_{A xor B}``, where ``sign`` counts the
transpositions that bring the concatenation into canonical order (Dorst, Fontijne and Mann,
*Geometric Algebra for Computer Science*, sec. 19.1). All tables are built once in float64
from this rule and cached per metric.

Products have two implementations:

* ``method="dense"``: ``einsum("...i,...j,ijk->...k")`` with the full ``(d, d, d)`` table;
  it is the test oracle.
* ``method="sparse"``: only the ``nnz`` non-zero ``(i, j)`` pairs of the table are formed,
  ``((a @ S_a) * (b @ S_b)) @ R`` with signed selection matrices ``S_a, S_b (d, nnz)`` and
  the scatter matrix ``R (nnz, d)``. The outer and regressive products of a 4D algebra have
  ``nnz = 81`` of ``256`` pairs, a degenerate geometric product ``192``.

``method="auto"`` picks ``sparse`` when at most half the pairs are non-zero, else ``dense``.
:mod:`geomlin.algebra.pga` adds a faster G(3,0,1) geometric product.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence

import torch
from torch import Tensor

#: Largest supported number of basis vectors (dense tables are ``4**n * 2**n`` entries).
MAX_DIM = 8
#: Products the engine knows, each a masked Cayley table.
PRODUCTS = ("geometric", "outer", "inner", "left_contraction", "right_contraction", "scalar",
            "regressive")
METHODS = ("auto", "sparse", "dense")
#: ``sparse`` is preferred by ``auto`` when this fraction of (i, j) pairs or fewer is non-zero.
SPARSE_DENSITY = 0.5


def _popcount(x: int) -> int:
    return x.bit_count()


def _reorder_sign(a: int, b: int) -> int:
    """Sign of bringing ``e_A e_B`` (bitmaps) into canonical order."""
    swaps = 0
    a >>= 1
    while a:
        swaps += _popcount(a & b)
        a >>= 1
    return -1 if swaps & 1 else 1


@functools.cache
def _basis(n: int) -> tuple[tuple[tuple[int, ...], ...], tuple[int, ...]]:
    """Blades as index tuples and bitmaps, grade-lexicographic order."""
    blades = tuple(c for g in range(n + 1) for c in itertools.combinations(range(n), g))
    bitmaps = tuple(sum(1 << i for i in b) for b in blades)
    return blades, bitmaps


@functools.cache
def _tables(metric: tuple[float, ...]) -> dict[str, Tensor]:
    """All dense ``(d, d, d)`` float64 product tables plus sign vectors, built once per metric."""
    n = len(metric)
    blades, bitmaps = _basis(n)
    d = len(blades)
    index = {bm: i for i, bm in enumerate(bitmaps)}
    grade = torch.tensor([len(b) for b in blades])
    gp = torch.zeros(d, d, d, dtype=torch.float64)
    for i, a in enumerate(bitmaps):
        for j, b in enumerate(bitmaps):
            s = float(_reorder_sign(a, b))
            for k in range(n):
                if (a & b) >> k & 1:
                    s *= metric[k]
            if s != 0.0:
                gp[i, j, index[a ^ b]] = s
    gi, gj, gk = grade[:, None, None], grade[None, :, None], grade[None, None, :]
    tables = {
        "geometric": gp,
        "outer": gp * (gk == gi + gj),
        "left_contraction": gp * (gk == gj - gi),
        "right_contraction": gp * (gk == gi - gj),
        "inner": gp * (gk == (gi - gj).abs()),
        "scalar": gp * (gk == 0),
    }
    # Right complement (Poincare duality, metric free): e_A -> c_A e_{~A} with e_A ^ c_A e_{~A} = I.
    full = (1 << n) - 1
    comp = torch.zeros(d, d, dtype=torch.float64)  # comp[i, k]: coefficient of blade k in complement(e_i)
    for i, a in enumerate(bitmaps):
        comp[i, index[full ^ a]] = float(_reorder_sign(a, full ^ a))
    uncomp = torch.linalg.inv(comp)
    outer = tables["outer"]
    # a v b = uncomp(comp(a) ^ comp(b)): V[i, j, k] = sum C[i,p] C[j,q] W[p,q,r] U[r,k]
    tables["regressive"] = torch.einsum("ip,jq,pqr,rk->ijk", comp, comp, outer, uncomp)
    tables["complement"] = comp
    tables["uncomplement"] = uncomp
    tables["grade"] = grade
    tables["reverse"] = torch.tensor([(-1.0) ** (g * (g - 1) // 2) for g in grade.tolist()],
                                     dtype=torch.float64)
    tables["involute"] = torch.tensor([(-1.0) ** g for g in grade.tolist()], dtype=torch.float64)
    tables["conjugate"] = tables["reverse"] * tables["involute"]
    return tables


@functools.cache
def _sparse(metric: tuple[float, ...], kind: str) -> tuple[Tensor, Tensor, Tensor]:
    """Selection matrices ``(S_a (d, nnz), S_b (d, nnz), R (nnz, d))`` of a product table."""
    table = _tables(metric)[kind]
    d = table.shape[0]
    i, j, k = table.nonzero(as_tuple=True)
    # the regressive table can hold rounding noise from the inverse; its entries are +-1
    vals = table[i, j, k].round()
    nnz = len(i)
    col = torch.arange(nnz)
    sa = torch.zeros(d, nnz, dtype=torch.float64)
    sa[i, col] = vals
    sb = torch.zeros(d, nnz, dtype=torch.float64)
    sb[j, col] = 1.0
    r = torch.zeros(nnz, d, dtype=torch.float64)
    r[col, k] = 1.0
    return sa, sb, r


#: Tables already moved to a (device, dtype), by key. A plain dict rather than lru_cache so that
#: torch.compile reads a warm entry as a constant instead of tracing the table builders.
_CONSTANTS: dict = {}


def cached_constant(key: tuple, build) -> Tensor:
    """``_CONSTANTS[key]``, built by ``build()`` on the first request."""
    t = _CONSTANTS.get(key)
    if t is None:
        t = build()
        _CONSTANTS[key] = t
    return t


def _on(metric: tuple[float, ...], key: str, index: int, device: torch.device, dtype: torch.dtype) -> Tensor:
    """A cached table moved to ``device``/``dtype`` (``index`` selects within a sparse triple)."""
    def build():
        t = _sparse(metric, key[7:])[index] if key.startswith("sparse:") else _tables(metric)[key]
        return t.to(device=device, dtype=dtype)
    return cached_constant(("clifford", metric, key, index, device, dtype), build)


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


class CliffordAlgebra:
    """The Clifford algebra with basis-vector squares ``metric``.

    Parameters
    ----------
    metric: sequence of ``n`` numbers in ``{1, -1, 0}``, ``1 <= n <= 8``.
    first_index: label of the first basis vector in :attr:`blade_names` (``e0`` or ``e1``);
        naming only.

    Attributes
    ----------
    n: number of basis vectors; ``dim = 2**n`` components per multivector.
    blades: index tuples of the basis blades in storage order.
    grades: ``(dim,)`` long tensor, the grade of each component.
    grade_slices: ``slice`` of the components of each grade ``0..n``.

    All methods take multivectors ``(..., dim)`` of a floating dtype and broadcast their
    leading dimensions.
    """

    def __init__(self, metric: Sequence[float], first_index: int = 1):
        self.metric = _as_metric(metric)
        self.n = len(self.metric)
        self.dim = 2 ** self.n
        self.blades, self.bitmaps = _basis(self.n)
        self.first_index = int(first_index)
        self.blade_names = tuple("1" if not b else "e" + "".join(str(i + self.first_index) for i in b)
                                 for b in self.blades)
        self.grades = _tables(self.metric)["grade"]
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

    # ------------------------------------------------------------------ tables
    def table(self, kind: str = "geometric") -> Tensor:
        """The dense float64 product table ``(dim, dim, dim)``: ``(a b)_k = sum_ij a_i b_j T_ijk``."""
        self._check_kind(kind)
        return _tables(self.metric)[kind]

    def nnz(self, kind: str = "geometric") -> int:
        """Number of non-zero ``(i, j)`` pairs of a product table."""
        return _sparse(self.metric, self._check_kind(kind))[0].shape[1]

    def _check_kind(self, kind: str) -> str:
        if kind not in PRODUCTS:
            raise ValueError(f"unknown product {kind!r}; expected one of {PRODUCTS}")
        return kind

    def _tab(self, key: str, like: Tensor, index: int = 0) -> Tensor:
        return _on(self.metric, key, index, like.device, like.dtype)

    def check(self, x: Tensor, name: str = "x") -> Tensor:
        """Validate a multivector: a floating tensor with last dimension ``dim``."""
        if not isinstance(x, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
        if x.ndim == 0 or x.shape[-1] != self.dim:
            raise ValueError(f"{name} must have last dimension {self.dim} (a multivector of "
                             f"{self}), got shape {tuple(x.shape)}")
        if not x.is_floating_point():
            raise TypeError(f"{name} must have a floating dtype, got {x.dtype}")
        return x

    # ------------------------------------------------------------------ products
    def product(self, a: Tensor, b: Tensor, kind: str = "geometric", method: str = "auto") -> Tensor:
        """Bilinear product ``kind`` of ``a (..., dim)`` and ``b (..., dim)`` -> ``(..., dim)``.

        ``kind`` is one of :data:`PRODUCTS`; ``method`` one of ``auto``, ``sparse``, ``dense``
        (see the module docstring).
        """
        self._check_kind(kind)
        self.check(a, "a")
        self.check(b, "b")
        if method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {method!r}")
        if method == "auto":
            method = "sparse" if self.nnz(kind) <= SPARSE_DENSITY * self.dim ** 2 else "dense"
        a, b = torch.broadcast_tensors(a, b) if a.dtype == b.dtype else (a, b.to(a.dtype))
        if method == "dense":
            return torch.einsum("...i,...j,ijk->...k", a, b, self._tab(kind, a))
        key = "sparse:" + kind
        sa, sb, r = (self._tab(key, a, i) for i in range(3))
        return ((a @ sa) * (b @ sb)) @ r

    def geometric_product(self, a: Tensor, b: Tensor, method: str = "auto") -> Tensor:
        """``a b`` for ``(..., dim)`` tensors."""
        return self.product(a, b, "geometric", method)

    def outer_product(self, a: Tensor, b: Tensor, method: str = "auto") -> Tensor:
        """Wedge ``a ^ b`` (grade ``r + s`` part of the product of an r- and an s-blade)."""
        return self.product(a, b, "outer", method)

    def inner_product(self, a: Tensor, b: Tensor, method: str = "auto") -> Tensor:
        """Symmetric ("fat dot") inner product: grade ``|r - s|`` part of blade products."""
        return self.product(a, b, "inner", method)

    def left_contraction(self, a: Tensor, b: Tensor, method: str = "auto") -> Tensor:
        """Left contraction ``a _| b``: grade ``s - r`` part."""
        return self.product(a, b, "left_contraction", method)

    def regressive_product(self, a: Tensor, b: Tensor, method: str = "auto") -> Tensor:
        """Regressive product (join in PGA) ``a v b = uncomplement(complement(a) ^ complement(b))``.

        Uses the metric-free right complement, so it is defined for degenerate metrics.
        """
        return self.product(a, b, "regressive", method)

    def scalar_product(self, a: Tensor, b: Tensor) -> Tensor:
        """``<a b>_0`` as a ``(..., 1)`` tensor."""
        self.check(a, "a")
        self.check(b, "b")
        diag = torch.diagonal(self._tab("scalar", a)[..., 0])  # (dim,): e_i e_i scalar part
        return (a * b * diag).sum(-1, keepdim=True)

    # ------------------------------------------------------------------ unary maps
    def _signs(self, x: Tensor, key: str) -> Tensor:
        return self.check(x) * self._tab(key, x)

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
        grades = [grades] if isinstance(grades, int) else list(grades)
        for g in grades:
            if not 0 <= g <= self.n:
                raise ValueError(f"grade must be in 0..{self.n}, got {g}")
        mask = torch.zeros(self.dim, dtype=x.dtype, device=x.device)
        for g in grades:
            mask[self.grade_slices[g]] = 1.0
        return x * mask

    def complement(self, x: Tensor) -> Tensor:
        """Right complement (Poincare dual, metric free): ``e_A ^ complement(e_A) = I``."""
        return self.check(x) @ self._tab("complement", x)

    def uncomplement(self, x: Tensor) -> Tensor:
        """Inverse of :meth:`complement`."""
        return self.check(x) @ self._tab("uncomplement", x)

    def pseudoscalar(self, dtype=torch.float64, device=None) -> Tensor:
        """The unit pseudoscalar ``I = e_0 e_1 ... e_{n-1}`` as a ``(dim,)`` tensor."""
        out = torch.zeros(self.dim, dtype=dtype, device=device)
        out[-1] = 1.0
        return out

    def dual(self, x: Tensor) -> Tensor:
        """Dual: ``x I^-1`` (Hodge-type) for non-degenerate metrics, the right complement otherwise."""
        if self.degenerate:
            return self.complement(x)
        ps = self.pseudoscalar(x.dtype, x.device)
        inv = self.reverse(ps) / self.scalar_product(ps, self.reverse(ps))
        return self.geometric_product(x, inv)

    def norm_squared(self, x: Tensor) -> Tensor:
        """``<x ~x>_0`` as ``(..., 1)``; may be negative or zero in indefinite/degenerate metrics."""
        return self.scalar_product(x, self.reverse(x))

    def norm(self, x: Tensor) -> Tensor:
        """``sqrt(|<x ~x>_0|)`` as ``(..., 1)``."""
        return self.norm_squared(x).abs().sqrt()

    def grade_norms(self, x: Tensor, eps: float = 0.0) -> Tensor:
        """Per-grade ``sqrt(|<x_k ~x_k>_0| + eps)`` as ``(..., n + 1)`` (CGENN gating features)."""
        self.check(x)
        sq = x * x * torch.diagonal(self._tab("scalar", x)[..., 0]) * self._tab("reverse", x)
        parts = [sq[..., s].sum(-1) for s in self.grade_slices]
        return (torch.stack(parts, -1).abs() + eps).sqrt()

    def inverse_versor(self, v: Tensor) -> Tensor:
        """``v^-1 = ~v / <v ~v>_0`` for a versor ``v (..., dim)``; raises on null versors."""
        nsq = self.norm_squared(v)
        if (nsq.abs() < 1e-12 * (v * v).sum(-1, keepdim=True).clamp_min(1e-300)).any():
            raise ValueError("versor has zero norm (a null vector or an ideal element) and cannot be inverted")
        return self.reverse(v) / nsq

    def parity(self, v: Tensor) -> Tensor:
        """``(...,)`` bool, True where ``v`` is odd (more weight on odd than on even grades)."""
        self.check(v, "v")
        odd = (self.grades % 2 == 1).to(device=v.device)
        w = v * v
        return w[..., odd].sum(-1) > w[..., ~odd].sum(-1)

    def sandwich(self, v: Tensor, x: Tensor, method: str = "auto") -> Tensor:
        """Versor action ``rho_v(x) = v x^ v^-1`` (grade involution of ``x`` when ``v`` is odd).

        This twisted adjoint makes odd versors act as reflections on every grade
        (Pin group action). ``v (..., dim)`` broadcasts against ``x (..., dim)``.
        """
        self.check(x, "x")
        odd = self.parity(v)[..., None]
        xs = torch.where(odd, self.grade_involution(x), x)
        return self.geometric_product(self.geometric_product(v, xs, method), self.inverse_versor(v), method)

    def act(self, g: Tensor, x: Tensor) -> Tensor:
        """The action of one group element ``g`` on multivectors ``x (..., dim)``.

        ``g (dim,)`` is a versor acting by :meth:`sandwich`; the ``(dim, dim)`` matrix of the map
        is built once, so ``x`` of any leading shape costs one matrix product.
        """
        self.check(x, "x")
        self.check(g, "g")
        if g.ndim != 1:
            raise ValueError(f"act takes one versor of shape ({self.dim},), got {tuple(g.shape)}")
        eye = torch.eye(self.dim, dtype=x.dtype, device=x.device)
        return x @ self.sandwich(g.to(dtype=x.dtype, device=x.device), eye)

    def versor_group(self):
        """The group of versors acting on this algebra's multivectors: :class:`~geomlin.algebra.Pin301`
        for G(3,0,1), :class:`~geomlin.algebra.CliffordGroup` otherwise."""
        from geomlin.algebra.versor_groups import CliffordGroup, Pin301

        if self.metric == (0.0, 1.0, 1.0, 1.0):
            return Pin301()
        return CliffordGroup(self)

    def exp(self, x: Tensor, terms: int = 14) -> Tensor:
        """Exponential of a multivector (typically a bivector) ``(..., dim)``.

        Scaling and squaring with a Taylor polynomial: ``exp(x) = exp(x / 2^s)^(2^s)`` with
        ``s`` chosen so ``|x| / 2^s <= 1/2``; exact to float64 round-off for bivectors
        of moderate norm.
        """
        self.check(x)
        size = x.detach().abs().sum(-1).max().item() if x.numel() else 0.0
        s = max(0, math.ceil(math.log2(size / 0.5))) if size > 0.5 else 0
        y = x / (2 ** s)
        one = torch.zeros_like(x)
        one[..., 0] = 1.0
        out, term = one.clone(), one
        for k in range(1, terms + 1):
            term = self.geometric_product(term, y) / k
            out = out + term
        for _ in range(s):
            out = self.geometric_product(out, out)
        return out

    def embed_vector(self, v: Tensor) -> Tensor:
        """``(..., n)`` coefficients of the basis vectors -> grade-1 multivector ``(..., dim)``."""
        if v.shape[-1] != self.n:
            raise ValueError(f"vector must have last dimension {self.n}, got shape {tuple(v.shape)}")
        out = v.new_zeros(*v.shape[:-1], self.dim)
        out[..., self.grade_slices[1]] = v
        return out
