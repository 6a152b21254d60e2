"""GATr primitives: pure, Pin(3,0,1)-equivariant functions on G(3,0,1) multivectors ``(..., 16)``.

Brehmer, de Haan, Behrends, Cohen, "Geometric Algebra Transformer", NeurIPS 2023 (GATr):

* equivariant linear maps (Prop. 2: spanned by the 5 grade projections and the 4 maps
  ``x -> e0 <x>_k``, ``k = 0..3``): :func:`equi_linear`;
* geometric product and the equivariant join ``<ref>_{e0123} (x v y)`` (eq. 4): :func:`geometric_product`,
  :func:`equivariant_join`;
* invariant inner product on the non-degenerate components: :func:`inner_product`;
* equivariant layer norm (eq. 5), scalar-gated GELU (sec. 3.2), grade dropout;
* attention on inner-product and distance-aware features (sec. 3.3), one call to
  :func:`torch.nn.functional.scaled_dot_product_attention`: :func:`geometric_attention`.

Every function takes plain tensors, validates nothing inside hot loops and states its shapes.
``method="dense"`` selects the Cayley-table einsum path (the oracle / the reference-style
implementation the benchmark compares against).
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F
from torch import Tensor

from geomlin.algebra import pga
from geomlin.algebra.clifford import cached_constant

#: Number of Pin(3,0,1)-equivariant linear maps of G(3,0,1) (5 grade projections + 4 e0 maps).
NUM_LINEAR_BASIS = 9
METHODS = ("auto", "fast", "dense")


def _check_method(method: str) -> str:
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    return method


@functools.cache
def _linear_basis() -> Tensor:
    """``(9, 16, 16)`` float64 basis ``B[b, k_out, l_in]`` of the equivariant linear maps."""
    basis = torch.zeros(NUM_LINEAR_BASIS, pga.DIM, pga.DIM, dtype=torch.float64)
    for g, sl in enumerate(pga.GRADE_SLICES):
        idx = torch.arange(pga.DIM)[sl]
        basis[g, idx, idx] = 1.0
    e0 = torch.zeros(pga.DIM, dtype=torch.float64)
    e0[pga.E0] = 1.0
    for g in range(4):
        proj = basis[g]  # grade-g projection
        # column l of e0 * <e_l>_g, as a (16 out, 16 in) matrix
        left = pga.PGA.geometric_product(e0.expand(pga.DIM, pga.DIM), proj.T.contiguous(), "dense")
        basis[5 + g] = left.T
    return basis


def linear_basis(dtype: torch.dtype = torch.float64, device=None) -> Tensor:
    """The 9 equivariant linear maps as ``(9, 16, 16)`` matrices ``B[b, out, in]``."""
    return _linear_basis().to(dtype=dtype, device=device)


@functools.cache
def _blocked_plan() -> tuple[Tensor, Tensor, Tensor]:
    """Index plan of the blocked linear map.

    ``grade_of (16,)``: basis index of the grade projection that keeps component ``k``;
    ``source (16,)``: component ``l`` with ``e0 * e_l = +-e_k`` (``k`` itself where none);
    ``e0_coef (16, 9)``: coefficient of each basis weight on the source path of ``k``.
    """
    basis = _linear_basis()
    grade_of = torch.tensor([int(pga.PGA.grades[k]) for k in range(pga.DIM)])
    source = torch.arange(pga.DIM)
    e0_coef = torch.zeros(pga.DIM, NUM_LINEAR_BASIS, dtype=torch.float64)
    for k in range(pga.DIM):
        for b in range(5, NUM_LINEAR_BASIS):
            nz = basis[b, k].nonzero()
            if len(nz):
                source[k] = nz[0, 0]
                e0_coef[k, b] = basis[b, k, nz[0, 0]]
    return grade_of, source, e0_coef


def _blocked_plan_on(device, dtype) -> tuple[Tensor, Tensor, Tensor]:
    return (cached_constant(("gatr-grade-of", device), lambda: _blocked_plan()[0].to(device)),
            cached_constant(("gatr-source", device), lambda: _blocked_plan()[1].to(device)),
            cached_constant(("gatr-e0-coef", device, dtype), lambda: _blocked_plan()[2].to(device=device, dtype=dtype)))


def _linear_basis_on(device, dtype) -> Tensor:
    return cached_constant(("gatr-basis", device, dtype), lambda: _linear_basis().to(device=device, dtype=dtype))


def equi_linear(x: Tensor, weight: Tensor, method: str = "auto") -> Tensor:
    """Pin(3,0,1)-equivariant linear map ``(..., in_ch, 16) -> (..., out_ch, 16)``.

    ``out[..., o, k] = sum_{i, b} weight[o, i, b] * sum_l B[b, k, l] x[..., i, l]`` with the
    basis ``B`` of :func:`linear_basis` (GATr Prop. 2).

    ``method="fast"`` (``auto``) runs one batched matmul over the 16 components: component
    ``k`` mixes channels with the weight of its grade, plus (for the 8 components with an
    ``e0``) the weight of the ``e0``-map applied to its source component. That is
    ``16 in_ch out_ch`` multiply-adds per item instead of ``256 in_ch out_ch`` for a dense
    ``(in_ch*16, out_ch*16)`` matrix. ``method="dense"`` is the reference einsum with the
    ``(9, 16, 16)`` basis.
    """
    method = _check_method(method)
    if method == "dense":
        basis = _linear_basis_on(x.device, x.dtype)
        return torch.einsum("oib,bkl,...il->...ok", weight, basis, x)
    grade_of, source, e0_coef = _blocked_plan_on(x.device, x.dtype)
    # per-component weights (16, in, out): grade path and e0 path
    w_grade = weight[:, :, grade_of].permute(2, 1, 0)
    w_e0 = torch.einsum("oib,kb->kio", weight, e0_coef)
    w = torch.cat([w_grade, w_e0], 1)  # (16, 2*in, out)
    lead = x.shape[:-2]
    xt = x.reshape(-1, x.shape[-2], pga.DIM).permute(2, 0, 1)  # (16, M, in)
    xin = torch.cat([xt, xt[source]], -1)  # (16, M, 2*in)
    out = torch.bmm(xin, w)  # (16, M, out)
    return out.permute(1, 2, 0).reshape(*lead, weight.shape[0], pga.DIM)


def geometric_product(x: Tensor, y: Tensor, method: str = "auto") -> Tensor:
    """Geometric product of ``(..., 16)`` tensors (broadcasting).

    ``fast``/``auto``: the complex-matrix product of :func:`geomlin.algebra.pga.geometric_product`;
    ``dense``: the ``16^3`` Cayley einsum.
    """
    method = _check_method(method)
    return pga.geometric_product(x, y, "dense" if method == "dense" else "auto")


def join(x: Tensor, y: Tensor, method: str = "auto") -> Tensor:
    """Regressive product ``x v y`` of ``(..., 16)`` tensors (sparse table, 81 of 256 pairs)."""
    method = _check_method(method)
    return pga.join(x, y, "dense" if method == "dense" else "sparse")


def equivariant_join(x: Tensor, y: Tensor, reference: Tensor, method: str = "auto") -> Tensor:
    """``<reference>_{e0123} * (x v y)``: the join made Pin(3,0,1)-equivariant (GATr eq. 4).

    The join flips sign under odd versors; so does the pseudoscalar of the reference,
    so the product is equivariant. ``x, y (..., 16)``; ``reference`` broadcastable ``(..., 16)``.
    """
    return reference[..., pga.E0123:pga.E0123 + 1] * join(x, y, method)


def inner_product(x: Tensor, y: Tensor) -> Tensor:
    """Invariant inner product ``<~x y>_0`` on the 8 components without ``e0``: ``(..., 16) -> (..., 1)``.

    In G(3,0,1) every e0-free blade squares (with reversion) to ``+1``, so this is a plain
    dot product over :data:`geomlin.algebra.pga.NONDEGENERATE`.
    """
    idx = list(pga.NONDEGENERATE)
    return (x[..., idx] * y[..., idx]).sum(-1, keepdim=True)


def norm_squared(x: Tensor) -> Tensor:
    """``inner_product(x, x)``, ``(..., 16) -> (..., 1)``."""
    return inner_product(x, x)


def equi_layer_norm(x: Tensor, channel_dim: int = -2, eps: float = 1e-6) -> Tensor:
    """Equivariant layer norm (GATr eq. 5): ``x / sqrt(mean_channels <x, x> + eps)``.

    ``x (..., channels, 16)``; the mean runs over ``channel_dim``.
    """
    sq = norm_squared(x)  # (..., channels, 1)
    return x / torch.sqrt(sq.mean(dim=channel_dim, keepdim=True) + eps)


def scalar_gated_gelu(x: Tensor, gates: Tensor | None = None) -> Tensor:
    """Scalar-gated GELU: ``x * gelu(gates)`` with ``gates = <x>_0 (..., 1)`` by default."""
    if gates is None:
        gates = x[..., pga.SCALAR:pga.SCALAR + 1]
    return x * F.gelu(gates)


def grade_dropout(x: Tensor, p: float, training: bool = True, generator: torch.Generator | None = None) -> Tensor:
    """Dropout that zeroes whole grades: one Bernoulli draw per ``(..., grade)``; ``(..., 16)``.

    Survivors are scaled by ``1 / (1 - p)``. Equivariant for each fixed draw, since the
    Pin action preserves grades.
    """
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability must be in [0, 1), got {p}")
    if not training or p == 0.0:
        return x
    keep = torch.rand(*x.shape[:-1], 5, dtype=x.dtype, device=x.device, generator=generator) >= p
    grade_of = _grade_index_on(x.device)
    return x * keep[..., grade_of].to(x.dtype) / (1.0 - p)


def _grade_index_on(device) -> Tensor:
    return cached_constant(("pga-grades", device), lambda: pga.PGA.grades.to(device))


#: The 4 trivector components a point lives on, homogeneous weight first.
TRIVECTOR_WEIGHT = pga.E123
TRIVECTOR_POSITION = pga.POINT_COMPONENTS


def distance_features(x: Tensor, role: str) -> Tensor:
    """Distance-aware attention features of ``x (..., 16) -> (..., 5)`` (GATr sec. 3.3).

    With ``w = <x>_{e123}`` and ``p`` the ``e0ij`` components of the trivector,
    ``distance_features(q, "query") . distance_features(k, "key") = -|w_k p_q - w_q p_k|^2``,
    minus the squared Euclidean distance for points of unit weight. The product is
    Pin(3,0,1)-invariant, though the two factors are not.
    """
    w = x[..., TRIVECTOR_WEIGHT:TRIVECTOR_WEIGHT + 1]
    p = x[..., list(TRIVECTOR_POSITION)]
    pp = (p * p).sum(-1, keepdim=True)
    if role == "query":
        return torch.cat([w * w, pp, w * p], -1)
    if role == "key":
        return torch.cat([-pp, -(w * w), 2.0 * w * p], -1)
    raise ValueError(f"role must be 'query' or 'key', got {role!r}")


def attention_mask(mask: Tensor | None = None, batch: Tensor | None = None) -> Tensor | None:
    """Boolean mask ``True = may attend`` for :func:`geometric_attention`.

    ``mask (..., items)`` marks valid items (padding layout) -> ``(..., 1, 1, items)``;
    ``batch (items,)`` assigns items to sets (PyG flat layout) -> ``(1, items, items)``
    block-diagonal. Both may be given.
    """
    out = None
    if mask is not None:
        out = mask[..., None, None, :]
    if batch is not None:
        block = (batch[:, None] == batch[None, :])[None]
        out = block if out is None else out & block
    return out


def geometric_attention(q_mv: Tensor, k_mv: Tensor, v_mv: Tensor,
                        q_s: Tensor | None = None, k_s: Tensor | None = None, v_s: Tensor | None = None,
                        attn_mask: Tensor | None = None, use_distance: bool = True) -> tuple[Tensor, Tensor | None]:
    """Pin(3,0,1)-equivariant multi-head attention in one ``scaled_dot_product_attention`` call.

    Parameters
    ----------
    q_mv, k_mv, v_mv: ``(..., heads, items, channels, 16)``.
    q_s, k_s, v_s: ``(..., heads, items, s_channels)`` or ``None``.
    attn_mask: boolean, broadcastable to ``(..., heads, items_q, items_k)``, ``True`` = attend.
    use_distance: add the distance-aware trivector features.

    The attention logit is ``(sum_c <q_c, k_c> + [dist] + q_s . k_s) / sqrt(n_features)``.

    Returns
    -------
    ``(mv (..., heads, items, channels, 16), scalars (..., heads, items, s_channels) or None)``.
    """
    idx = list(pga.NONDEGENERATE)
    qf = [q_mv[..., idx].flatten(-2)]
    kf = [k_mv[..., idx].flatten(-2)]
    if use_distance:
        qf.append(distance_features(q_mv, "query").flatten(-2))
        kf.append(distance_features(k_mv, "key").flatten(-2))
    vf = [v_mv.flatten(-2)]
    if q_s is not None:
        qf.append(q_s)
        kf.append(k_s)
    if v_s is not None:
        vf.append(v_s)
    q = torch.cat(qf, -1) if len(qf) > 1 else qf[0]
    k = torch.cat(kf, -1) if len(kf) > 1 else kf[0]
    v = torch.cat(vf, -1) if len(vf) > 1 else vf[0]
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, scale=1.0 / math.sqrt(q.shape[-1]))
    n_mv = v_mv.shape[-2] * pga.DIM
    mv = out[..., :n_mv].unflatten(-1, (v_mv.shape[-2], pga.DIM))
    s = out[..., n_mv:] if v_s is not None else None
    return mv, s


def join_reference(mv: Tensor, mask: Tensor | None = None, batch: Tensor | None = None) -> Tensor:
    """Per-set mean of ``mv (..., items, channels, 16)`` for :func:`equivariant_join`.

    * no mask, no batch: mean over items and channels -> ``(..., 1, 1, 16)``;
    * ``mask (..., items)``: mean over valid items -> ``(..., 1, 1, 16)``;
    * ``batch (items,)`` (flat layout, ``mv (items, channels, 16)``): mean per set,
      gathered back -> ``(items, 1, 16)``, so every set's reference follows its own
      transformation.
    """
    per_item = mv.mean(-2, keepdim=True)  # (..., items, 1, 16)
    if batch is not None:
        n_sets = int(batch.max().item()) + 1 if batch.numel() else 0
        w = torch.ones(batch.shape[0], dtype=mv.dtype, device=mv.device)
        if mask is not None:
            w = w * mask.to(mv.dtype)
        sums = torch.zeros(n_sets, pga.DIM, dtype=mv.dtype, device=mv.device)
        sums.index_add_(0, batch, per_item[:, 0] * w[:, None])
        counts = torch.zeros(n_sets, dtype=mv.dtype, device=mv.device).index_add_(0, batch, w)
        means = sums / counts.clamp_min(1.0)[:, None]
        return means[batch][:, None, :]
    if mask is not None:
        w = mask.to(mv.dtype)[..., None, None]  # (..., items, 1, 1)
        total = (per_item * w).sum(-3, keepdim=True)
        return total / w.sum(-3, keepdim=True).clamp_min(1.0)
    return per_item.mean(-3, keepdim=True)
