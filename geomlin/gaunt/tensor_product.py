"""[`GauntTensorProduct`][]: e3nn's ``o3.TensorProduct`` and ``o3.FullyConnectedTensorProduct``, paths from the sphere."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from geomlin.gaunt.cache import route_tables
from geomlin.gaunt.instructions import (
    fully_connected_instructions,
    normalized_instructions,
    output_mask_blocks,
)
from geomlin.gaunt.layout import as_irreps
from geomlin.gaunt.paths import build_plan, evaluate, plan_keys, weight_scales
from geomlin.precision import compute_dtype, full_precision
from geomlin.validation import check_broadcastable, check_finite, check_tensor, shape_str

__all__ = ["GauntTensorProduct"]

_IRREP_NORMALIZATION_DEFAULT = "component"
_PATH_NORMALIZATION_DEFAULT = "element"


def _flag(value, name: str, allow_none: bool = False):
    if (value is None and allow_none) or isinstance(value, bool):
        return value
    raise TypeError(f"{name} must be a bool{' or None' if allow_none else ''}, got {value!r}")


class GauntTensorProduct(nn.Module):
    r"""e3nn's tensor product, a drop-in for ``o3.TensorProduct`` and ``o3.FullyConnectedTensorProduct``.

    ``GauntTensorProduct(irreps_in1, irreps_in2, irreps_out)`` is ``o3.FullyConnectedTensorProduct``
    (every path, mode ``"uvw"``, trained); with ``instructions`` it is ``o3.TensorProduct``. Same
    arguments, same instructions, weights (``weight_numel``, e3nn's flat layout, ``weight_views()``),
    normalisation and outputs as e3nn's, to round-off: the output is linear in the weights,
    ``out = sum_paths sqrt(alpha_path) w_path . (x1 (x) x2)_path``. Every path's coupling comes from the
    sphere: the Gaunt coefficient ``int Y_k Y_i Y_j`` for ``l1 + l2 + l3`` even, the Poisson bracket
    ``int Y_k r . (grad Y_i x grad Y_j)`` for odd (the cross product, ``1o x 1o -> 1e``, is one), each
    divided by its norm, which makes it e3nn's ``wigner_3j`` ([`geomlin.gaunt.paths`][]). So every
    output e3nn reaches is reached, for any parities, and an output irrep that no path reaches is zero
    and marked 0 in ``output_mask``, as in e3nn.

    The paths of one pair of input irreps share one contraction, in the cheapest of a few orders
    chosen once from the irreps (never from the batch): spherical harmonics times features, as in a
    convolution, become the "multiply by ``x2``" operator of each row met by every channel in one
    batched GEMM ([`geomlin.gaunt.paths`][] says which order runs when).

    Parameters
    ----------
    irreps_in1, irreps_in2, irreps_out : e3nn Irreps
        anything ``o3.Irreps(...)`` accepts; zero multiplicities and empty irreps as in e3nn
        (instruction indices count every entry).
    instructions : list of tuple, optional
        ``(i_in1, i_in2, i_out, mode, has_weight[, path_weight])`` with ``mode`` one of ``"uvw"``,
        ``"uvu"``, ``"uvv"``, ``"uuw"``, ``"uuu"``, ``"uvuv"``, ``"uvu<v"``, ``"u<vw"``
        ([`geomlin.gaunt.instructions`][]); ``None``: the fully connected paths. A path that cannot
        exist (parity, triangle, multiplicities of its mode) is refused in one line naming it.
    in1_var, in2_var, out_var : list of float, optional
        variance of each irrep of the inputs / wanted of the outputs (default 1 each).
    irrep_normalization : {"component", "norm", "none"}, optional
        default ``"component"``.
    path_normalization : {"element", "path", "none"}, optional
        default ``"element"``.
    internal_weights : bool, optional
        hold the weights as the parameter ``weight`` (default: ``shared_weights`` and some path
        is trained).
    shared_weights : bool, optional
        one set of weights for every row (default ``True``); ``False``: ``weight (..., weight_numel)``
        per row, broadcast with the inputs (a radial MLP's output in a convolution).
    compile_left_right : bool
        as in e3nn, ``False`` builds a module whose ``forward`` refuses to run.
    compile_right : bool
        as in e3nn, [`right`][geomlin.gaunt.tensor_product.GauntTensorProduct.right] runs only with ``True``.
    normalization : {"component", "norm", "none"}, optional
        e3nn's older name of ``irrep_normalization`` (refused when both are given and differ).
    _specialized_code, _optimize_einsums : bool, optional
        e3nn's switches between code generators that compute the same numbers; accepted and kept
        as attributes, this module has one evaluation (the same numbers either way).

    Shapes
    ------
    ``forward(x1 (..., irreps_in1.dim), x2 (..., irreps_in2.dim), weight=None) -> (..., irreps_out.dim)``,
    leading axes broadcast (``weight (..., weight_numel)`` too when ``shared_weights=False``);
    ``weight`` may also be a list of per-instruction tensors of shape ``(...,) + path_shape``.
    float32/float64 (half precision under ``torch.autocast``: computed in float32); shared weights
    are cast to the inputs' dtype. Differentiable twice (forces by double backward).
    """

    def __init__(self, irreps_in1, irreps_in2, irreps_out, instructions=None, in1_var=None, in2_var=None,
                 out_var=None, irrep_normalization: str | None = None, path_normalization: str | None = None,
                 internal_weights: bool | None = None, shared_weights: bool | None = None,
                 compile_left_right: bool = True, compile_right: bool = False, normalization: str | None = None,
                 _specialized_code: bool | None = None, _optimize_einsums: bool | None = None):
        super().__init__()
        from geomlin.reps.irreps import IrrepsRep

        if isinstance(irreps_in1, int) and not isinstance(irreps_in1, bool):
            raise TypeError(f"irreps_in1 must be e3nn Irreps, got the int {irreps_in1}: for sphere coefficients "
                            "of given degrees use SphereGauntProduct(lmax_in1, lmax_in2, lmax_out, channels)")
        self.irreps_in1 = as_irreps(irreps_in1, "irreps_in1", keep_empty=True)
        self.irreps_in2 = as_irreps(irreps_in2, "irreps_in2", keep_empty=True)
        self.irreps_out = as_irreps(irreps_out, "irreps_out", keep_empty=True)
        if isinstance(instructions, str):
            raise TypeError(f"instructions must be a list of tuples, got the string {instructions!r}: "
                             f"o3.FullyConnectedTensorProduct's fourth argument is irrep_normalization; pass "
                             f"irrep_normalization={instructions!r} by name")
        if normalization is not None:
            if irrep_normalization is not None and irrep_normalization != normalization:
                raise ValueError(f"normalization={normalization!r} (e3nn's older name of irrep_normalization) and "
                                 f"irrep_normalization={irrep_normalization!r} differ; pass irrep_normalization only")
            irrep_normalization = normalization
        self._specialized_code = _flag(_specialized_code, "_specialized_code", allow_none=True)
        self._optimize_einsums = _flag(_optimize_einsums, "_optimize_einsums", allow_none=True)
        self._compile_left_right = _flag(compile_left_right, "compile_left_right")
        self._did_compile_right = _flag(compile_right, "compile_right")
        shared_weights = _flag(shared_weights, "shared_weights", allow_none=True)
        internal_weights = _flag(internal_weights, "internal_weights", allow_none=True)

        if instructions is None:
            instructions = fully_connected_instructions(self.irreps_in1, self.irreps_in2, self.irreps_out)
        self.instructions = normalized_instructions(
            self.irreps_in1, self.irreps_in2, self.irreps_out, instructions, in1_var, in2_var, out_var,
            _IRREP_NORMALIZATION_DEFAULT if irrep_normalization is None else irrep_normalization,
            _PATH_NORMALIZATION_DEFAULT if path_normalization is None else path_normalization)
        if shared_weights is False and internal_weights is None:
            internal_weights = False
        shared_weights = True if shared_weights is None else shared_weights
        if internal_weights is None:
            internal_weights = shared_weights and any(ins.has_weight for ins in self.instructions)
        if internal_weights and not shared_weights:
            raise ValueError("internal_weights=True needs shared_weights=True (internal weights are one set for "
                             "every row, as in e3nn); pass the per-row weights to forward instead")
        self.shared_weights, self.internal_weights = shared_weights, internal_weights
        #: Number of weights: the trained paths' ``path_shape`` products, in instruction order (e3nn's layout).
        self.weight_numel = sum(math.prod(ins.path_shape) for ins in self.instructions if ins.has_weight)
        if internal_weights and self.weight_numel > 0:
            self.weight = nn.Parameter(torch.randn(self.weight_numel))
        else:
            self.register_buffer("weight", torch.empty(0))
        mask = [torch.full((mul * ir.dim,), float(reached)) for (mul, ir), reached
                in zip(self.irreps_out, output_mask_blocks(self.irreps_out, self.instructions))]
        self.register_buffer("output_mask", torch.cat(mask) if mask else torch.ones(0))

        self._plans = build_plan(self.irreps_in1, self.irreps_in2, self.irreps_out, self.instructions,
                                 self.shared_weights)
        self._blocks = tuple(tuple((mul, ir.dim) for mul, ir in irreps)
                             for irreps in (self.irreps_in1, self.irreps_in2, self.irreps_out))
        self._weight_sizes = [math.prod(ins.path_shape) for ins in self.instructions if ins.has_weight]
        # ints and strings: torch.compile cannot guard on e3nn's Irreps
        self._dims = (self.irreps_in1.dim, self.irreps_in2.dim, self.irreps_out.dim)
        self._texts = (str(self.irreps_in1), str(self.irreps_in2), str(self.irreps_out))
        self.tables = route_tables(plan_keys(self._plans))
        self.tables.add("weight_scales", weight_scales(self._plans, self._weight_sizes))
        self.type_in = (IrrepsRep(self.irreps_in1), IrrepsRep(self.irreps_in2))
        self.type_out = IrrepsRep(self.irreps_out)

    # ------------------------------------------------------------------ weights
    def _weights(self, weight) -> Tensor | None:
        """The weights to use: ``(weight_numel,)`` shared, ``(..., weight_numel)`` per row, or None (no trained path)."""
        if weight is None:
            if self.weight_numel == 0:
                return None
            if not self.internal_weights:
                raise ValueError(f"weight is required: this GauntTensorProduct has internal_weights=False "
                                 f"(shared_weights={self.shared_weights}); pass weight of shape "
                                 f"{'(' if self.shared_weights else '(..., '}{self.weight_numel},)")
            return self.weight
        if isinstance(weight, (list, tuple)):
            weight = self._join(weight)
        check_tensor(weight, "weight", dtype="any", what=f"{self.weight_numel} path weights")
        compute_dtype(weight, "weight")
        if self.shared_weights and tuple(weight.shape) != (self.weight_numel,):
            raise ValueError(f"weight must have shape ({self.weight_numel},) (shared_weights=True), "
                             f"got {shape_str(weight.shape)}")
        if not self.shared_weights and (weight.dim() < 2 or weight.shape[-1] != self.weight_numel):
            raise ValueError(f"weight must have shape (..., {self.weight_numel}) with a batch axis "
                             f"(shared_weights=False), got {shape_str(weight.shape)}")
        return weight

    def _join(self, weights) -> Tensor:
        """Per-instruction weights ``[(...,) + path_shape]`` -> the flat ``(..., weight_numel)``."""
        shapes = [ins.path_shape for ins in self.instructions if ins.has_weight]
        if len(weights) != len(shapes) or not all(isinstance(w, Tensor) for w in weights):
            raise ValueError(f"weight as a list needs one tensor per trained instruction ({len(shapes)}), "
                             f"got {len(weights)} item(s)")
        flat = []
        for k, (w, shape) in enumerate(zip(weights, shapes)):
            if tuple(w.shape[w.dim() - len(shape):]) != tuple(shape) or (self.shared_weights and w.dim() != len(shape)):
                want = shape_str(shape if self.shared_weights else (..., *shape))
                raise ValueError(f"weight[{k}] must have shape {want}, got {shape_str(w.shape)}")
            flat.append(w.reshape(*w.shape[: w.dim() - len(shape)], -1))
        batch = check_broadcastable(*((f"weight[{k}]", w.shape[:-1]) for k, w in enumerate(flat)),
                                    what="batch shapes")
        return torch.cat([w.expand(*batch, w.shape[-1]) for w in flat], dim=-1)

    def weight_view_for_instruction(self, instruction: int, weight: Tensor | None = None) -> Tensor:
        """View of the weights of ``instructions[instruction]`` (a trained one), ``(...,) + path_shape``."""
        ins = self.instructions[instruction]
        if not ins.has_weight:
            raise ValueError(f"instructions[{instruction}] has no weights (has_weight=False)")
        weight = self._weights(weight)
        offset = sum(math.prod(i.path_shape) for i in self.instructions[:instruction] if i.has_weight)
        return weight.narrow(-1, offset, math.prod(ins.path_shape)).view(*weight.shape[:-1], *ins.path_shape)

    def weight_views(self, weight: Tensor | None = None, yield_instruction: bool = False):
        """Iterate over the weight views of the trained instructions (with ``(index, instruction, view)``
        when ``yield_instruction``), as e3nn's ``weight_views``."""
        weight = self._weights(weight)
        offset = 0
        for k, ins in enumerate(self.instructions):
            if ins.has_weight:
                n = math.prod(ins.path_shape)
                view = weight.narrow(-1, offset, n).view(*weight.shape[:-1], *ins.path_shape)
                offset += n
                yield (k, ins, view) if yield_instruction else view

    # ------------------------------------------------------------------ evaluation
    def _features(self, x, which: int) -> torch.dtype:
        """Check input ``which`` (0: ``x1``, 1: ``x2``); returns the dtype it is computed in."""
        name, dim, text = ("x1", "x2")[which], self._dims[which], self._texts[which]
        check_tensor(x, name, min_ndim=1, dtype="any", what=f"e3nn features of {text}")
        if x.shape[-1] != dim:
            raise ValueError(f"{name} must have last dimension {dim} (irreps {text}), got shape {shape_str(x.shape)}")
        return compute_dtype(x, name)

    def _rows(self, x1, x2, weight):
        """Checked rows: ``(x1 (N, dim1) or None, x2 (N, dim2), weight, per_sample, batch, dtype)``."""
        dtype = self._features(x2, 1)
        if x1 is not None and self._features(x1, 0) != dtype:
            raise TypeError(f"x1 and x2 must have the same dtype, got {x1.dtype} and {x2.dtype}")
        weight = self._weights(weight)
        _check_finite(("x1", x1), ("x2", x2), ("weight", None if weight is self.weight else weight))
        per_sample = weight is not None and not self.shared_weights
        shapes = ([] if x1 is None else [("x1", x1.shape[:-1])]) + [("x2", x2.shape[:-1])]
        if per_sample:
            shapes.append(("weight", weight.shape[:-1]))
        if all(shape == shapes[0][1] for _, shape in shapes):  # the common case: nothing to broadcast
            batch = tuple(shapes[0][1])
        else:
            batch = check_broadcastable(*shapes, what="batch shapes")
        N = math.prod(batch)
        x1, x2 = (None if x is None else _rows_of(x, dtype, batch, N) for x in (x1, x2))
        if weight is not None:
            if per_sample:  # (their scales multiply the paths' outputs: no scaled copy of per-row weights)
                weight = _rows_of(weight, dtype, batch, N)
            else:
                weight = weight.to(dtype) * self.tables.get("weight_scales", dtype)
        return x1, x2, weight, per_sample, batch, dtype

    def forward(self, x1: Tensor, x2: Tensor, weight: Tensor | list | None = None) -> Tensor:
        if not self._compile_left_right:
            raise ValueError("this GauntTensorProduct was built with compile_left_right=False, which (as in e3nn) "
                             "leaves it without a forward; build it with compile_left_right=True")
        x1, x2, weight, per_sample, batch, _ = self._rows(x1, x2, weight)
        if x1.shape[0] == 0 or self._dims[2] == 0:
            return x1.new_zeros(*batch, self._dims[2])
        with full_precision(x1):  # under autocast: float32, as the routes compute (geomlin.precision)
            out = evaluate(self._plans, x1, x2, weight, per_sample, *self._blocks, self._weight_sizes, self.tables)
        return out.view(*batch, self._dims[2])

    def right(self, x2: Tensor, weight: Tensor | list | None = None) -> Tensor:
        """The product as a matrix acting on ``x1``: ``forward(x1, x2, weight) = einsum("...i,...ij->...j", x1, right(x2, weight))``.

        Parameters
        ----------
        x2 : Tensor of shape (..., irreps_in2.dim)
            the second input.
        weight : Tensor, optional
            as in ``forward``.

        Returns
        -------
        Tensor of shape (..., irreps_in1.dim, irreps_out.dim)
            the leading axes of ``x2`` (broadcast with those of per-row weights). Needs
            ``compile_right=True``, as in e3nn.
        """
        if not self._did_compile_right:
            raise ValueError("right() needs a GauntTensorProduct built with compile_right=True (as in e3nn)")
        dim1, dim2, dim_out = self._dims
        _, x2, weight, per_sample, batch, dtype = self._rows(None, x2, weight)
        N = x2.shape[0]
        if N == 0 or dim1 == 0 or dim_out == 0:
            return x2.new_zeros(*batch, dim1, dim_out)
        # the product is linear in x1: its matrix is the product of every basis vector of x1
        basis = torch.eye(dim1, dtype=dtype, device=x2.device).expand(N, dim1, dim1).reshape(N * dim1, dim1)
        x2 = x2[:, None].expand(N, dim1, dim2).reshape(N * dim1, dim2)
        if per_sample:
            weight = weight[:, None].expand(N, dim1, self.weight_numel).reshape(N * dim1, self.weight_numel)
        with full_precision(x2):
            out = evaluate(self._plans, basis, x2, weight, per_sample, *self._blocks, self._weight_sizes, self.tables)
        return out.view(*batch, dim1, dim_out)

    def example_inputs(self, generator=None, dtype=torch.float64):
        """Random features of both irreps (and per-row weights when ``shared_weights=False``)."""
        batch = 4
        x1 = torch.randn(batch, self.irreps_in1.dim, generator=generator, dtype=dtype)
        x2 = torch.randn(batch, self.irreps_in2.dim, generator=generator, dtype=dtype)
        if not self.internal_weights and self.weight_numel:
            shape = (self.weight_numel,) if self.shared_weights else (batch, self.weight_numel)
            return (x1, x2), {"weight": torch.randn(*shape, generator=generator, dtype=dtype)}
        return (x1, x2), {}

    def __repr__(self) -> str:
        paths = sum(math.prod(ins.path_shape) for ins in self.instructions)
        return (f"{type(self).__name__}({self.irreps_in1.simplify()} x {self.irreps_in2.simplify()} -> "
                f"{self.irreps_out.simplify()} | {paths} paths | {self.weight_numel} weights)")


def _rows_of(x: Tensor, dtype: torch.dtype, batch: tuple, N: int) -> Tensor:
    """``x (..., dim)`` broadcast to ``batch`` as rows ``(N, dim)`` in ``dtype`` (itself when it already is)."""
    if x.dtype != dtype:
        x = x.to(dtype)
    if x.dim() == 2 and x.shape[0] == N:
        return x
    return x.expand(*batch, x.shape[-1]).reshape(N, x.shape[-1])


def _check_finite(*named) -> None:
    """Refuse NaN and inf in the named tensors (``None`` skipped) through ``geomlin.validation.check_finite``.

    On the CPU, eagerly, one sum of all of them screens first (a NaN or inf makes it non-finite; so may
    finite values that overflow it): the per-tensor checks, which name the culprit, run only when it is
    not. That is one reduction per tensor and one host read per call, instead of a finiteness mask and
    a read per tensor: most of the per-call cost of a product of a few rows.
    """
    named = [(n, t) for n, t in named if t is not None]
    if all(t.device.type == "cpu" for _, t in named) and not torch.compiler.is_compiling():
        total = named[0][1].sum()
        for _, t in named[1:]:
            total = total + t.sum()
        if math.isfinite(total.item()):
            return
    for name, t in named:
        check_finite(t, name)
