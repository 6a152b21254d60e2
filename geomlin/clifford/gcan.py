"""Geometric Clifford algebra networks (GCAN): learned group elements acting by sandwich products.

Ruhe, Gupta, de Keninck, Welling, Brandstetter, "Geometric Clifford Algebra Networks", ICML 2023.
A *group action layer* (Sec. 3.2) combines transformed copies of its inputs,

    y_o = sum_i w_oi  a_oi x_i^ a_oi^-1,        (``x_i^``: grade involution when ``a_oi`` is odd)

with one learned versor ``a_oi`` and one weight ``w_oi`` per channel pair: in G(3,0,1) each term
moves the input rigidly (rotation, translation, reflection), so a layer is a *geometric template*
refined by gradient descent. It is not equivariant (``g`` does not commute with the learned
``a_oi``), and does not claim to be.

Versors are rebuilt from unconstrained parameters on every forward pass, so they stay on the
group during training (the reference implementation's motors drift off it):

* ``versor="exp"``: ``a = exp(B)`` of a learned bivector ``B`` (a rotor, or a motor in PGA);
  ``<a ~a>_0 = 1``;
* ``versor="even"``: a learned even multivector ``m`` renormalised to ``m (m ~m)^(-1/2)`` (for
  ``n = 4`` the square root is taken in ``span(1, I)``, which commutes with even elements), so
  ``<a ~a>_0 = +-1``; ``n <= 4``;
* ``versor="reflections"``: the product of ``num_reflections`` learned unit vectors; an odd count
  gives improper elements (reflections, roto-reflections), ``<a ~a>_0 = +-1``.

The nonlinearity and normalisation of Sec. 3.3: [`GCAGate`][] multiplies each channel by a
sigmoid of a learned *linear functional of all its components*, which is not invariant, so the
gate is **not equivariant** (declared in ``tests/clifford/declared_examples.py``);
[`GCAGroupNorm`][] divides channel groups by an invariant norm and is equivariant.
[`GCAMLP`][] stacks them.

>>> from geomlin.algebra import pga
>>> layer = GroupActionLinear(pga.PGA, 1, 3, versor="exp")
>>> layer(torch.randn(10, 1, 16)).shape
torch.Size([10, 3, 16])
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from geomlin.algebra import CliffordAlgebra
from geomlin.clifford.cgenn import algebra_argument, cgenn_tables, check_channels, multivector_type
from geomlin.linalg import scaling_and_squaring
from geomlin.tables import ConstantTables, table_on
from geomlin.validation import check_choice, check_float, check_int, check_positive_int

#: The versor parametrisations of [`GroupActionLinear`][].
VERSORS = ("exp", "even", "reflections")


def _pairs(algebra: CliffordAlgebra, grades) -> Tensor:
    """``(m,)`` long: the components of the given grades."""
    return torch.cat([torch.arange(algebra.grade_slices[g].start, algebra.grade_slices[g].stop) for g in grades])


def _scatter(algebra: CliffordAlgebra, coeffs: Tensor, components: Tensor) -> Tensor:
    """``(..., m)`` coefficients of ``components`` -> ``(..., dim)`` multivectors."""
    out = coeffs.new_zeros(*coeffs.shape[:-1], algebra.dim)
    out[..., components.to(coeffs.device)] = coeffs
    return out


#: Taylor terms of [`matrix_exp`][]: round-off after scaling to norm 1/2 (``0.5**15 / 15!`` for float64).
EXP_TERMS = {torch.float64: 14}
EXP_TERMS_DEFAULT = 8


def matrix_exp(A: Tensor) -> Tensor:
    """``exp(A)`` of square matrices ``A (..., m, m)`` without a host synchronisation.

    Scaling and squaring with a Taylor polynomial, per matrix
    ([`geomlin.linalg.scaling_and_squaring`][], scaled
    by the 1-norm); differentiable, exact to round-off for 1-norms up to about ``5e5``. ``torch.linalg.matrix_exp`` reads the
    norms back to the host on CUDA to choose its degree, which this avoids.
    """
    size = A.detach().abs().sum(-2).amax(-1)[..., None, None]
    one = torch.eye(A.shape[-1], dtype=A.dtype, device=A.device)
    return scaling_and_squaring(A, size, torch.matmul, one, EXP_TERMS.get(A.dtype, EXP_TERMS_DEFAULT))


def versor_exp(algebra: CliffordAlgebra, B: Tensor, *, tables: ConstantTables | None = None) -> Tensor:
    """``exp(B)`` for bivectors (any multivectors) ``B (..., dim)``: the first column of the matrix
    exponential of left multiplication by ``B`` ([`matrix_exp`][]), differentiable and accurate
    to round-off. ``tables``: a module's tables with the dense ``"geometric"`` product
    (``algebra.tables("dense:geometric")``); ``None`` reads a per-(device, dtype) cache."""
    algebra.check(B, "B")
    table = table_on(f"gcan:geometric:{algebra.metric}", lambda: algebra.table("geometric"), B.device, B.dtype) \
        if tables is None else tables.get("geometric", dtype=B.dtype)
    left = torch.einsum("...j,jik->...ki", B, table)  # (B x)_k = sum_i left[k, i] x_i
    return matrix_exp(left)[..., :, 0]


def _pseudoscalar_square(algebra: CliffordAlgebra) -> float:
    """``I^2`` of the algebra's pseudoscalar (``0``, ``1`` or ``-1``), computed once in float64 on the host."""
    I = algebra.pseudoscalar(torch.float64)
    return float(algebra.geometric_product(I, I)[0])


def _inverse_sqrt_even_norm(algebra: CliffordAlgebra, m: Tensor, sigma: float,
                            tables: ConstantTables | None = None) -> Tensor:
    """``(m ~m)^(-1/2)`` for even ``m (..., dim)``, ``n <= 4``: an element of ``span(1, I)``.

    For ``n <= 3`` ``m ~m`` is a scalar; for ``n = 4`` it is ``s + p I`` with ``I^2 = sigma`` in
    ``{0, 1, -1}``, and the square root is taken in that commutative algebra (dual, split-complex
    or complex numbers). The sign of ``s`` is factored out (``<a ~a>_0 = -1`` is a valid versor
    in indefinite metrics). ``sigma`` is ``I^2``, which the module reads once at construction (a host
    read per call would break a compiled graph and fail ``torch.export``).
    """
    mm = algebra.geometric_product(m, algebra.reverse(m), tables=tables)
    s = mm[..., 0]
    sign = torch.where(s < 0, -1.0, 1.0).to(m.dtype)
    s = s * sign
    tiny = torch.finfo(m.dtype).tiny
    out = torch.zeros_like(m)
    if algebra.n < 4:
        out[..., 0] = sign / s.clamp_min(tiny).sqrt()
        return out
    p = mm[..., -1] * sign
    if sigma == 0.0:
        c0 = s.clamp_min(tiny).rsqrt()
        c4 = -0.5 * p * c0 / s.clamp_min(tiny)
    elif sigma > 0:  # split-complex: (s + p j) = u e+ + v e-, e+- = (1 +- j) / 2
        u = (s + p).clamp_min(tiny).rsqrt()
        v = (s - p).clamp_min(tiny).rsqrt()
        c0, c4 = (u + v) / 2, (u - v) / 2
    else:  # complex: z^(-1/2) = |z|^(-1/2) e^(-i theta / 2)
        r = torch.sqrt(s * s + p * p).clamp_min(tiny)
        theta = torch.atan2(p, s)
        c0, c4 = r.rsqrt() * torch.cos(-theta / 2), r.rsqrt() * torch.sin(-theta / 2)
    out[..., 0] = c0 * sign
    out[..., -1] = c4 * sign
    return out


def sandwich_matrices(algebra: CliffordAlgebra, a: Tensor, odd: bool, *,
                      tables: ConstantTables | None = None) -> Tensor:
    """``(..., dim, dim)`` matrices ``T`` with ``x @ T = a x^ a^-1`` for versors ``a (..., dim)``.

    ``a^-1 = ~a / <a ~a>_0``; ``odd`` applies the grade involution to ``x`` (Pin action of odd
    versors). No invertibility check: the callers build unit versors. ``tables``: a module's
    ``algebra.tables("geometric", "square")``.
    """
    algebra.check(a, "a")
    eye = torch.eye(algebra.dim, dtype=a.dtype, device=a.device)
    reverse = algebra.reverse(a)
    inverse = reverse / algebra.scalar_product(a, reverse, tables=tables)
    left = algebra.geometric_product(a[..., None, :], eye, tables=tables)  # (..., dim_in, dim): a e_l
    mats = algebra.geometric_product(left, inverse[..., None, :], tables=tables)  # a e_l a^-1
    if odd:  # row l of T times the sign of e_l under the grade involution
        mats = algebra.grade_involution(mats.transpose(-1, -2)).transpose(-1, -2)
    return mats


def adjoint_blocks(algebra: CliffordAlgebra, grade: int) -> Tensor:
    """``(num_bivectors, m, m)``: for each basis bivector ``e_b``, the matrix ``A`` of
    ``x -> e_b x - x e_b`` on the grade-``grade`` components (``m`` of them), row convention
    (``x @ A``). The commutator with a bivector keeps grades, so ``exp(B) x exp(-B)`` is
    ``x @ matrix_exp(sum_b B_b A_b)`` grade by grade."""
    check_int(grade, "grade", minimum=0, maximum=algebra.n)
    table = algebra.table("geometric")
    biv = torch.arange(algebra.grade_slices[2].start, algebra.grade_slices[2].stop)
    s = algebra.grade_slices[grade]
    left = table[biv][:, s, s]  # [b, l, k]: (e_b e_l)_k
    right = table[:, biv].transpose(0, 1)[:, s, s]  # [b, l, k]: (e_l e_b)_k
    return left - right


class GroupActionLinear(nn.Module):
    """``y_o = sum_i w_oi a_oi x_i^ a_oi^-1``: ``(..., in_channels, dim) -> (..., out_channels, dim)``.

    Parameters
    ----------
    algebra : CliffordAlgebra or sequence of float
        a [`CliffordAlgebra`][geomlin.algebra.clifford.CliffordAlgebra] or its metric (``pga.PGA`` for rigid
        motions).
    in_channels, out_channels : int
        multivector channels.
    versor : str
        ``"exp"`` (default), ``"even"`` (``n <= 4``) or ``"reflections"``; see the module docstring.
    num_reflections : int | None
        unit vectors per versor for ``versor="reflections"`` (default ``n``; odd
        counts give improper elements).
    init_scale : float
        standard deviation of the initial bivectors / perturbations of the identity.
    """

    def __init__(self, algebra, in_channels: int, out_channels: int, versor: str = "exp",
                 num_reflections: int | None = None, init_scale: float = 0.5):
        super().__init__()
        self.algebra = algebra_argument(algebra)
        self.in_channels = check_positive_int(in_channels, "in_channels")
        self.out_channels = check_positive_int(out_channels, "out_channels")
        self.versor = check_choice(versor, "versor", VERSORS)
        init_scale = check_float(init_scale, "init_scale", minimum=0.0)
        alg = self.algebra
        shape = (out_channels, in_channels)
        self.weight = nn.Parameter(torch.randn(*shape) / math.sqrt(in_channels) + 1.0 / in_channels)
        self.num_reflections = None
        if versor == "exp":
            self.register_buffer("components", _pairs(alg, [2]), persistent=False)
            self.bivectors = nn.Parameter(torch.randn(*shape, len(self.components)) * init_scale)
        elif versor == "even":
            if alg.n > 4:
                raise ValueError(f"versor='even' renormalises in span(1, I), which needs n <= 4; the algebra has "
                                 f"n = {alg.n} (use 'exp' or 'reflections')")
            self.register_buffer("components", _pairs(alg, range(0, alg.n + 1, 2)), persistent=False)
            raw = torch.randn(*shape, len(self.components)) * init_scale
            raw[..., 0] += 1.0  # near the identity
            self.even = nn.Parameter(raw)
            #: ``I^2``, read once here: the forward branches on it without a host read
            self.pseudoscalar_square = _pseudoscalar_square(alg)
        else:
            k = alg.n if num_reflections is None else num_reflections
            self.num_reflections = check_positive_int(k, "num_reflections")
            if alg.metric.count(0.0) == alg.n:
                raise ValueError("a fully degenerate metric has no unit vectors to reflect in")
            self.register_buffer("components", _pairs(alg, [1]), persistent=False)
            self.vectors = nn.Parameter(torch.randn(*shape, self.num_reflections, alg.n))
        if versor != "reflections" and num_reflections is not None:
            raise ValueError("num_reflections applies only to versor='reflections'")
        # the constant tables of the forward pass, as non-persistent buffers
        if versor == "exp":
            tables = {f"gcan:adjoint:{k}": adjoint_blocks(alg, k) for k in range(1, alg.n)}
            tables["geometric"] = alg.table("geometric")  # versors() (dense: first column of exp)
            self.tables = ConstantTables(tables)
        else:
            self.tables = cgenn_tables(alg, "grade", "geometric", "square")
            if versor == "reflections":
                self.register_buffer("metric", torch.tensor(alg.metric), persistent=False)

    @property
    def odd(self) -> bool:
        """True when the versors are odd (improper): an odd number of reflections."""
        return self.versor == "reflections" and self.num_reflections % 2 == 1

    def versors(self, dtype: torch.dtype | None = None) -> Tensor:
        """The current versors ``a_oi``, ``(out_channels, in_channels, dim)``, with ``<a ~a>_0 = +-1``."""
        alg = self.algebra
        if self.versor == "exp":
            B = self.bivectors if dtype is None else self.bivectors.to(dtype)
            return versor_exp(alg, _scatter(alg, B, self.components), tables=self.tables)
        if self.versor == "even":
            m = _scatter(alg, self.even if dtype is None else self.even.to(dtype), self.components)
            norm = _inverse_sqrt_even_norm(alg, m, self.pseudoscalar_square, self.tables)
            return alg.geometric_product(m, norm, tables=self.tables)
        u = self.vectors if dtype is None else self.vectors.to(dtype)
        uu = (self.metric.to(u.dtype) * u * u).sum(-1, keepdim=True)
        u = u / uu.abs().clamp_min(torch.finfo(u.dtype).tiny).sqrt()
        vecs = _scatter(alg, u, self.components)  # (out, in, k, dim)
        a = vecs[..., 0, :]
        for r in range(1, self.num_reflections):
            a = alg.geometric_product(a, vecs[..., r, :], tables=self.tables)
        return a

    def sandwich_blocks(self, dtype: torch.dtype | None = None) -> list[Tensor]:
        """Per grade ``k``, the ``(out, in, m_k, m_k)`` matrices ``T`` of ``x_k -> a_oi x_k^ a_oi^-1``
        (row convention, ``x_k @ T``); versors keep grades, so these blocks are the whole map.

        ``versor="exp"`` exponentiates the adjoint action grade by grade ([`adjoint_blocks`][]),
        without forming ``a``; the others build ``a`` and its sandwich.
        """
        alg = self.algebra
        if self.versor == "exp":
            B = self.bivectors if dtype is None else self.bivectors.to(dtype)
            blocks = []
            for k in range(alg.n + 1):
                m = alg.grade_slices[k].stop - alg.grade_slices[k].start
                if k in (0, alg.n) or m == 0:  # bivectors commute with scalars and the pseudoscalar
                    blocks.append(torch.eye(m, dtype=B.dtype, device=B.device).expand(*B.shape[:-1], m, m))
                    continue
                ad = self.tables.get(f"gcan:adjoint:{k}", dtype=B.dtype)
                blocks.append(matrix_exp(torch.einsum("...b,blk->...lk", B, ad)))
            return blocks
        mats = sandwich_matrices(alg, self.versors(dtype), self.odd, tables=self.tables)
        return [mats[..., s, s] for s in alg.grade_slices]

    def forward(self, x: Tensor) -> Tensor:
        """``x (..., in_channels, dim) -> (..., out_channels, dim)``."""
        check_channels(self.algebra, x, self.in_channels, "GroupActionLinear")
        w = self.weight.to(x.dtype)
        outs = [torch.einsum("...il,oilk->...ok", x[..., s], w[..., None, None] * T)
                for s, T in zip(self.algebra.grade_slices, self.sandwich_blocks(x.dtype))]
        return torch.cat(outs, -1)


class GCAGate(nn.Module):
    """GCAN gated nonlinearity: ``x_c -> sigmoid(u_c . x_c + b_c) x_c`` with a learned functional
    ``u_c`` of all ``dim`` components of channel ``c``; ``(..., channels, dim)`` -> same.

    ``u_c . x_c`` is not an invariant, so this gate is **not equivariant** (use
    [`MVSiLU`][] for an equivariant gate).
    """

    def __init__(self, algebra, channels: int):
        super().__init__()
        self.algebra = algebra_argument(algebra)
        self.channels = check_positive_int(channels, "channels")
        self.functional = nn.Parameter(torch.randn(channels, self.algebra.dim) / math.sqrt(self.algebra.dim))
        self.bias = nn.Parameter(torch.zeros(channels))

    def forward(self, x: Tensor) -> Tensor:
        """``x (..., channels, dim) -> (..., channels, dim)``."""
        check_channels(self.algebra, x, self.channels, "GCAGate")
        logits = (x * self.functional.to(x.dtype)).sum(-1) + self.bias.to(x.dtype)
        return x * torch.sigmoid(logits)[..., None]


class GCAGroupNorm(nn.Module):
    """GCAN normalisation: channels in ``num_groups`` groups, each divided by its mean invariant norm
    ``mean_{c in group} sum_k sqrt(|<x_ck ~x_ck>_0|)`` (plus ``eps``), times a learned scale per
    channel; ``(..., channels, dim)`` -> same. Equivariant (the normaliser is invariant).
    ``eps > 0`` is required: an all-zero group is then mapped to zero (with ``eps = 0`` it would be 0/0)."""

    def __init__(self, algebra, channels: int, num_groups: int = 1, eps: float = 1e-6):
        super().__init__()
        self.algebra = algebra_argument(algebra)
        self.channels = check_positive_int(channels, "channels")
        self.num_groups = check_positive_int(num_groups, "num_groups")
        if channels % num_groups:
            raise ValueError(f"channels ({channels}) must be divisible by num_groups ({num_groups})")
        # eps > 0: an all-zero channel group would otherwise be 0 / 0 = NaN
        self.eps = check_float(eps, "eps", minimum=0.0, strict_minimum=True)
        self.scale = nn.Parameter(torch.ones(channels))
        self.tables = cgenn_tables(self.algebra, "grade", "quadratic_form")
        self.type_in = self.type_out = multivector_type(self.algebra, channels)

    def forward(self, x: Tensor) -> Tensor:
        """``x (..., channels, dim) -> (..., channels, dim)``."""
        check_channels(self.algebra, x, self.channels, "GCAGroupNorm")
        norms = self.algebra.grade_norms(x, tables=self.tables).sum(-1)  # (..., channels)
        groups = norms.unflatten(-1, (self.num_groups, -1)).mean(-1, keepdim=True)  # (..., groups, 1)
        denom = groups.expand(*groups.shape[:-1], self.channels // self.num_groups).flatten(-2)
        return x / (denom + self.eps)[..., None] * self.scale.to(x.dtype)[:, None]


class GCAMLP(nn.Module):
    """GCA-MLP: ``num_blocks`` group action layers (blocks), each but the last followed by
    [`GCAGroupNorm`][] and [`GCAGate`][]; ``(..., in_channels, dim) -> (..., out_channels, dim)``.

    Channels are objects or parts (e.g. the particles of a system, each a point and a velocity);
    the network learns which rigid motions of which inputs to combine. Not equivariant (by design).
    """

    def __init__(self, algebra, in_channels: int, out_channels: int, hidden_channels: int = 32,
                 num_blocks: int = 3, versor: str = "exp", num_groups: int = 1):
        super().__init__()
        algebra = algebra_argument(algebra)
        check_positive_int(num_blocks, "num_blocks")
        check_positive_int(in_channels, "in_channels")
        check_positive_int(hidden_channels, "hidden_channels")
        check_positive_int(out_channels, "out_channels")
        sizes = [in_channels] + [hidden_channels] * (num_blocks - 1) + [out_channels]
        layers: list[nn.Module] = []
        for i in range(num_blocks):
            layers.append(GroupActionLinear(algebra, sizes[i], sizes[i + 1], versor=versor))
            if i < num_blocks - 1:
                layers += [GCAGroupNorm(algebra, sizes[i + 1], num_groups), GCAGate(algebra, sizes[i + 1])]
        self.net = nn.Sequential(*layers)
        self.algebra = algebra
        self.in_channels = check_positive_int(in_channels, "in_channels")

    def forward(self, x: Tensor) -> Tensor:
        """``x (..., in_channels, dim) -> (..., out_channels, dim)``."""
        check_channels(self.algebra, x, self.in_channels, "GCAMLP")
        return self.net(x)
