"""Compatibility with the reference GATr (Qualcomm's ``geometric-algebra-transformer``, v1.4).

[`geomlin.gatr.GATr`][geomlin.gatr.model.GATr] is the reference's ``gatr.nets.GATr`` architecture: the same
layers, initialisation, multi-query attention with learnable distance weights, layer norm, gated GELU
and join. A reference ``state_dict`` therefore loads without retraining (same outputs, to float64
round-off):

>>> from geomlin.gatr.reference import gatr_from_reference   # doctest: +SKIP
>>> model = gatr_from_reference(reference_model)              # doctest: +SKIP

What maps, parameter by parameter (``convert_reference_state_dict``):

* ``EquiLinear``: ``weight`` is divided by the reference's basis norms (its basis maps are
  normalised, geomlin's are not: [`reference_basis_norms`][geomlin.gatr.planes.reference_basis_norms]);
  ``s2mvs`` -> ``s_to_mv`` / ``bias_mv`` (or ``bias`` -> ``bias_mv`` without scalar inputs),
  ``mvs2s`` -> ``mv_to_s`` / ``bias_s``, ``s2s`` -> ``s_to_s``;
* attention: ``q_linear``, ``k_linear``, ``v_linear`` (or the multi-head ``in_linear``) are
  stacked into one ``qkv`` projection, with the reference's channel order
  ``(channels, heads)`` turned into geomlin's ``(heads, channels)``;
  ``attention.log_weights (heads, 1, c)`` -> ``log_distance_weights (heads, c)``;
* the bilinear layer's ``linear_left``, ``linear_right``, ``linear_join_left``,
  ``linear_join_right`` are stacked into ``proj_in``; ``linear_out`` -> ``proj_out``.

What cannot map (the loader refuses it with the reason): rotary positional encodings
(``pos_encoding=True``), re-inserted query/key channels (``reinsert_mv_channels`` /
``reinsert_s_channels``), activations other than GELU, and the axial variant (``AxialGATr``):
geomlin has no such layers. A reference model without scalar channels cannot be built by the
reference itself (its attention needs them), so it does not arise.

Conventions that differ (see [`geomlin.algebra.pga`][]): quaternions ``(w, x, y, z)`` here,
``(x, y, z, w)`` there; [`extract_point`][geomlin.algebra.pga.extract_point] keeps the sign of a clamped
small weight; the attention ``mask`` is boolean only and PyG batch vectors are supported
directly (the reference needs xformers block masks for them).
"""

from __future__ import annotations

import torch
from torch import Tensor

from geomlin.gatr import planes
from geomlin.validation import check_bool, check_positive_int

#: Endings of geomlin's own GATr parameter names, which no reference state_dict has (it spells them
#: ``s2mvs``, ``mvs2s``, ``s2s``, ``qkv_module``, ``log_weights``).
GEOMLIN_NAMES = (".s_to_mv", ".mv_to_s", ".s_to_s", ".bias_mv", ".bias_s", ".log_distance_weights", ".qkv.weight")
#: Reference attention options geomlin cannot reproduce, with the value that is compatible.
_UNSUPPORTED_ATTENTION = {"pos_encoding": False, "additional_qk_mv_channels": 0, "additional_qk_s_channels": 0}


def _linear(sd: dict, prefix: str, inv_norms: Tensor) -> dict:
    """One reference ``EquiLinear`` -> geomlin ``EquiLinear`` tensors (no name prefix)."""
    w = sd[prefix + "weight"]
    out = {"weight": w * inv_norms.to(w.dtype)}

    def present(sub: str) -> bool:
        # a sub-layer is there if its weight or its bias is; a bias without its weight then reads
        # (and names) the missing weight
        return prefix + sub + "weight" in sd or prefix + sub + "bias" in sd

    if present("s2mvs."):
        out["s_to_mv"] = sd[prefix + "s2mvs.weight"]
        if prefix + "s2mvs.bias" in sd:
            out["bias_mv"] = sd[prefix + "s2mvs.bias"]
    if prefix + "bias" in sd:
        out["bias_mv"] = sd[prefix + "bias"].reshape(-1)
    if present("mvs2s."):
        out["mv_to_s"] = sd[prefix + "mvs2s.weight"]
        if prefix + "mvs2s.bias" in sd:
            out["bias_s"] = sd[prefix + "mvs2s.bias"]
    if present("s2s."):
        out["s_to_s"] = sd[prefix + "s2s.weight"]
    return out


def _stack(parts: list[dict], perms: list[Tensor | None], s_perms: list[Tensor | None]) -> dict:
    """Stack several linears along their output channels (optionally permuting each one's outputs)."""
    out = {}
    for key in parts[0]:
        pieces = []
        for part, perm, s_perm in zip(parts, perms, s_perms):
            t = part[key]
            p = s_perm if key in ("mv_to_s", "bias_s", "s_to_s") else perm
            pieces.append(t if p is None else t[p])
        out[key] = torch.cat(pieces, 0)
    return out


def _head_order(heads: int, channels: int) -> Tensor:
    """Indices turning the reference's ``(channels, heads)`` output order into ``(heads, channels)``."""
    return torch.tensor([c * heads + h for h in range(heads) for c in range(channels)], dtype=torch.long)


def convert_reference_state_dict(state_dict: dict, num_heads: int, multi_query: bool = True) -> dict:
    """Map a reference ``gatr.nets.GATr`` ``state_dict`` onto [`geomlin.gatr.GATr`][geomlin.gatr.model.GATr] names and layouts.

    ``num_heads`` and ``multi_query`` are the reference model's attention settings. Returns a new
    dict (the input is not modified); load it with ``GATr.load_state_dict(..., strict=True)``.

    Refused with a message naming the entry: anything but a mapping of names to tensors, geomlin's
    own GATr ``state_dict`` (load that directly), a missing entry (a bias without its weight names
    the weight), a ``log_weights`` whose head count is not ``num_heads``, a rotary ``pos_encoding``
    buffer, and any entry the conversion would not use (it would be silently dropped otherwise).
    """
    sd = _ReferenceStateDict(state_dict)
    num_heads = check_positive_int(num_heads, "num_heads")
    check_bool(multi_query, "multi_query")
    # the reference divides each basis map by its norm in float32, whatever the model's dtype
    basis = planes.linear_basis(torch.float32)
    norms = (basis / torch.linalg.norm(basis, dim=(1, 2), keepdim=True)).abs().amax(dim=(1, 2)).double()
    out: dict = {}

    def put(prefix: str, tensors: dict) -> None:
        for k, v in tensors.items():
            out[prefix + k] = v.clone()

    put("linear_in.", _linear(sd, "linear_in.", norms))
    put("linear_out.", _linear(sd, "linear_out.", norms))
    blocks = sorted({int(k.split(".")[1]) for k in sd if k.startswith("blocks.")})
    for b in blocks:
        src, dst = f"blocks.{b}.", f"blocks.{b}."
        att = src + "attention."
        log_w = sd[att + "attention.log_weights"]  # (heads, 1, c)
        if log_w.ndim != 3 or log_w.shape[0] != num_heads:
            raise ValueError(f"state_dict: {att}attention.log_weights has shape {tuple(log_w.shape)}, but "
                             f"num_heads={num_heads} needs ({num_heads}, 1, channels); pass the reference "
                             "model's head count")
        c = log_w.shape[-1]
        if multi_query:
            q = _linear(sd, att + "qkv_module.q_linear.", norms)
            k = _linear(sd, att + "qkv_module.k_linear.", norms)
            v = _linear(sd, att + "qkv_module.v_linear.", norms)
            cs = q["mv_to_s"].shape[0] // num_heads if "mv_to_s" in q else 0
            qkv = _stack([q, k, v], [_head_order(num_heads, c), None, None],
                         [_head_order(num_heads, cs) if cs else None, None, None])
        else:
            full = _linear(sd, att + "qkv_module.in_linear.", norms)
            cs = full["mv_to_s"].shape[0] // (3 * num_heads) if "mv_to_s" in full else 0
            # reference order (qkv, channels, heads) -> geomlin (qkv, heads, channels)
            order = torch.cat([i * c * num_heads + _head_order(num_heads, c) for i in range(3)])
            s_order = torch.cat([i * cs * num_heads + _head_order(num_heads, cs) for i in range(3)]) if cs else None
            qkv = _stack([full], [order], [s_order])
        put(dst + "attention.qkv.", qkv)
        put(dst + "attention.out.", _linear(sd, att + "out_linear.", norms))
        out[dst + "attention.log_distance_weights"] = log_w[:, 0, :].clone()
        mlp = src + "mlp.layers."
        ops = [_linear(sd, mlp + f"0.{n}.", norms)
               for n in ("linear_left", "linear_right", "linear_join_left", "linear_join_right")]
        put(dst + "mlp.bilinear.proj_in.", _stack(ops, [None] * 4, [None] * 4))
        put(dst + "mlp.bilinear.proj_out.", _linear(sd, mlp + "0.linear_out.", norms))
        last = max(int(k[len(mlp):].split(".")[0]) for k in sd if k.startswith(mlp))
        put(dst + "mlp.out.", _linear(sd, mlp + f"{last}.", norms))
    sd.refuse_unused()
    return out


class _ReferenceStateDict(dict):
    """A reference ``state_dict`` (detached tensors) that records which keys the conversion reads, so a
    missing key is a clear error and a key the conversion would drop (a rotary ``pos_encoding``
    buffer, a module geomlin does not have) is refused instead of being silently lost."""

    def __init__(self, state_dict):
        from collections.abc import Mapping

        if not isinstance(state_dict, Mapping):
            raise TypeError(f"state_dict must be a mapping of parameter names to tensors (a reference "
                            f"model's .state_dict()), got {type(state_dict).__name__}")
        bad = [k for k, v in state_dict.items() if not isinstance(k, str) or not isinstance(v, Tensor)]
        if bad:
            raise TypeError(f"state_dict must map str names to tensors, got {bad[0]!r}: "
                            f"{type(state_dict[bad[0]]).__name__}")
        rotary = [k for k in state_dict if ".pos_encoding." in k]
        if rotary:
            raise ValueError(f"state_dict holds rotary positional encodings ({rotary[0]!r}): reference option "
                             "pos_encoding=True has no geomlin counterpart (needs False)")
        super().__init__({k: v.detach() for k, v in state_dict.items()})
        self.used: set[str] = set()
        own = next((k for k in self if k.endswith(GEOMLIN_NAMES)), None)
        if own is not None:
            raise ValueError(f"state_dict is a geomlin GATr state_dict (it has {own!r}), not a reference "
                             "gatr.nets.GATr one: load it with GATr.load_state_dict(state_dict), without conversion")
        if not any(k.startswith("linear_in.") for k in self):
            raise ValueError("state_dict is not a reference gatr.nets.GATr state_dict: it has no 'linear_in.*' "
                             f"entries (keys: {', '.join(list(self)[:5]) or 'none'})")

    def __getitem__(self, key: str) -> Tensor:
        if key not in self:
            raise ValueError(f"state_dict is missing {key!r}, which a reference gatr.nets.GATr of this layout has "
                             "(a truncated state_dict, or one of another architecture)")
        self.used.add(key)
        return super().__getitem__(key)

    def __contains__(self, key) -> bool:
        found = super().__contains__(key)
        if found:
            self.used.add(key)
        return found

    def refuse_unused(self) -> None:
        unused = sorted(k for k in self.keys() if k not in self.used)
        if unused:
            raise ValueError(f"state_dict has {len(unused)} entries with no geomlin counterpart, e.g. {unused[0]!r}: "
                             "the reference model uses an option geomlin cannot load (see "
                             "geomlin.gatr.reference)")


def _check_reference_config(module) -> None:
    if type(module).__name__ != "GATr" or not hasattr(module, "blocks"):
        raise TypeError(f"expected a reference gatr.nets.GATr, got {type(module).__name__} "
                        "(AxialGATr and other variants have no geomlin counterpart)")
    if getattr(module, "_reinsert_mv_channels", None) or getattr(module, "_reinsert_s_channels", None):
        raise ValueError("reference models with reinsert_mv_channels / reinsert_s_channels cannot be loaded: "
                         "geomlin's attention has no additional query/key channels")
    for block in module.blocks:
        cfg = block.attention.config
        for key, ok in _UNSUPPORTED_ATTENTION.items():
            if getattr(cfg, key, ok) != ok:
                raise ValueError(f"reference attention option {key}={getattr(cfg, key)!r} has no geomlin "
                                 f"counterpart (needs {ok!r})")
        activation = getattr(block.mlp.config, "activation", "gelu")
        if activation != "gelu":
            raise ValueError(f"reference MLP activation {activation!r} cannot be loaded: geomlin's GATr uses "
                             "the scalar-gated GELU")
        if len(block.mlp.layers) not in (3, 4, 5):  # bilinear [, dropout], gate, linear [, dropout]
            raise ValueError("reference MLPs with more than one hidden layer cannot be loaded")


def gatr_from_reference(module, **kwargs):
    """A [`geomlin.gatr.GATr`][geomlin.gatr.model.GATr] computing the same function as a reference ``gatr.nets.GATr``.

    Sizes, heads and attention settings are read from ``module``; its parameters are converted
    by [`convert_reference_state_dict`][]. ``kwargs`` go to the ``GATr`` constructor
    (``attention_method``, ``checkpoint``). The result is in ``module``'s dtype.
    """
    from geomlin.gatr.model import GATr

    _check_reference_config(module)
    sd = module.state_dict()
    lin_in, lin_out = module.linear_in, module.linear_out
    cfg = module.blocks[0].attention.config if len(module.blocks) else None
    in_s = lin_in.s2mvs.weight.shape[1] if lin_in.s2mvs is not None else 0
    hidden_s = lin_in.mvs2s.weight.shape[0] if lin_in.mvs2s is not None else 0
    out_s = lin_out.mvs2s.weight.shape[0] if lin_out.mvs2s is not None else 0
    heads = cfg.num_heads if cfg is not None else 1
    model = GATr(lin_in.weight.shape[1], lin_out.weight.shape[0], lin_in.weight.shape[0],
                 in_s_channels=in_s, out_s_channels=out_s, hidden_s_channels=hidden_s,
                 num_blocks=len(module.blocks), num_heads=heads,
                 head_mv_channels=cfg.hidden_mv_channels if cfg is not None else None,
                 head_s_channels=cfg.hidden_s_channels if cfg is not None else None,
                 multi_query=cfg.multi_query if cfg is not None else True, **kwargs)
    if cfg is not None:
        for block in model.blocks:
            block.attention.distance_eps = float(cfg.normalizer_eps)
    model = model.to(dtype=lin_in.weight.dtype, device=lin_in.weight.device)
    model.load_state_dict(convert_reference_state_dict(sd, heads, model.blocks[0].attention.multi_query
                                                       if len(model.blocks) else True), strict=True)
    return model


def load_reference_state_dict(model, state_dict: dict, strict: bool = True):
    """Load a reference ``gatr.nets.GATr`` ``state_dict`` into an existing geomlin ``model``
    of the same sizes (its heads and ``multi_query`` setting are used for the conversion)."""
    att = model.blocks[0].attention if len(model.blocks) else None
    converted = convert_reference_state_dict(state_dict, att.heads if att is not None else 1,
                                             att.multi_query if att is not None else True)
    return model.load_state_dict(converted, strict=strict)
