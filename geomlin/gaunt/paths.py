"""The paths of [`GauntTensorProduct`][]: their couplings from the sphere, their plan, their evaluation.

**Couplings.** Path ``(l1, l2, l3)`` couples through ``int Y_k Y_i Y_j`` (the Gaunt coefficient,
``l1 + l2 + l3`` even) or ``int Y_k {Y_i, Y_j}`` (the Poisson bracket, odd;
[`geomlin.gaunt.bracket`][]), integrated exactly on a sphere grid. Each is the Clebsch-Gordan
coefficient times a positive constant (``c`` for even paths, ``b`` for odd ones, see
[`path_constant`][]), so divided by its norm it is e3nn's ``wigner_3j(l1, l2, l3)``
([`path_coefficients`][]; ``tests/gaunt/test_paths.py`` checks every path up to ``L = 8`` against
e3nn to 1e-10).

**Plan.** The paths that share a block of ``x2`` and the degree ``l1`` of ``x1`` form a group (the
``x1`` blocks of that degree, both parities and repeated irreps, stacked along their channels; the
paired modes ``uuw``, ``uuu`` group per pair). A group shares one contraction per output degree,
``Y[z, u, v, k]``, computed in the cheapest of these orders, chosen once from the irreps (never from
the batch, so the numbers of a model do not depend on its batch size):

* ``scale``: one input is a scalar, the coupling is the identity over ``sqrt(2l + 1)``;
* ``dot``: the only output is a scalar, the coupling is the dot product over ``sqrt(2l + 1)``;
* ``outer``: the outer product ``x1_u (x) x2_v`` times the group's coupling table, one GEMM
  (``U V d1 d2 (1 + K)`` multiply-adds per row);
* ``right``: ``x2`` contracted with the table first (the "multiply by ``x2``" operator, ``V d2 d1 K``),
  then met by every channel of ``x1`` in one batched GEMM (``U V d1 K``): spherical harmonics
  (``V = 1``) times features, as in every convolution.

With several channels of ``x2`` the blocks are laid out ``(Z, 2 l3 + 1, U, V)``, so that the weights of
a ``uvw`` path contract their trailing ``U V`` in one GEMM without a copy. A ``uvw`` path may instead
contract its weights with one input first and meet the other input's operator in a batched GEMM (the
order e3nn's opt_einsum picks where it is cheaper: ``U V W d1`` or ``U V W d2`` against ``U V W d3``).
Each path then applies its weights as its mode says (module docstring of
[`geomlin.gaunt.instructions`][]) and its e3nn normalisation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np
import torch
from torch import Tensor

from geomlin.gaunt.bracket import path_block
from geomlin.gaunt.cache import device_tables, table_builder
from geomlin.validation import check_nonnegative_int

__all__ = ["path_coefficients", "path_constant"]

ORDERS = ("scale", "dot", "outer", "right")
#: Modes whose channels pair ``u`` of ``x1`` with the same ``u`` of ``x2``.
PAIRED = ("uuw", "uuu")
#: Relative cost of a batched GEMM of small matrices against one large GEMM per multiply-add.
#: Measured on the CPU: it keeps ``outer`` where the two orders are within this factor.
BATCHED_GEMM_COST = 1.5


def _triangle(l1: int, l2: int, l3: int) -> bool:
    return abs(l1 - l2) <= l3 <= l1 + l2


def path_constant(l1: int, l2: int, l3: int) -> float:
    """The norm of a path's coupling: ``c = sqrt((2l1+1)(2l2+1)(2l3+1) / (4 pi)) |(l1 l2 l3; 0 0 0)|`` for
    ``l1 + l2 + l3`` even, ``b = sqrt(l1 (l1+1) l2 (l2+1) (2l1+1)(2l2+1)(2l3+1) / (4 pi)) |(l1 l2 l3; 1 -1 0)|``
    for odd (computed as the norm of the coupling on the sphere grid); 0 outside the triangle and for odd
    paths with ``l1 = 0`` or ``l2 = 0``.

    ``gaunt_tensor_product`` / ``gaunt_bracket`` restricted to the path equal this constant times e3nn's
    ``wigner_3j(l1, l2, l3)``.
    """
    for name, l in (("l1", l1), ("l2", l2), ("l3", l3)):
        check_nonnegative_int(l, name)
    if not _triangle(l1, l2, l3):
        return 0.0
    return float(np.linalg.norm(path_block(l1, l2, l3)))


@cache
def _coefficients(l1: int, l2: int, l3: int) -> np.ndarray:
    block = path_block(l1, l2, l3)
    norm = np.linalg.norm(block)
    if norm == 0:
        raise ValueError(f"the path ({l1}, {l2}, {l3}) has no coupling: it needs |l1 - l2| <= l3 <= l1 + l2"
                         + ("" if _triangle(l1, l2, l3) else f", got {l3} outside [{abs(l1 - l2)}, {l1 + l2}]"))
    out = block / norm
    out.flags.writeable = False
    return out


def path_coefficients(l1: int, l2: int, l3: int) -> Tensor:
    """e3nn's ``wigner_3j(l1, l2, l3)`` from the sphere: the path's coupling over [`path_constant`][],
    ``(2l1+1, 2l2+1, 2l3+1)`` float64 (a copy); unit norm. ``ValueError`` outside the triangle."""
    for name, l in (("l1", l1), ("l2", l2), ("l3", l3)):
        check_nonnegative_int(l, name)
    return torch.from_numpy(_coefficients(l1, l2, l3).copy())


@table_builder("tp.pair")
def _pair_tables(order: int, l1: int, l2: int, *l3s: int) -> tuple[Tensor]:
    """The coupling table of a group, float64: ``outer`` ``(d1 d2, K)``, ``right`` ``(d2, d1 K)``, with the output
    degrees ``l3s`` side by side along ``K``."""
    C = np.concatenate([_coefficients(l1, l2, l3) for l3 in l3s], axis=-1)  # (d1, d2, K)
    d1, d2, K = C.shape
    name = ORDERS[order]
    table = C.reshape(d1 * d2, K) if name == "outer" else C.transpose(1, 0, 2).reshape(d2, d1 * K)
    return (torch.from_numpy(np.ascontiguousarray(table)),)


@table_builder("tp.left")
def _left_table(l1: int, l2: int, l3: int) -> tuple[Tensor]:
    """One path's coupling as ``(d1, d2 d3)``, float64: ``x1 @ table`` is the operator of ``x1``."""
    C = _coefficients(l1, l2, l3)
    return (torch.from_numpy(C.reshape(C.shape[0], -1).copy()),)


@table_builder("tp.triu")
def _triu_table(mul: int) -> tuple[Tensor]:
    """Flat indices ``u * mul + v`` of the pairs ``u < v`` (row-major, as ``torch.triu_indices``), int64."""
    iu, iv = torch.triu_indices(mul, mul, 1)
    return (iu * mul + iv,)


# ------------------------------------------------------------------------------------------- plan
@dataclass(frozen=True)
class PathPlan:
    """One instruction inside its group: its channels, output columns, weights and scale."""

    instruction: int
    member: int        # which x1 block of the group (its channels)
    column: int        # which output degree of the group
    i_out: int
    mode: str
    weight: int | None  # index among the trained instructions (None: no weights)
    shape: tuple[int, ...]
    scale: float        # e3nn's path weight, times 1 / sqrt(2l + 1) for the "scale" and "dot" orders
    first: int = 0      # 1 (2): a "uvw" path contracts its weights with x1 (x2) first, 0 not
    key: tuple | None = None  # the table of ``first = 2``: the operator of x1 for this output degree


@dataclass(frozen=True)
class GroupPlan:
    """One contraction shared by the paths of a block of ``x2`` with the ``x1`` blocks of one degree.

    The ``x1`` blocks (``members``, irrep indices) are stacked along their channels, so the pairs
    ``(i_in1, i_in2)`` of one degree ``l1`` (both parities, repeated irreps) run as one.
    """

    i2: int
    members: tuple[int, ...]
    paired: bool
    order: str
    transposed: bool   # contraction blocks laid out (Z, 2 l3 + 1, U, V) (x2 with several channels)
    l1: int
    l2: int
    l3s: tuple[int, ...]
    key: tuple | None
    triu_key: tuple | None
    paths: tuple[PathPlan, ...]


def _order(l1: int, l2: int, l3s: tuple, u: int, v: int, paired: bool) -> str:
    if l1 == 0 or l2 == 0:
        return "scale"
    if l3s == (0,):
        return "dot"
    if paired:
        return "outer"
    if v > 1:  # several channels of x2: its operator, in the transposed layout (see _contract)
        return "right"
    d1, d2, K = 2 * l1 + 1, 2 * l2 + 1, sum(2 * l + 1 for l in l3s)
    costs = {"outer": u * v * d1 * d2 * (1 + K), "right": v * d2 * d1 * K + BATCHED_GEMM_COST * u * v * d1 * K}
    return min(costs, key=costs.get)


def _first(order: str, l1: int, l2: int, mode: str, has_weight: bool, shared: bool, u: int, v: int, w: int,
           d3: int) -> int:
    """For a ``uvw`` path: contract its weights first with ``x1`` (1), ``x2`` (2), or not (0), by multiply-adds
    per row (as opt_einsum chooses for e3nn): the group's block and the weights' GEMM (``u v w d3``), or the
    weights' GEMM with one input (``u v w d1`` / ``u v w d2``) and a batched GEMM with the operator of the
    other input (copies counted). ``right`` groups, and ``scale`` groups with several channels of ``x2``
    (the operator is then the other input itself)."""
    d1, d2 = 2 * l1 + 1, 2 * l2 + 1
    if mode != "uvw" or not has_weight or order not in ("right", "scale") or (order == "scale" and v == 1):
        return 0
    costs = {0: u * v * (d1 if order == "right" else 1) * d3 + u * v * w * d3}  # the block, the weights' GEMM
    if order == "right" or l1 == 0:
        costs[1] = u * v * w * d1 + v * d1 * d3 + BATCHED_GEMM_COST * w * v * d1 * d3
    if shared and (order == "right" or l2 == 0):
        costs[2] = u * v * w * d2 + (2 * u * d1 * d2 * d3 if order == "right" else 0) \
            + BATCHED_GEMM_COST * w * u * d2 * d3
    return min(costs, key=costs.get)


def build_plan(irreps_in1, irreps_in2, irreps_out, instructions, shared_weights: bool = True) -> tuple[GroupPlan, ...]:
    """Group the non-empty instructions (e3nn ``Instruction``\\ s): per block of ``x2`` and degree of ``x1``
    (per pair for the paired modes ``uuw``, ``uuu``)."""
    trained = {k: n for n, k in enumerate(k for k, ins in enumerate(instructions) if ins.has_weight)}
    groups: dict = {}
    for k, ins in enumerate(instructions):
        dims = (irreps_in1[ins.i_in1].dim, irreps_in2[ins.i_in2].dim, irreps_out[ins.i_out].dim)
        if 0 in ins.path_shape or 0 in dims:
            continue  # an empty path contributes nothing (as in e3nn)
        paired = ins.connection_mode in PAIRED
        key = (ins.i_in2, irreps_in1[ins.i_in1].ir.l, paired, ins.i_in1 if paired else None)
        groups.setdefault(key, []).append(k)
    plans = []
    for (i2, l1, paired, _), ks in groups.items():
        members = tuple(dict.fromkeys(instructions[k].i_in1 for k in ks))
        l3s = tuple(dict.fromkeys(irreps_out[instructions[k].i_out].ir.l for k in ks))
        (v, ir2) = irreps_in2[i2]
        u = sum(irreps_in1[i].mul for i in members)
        order = _order(l1, ir2.l, l3s, u, v, paired)
        coupling = 1.0 if order in ("outer", "right") else 1.0 / math.sqrt(2 * (l1 if order == "dot" else max(l1, ir2.l)) + 1)
        paths = []
        for k in ks:
            ins = instructions[k]
            mul1, (mul_out, ir_out) = irreps_in1[ins.i_in1].mul, irreps_out[ins.i_out]
            first = _first(order, l1, ir2.l, ins.connection_mode, ins.has_weight, shared_weights, mul1, v, mul_out,
                           ir_out.dim)
            paths.append(PathPlan(k, members.index(ins.i_in1), l3s.index(ir_out.l), ins.i_out, ins.connection_mode,
                                  trained.get(k), tuple(ins.path_shape), float(ins.path_weight) * coupling, first,
                                  ("tp.left", l1, ir2.l, ir_out.l) if first == 2 and order == "right" else None))
        paths = tuple(paths)
        key = ("tp.pair", ORDERS.index(order), l1, ir2.l, *l3s) if order in ("outer", "right") else None
        triu = {"uvu<v", "u<vw"} & {p.mode for p in paths}
        plans.append(GroupPlan(i2, members, paired, order, not paired and v > 1, l1, ir2.l, l3s, key,
                               ("tp.triu", irreps_in1[members[0]].mul) if triu else None, paths))
    return tuple(plans)


def plan_keys(plans) -> list[tuple]:
    """Cache keys of every table the plans read."""
    return [k for p in plans for k in (p.key, p.triu_key, *(q.key for q in p.paths)) if k is not None]


# ------------------------------------------------------------------------------------------- evaluation
class _Concat(torch.autograd.Function):
    """``torch.cat`` along axis 1 whose gradient is ``torch.split`` (views).

    ``torch.cat``'s own gradient slices the output gradient, and the gradient of a slice fills a zero
    tensor of the whole size: in a double backward (forces) each of ``k`` pieces then costs a zero fill
    and an addition of the whole output, ``O(k)`` passes. Split's gradient is one concatenation.
    """

    @staticmethod
    def forward(ctx, *pieces: Tensor) -> Tensor:
        ctx.sizes = [p.shape[1] for p in pieces]
        return torch.cat(pieces, dim=1)

    @staticmethod
    def backward(ctx, grad: Tensor):
        return torch.split(grad, ctx.sizes, dim=1)


def concat(pieces) -> Tensor:
    """``torch.cat(pieces, dim=1)`` with a split for gradient (see ``_Concat``); plain ``torch.cat`` inside
    ``torch.compile`` (whose tracing of a variadic ``apply`` keeps only the first piece, torch 2.13)."""
    if len(pieces) == 1:
        return pieces[0]
    return torch.cat(pieces, dim=1) if torch.compiler.is_compiling() else _Concat.apply(*pieces)


def _contract(group: GroupPlan, a: Tensor, b: Tensor, tables=None) -> tuple[tuple[Tensor, ...], Tensor | None]:
    """``a (Z, U, d1)``, ``b (Z, V, d2)`` -> one block per output degree ``l3`` of the group and a factor
    ``(Z, 1, 1)`` still to multiply the paths' outputs by (or None).

    Blocks are ``(Z, U, V, 2 l3 + 1)`` (``(Z, U, 2 l3 + 1)`` for paired channels) or, when ``x2`` has
    several channels (``group.transposed``), ``(Z, 2 l3 + 1, U, V)``: then the weights of a ``uvw`` path
    contract the trailing ``U V`` of a contiguous block in one GEMM, instead of copying a strided block
    first. Without the ``1 / sqrt(2l + 1)`` of the ``scale`` and ``dot`` orders (in the paths' scales). A
    scalar ``x2`` (one channel of degree 0) is left out of the blocks and returned as the factor: applied
    after the weights it costs one pass over the outputs instead of one over the blocks.
    """
    Z, U, d1 = a.shape
    V, d2 = b.shape[1], b.shape[2]
    if group.order == "scale":  # one of d1, d2 is 1: the coupling is the identity (over sqrt(2l + 1))
        if group.paired:
            return (a * b,), None
        if V == 1 and d2 == 1:
            return (a[:, :, None, :],), b
        if group.transposed:  # (transposed inputs made contiguous first: then the product is contiguous)
            return (a.transpose(1, 2).contiguous()[:, :, :, None] * b.transpose(1, 2).contiguous()[:, :, None, :],), None
        return (a[:, :, None, :] * b[:, None, :, :],), None
    if group.order == "dot":  # (Z, U, V, 1) and (Z, 1, U, V) are the same memory
        if group.paired:
            return ((a * b).sum(-1, keepdim=True),), None
        Y = torch.bmm(a, b.transpose(1, 2))
        return ((Y[:, None] if group.transposed else Y[..., None]),), None
    (T,) = device_tables(group.key, a.device, a.dtype, tables)
    widths = [2 * l + 1 for l in group.l3s]
    starts = [sum(widths[:i]) for i in range(len(widths))]
    if group.order == "outer":
        xx = (a[..., :, None] * b[..., None, :]).reshape(Z, U, d1 * d2) if group.paired else \
            (a[:, :, None, :, None] * b[:, None, :, None, :]).reshape(Z, U, V, d1 * d2)
        return tuple(xx @ T[:, k:k + w] for k, w in zip(starts, widths)), None
    return _right_blocks(group, a, _operator(group, b, T), widths, starts), None                 # "right"


def _operator(group: GroupPlan, b: Tensor, T: Tensor) -> Tensor:
    """The operator of ``x2`` for every output degree of a ``right`` group: ``b (Z, V, d2)`` -> ``(Z, V, d1, K)``."""
    Z, V, d2 = b.shape
    return (b.reshape(Z * V, d2) @ T).view(Z, V, 2 * group.l1 + 1, -1)


def _right_blocks(group: GroupPlan, a: Tensor, M: Tensor, widths, starts) -> tuple[Tensor, ...]:
    """The blocks of a ``right`` group from ``a (Z, U, d1)`` and the operator ``M (Z, V, d1, K)``."""
    Z, U, d1 = a.shape
    V = M.shape[1]
    if V == 1:
        M = M.view(Z, d1, -1)
        return tuple(torch.bmm(a, M[:, :, k:k + w]).view(Z, U, 1, w) for k, w in zip(starts, widths))
    # transposed: (Z w, U, d1) @ (Z w, d1, V), one batched GEMM per degree, contiguous (Z, w, U, V) blocks
    return tuple(torch.bmm(a[:, None].expand(Z, w, U, d1).reshape(Z * w, U, d1),
                           M[..., k:k + w].permute(0, 3, 2, 1).reshape(Z * w, d1, V)).view(Z, w, U, V)
                 for k, w in zip(starts, widths))


def _weights_first(path: PathPlan, a: Tensor, b: Tensor, M: Tensor | None, k: int, d3: int, w: Tensor,
                   tables=None) -> Tensor:
    """A ``uvw`` path with its weights contracted first (``path.first``): ``a (Z, U, d1)`` (its member),
    ``b (Z, V, d2)``, the operator of ``x2``, ``M (Z, V, d1, K)`` (the path's degree at columns ``k:k + d3``;
    ``b`` itself when ``d1 = 1`` in a ``scale`` group), weights ``w (U, V, W)`` or ``(Z, U, V, W)`` ->
    ``(Z, W, d3)``."""
    Z, U, d1 = a.shape
    V, d2 = b.shape[1], b.shape[2]
    W = w.shape[-1]
    if path.first == 1:  # B[z, (i, v), w] = sum_u x1[z, u, i] w[u, v, w]; out = B^T M over (i, v)
        if M is None:
            M, k = b.view(Z, V, 1, d2), 0
        if w.dim() == 4:
            B = torch.bmm(a.transpose(1, 2), w.reshape(Z, U, V * W))
        else:
            B = a.transpose(1, 2).reshape(Z * d1, U) @ w.reshape(U, V * W)
        Mt = M[..., k:k + d3].transpose(1, 2).reshape(Z, d1 * V, d3)  # (a copy of the operator: smaller than B)
        return torch.bmm(B.view(Z, d1 * V, W).transpose(1, 2), Mt)
    # 2: B[z, (j, u), w] = sum_v x2[z, v, j] w[u, v, w]; out = B^T A over (j, u), A the operator of x1
    if path.key is None:  # a scale group with d2 = 1: the operator of x1 is x1
        A = a
    else:
        (T,) = device_tables(path.key, a.device, a.dtype, tables)
        A = (a.reshape(Z * U, d1) @ T).view(Z, U, d2, d3).transpose(1, 2).reshape(Z, d2 * U, d3)
    B = b.transpose(1, 2).reshape(Z * d2, V) @ w.permute(1, 0, 2).reshape(V, U * W)
    return torch.bmm(B.view(Z, d2 * U, W).transpose(1, 2), A)


def _mix(Y: Tensor, w: Tensor) -> Tensor:
    """``out[z, w, k] = sum_c W[(z,) c, w] Y[z, c, k]``: ``Y (Z, C, K)``, weights ``(C, W)`` or ``(Z, C, W)`` -> ``(Z, W, K)``."""
    if w.dim() == 3:
        return torch.bmm(w.transpose(1, 2), Y)
    return (Y.transpose(1, 2) @ w).transpose(1, 2)                        # one GEMM over the rows and K


def _apply_weights(path: PathPlan, Y: Tensor, w: Tensor | None, q: Tensor | None, transposed: bool) -> Tensor:
    """A path's output block ``(Z, mul_out, 2 l3 + 1)`` from its block ``Y`` of the group's contraction
    (``(Z, 2 l3 + 1, U, V)`` when ``transposed``); ``w`` its weights, already scaled by ``path.scale``."""
    mode = path.mode
    if transposed:
        if mode == "uvw" and w is not None:
            Z, K = Y.shape[0], Y.shape[1]
            if w.dim() == 4:  # per-row weights (Z, U, V, W)
                return torch.bmm(Y.reshape(Z, K, -1), w.flatten(1, 2)).transpose(1, 2)
            return (Y.reshape(Z * K, -1) @ w.flatten(0, 1)).view(Z, K, -1).transpose(1, 2)
        Y = Y.permute(0, 2, 3, 1)
    if mode in ("uvu<v", "u<vw"):
        Y = Y.flatten(1, 2).index_select(1, q)                            # (Z, U (U - 1) / 2, K)
    if w is None:
        if mode == "uvu":
            Y = Y.sum(2)
        elif mode == "uvv":
            Y = Y.sum(1)
        elif mode == "uuw":
            Y = Y.sum(1, keepdim=True)
        elif mode == "uvuv":
            Y = Y.flatten(1, 2)
        return Y * path.scale if path.scale != 1.0 else Y
    if mode == "uvw":
        if Y.shape[2] == 1 and w.dim() == 3:  # one channel of x2 (harmonics, a scalar attribute)
            return (Y[:, :, 0].transpose(1, 2) @ w[:, 0]).transpose(1, 2)
        return _mix(Y.reshape(Y.shape[0], -1, Y.shape[-1]), w.flatten(-3, -2))
    if mode in ("uuw", "u<vw"):
        return _mix(Y, w)
    w = w[..., None]
    if mode == "uvu":
        return Y[:, :, 0] * w[..., 0, :] if Y.shape[2] == 1 else (Y * w).sum(2)
    if mode == "uvv":
        return Y[:, 0] * w[..., 0, :, :] if Y.shape[1] == 1 else (Y * w).sum(1)
    if mode == "uvuv":
        return (Y * w).flatten(1, 2)
    return Y * w                                                          # uuu, uvu<v


def weight_scales(plans, weight_sizes) -> Tensor:
    """Per weight, the scale of its path (e3nn's path weight and the coupling's ``1 / sqrt(2l + 1)``), float64
    ``(weight_numel,)``: the weights are scaled once per call, not per path."""
    scales = [1.0] * len(weight_sizes)
    for group in plans:
        for path in group.paths:
            if path.weight is not None:
                scales[path.weight] = path.scale
    return torch.cat([torch.full((n,), s, dtype=torch.float64) for n, s in zip(weight_sizes, scales)]) \
        if weight_sizes else torch.zeros(0, dtype=torch.float64)


def evaluate(plans, x1: Tensor, x2: Tensor, weight: Tensor | None, per_sample: bool, blocks1, blocks2,
             blocks_out, weight_sizes, tables=None) -> Tensor:
    """The tensor product of rows ``x1 (Z, dim1)``, ``x2 (Z, dim2)`` -> ``(Z, dim_out)``.

    ``weight``: ``(weight_numel,)`` shared, already multiplied by [`weight_scales`][], or ``(Z, weight_numel)``
    per row (``per_sample``; the paths' scales then multiply their outputs, so that no scaled copy of
    the per-row weights is kept for the backward); ``blocks*``: ``(mul, dim)`` of every irrep of the flat layouts;
    ``weight_sizes``: the trained instructions' numbers of weights; ``tables``: the module's tables of
    `plan_keys` ([`geomlin.gaunt.cache`][]), ``None`` the device cache. Inputs, contractions and weights are
    cut with ``torch.split`` (whose gradient is one concatenation, not a zero-filled tensor per slice).
    """
    Z = x1.shape[0]
    xs1 = torch.split(x1, [m * d for m, d in blocks1], dim=1)
    xs2 = torch.split(x2, [m * d for m, d in blocks2], dim=1)
    ws = () if weight is None else torch.split(weight, weight_sizes, dim=-1)
    outputs: dict = {}
    stacks: dict = {}
    for group in plans:
        parts = [xs1[i].view(Z, *blocks1[i]) for i in group.members]
        b = xs2[group.i2].view(Z, *blocks2[group.i2])
        widths = [2 * l + 1 for l in group.l3s]
        starts = [sum(widths[:i]) for i in range(len(widths))]
        M = by_degree = factor = None
        if group.order == "right":
            M = _operator(group, b, device_tables(group.key, x1.device, x1.dtype, tables)[0])
        if any(path.first == 0 for path in group.paths):
            if group.members not in stacks:  # the same x1 blocks meet every block of x2: stacked once
                stacks[group.members] = concat(parts)
            a = stacks[group.members]
            if M is None:
                by_degree, factor = _contract(group, a, b, tables)
                by_degree = list(by_degree)
            else:  # one degree at a time, when its first path needs it (below): fewer blocks alive at once
                by_degree = [None] * len(widths)
        muls = [blocks1[i][0] for i in group.members]
        cells: dict = {}
        last_use = {path.column: k for k, path in enumerate(group.paths) if not path.first}
        q = None if group.triu_key is None else device_tables(group.triu_key, x1.device, x1.dtype, tables)[0]
        for k_path, path in enumerate(group.paths):
            w = None
            if path.weight is not None:
                w = ws[path.weight].reshape(Z, *path.shape) if per_sample else ws[path.weight].view(path.shape)
            if path.first:
                block = _weights_first(path, parts[path.member], b, M, starts[path.column], widths[path.column], w,
                                       tables)
            else:
                if path.column not in cells:
                    Y = by_degree[path.column]
                    if Y is None:
                        c = path.column
                        (Y,) = _right_blocks(group, a, M, widths[c:c + 1], starts[c:c + 1])
                    by_degree[path.column] = None
                    cells[path.column] = (Y,) if len(muls) == 1 else \
                        torch.split(Y, muls, dim=2 if group.transposed else 1)
                    del Y
                block = _apply_weights(path, cells[path.column][path.member], w, q, group.transposed)
                if last_use[path.column] == k_path:  # its last path: free the block (without autograd)
                    del cells[path.column]
            if factor is not None:
                block = block * factor
            if per_sample and w is not None and path.scale != 1.0:
                block = block * path.scale
            outputs[path.i_out] = block if path.i_out not in outputs else outputs[path.i_out] + block
    pieces = []
    for k, (mul, dim) in enumerate(blocks_out):
        if mul * dim == 0:
            continue
        block = outputs.get(k)
        pieces.append(x1.new_zeros(Z, mul * dim) if block is None else block.reshape(Z, mul * dim))
    if not pieces:
        return x1.new_zeros(Z, 0)
    return concat(pieces)
