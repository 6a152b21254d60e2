"""``DiagramLinear``: an equivariant linear layer between tensor power spaces, applied diagram by diagram.

``y = Σ_d D_d ⊗ Λ_d`` (Pearce-Crump 2022/2023): one channel-mixing matrix
``Λ_d (out_channels, in_channels)`` per basis element ``D_d`` of
``Hom_G((R^n)^{⊗k}, (R^n)^{⊗l})`` (see [`geomlin.linear.diagrams.basis`][]),
plus a bias ``Σ_b β_b D_b`` from the basis of the ``(0, l)`` diagrams. The
matrices ``D_d`` are never built: every diagram is applied with the factored
product of [`geomlin.linear.diagrams.apply`][].

Execution plan (built once in ``__init__``): the diagrams actually applied
(S_n: the diagram-basis elements the orbit basis expands into) are split into
bottom halves (reading the input) and top halves (writing the output).

* every distinct bottom half runs once (one strided view, at most one sum);
* top halves fed by the same list of bottom results form a *family*: the
  results are concatenated along the channel axis and mixed by one matrix
  product for all tops of the family, each top then written by a strided add;
  bias terms whose top is a broadcast ride along in that product;
* the identity top half: bottoms that are pure axis permutations are mixed in
  one product with ``x`` and permuted on the way out (channel mixing commutes
  with axis permutations), other bottoms accumulate in place (``baddbmm_``).

For S_n with k = l = 2: 7 strided contractions (2 are free views), 3 matrix products and 5
strided writes for the 15 diagrams.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from geomlin.linear.diagrams.apply import (
    TopOp,
    bottom_apply,
    check_diagram_input,
    levi_civita_matrix,
    split_diagram,
    top_add,
)
from geomlin.linear.diagrams.basis import diagram_basis, frobenius_norm_sq
from geomlin.linear.diagrams.enumerate import partition_diagrams
from geomlin.linear.diagrams.families import check_n, geomlin_group, group_name
from geomlin.linear.diagrams.orbit import orbit_expansion, orbit_to_diagram_matrix
from geomlin.reps.types import Tensors
from geomlin.validation import check_finite, check_nonnegative_int, check_positive_int

#: Coefficient matrices (applied diagrams x basis elements) with more entries than this are
#: stored sparse (the S(n) orbit basis expands each element into few diagrams).
MAX_DENSE_COEFFICIENTS = 2 ** 20


def _gain(d, n: int, name: str, orbit: bool, l: int) -> float:
    """RMS output entry of the basis element on a standard normal input: ``||D||_F / sqrt(n^l)``."""
    return math.sqrt(frobenius_norm_sq(d, n, name, orbit) / n ** l)


class DiagramLinear(nn.Module):
    """Equivariant linear layer ``(..., C_in, n^k) -> (..., C_out, n^l)`` from diagram bases.

    Parameters
    ----------
    group : str or Group
        the family ``"S"``, ``"O"``, ``"SO"``, ``"Sp"``, or a geomlin ``S(n)/O(n)/SO(n)/Sp(m)`` or its name
        (``"S(4)"``; see [`group_name`][geomlin.linear.diagrams.families.group_name]).
        The group acts on every tensor axis by its ``n x n`` matrices;
        ``"Sp"`` uses ``J = symplectic_form(n // 2)`` in the basis ``(q_1..q_m, p_1..p_m)``.
    n : int
        dimension of R^n (even for Sp).
    order_in : int
        input tensor order ``k`` (number of trailing ``n``-axes of the input), ``>= 0``: the top
        row of the ``(k, l)`` diagrams.
    order_out : int
        output tensor order ``l``, ``>= 0``: their bottom row.
    in_channels, out_channels : int
        channel counts (the axis just before the tensor axes).
    bias : bool
        add the equivariant bias spanned by the ``(0, l)`` basis diagrams.

    Parameters of the module
    ------------------------
    weight: ``(num_basis, out_channels, in_channels)``, one ``Λ_d`` per basis element
        (S_n: orbit basis ``X_π``, ``π`` with at most n blocks; others: the
        rank-revealing diagram selection). Basis elements are scaled to unit
        RMS gain so a standard init keeps activations O(1).
    bias: ``(num_bias_basis, out_channels)`` or None.

    Shapes
    ------
    input ``(..., in_channels, n, .., n)`` with ``k`` trailing ``n``-axes, floating point;
    output ``(..., out_channels, n, .., n)`` with ``l`` trailing ``n``-axes, same dtype.
    """

    def __init__(self, group, n: int, order_in: int, order_out: int, in_channels: int, out_channels: int,
                 bias: bool = True):
        super().__init__()
        name = group_name(group, n)
        check_n(name, n)
        k = check_nonnegative_int(order_in, "DiagramLinear: order_in")
        l = check_nonnegative_int(order_out, "DiagramLinear: order_out")
        in_channels = check_positive_int(in_channels, "DiagramLinear: in_channels")
        out_channels = check_positive_int(out_channels, "DiagramLinear: out_channels")
        if not isinstance(bias, bool):
            raise TypeError(f"DiagramLinear: bias must be a bool, got {type(bias).__name__}")
        self.group, self.n, self.order_in, self.order_out = name, n, k, l
        self.in_channels, self.out_channels = in_channels, out_channels
        acting = geomlin_group(name, n)
        self.type_in = Tensors(acting, k, in_channels)
        self.type_out = Tensors(acting, l, out_channels)
        orbit = name == "S"
        self.basis = diagram_basis(name, k, l, n)
        gains = torch.tensor([_gain(d, n, name, orbit, l) for d in self.basis], dtype=torch.float64)
        if orbit:
            applied = partition_diagrams(k, l, max_blocks=n)
            coeff = orbit_to_diagram_matrix(self.basis, applied, sparse=True)
        else:
            applied = list(self.basis)
            coeff = torch.sparse_coo_tensor(torch.arange(len(applied)).repeat(2, 1),
                                            torch.ones(len(applied), dtype=torch.float64),
                                            (len(applied), len(applied)), check_invariants=True)
        applied, coeff = self._plan_diagrams(applied, coeff)
        self.applied = applied
        # coeff[a, r]: coefficient of applied diagram a in basis element r (unit-gain scaled);
        # dense for small layers (one einsum), sparse for large ones (S(n) with many diagrams)
        coeff = (coeff * (1.0 / gains.clamp_min(1e-300))[None, :]).coalesce()
        if coeff.shape[0] * coeff.shape[1] <= MAX_DENSE_COEFFICIENTS:
            coeff = coeff.to_dense()
        self.register_buffer("coeff", coeff, persistent=False)
        num = len(self.basis)
        self.weight = nn.Parameter(torch.randn(num, out_channels, in_channels)
                                   / math.sqrt(max(num * in_channels, 1)))
        if bias:
            self.bias_basis = diagram_basis(name, 0, l, n)
            self.bias = nn.Parameter(torch.zeros(len(self.bias_basis), out_channels))
        else:
            self.bias_basis = []
            self.register_parameter("bias", None)
        self._plan_bias(orbit)
        # SO(n): the ε tables of every bottom half that contracts with it, as buffers (moved with the layer)
        for s in sorted({b.eps_out for b in self._bottoms + [b for b, _, _ in self._bias_alone] if b.eps_in or b.eps_out}):
            self.register_buffer(f"levi_civita_{s}", levi_civita_matrix(n, s), persistent=False)

    def _bottom(self, op, x: Tensor) -> Tensor:
        """[`bottom_apply`][] with this layer's ε table."""
        table = getattr(self, f"levi_civita_{op.eps_out}") if op.eps_in or op.eps_out else None
        return bottom_apply(op, x, self.n, table)

    def _plan_diagrams(self, applied, coeff: Tensor) -> tuple[list, Tensor]:
        """Build the execution plan; returns the applied diagrams reordered to match it and the
        matching rows of ``coeff``.

        Tops that read the same list of bottom results form a *family*: one concatenation and one
        matrix product serve all of them (their weights are stacked along the output rows).
        """
        bottoms: dict = {}
        tops: dict = {}
        for a, d in enumerate(applied):
            bottom, top = split_diagram(d, self.group)
            b = bottoms.setdefault(bottom, len(bottoms))
            tops.setdefault(top, []).append((a, b))
        self._bottoms = list(bottoms)
        identity = TopOp(self.order_out, tuple((a,) for a in range(self.order_out)), (), (), self.group == "Sp")
        order = []
        self._identity = None  # (bottom indices, first applied row) of the identity top
        if identity in tops:
            members = tops.pop(identity)
            perms = []  # (position in the group, axis permutation) of pure-permutation bottoms
            bottom_of = [b for _, b in members]
            for r, (_, b) in enumerate(members):
                op = self._bottoms[b]
                if (not op.traced and not op.eps_in and not op.eps_out and not op.twist
                        and all(len(p) == 1 for p in op.passing) and len(op.passing) == op.k):
                    perms.append((r, tuple(p[0] for p in op.passing)))
                    bottom_of[r] = None
            perms.sort(key=lambda item: item[1] != tuple(range(self.order_out)))  # identity first: contiguous sum
            self._identity = (bottom_of, 0, perms)
            # the applied rows of the permutation bottoms, as a device index (the identity top starts at row 0)
            self.register_buffer("identity_rows", torch.tensor([r for r, _ in perms], dtype=torch.long),
                                 persistent=False)
            order += [a for a, _ in members]
        families: dict = {}
        for top, members in tops.items():
            families.setdefault(tuple(b for _, b in members), []).append((top, members))
        self._families = []  # (bottom indices, tops, first applied row, last applied row + 1)
        for key, group in families.items():
            start = len(order)
            for _, members in group:
                order += [a for a, _ in members]
            self._families.append((list(key), [t for t, _ in group], start, len(order)))
        return [applied[a] for a in order], _permute_rows(coeff, order)

    def _plan_bias(self, orbit: bool) -> None:
        """Bias: each (0, l) basis element expands into top halves; those equal to a family's top
        are added to that family's (tiny) matrix product result, the others written on their own."""
        name, n, l = self.group, self.n, self.order_out
        tops: dict = {}
        rows, cols, vals = [], [], []
        for r, d in enumerate(self.bias_basis):
            terms = orbit_expansion(d) if orbit else ((1.0, d),)
            for coeff, sigma in terms:
                bottom, top = split_diagram(sigma, name)
                t = tops.setdefault((top, bottom), len(tops))
                rows.append(t)
                cols.append(r)
                vals.append(coeff / _gain(d, n, name, orbit, l))
        M = torch.zeros(len(tops), len(self.bias_basis), dtype=torch.float64)
        for t, r, v in zip(rows, cols, vals):
            M[t, r] += v
        self.register_buffer("bias_coeff", M, persistent=False)
        where = {}
        for f, (_, ftops, _, _) in enumerate(self._families):
            for i, top in enumerate(ftops):
                where[top] = (f, i)
        self._bias_in_family = {}  # family -> [(position in family, bias top row)]
        self._bias_alone = []  # (BottomOp, TopOp, bias top row); the bottom makes ε's axes (SO)
        for (top, bottom), t in tops.items():
            if top in where and top.in_axes == 0:
                f, i = where[top]
                self._bias_in_family.setdefault(f, []).append((i, t))
            else:
                self._bias_alone.append((bottom, top, t))

    @property
    def num_basis(self) -> int:
        """Number of basis elements (= dim Hom_G((R^n)^{⊗k}, (R^n)^{⊗l}))."""
        return len(self.basis)

    def extra_repr(self) -> str:
        return (f"group={self.group!r}, n={self.n}, order_in={self.order_in}, order_out={self.order_out}, in_channels={self.in_channels}, "
                f"out_channels={self.out_channels}, num_basis={self.num_basis}, bias={self.bias is not None}")

    def diagram_weights(self) -> Tensor:
        """``(num_applied, out_channels, in_channels)``: the ``Λ`` of every applied diagram."""
        return self._applied_weights(self.weight.dtype)

    def _applied_weights(self, dtype: torch.dtype) -> Tensor:
        """``coeff @ weight``: ``(num_applied, out_channels, in_channels)`` in ``dtype``."""
        W = self.weight.to(dtype)
        if self.coeff.is_sparse:
            flat = torch.sparse.mm(self.coeff.to(dtype), W.reshape(W.shape[0], -1))
            return flat.reshape(-1, self.out_channels, self.in_channels)
        return torch.einsum("ar,roi->aoi", self.coeff.to(dtype), W)

    def forward(self, x: Tensor) -> Tensor:
        """Apply the layer; ``x (..., in_channels, n^k) -> (..., out_channels, n^l)``."""
        k, l, n = self.order_in, self.order_out, self.n
        check_diagram_input(x, k, n)
        if x.ndim < k + 1 or x.shape[x.ndim - k - 1] != self.in_channels:
            raise ValueError(f"DiagramLinear expects input (..., in_channels={self.in_channels}, "
                             f"{', '.join(['n'] * k)}{', ' if k else ''}) with n = {n}, got {tuple(x.shape)}")
        # one pass over the input (the layer's work is that times the number of diagrams);
        # asynchronous on accelerators, so no host synchronisation
        check_finite(x, "x")
        lead = x.shape[: x.ndim - k - 1]
        xb = x.reshape(-1, self.in_channels, *([n] * k))
        B = xb.shape[0]
        o = self.out_channels
        out_shape = (B, o, *([n] * l))
        if self.coeff.is_sparse:
            weights = self._applied_weights(x.dtype).transpose(0, 1)  # (o, a, i)
        else:
            weights = torch.einsum("ar,roi->oai", self.coeff.to(x.dtype), self.weight.to(x.dtype))
        bias = None if self.bias is None else self.bias_coeff.to(x.dtype) @ self.bias.to(x.dtype)
        zs = [self._bottom(b, xb) for b in self._bottoms]
        out = None
        if self._identity is not None:
            # the top half is the identity: pure axis permutations of x are mixed in one product
            # and permuted on the way out (channel mixing commutes with axis permutations); any
            # other bottom result is accumulated straight into the output buffer
            members, start, perms = self._identity
            # (under autocast the products run in its dtype; the terms are summed in x's dtype)
            if perms:
                W = weights.index_select(1, self.identity_rows).transpose(0, 1).reshape(len(perms) * o, -1)
                Y = torch.matmul(W, xb.reshape(B, self.in_channels, -1)).view(B, len(perms), *out_shape[1:])
                terms = [Y[:, j].permute(0, 1, *(2 + a for a in perm)) for j, (_, perm) in enumerate(perms)]
                out = (terms[0].clone() if len(terms) == 1 else torch.add(terms[0], terms[1]))
                out = out.to(xb.dtype).contiguous()
                for term in terms[2:]:
                    out.add_(term)
            for r, b in enumerate(members):
                if b is None:
                    continue
                W = weights[:, start + r].expand(B, -1, -1)
                Z = zs[b].reshape(B, self.in_channels, -1)
                if out is None:
                    out = torch.bmm(W, Z).to(xb.dtype)
                elif out.dtype == W.dtype == Z.dtype:
                    out.view(B, o, -1).baddbmm_(W, Z)
                else:
                    out.view(B, o, -1).add_(torch.bmm(W, Z))
        out = xb.new_zeros(out_shape) if out is None else out.view(out_shape)  # storage offset 0 (passed to top_add)
        if torch.compiler.is_compiling():
            # inductor functionalizes top_add's writes through as_strided only on a base tensor, not a view
            out = out.clone()
        for f, (members, tops, start, stop) in enumerate(self._families):
            Z = zs[members[0]] if len(members) == 1 else torch.cat([zs[b] for b in members], dim=1)
            T = len(tops)
            W = weights[:, start:stop].reshape(o, T, len(members), -1).transpose(0, 1).reshape(T * o, -1)
            y = torch.matmul(W, Z.reshape(B, Z.shape[1], -1))  # (B, T * o, n^c)
            if bias is not None and f in self._bias_in_family:
                y4 = y.view(B, T, o, -1)
                for i, t in self._bias_in_family[f]:
                    y4[:, i].add_(bias[t][:, None])
            for i, top in enumerate(tops):
                top_add(top, out, y[:, i * o:(i + 1) * o].reshape((B, o, *([n] * top.in_axes))), n, offset=0)
        if bias is not None:
            for bottom, top, t in self._bias_alone:
                top_add(top, out, self._bottom(bottom, bias[t].expand(B, o)), n, offset=0)
        return out.reshape((*lead, self.out_channels, *([n] * l)))


def _permute_rows(coeff: Tensor, order: list[int]) -> Tensor:
    """``coeff[order]`` for a dense or sparse COO matrix."""
    if not coeff.is_sparse:
        return coeff[order]
    coeff = coeff.coalesce()
    position = torch.empty(len(order), dtype=torch.long)
    position[torch.tensor(order, dtype=torch.long)] = torch.arange(len(order))
    idx = coeff.indices().clone()
    idx[0] = position[idx[0]]
    return torch.sparse_coo_tensor(idx, coeff.values(), coeff.shape, check_invariants=True).coalesce()
