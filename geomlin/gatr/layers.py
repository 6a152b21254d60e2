"""GATr layers: thin ``nn.Module`` shells around the kernels of [`geomlin.gatr.planes`][].

Every layer maps ``(mv (..., items, mv_channels, 16), scalars (..., items, s_channels) | None)``
to the same pair, and declares its feature types (``type_in`` / ``type_out``: multivectors of
G(3,0,1) under Pin(3,0,1), invariant scalars), so ``geomlin.testing.assert_equivariant(layer)``
checks it with no other argument. A layer's ``forward`` is the only way in: the block calls its
layers' forwards and the model its blocks'. Each forward rearranges its input into planes
([`to_planes`][geomlin.gatr.planes.to_planes]) and returns a view of its output planes
([`from_planes`][geomlin.gatr.planes.from_planes]), so between layers the activations stay
component-major and nothing is copied.

The architecture is the reference GATr's (v1.4, ``gatr.layers``): the same maps, initialisation,
multi-query attention with learnable distance weights, the same layer norm and gated GELU, so a
reference ``state_dict`` loads
([`geomlin.gatr.reference.load_reference_state_dict`][]).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from geomlin.algebra import pga
from geomlin.batching import BatchLayout, batch_layout
from geomlin.gatr import planes as PL
from geomlin.gatr.attention import attend, attend_masked
from geomlin.gatr.join_references import join_reference
from geomlin.reps import Multivectors, Scalars
from geomlin.validation import (
    check_choice,
    check_finite,
    check_float,
    check_mask,
    check_nonnegative_int,
    check_positive_int,
    check_tensor,
)

#: Initialisation schemes of [`EquiLinear`][] (the reference's).
INITIALIZATIONS = ("default", "small", "unit_scalar", "almost_unit_scalar")
#: Per-basis-map factors of the reference's initialisation bound (``use_mv_heuristics``), for its
#: normalised basis: they keep the variance of each output grade close to 1.
_REFERENCE_INIT_FACTORS = (1.0, 4.0, 6.0, 2.0, 0.5, 0.5, 1.5, 1.5, 0.5)
#: Batch and item counts of the example inputs of the layers' equivariance checks.
EXAMPLE_ITEMS = (2, 5)


def _mv_type(channels: int) -> Multivectors:
    return Multivectors(pga.PGA, channels)


def _s_type(channels: int) -> Scalars | None:
    return Scalars(channels) if channels else None


def _example(generator, dtype, mv_channels: int, s_channels: int) -> tuple[Tensor, Tensor | None]:
    mv = torch.randn(*EXAMPLE_ITEMS, mv_channels, pga.DIM, generator=generator, dtype=dtype)
    s = torch.randn(*EXAMPLE_ITEMS, s_channels, generator=generator, dtype=dtype) if s_channels else None
    return mv, s


def _check_pair(mv: Tensor, scalars: Tensor | None, mv_channels: int, s_channels: int, where: str) -> None:
    """Validate ``mv (..., mv_channels, 16)`` and ``scalars (..., s_channels)`` at a public boundary."""
    pga.check_mv(mv, f"{where}: mv")
    if mv.ndim < 2 or mv.shape[-2] != mv_channels:
        raise ValueError(f"{where}: mv must have shape (..., {mv_channels}, 16), got {tuple(mv.shape)}")
    if s_channels:
        if scalars is None:
            raise ValueError(f"{where}: expected scalars of shape (..., {s_channels}), got None")
        check_tensor(scalars, f"{where}: scalars")
        if scalars.shape[-1] != s_channels or scalars.shape[:-1] != mv.shape[:-2]:
            raise ValueError(f"{where}: scalars must have shape {tuple(mv.shape[:-2]) + (s_channels,)} "
                             f"to match mv {tuple(mv.shape)}, got {tuple(scalars.shape)}")
    elif scalars is not None and scalars.shape[-1] != 0:
        raise ValueError(f"{where}: built without scalar channels but got scalars of shape {tuple(scalars.shape)}")


def check_reference(reference: Tensor, where: str) -> Tensor:
    """Refuse a join reference unless it is finite multivectors broadcastable to ``(..., 1, 16)``
    (one per item or set; ``where`` names the caller in the message); returns it."""
    pga.check_mv(reference, f"{where}: reference")
    if reference.ndim >= 2 and reference.shape[-2] != 1:
        raise ValueError(f"{where}: reference must be one multivector per item or set, broadcastable to "
                         f"(..., 1, 16), got shape {tuple(reference.shape)}")
    # a side input gets the main inputs' checks: a NaN reference would make every output NaN
    check_finite(reference, f"{where}: reference")
    return reference


def _reference_weight(reference: Tensor, lead: tuple) -> Tensor:
    """The ``e123`` component of a join reference ``(..., [1,] 16)`` per item: ``(M, 1)`` (or ``(1, 1)``).

    ``lead`` is the items' leading shape (``mv.shape[:-2]``); the reference broadcasts against it.
    """
    w = reference[..., pga.E123]
    if reference.ndim >= 2:
        w = w[..., 0]
    if w.ndim == 0:
        return w.reshape(1, 1)
    return w.expand(lead).reshape(-1, 1)


def _lead(mv: Tensor) -> tuple:
    return tuple(mv.shape[:-2])


def _flat_scalars(scalars: Tensor | None, channels: int) -> Tensor | None:
    return scalars.reshape(-1, channels) if channels and scalars is not None else None


def _unflat_scalars(s: Tensor | None, lead: tuple) -> Tensor | None:
    return None if s is None else s.reshape(*lead, s.shape[-1])


class EquiLinear(nn.Module):
    """Equivariant linear layer on multivector and scalar channels.

    ``mv (..., in_mv, 16), scalars (..., in_s) -> mv (..., out_mv, 16), scalars (..., out_s)``.

    Multivectors mix through the 9 equivariant basis maps
    ([`equi_linear`][geomlin.gatr.planes.equi_linear_planes]); input scalars feed the output scalar components
    ``<mv>_0``; output scalars read input scalars and ``<mv>_0``. The multivector bias sits on the scalar component (the only invariant one).
    Missing scalar sides are ``0`` channels (``scalars=None``).

    Parameters
    ----------
    in_mv_channels, out_mv_channels : int
        multivector channels in and out.
    in_s_channels, out_s_channels : int
        scalar channels in and out (0 for none).
    bias : bool
        add a learnable bias on the scalar component of the multivector outputs (and on the
        output scalars).
    initialization : str
        the reference's schemes (``"default"``: variance preserving with its per-grade factors;
        ``"small"``: outputs ten times smaller; ``"unit_scalar"`` / ``"almost_unit_scalar"``:
        outputs near the unit scalar).
    """

    def __init__(self, in_mv_channels: int, out_mv_channels: int, in_s_channels: int = 0,
                 out_s_channels: int = 0, bias: bool = True, initialization: str = "default"):
        super().__init__()
        self.in_mv = check_positive_int(in_mv_channels, "in_mv_channels")
        self.out_mv = check_positive_int(out_mv_channels, "out_mv_channels")
        self.in_s = check_nonnegative_int(in_s_channels, "in_s_channels")
        self.out_s = check_nonnegative_int(out_s_channels, "out_s_channels")
        self.weight = nn.Parameter(torch.empty(self.out_mv, self.in_mv, PL.NUM_LINEAR_BASIS))
        self.s_to_mv = nn.Parameter(torch.empty(self.out_mv, self.in_s)) if self.in_s else None
        self.mv_to_s = nn.Parameter(torch.empty(self.out_s, self.in_mv)) if self.out_s else None
        self.s_to_s = nn.Parameter(torch.empty(self.out_s, self.in_s)) if self.out_s and self.in_s else None
        self.bias_mv = nn.Parameter(torch.zeros(self.out_mv)) if bias else None
        self.bias_s = nn.Parameter(torch.zeros(self.out_s)) if bias and self.out_s else None
        #: the index plan as buffers, see [`tables`][geomlin.gatr.planes.tables]
        self.tables = PL.tables("gatr:linear")
        self.reset_parameters(initialization)
        self.type_in = (_mv_type(self.in_mv), _s_type(self.in_s))
        self.type_out = (_mv_type(self.out_mv), _s_type(self.out_s))

    def extra_repr(self) -> str:
        return f"mv {self.in_mv}->{self.out_mv}, scalars {self.in_s}->{self.out_s}"

    @torch.no_grad()
    def reset_parameters(self, initialization: str = "default", out_channels: slice | None = None) -> None:
        """The reference GATr's initialisation (``EquiLinear.reset_parameters``), translated to
        geomlin's unnormalised basis; ``out_channels`` re-initialises only those output channels."""
        check_choice(initialization, "initialization", INITIALIZATIONS)
        rows = slice(None) if out_channels is None else out_channels
        mv_factor = {"default": 1.0, "small": 0.1, "unit_scalar": 0.1, "almost_unit_scalar": 0.5}[initialization]
        s_factor = 0.1 if initialization == "small" else 1.0
        shift = 1.0 if initialization in ("unit_scalar", "almost_unit_scalar") else 0.0
        norms = PL.reference_basis_norms(torch.float64).tolist()
        bound = mv_factor / math.sqrt(self.in_mv)
        for b, (factor, norm) in enumerate(zip(_REFERENCE_INIT_FACTORS, norms)):
            scale = math.sqrt(factor) * bound / norm  # reference weight w_ref = w * norm
            if b == 0 and self.in_s:  # scalar inputs share the variance of the scalar output
                scale /= math.sqrt(2.0)
            nn.init.uniform_(self.weight[rows, :, b], -scale, scale)
        if self.in_s:
            s_bound = mv_factor / math.sqrt(self.in_s) / math.sqrt(2.0)
            nn.init.uniform_(self.s_to_mv[rows], -s_bound, s_bound)
        if self.bias_mv is not None:
            if self.in_s:
                b_bound = 1.0 / math.sqrt(self.in_s + self.in_mv)
                nn.init.uniform_(self.bias_mv[rows], shift - b_bound, shift + b_bound)
            else:
                self.bias_mv[rows] = shift
        maps = [m for m in (self.s_to_s, self.mv_to_s) if m is not None]
        for m in maps:
            fan_in = max(m.shape[1], 1)
            m_bound = s_factor / math.sqrt(fan_in) / math.sqrt(len(maps))
            nn.init.uniform_(m, -m_bound, m_bound)
        if self.bias_s is not None:
            fan_in = self.in_mv + self.in_s
            nn.init.uniform_(self.bias_s, -s_factor / math.sqrt(fan_in), s_factor / math.sqrt(fan_in))

    def example_inputs(self, generator: torch.Generator | None = None, dtype: torch.dtype = torch.float64):
        """Random ``(mv (2, 5, in_mv, 16), scalars (2, 5, in_s) or None)``."""
        mv, s = _example(generator, dtype, self.in_mv, self.in_s)
        return (mv, s), {}

    def forward(self, mv: Tensor, scalars: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """``(mv (..., in_mv, 16), scalars (..., in_s) | None) -> (mv (..., out_mv, 16), scalars (..., out_s) | None)``."""
        _check_pair(mv, scalars if self.in_s else None, self.in_mv, self.in_s, "EquiLinear")
        lead = _lead(mv)
        xp, s = PL.to_planes(mv), _flat_scalars(scalars, self.in_s)
        scalar_part = self.bias_mv  # onto the scalar component only
        if self.s_to_mv is not None:
            scalar_part = F.linear(s, self.s_to_mv.to(s.dtype), None if self.bias_mv is None else self.bias_mv.to(s.dtype))
        out = PL.equi_linear_planes(xp, self.weight, scalar_part, tables=self.tables)
        s_out = None
        if self.out_s:
            mv0 = xp[pga.SCALAR]
            bias = None if self.bias_s is None else self.bias_s.to(mv0.dtype)
            if self.s_to_s is not None:
                s_out = F.linear(torch.cat([mv0, s.to(mv0.dtype)], -1),
                                 torch.cat([self.mv_to_s, self.s_to_s], 1).to(mv0.dtype), bias)
            else:
                s_out = F.linear(mv0, self.mv_to_s.to(mv0.dtype), bias)
        return PL.from_planes(out, lead), _unflat_scalars(s_out, lead)


class EquiLayerNorm(nn.Module):
    """Equivariant layer norm on multivector channels plus a plain layer norm on scalars.

    ``(mv (..., channels, 16), scalars (..., s) | None) -> same shapes``. The multivector part is
    [`equi_layer_norm`][geomlin.gatr.planes.equi_layer_norm_planes] (mean squared norm clamped below at
    ``eps``; float32 under autocast, as the reference's); scalars get
    ``torch.nn.functional.layer_norm`` with ``s_eps``.

    Parameters
    ----------
    eps : float
        lower clamp of the mean squared multivector norm.
    mv_channels : int, optional
        multivector channels, declared in the feature types (any count works when omitted).
    s_channels : int
        scalar channels, declared in the feature types.
    s_eps : float
        ``eps`` of the scalar layer norm.
    """

    def __init__(self, eps: float = PL.LAYER_NORM_EPS, mv_channels: int | None = None, s_channels: int = 0,
                 s_eps: float = 1e-5):
        super().__init__()
        self.eps = check_float(eps, "eps", minimum=0.0)
        self.s_eps = check_float(s_eps, "s_eps", minimum=0.0)
        self.mv_channels = None if mv_channels is None else check_positive_int(mv_channels, "mv_channels")
        self.s_channels = check_nonnegative_int(s_channels, "s_channels")
        self.tables = PL.tables("gatr:nondegenerate")
        if self.mv_channels is not None:
            self.type_in = (_mv_type(self.mv_channels), _s_type(self.s_channels))
            self.type_out = self.type_in

    def example_inputs(self, generator: torch.Generator | None = None, dtype: torch.dtype = torch.float64):
        """Random ``(mv (2, 5, mv_channels, 16), scalars (2, 5, s_channels) or None)``."""
        return _example(generator, dtype, self.mv_channels or 1, self.s_channels), {}

    def forward(self, mv: Tensor, scalars: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """``(mv (..., channels, 16), scalars (..., s) | None) -> same shapes``."""
        pga.check_mv(mv, "EquiLayerNorm: mv")
        if mv.ndim < 2:
            raise ValueError(f"EquiLayerNorm: mv must have a channel axis, (..., channels, 16), got {tuple(mv.shape)}")
        if self.mv_channels is not None:
            _check_pair(mv, scalars if self.s_channels else None, self.mv_channels, self.s_channels, "EquiLayerNorm")
        out = PL.from_planes(PL.equi_layer_norm_planes(PL.to_planes(mv), self.eps, tables=self.tables), _lead(mv))
        if scalars is not None and scalars.shape[-1] > 0:
            scalars = F.layer_norm(scalars, scalars.shape[-1:], eps=self.s_eps)
        return out, scalars


class GeometricBilinear(nn.Module):
    """Geometric product and equivariant join of learned projections (GATr sec. 3.2).

    ``mv (..., in_mv, 16), scalars (..., in_s), reference (..., 16)-broadcastable
    -> mv (..., out_mv, 16), scalars (..., out_s)``. One [`EquiLinear`][] produces the four
    operands (``hidden_mv_channels`` channels each; the reference's ``hidden_mv_channels`` counts
    both products, twice this), the outputs ``x y`` and ``<ref>_{e123} (x' v y')`` are
    concatenated and mixed by a second [`EquiLinear`][]. The join is active whenever the
    reference has an ``e123`` part (a point cloud's mean does).

    Parameters
    ----------
    in_mv_channels, out_mv_channels, in_s_channels, out_s_channels : int
        channels in and out, as for [`EquiLinear`][].
    hidden_mv_channels : int, optional
        channels of each of the four operands (default ``max(1, out_mv_channels // 2)``).
    """

    def __init__(self, in_mv_channels: int, out_mv_channels: int, in_s_channels: int = 0,
                 out_s_channels: int = 0, hidden_mv_channels: int | None = None):
        super().__init__()
        hidden = max(1, check_positive_int(out_mv_channels, "out_mv_channels") // 2) \
            if hidden_mv_channels is None else check_positive_int(hidden_mv_channels, "hidden_mv_channels")
        self.hidden = hidden
        self.proj_in = EquiLinear(in_mv_channels, 4 * hidden, in_s_channels, 0)
        # the reference starts the right factor of the product near the unit scalar
        self.proj_in.reset_parameters("almost_unit_scalar", out_channels=slice(hidden, 2 * hidden))
        self.proj_out = EquiLinear(2 * hidden, out_mv_channels, in_s_channels, out_s_channels)
        self.tables = PL.tables("pga:geometric_product", "pga:join")
        self.in_mv, self.in_s = self.proj_in.in_mv, self.proj_in.in_s
        self.type_in = (_mv_type(self.in_mv), _s_type(self.in_s), _mv_type(1))
        self.type_out = self.proj_out.type_out

    def example_inputs(self, generator: torch.Generator | None = None, dtype: torch.dtype = torch.float64):
        """Points-and-noise ``(mv, scalars or None, reference (2, 1, 1, 16))``, the data mean as reference."""
        mv, s = _example(generator, dtype, self.in_mv, self.in_s)
        return (mv, s, join_reference(mv)), {}

    def forward(self, mv: Tensor, scalars: Tensor | None, reference: Tensor) -> tuple[Tensor, Tensor | None]:
        """``(mv (..., in_mv, 16), scalars (..., in_s) | None, reference) -> (mv (..., out_mv, 16), scalars (..., out_s) | None)``;
        ``reference`` broadcastable to ``(..., 1, 16)`` (one multivector per item or set)."""
        _check_pair(mv, scalars if self.in_s else None, self.in_mv, self.in_s, "GeometricBilinear")
        lead = _lead(mv)
        ref_w = _reference_weight(check_reference(reference, "GeometricBilinear"), lead)
        operands, _ = self.proj_in(mv, scalars)
        a, b, c, d = PL.to_planes(operands).split(self.hidden, dim=-1)
        gp = PL.geometric_product_planes(a, b, tables=self.tables)
        jn = PL.equivariant_join_planes(c, d, ref_w, tables=self.tables)
        hidden = torch.cat([gp.to(jn.dtype), jn], -1)
        return self.proj_out(PL.from_planes(hidden, lead), scalars)


class GeometricAttention(nn.Module):
    """Geometric self-attention (GATr sec. 3.3; the reference's ``SelfAttention``), fused kernels.

    ``mv (..., items, in_mv, 16), scalars (..., items, in_s) -> mv (..., items, out_mv, 16),
    scalars (..., items, out_s)``. Queries/keys: 7 inner-product components, 5 distance-aware
    trivector features (weighted per head and channel by ``exp(log_distance_weights)``) and the
    scalar channels; values: full multivectors and scalars.

    ``multi_query=True`` (the reference's default): one key/value head shared by the
    ``num_heads`` query heads; ``False``: every head has its own. Per head ``head_mv_channels``
    (default ``max(2 in_mv / num_heads, 1)``) and ``head_s_channels`` (default
    ``max(2 in_s / num_heads, 4)``), as in the reference.

    ``attn_mask``: ``None`` (all items of a leading index attend to each other), a
    [`BatchLayout`][geomlin.batching.BatchLayout] from [`batch_layout`][geomlin.batching.batch_layout]
    (padding mask or PyG batch vector; memory linear in items), or a boolean tensor
    broadcastable to ``(..., heads, items, items)``.

    Parameters
    ----------
    in_mv_channels, out_mv_channels, in_s_channels, out_s_channels : int
        channels in and out, as for [`EquiLinear`][].
    num_heads : int
        query heads.
    head_mv_channels, head_s_channels : int, optional
        multivector and scalar channels per head (defaults above).
    use_distance : bool
        add the distance-aware trivector features to queries and keys.
    multi_query : bool
        one key/value head shared by all query heads.
    distance_eps : float
        ``eps`` of the distance features' normaliser (see
        [`distance_features`][geomlin.gatr.planes.distance_features_planes]).
    """

    def __init__(self, in_mv_channels: int, out_mv_channels: int, in_s_channels: int = 0,
                 out_s_channels: int = 0, num_heads: int = 4, head_mv_channels: int | None = None,
                 head_s_channels: int | None = None, use_distance: bool = True, multi_query: bool = True,
                 distance_eps: float = PL.DISTANCE_EPS):
        super().__init__()
        self.heads = check_positive_int(num_heads, "num_heads")
        in_mv = check_positive_int(in_mv_channels, "in_mv_channels")
        in_s = check_nonnegative_int(in_s_channels, "in_s_channels")
        self.head_mv = max(1, 2 * in_mv // self.heads) if head_mv_channels is None \
            else check_positive_int(head_mv_channels, "head_mv_channels")
        if head_s_channels is None:
            self.head_s = max(4, 2 * in_s // self.heads) if in_s else 0
        else:
            self.head_s = check_nonnegative_int(head_s_channels, "head_s_channels")
        self.use_distance = bool(use_distance)
        self.multi_query = bool(multi_query)
        self.distance_eps = check_float(distance_eps, "distance_eps", minimum=0.0)
        kv_heads = 1 if self.multi_query else self.heads
        self.qkv = EquiLinear(in_mv, (self.heads + 2 * kv_heads) * self.head_mv, in_s,
                              (self.heads + 2 * kv_heads) * self.head_s)
        self.log_distance_weights = nn.Parameter(torch.zeros(self.heads, self.head_mv))
        self.out = EquiLinear(self.heads * self.head_mv, out_mv_channels, self.heads * self.head_s,
                              out_s_channels, initialization="small")
        self.tables = PL.tables("gatr:attention")
        self.in_mv, self.in_s = in_mv, in_s
        self.type_in = (_mv_type(in_mv), _s_type(in_s))
        self.type_out = self.out.type_out

    def extra_repr(self) -> str:
        return (f"heads={self.heads}, head_mv={self.head_mv}, head_s={self.head_s}, "
                f"multi_query={self.multi_query}, use_distance={self.use_distance}")

    def example_inputs(self, generator: torch.Generator | None = None, dtype: torch.dtype = torch.float64):
        """``(mv (2, 5, in_mv, 16), scalars)`` with a padding mask (the second row has 3 real items)."""
        mv, s = _example(generator, dtype, self.in_mv, self.in_s)
        mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
        return (mv, s), {"attn_mask": batch_layout(mask)}

    def forward(self, mv: Tensor, scalars: Tensor | None = None, attn_mask: Tensor | BatchLayout | None = None
                ) -> tuple[Tensor, Tensor | None]:
        """See the class docstring; ``mv`` needs an items axis: ``(..., items, in_mv, 16)``."""
        _check_pair(mv, scalars if self.in_s else None, self.in_mv, self.in_s, "GeometricAttention")
        if mv.ndim < 3:
            raise ValueError(f"GeometricAttention: mv must have shape (..., items, {self.in_mv}, 16), "
                             f"got {tuple(mv.shape)}")
        if attn_mask is not None and not isinstance(attn_mask, BatchLayout):
            check_mask(attn_mask, "attn_mask")
        lead = _lead(mv)
        qkv, qkv_s = self.qkv(mv, scalars)
        h, kv, c, cs = self.heads, 1 if self.multi_query else self.heads, self.head_mv, self.head_s
        q, k, v = PL.to_planes(qkv).split((h * c, kv * c, kv * c), dim=-1)
        q, k, v = q.unflatten(-1, (h, c)), k.unflatten(-1, (kv, c)), v.unflatten(-1, (kv, c))  # (16, M, heads, c)
        q_s = k_s = v_s = None
        if cs:
            q_s, k_s, v_s = qkv_s.reshape(-1, (h + 2 * kv) * cs).split((h * cs, kv * cs, kv * cs), dim=-1)
            q_s, k_s, v_s = q_s.unflatten(-1, (h, cs)), k_s.unflatten(-1, (kv, cs)), v_s.unflatten(-1, (kv, cs))
        q, k, v, scale = PL.attention_features_planes(q, k, v, q_s, k_s, v_s, self.use_distance,
                                               self.log_distance_weights.exp(), self.distance_eps, tables=self.tables)
        # items first, (..., items, heads, width)
        q, k, v = (t.reshape(*lead, t.shape[-2], t.shape[-1]) for t in (q, k, v))
        if attn_mask is None or isinstance(attn_mask, BatchLayout):
            out = attend(*(t.reshape(-1, *t.shape[-3:]) for t in (q, k, v)), attn_mask, scale)
        else:
            out = attend_masked(q, k, v, attn_mask, scale)
        mv_out, s_out = PL.attention_values(out.reshape(-1, h, out.shape[-1]), c, cs)  # (16, M, heads, c)
        mv_out = PL.from_planes(mv_out.reshape(pga.DIM, -1, h * c), lead)
        return self.out(mv_out, None if s_out is None else s_out.reshape(*lead, h * cs))


class GeometricMLP(nn.Module):
    """Bilinear -> scalar-gated GELU -> linear: the GATr block's feed-forward part (the reference's ``GeoMLP``).

    ``mv (..., mv_channels, 16), scalars (..., s_channels), reference -> same shapes``;
    ``hidden_mv_channels`` (default ``2 mv_channels``) and ``hidden_s_channels`` (default
    ``2 s_channels``) in between.

    Parameters
    ----------
    mv_channels : int
        multivector channels in and out.
    s_channels : int
        scalar channels in and out (0 for none).
    hidden_mv_channels, hidden_s_channels : int, optional
        channels between the bilinear and the output linear layer (defaults above).
    """

    def __init__(self, mv_channels: int, s_channels: int = 0, hidden_mv_channels: int | None = None,
                 hidden_s_channels: int | None = None):
        super().__init__()
        mv_channels = check_positive_int(mv_channels, "mv_channels")
        s_channels = check_nonnegative_int(s_channels, "s_channels")
        hidden_mv = 2 * mv_channels if hidden_mv_channels is None else check_positive_int(hidden_mv_channels,
                                                                                        "hidden_mv_channels")
        hidden_s = 2 * s_channels if hidden_s_channels is None else check_nonnegative_int(hidden_s_channels,
                                                                                        "hidden_s_channels")
        self.bilinear = GeometricBilinear(mv_channels, hidden_mv, s_channels, hidden_s,
                                          hidden_mv_channels=max(1, hidden_mv // 2))
        self.out = EquiLinear(hidden_mv, mv_channels, hidden_s, s_channels)
        self.mv_channels, self.s_channels = mv_channels, s_channels
        self.type_in = (_mv_type(mv_channels), _s_type(s_channels), _mv_type(1))
        self.type_out = (_mv_type(mv_channels), _s_type(s_channels))

    def example_inputs(self, generator: torch.Generator | None = None, dtype: torch.dtype = torch.float64):
        """``(mv, scalars or None, reference)`` with the data mean as reference."""
        mv, s = _example(generator, dtype, self.mv_channels, self.s_channels)
        return (mv, s, join_reference(mv)), {}

    def forward(self, mv: Tensor, scalars: Tensor | None, reference: Tensor) -> tuple[Tensor, Tensor | None]:
        """``(mv (..., mv_channels, 16), scalars (..., s_channels) | None, reference) -> same shapes``."""
        _check_pair(mv, scalars if self.s_channels else None, self.mv_channels, self.s_channels, "GeometricMLP")
        h_mv, h_s = self.bilinear(mv, scalars, reference)  # which checks the reference
        h_mv = PL.from_planes(PL.scalar_gated_gelu_planes(PL.to_planes(h_mv)), _lead(h_mv))
        return self.out(h_mv, None if h_s is None else F.gelu(h_s))


class GATrBlock(nn.Module):
    """Pre-norm transformer block: ``x + Attn(LN(x))`` then ``x + MLP(LN(x))`` (the reference's ``GATrBlock``).

    ``mv (..., items, mv_channels, 16), scalars (..., items, s_channels) | None`` in and out;
    ``reference`` for the join (see [`join_reference`][geomlin.gatr.join_references.join_reference]),
    ``attn_mask`` as in [`GeometricAttention`][].

    Parameters
    ----------
    mv_channels, s_channels : int
        multivector and scalar channels in and out, as for [`GeometricMLP`][].
    num_heads, head_mv_channels, head_s_channels : int
        as for [`GeometricAttention`][] (head widths optional).
    mlp_hidden_mv_channels, mlp_hidden_s_channels : int, optional
        the hidden widths of the [`GeometricMLP`][].
    dropout : float
        grade dropout (multivectors) and dropout (scalars) after attention and MLP.
    use_distance : bool
        distance-aware attention features.
    multi_query : bool
        one key/value head shared by all query heads.
    checkpoint : bool
        recompute the block in the backward pass instead of storing its activations
        (less memory, more time).
    """

    def __init__(self, mv_channels: int, s_channels: int = 0, num_heads: int = 4,
                 head_mv_channels: int | None = None, head_s_channels: int | None = None,
                 mlp_hidden_mv_channels: int | None = None, mlp_hidden_s_channels: int | None = None,
                 dropout: float = 0.0, use_distance: bool = True, multi_query: bool = True,
                 checkpoint: bool = False):
        super().__init__()
        self.mv_channels = check_positive_int(mv_channels, "mv_channels")
        self.s_channels = check_nonnegative_int(s_channels, "s_channels")
        self.dropout = check_float(dropout, "dropout", minimum=0.0, maximum=1.0, strict_maximum=True)
        self.checkpoint = bool(checkpoint)
        self.norm = EquiLayerNorm(mv_channels=self.mv_channels, s_channels=self.s_channels)
        self.attention = GeometricAttention(mv_channels, mv_channels, s_channels, s_channels, num_heads,
                                            head_mv_channels, head_s_channels, use_distance, multi_query)
        self.mlp = GeometricMLP(mv_channels, s_channels, mlp_hidden_mv_channels, mlp_hidden_s_channels)
        self.tables = PL.tables("gatr:grades")
        self.type_in = (_mv_type(self.mv_channels), _s_type(self.s_channels), _mv_type(1))
        self.type_out = (_mv_type(self.mv_channels), _s_type(self.s_channels))

    def example_inputs(self, generator: torch.Generator | None = None, dtype: torch.dtype = torch.float64):
        """``(mv, scalars or None, reference)`` and a padding mask as ``attn_mask``."""
        mv, s = _example(generator, dtype, self.mv_channels, self.s_channels)
        mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
        return (mv, s, join_reference(mv, mask)), {"attn_mask": batch_layout(mask)}

    def _drop(self, mv: Tensor, s: Tensor | None) -> tuple[Tensor, Tensor | None]:
        if not self.training or self.dropout == 0.0:
            return mv, s
        mv = PL.from_planes(PL.grade_dropout_planes(PL.to_planes(mv), self.dropout, tables=self.tables), _lead(mv))
        return mv, (F.dropout(s, self.dropout) if s is not None else None)

    def forward(self, mv: Tensor, scalars: Tensor | None, reference: Tensor,
                attn_mask: Tensor | BatchLayout | None = None) -> tuple[Tensor, Tensor | None]:
        """``(mv (..., items, mv_channels, 16), scalars (..., items, s_channels) | None, reference, attn_mask)
        -> same shapes``; ``reference`` as for [`GeometricMLP`][], ``attn_mask`` as for
        [`GeometricAttention`][]."""
        _check_pair(mv, scalars if self.s_channels else None, self.mv_channels, self.s_channels, "GATrBlock")
        if mv.ndim < 3:
            raise ValueError(f"GATrBlock: mv must have shape (..., items, {self.mv_channels}, 16), got {tuple(mv.shape)}")
        if attn_mask is not None and not isinstance(attn_mask, BatchLayout):
            check_mask(attn_mask, "attn_mask")
        check_reference(reference, "GATrBlock")
        if self.checkpoint and torch.is_grad_enabled():
            from torch.utils.checkpoint import checkpoint

            return checkpoint(self._block, mv, scalars, reference, attn_mask, use_reentrant=False)
        return self._block(mv, scalars, reference, attn_mask)

    def _block(self, mv: Tensor, scalars: Tensor | None, reference: Tensor, attn_mask
               ) -> tuple[Tensor, Tensor | None]:
        h_mv, h_s = self.norm(mv, scalars)
        a_mv, a_s = self._drop(*self.attention(h_mv, h_s, attn_mask))
        mv = mv + a_mv
        scalars = scalars + a_s if scalars is not None else None
        h_mv, h_s = self.norm(mv, scalars)
        m_mv, m_s = self._drop(*self.mlp(h_mv, h_s, reference))
        return mv + m_mv, (scalars + m_s if scalars is not None else None)
