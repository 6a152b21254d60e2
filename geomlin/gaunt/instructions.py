"""e3nn's tensor-product instructions: parsing, checks and normalisation, for [`GauntTensorProduct`][].

An instruction ``(i_in1, i_in2, i_out, mode, has_weight[, path_weight])`` puts ``irreps_in1[i_in1] x
irreps_in2[i_in2]`` into ``irreps_out[i_out]``; ``mode`` says how the multiplicities ``u`` (of
``in1``), ``v`` (of ``in2``) and ``w`` (of the output) meet, and the shape of the path's weights:

==========  ==========================================  ==============================
mode        output channel                              weights (``path_shape``)
==========  ==========================================  ==============================
``uvw``     ``z_w = sum_{u,v} w_uvw x_u (x) y_v``       ``(U, V, W)``
``uvu``     ``z_u = sum_v w_uv x_u (x) y_v``            ``(U, V)``
``uvv``     ``z_v = sum_u w_uv x_u (x) y_v``            ``(U, V)``
``uuw``     ``z_w = sum_u w_uw x_u (x) y_u``            ``(U, W)``
``uuu``     ``z_u = w_u x_u (x) y_u``                   ``(U,)``
``uvuv``    ``z_(u,v) = w_uv x_u (x) y_v``              ``(U, V)``
``uvu<v``   ``z_(u<v) = w_(u<v) x_u (x) y_v``           ``(U (U - 1) / 2,)``
``u<vw``    ``z_w = sum_{u<v} w_(u<v)w x_u (x) y_v``    ``(U (U - 1) / 2, W)``
==========  ==========================================  ==============================

Each path is scaled as e3nn scales it (``e3nn.o3.TensorProduct``): ``sqrt(alpha)`` with ``alpha`` the
output irrep's dimension (``irrep_normalization="component"``), ``d1 d2`` (``"norm"``) or 1 (``"none"``),
divided by the summed ``in1_var * in2_var * fan_in`` of every path into the same output
(``path_normalization="element"``) or by the path's own times the number of paths (``"path"``), times
``out_var`` and the instruction's ``path_weight``; so unit-variance inputs and weights give
unit-variance outputs.
"""

from __future__ import annotations

import math

from e3nn import o3

from geomlin.validation import check_choice

__all__ = ["MODES", "fully_connected_instructions", "normalized_instructions", "output_mask_blocks"]

#: Connection modes, as e3nn names them.
MODES = ("uvw", "uvu", "uvv", "uuw", "uuu", "uvuv", "uvu<v", "u<vw")
IRREP_NORMALIZATIONS = ("component", "norm", "none")
PATH_NORMALIZATIONS = ("element", "path", "none")


def path_shape(mode: str, u: int, v: int, w: int) -> tuple[int, ...]:
    """Shape of the weights of a path of ``mode`` with multiplicities ``u``, ``v`` (inputs), ``w`` (output)."""
    pairs = u * (v - 1) // 2
    return {"uvw": (u, v, w), "uvu": (u, v), "uvv": (u, v), "uuw": (u, w), "uuu": (u,), "uvuv": (u, v),
            "uvu<v": (pairs,), "u<vw": (pairs, w)}[mode]


def _fan_in(mode: str, u: int, v: int) -> int:
    """How many products one output entry of a path sums (e3nn's number of elements)."""
    return {"uvw": u * v, "uvu": v, "uvv": u, "uuw": u, "uuu": 1, "uvuv": 1, "uvu<v": 1,
            "u<vw": u * (v - 1) // 2}[mode]


def _multiplicity_rule(mode: str, u: int, v: int, w: int) -> str | None:
    """The multiplicity condition of ``mode`` that ``u, v, w`` break, or None."""
    rules = {"uvu": (u == w, "mul_in1 == mul_out"), "uvv": (v == w, "mul_in2 == mul_out"),
             "uuw": (u == v, "mul_in1 == mul_in2"), "uuu": (u == v == w, "mul_in1 == mul_in2 == mul_out"),
             "uvuv": (u * v == w, "mul_in1 * mul_in2 == mul_out"),
             "uvu<v": (u == v and u * (u - 1) // 2 == w, "mul_in1 == mul_in2 and mul_out == mul_in1 (mul_in1 - 1) / 2"),
             "u<vw": (u == v, "mul_in1 == mul_in2")}
    ok, text = rules.get(mode, (True, ""))
    return None if ok else text


def fully_connected_instructions(irreps_in1, irreps_in2, irreps_out) -> list[tuple]:
    """e3nn's ``FullyConnectedTensorProduct`` paths: every ``(i1, i2, i_out)`` with ``out in in1 x in2``, mode
    ``uvw``, trained, path weight 1."""
    return [(i1, i2, io, "uvw", True, 1.0)
            for i1, (_, ir1) in enumerate(irreps_in1) for i2, (_, ir2) in enumerate(irreps_in2)
            for io, (_, ir_out) in enumerate(irreps_out) if ir_out in ir1 * ir2]


def _check_instruction(k: int, ins, irreps_in1, irreps_in2, irreps_out) -> tuple:
    """One instruction as ``(i1, i2, io, mode, has_weight, path_weight)``, or a one-line error naming it."""
    where = f"instructions[{k}] = {ins!r}"
    if not isinstance(ins, (tuple, list)) or len(ins) not in (5, 6):
        raise ValueError(f"{where} must be a tuple (i_in1, i_in2, i_out, mode, has_weight[, path_weight]), as e3nn's")
    i1, i2, io, mode, has_weight, *rest = ins
    for name, index, irreps in (("i_in1", i1, irreps_in1), ("i_in2", i2, irreps_in2), ("i_out", io, irreps_out)):
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(irreps):
            raise ValueError(f"{where}: {name} must index the {len(irreps)} irreps of {irreps!s}, got {index!r}")
    if mode not in MODES:
        raise ValueError(f"{where}: mode must be one of {', '.join(MODES)} (e3nn's connection modes), got {mode!r}")
    if not isinstance(has_weight, bool):
        raise TypeError(f"{where}: has_weight must be a bool, got {has_weight!r}")
    path_weight = rest[0] if rest else 1.0
    if isinstance(path_weight, bool) or not isinstance(path_weight, (int, float)) or not math.isfinite(path_weight):
        raise ValueError(f"{where}: path_weight must be a finite number, got {path_weight!r}")
    (u, a), (v, b), (w, c) = irreps_in1[i1], irreps_in2[i2], irreps_out[io]
    if a.p * b.p != c.p or not abs(a.l - b.l) <= c.l <= a.l + b.l:
        raise ValueError(f"{where}: {a} x {b} has no {c} (it gives {' + '.join(str(x) for x in a * b)}); "
                         "no equivariant path exists")
    broken = _multiplicity_rule(mode, u, v, w)
    if broken:
        raise ValueError(f"{where}: mode {mode!r} needs {broken}, got {u}x{a} x {v}x{b} -> {w}x{c}")
    if mode in ("uvw", "u<vw") and not has_weight:
        raise ValueError(f"{where}: mode {mode!r} sums over every output channel only through its weights: "
                         "has_weight must be True (as in e3nn)")
    if mode == "uuw" and not has_weight and w != 1:
        raise ValueError(f"{where}: mode 'uuw' without weights sums the channels into one output: mul_out must be 1, "
                         f"got {w}")
    return i1, i2, io, mode, has_weight, float(path_weight)


def _variances(values, irreps, name: str) -> list[float]:
    if values is None:
        return [1.0] * len(irreps)
    try:
        values = [float(x) for x in values]
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be a list of numbers (one per irrep of {irreps}), got {values!r}") from err
    if len(values) != len(irreps):
        raise ValueError(f"{name} must have one variance per irrep of {irreps} ({len(irreps)}), got {len(values)}")
    if any(not math.isfinite(x) or x < 0 for x in values):
        raise ValueError(f"{name} must hold finite variances >= 0, got {values}")
    return values


def normalized_instructions(irreps_in1, irreps_in2, irreps_out, instructions, in1_var=None, in2_var=None,
                            out_var=None, irrep_normalization="component",
                            path_normalization="element") -> list[o3.Instruction]:
    """e3nn ``Instruction``\\ s with ``path_shape`` and the final path weight ``sqrt(alpha)`` (module docstring).

    Every instruction is checked (indices, parity and triangle, mode, multiplicities), with a one-line
    ``ValueError`` naming it; the result equals ``e3nn.o3.TensorProduct(...).instructions``.
    """
    check_choice(irrep_normalization, "irrep_normalization", IRREP_NORMALIZATIONS)
    check_choice(path_normalization, "path_normalization", PATH_NORMALIZATIONS)
    if isinstance(instructions, (str, bytes)) or not hasattr(instructions, "__iter__"):
        raise ValueError(f"instructions must be a list of tuples (i_in1, i_in2, i_out, mode, has_weight"
                         f"[, path_weight]), got {instructions!r}")
    raw = [_check_instruction(k, ins, irreps_in1, irreps_in2, irreps_out) for k, ins in enumerate(instructions)]
    var1 = _variances(in1_var, irreps_in1, "in1_var")
    var2 = _variances(in2_var, irreps_in2, "in2_var")
    var_out = _variances(out_var, irreps_out, "out_var")

    def fan(ins) -> float:
        i1, i2, _, mode, _, _ = ins
        return var1[i1] * var2[i2] * _fan_in(mode, irreps_in1[i1].mul, irreps_in2[i2].mul)

    out = []
    for ins in raw:
        i1, i2, io, mode, has_weight, path_weight = ins
        (u, a), (v, b), (w, c) = irreps_in1[i1], irreps_in2[i2], irreps_out[io]
        alpha = {"component": c.dim, "norm": a.dim * b.dim, "none": 1}[irrep_normalization]
        if path_normalization == "element":
            x = sum(fan(j) for j in raw if j[2] == io)
        elif path_normalization == "path":
            x = fan(ins) * sum(1 for j in raw if j[2] == io)
        else:
            x = 1.0
        if x > 0:
            alpha /= x
        alpha *= var_out[io] * path_weight
        if alpha < 0:
            raise ValueError(f"instructions: the path {ins!r} has a negative path_weight * out_var ({alpha:g}); "
                             "e3nn takes its square root")
        out.append(o3.Instruction(i1, i2, io, mode, has_weight, math.sqrt(alpha), path_shape(mode, u, v, w)))
    return out


def output_mask_blocks(irreps_out, instructions) -> list[bool]:
    """Per output irrep: whether some path with a non-zero weight and non-empty channels reaches it."""
    return [any(ins.i_out == k and ins.path_weight != 0 and 0 not in ins.path_shape for ins in instructions)
            for k in range(len(irreps_out))]
