"""A simulated accelerator for CPU-only machines: CUDA's device rules, checked on every operator.

geomlin is developed on machines without a GPU, but its users train on one. This module makes a
second device, ``sim``, out of PyTorch's ``PrivateUse1`` extension point. A ``sim`` tensor is a
wrapper around a CPU tensor (:class:`SimTensor`); every ATen operator that touches one runs through
:func:`_run`, which applies the rules a CUDA device imposes and records what would make the host
wait for the device:

Refused, as CUDA refuses them (a ``RuntimeError`` at the operator, any time):
    * a CPU tensor with one or more dimensions as an operand of an operator on ``sim`` tensors
      (CUDA only accepts zero-dimensional CPU tensors there, as scalars);
    * a CPU random generator for a random operator on ``sim``.

Recorded inside :func:`watch` (or raised at the operator with ``strict=True``):
    * ``sync``: the host reads device memory or waits for a data-dependent size:
      ``.item()`` / ``bool()`` / ``float()`` (``_local_scalar_dense``), device-to-host copies
      (``.cpu()``, ``.tolist()``, ``.numpy()``), ``nonzero`` and its users (boolean-mask indexing,
      ``masked_select``, ``argwhere``, one-argument ``where``), ``unique``, ``repeat_interleave``
      without ``output_size``, ``bincount``, ``equal``, the linear-algebra operators whose
      CUDA implementation reads an error code back (``eigh``, ``svd``, ``eig``, ``lstsq`` and every
      ``_linalg_check_errors``: ``inv``, ``solve``, ``cholesky``) and ``matrix_exp`` (which reads
      the norms of its matrices back);
    * ``assert``: a device-side assert (``torch._assert_async``), which on CUDA kills the context
      when it fails (geomlin defers its value checks instead, see :mod:`geomlin.validation`);
    * ``upload``: a host-to-device copy (``torch.tensor(..., device=x.device)``, a cached CPU
      table moved with ``.to(x.device)``, Python lists or CPU tensors as indices): a constant
      uploaded on every call instead of living in a buffer or a per-device cache.

The numbers are computed on the CPU, so results can be compared with a CPU run.
``torch.autocast(DEVICE_TYPE, dtype=torch.bfloat16 | torch.float16)`` applies CUDA's autocast policy
(which operators run in the lower precision, which in float32), so mixed precision is tested as it
would run on a GPU.

Use::

    from tests.device import simulated as sim
    model = model.to(sim.DEVICE)
    with sim.watch() as log:
        model(x.to(sim.DEVICE)).sum().backward()
    assert not log.events, log.report()

This is test machinery (it renames the PrivateUse1 backend for the whole process), never imported by
the library.
"""

from __future__ import annotations

import contextlib
import threading
import traceback
from dataclasses import dataclass, field

import torch
from torch.utils._pytree import tree_map

#: Name of the simulated device type.
DEVICE_TYPE = "sim"

aten = torch.ops.aten

#: Operators that make the host wait for the device on CUDA, whatever their arguments.
SYNC_OPS = frozenset({
    "aten::_local_scalar_dense",
    "aten::nonzero", "aten::nonzero_numpy", "aten::argwhere", "aten::masked_select",
    "aten::_unique", "aten::_unique2", "aten::unique_dim", "aten::unique_consecutive",
    "aten::unique_dim_consecutive",
    "aten::bincount", "aten::equal",
    "aten::_linalg_check_errors", "aten::_linalg_eigh", "aten::_linalg_svd", "aten::linalg_eig",
    "aten::linalg_lstsq", "aten::_linalg_eigvals", "aten::linalg_eigvals",
    # CUDA's matrix_exp reads the matrices' norms to the host to pick its Taylor degree and squarings
    "aten::linalg_matrix_exp",
})
#: Operators that may take CPU index tensors on CUDA (advanced indexing moves them: an upload).
INDEX_OPS = frozenset({"aten::index.Tensor", "aten::index_put_", "aten::index_put", "aten::_index_put_impl_",
                       "aten::_unsafe_index.Tensor", "aten::_unsafe_index_put"})
#: Operators that move data between devices (CPU operands allowed).
TRANSFER_OPS = frozenset({"aten::_to_copy", "aten::copy_", "aten::_copy_from", "aten::_copy_from_and_resize"})


class DeviceMixError(RuntimeError):
    """A CPU tensor entered an operator on the simulated device (CUDA refuses it too)."""


class HostSyncError(RuntimeError):
    """Raised in ``strict`` mode at an operator that would make the host wait for the device."""


@dataclass
class Event:
    """One recorded sync or upload: its kind, the operator and where in geomlin (or the caller) it happened."""

    kind: str
    op: str
    where: str

    def __str__(self) -> str:
        return f"{self.kind:6s} {self.op:32s} at {self.where}"


@dataclass
class Log:
    """Events recorded by one :func:`watch`."""

    events: list[Event] = field(default_factory=list)

    def of(self, kind: str) -> list[Event]:
        return [e for e in self.events if e.kind == kind]

    def report(self, limit: int = 30) -> str:
        lines = [str(e) for e in self.events[:limit]]
        if len(self.events) > limit:
            lines.append(f"... and {len(self.events) - limit} more")
        return "\n".join(lines)


_state = threading.local()
_lock = threading.Lock()
_installed = False


def _logs() -> list:
    if not hasattr(_state, "logs"):
        _state.logs = []
    return _state.logs


def _caller() -> str:
    """The innermost stack frame outside torch and this file, as ``path:line in function``."""
    for frame in reversed(traceback.extract_stack()[:-2]):
        name = frame.filename
        if "/torch/" in name or name.endswith("simulated.py") or "/torch_geometric/" in name:
            continue
        if "/geomlin/" in name or "/tests/" in name or "/benchmarks/" in name:
            short = name[name.rfind("/geomlin/") + 1:] if "/geomlin/" in name else name.rsplit("/", 2)[-1]
            return f"{short}:{frame.lineno} in {frame.name}"
    return "<outside geomlin>"


def _record(kind: str, op: str) -> None:
    logs = _logs()
    if not logs:
        return
    log, strict = logs[-1]
    if strict:
        raise HostSyncError(f"{kind} on the simulated device: {op} at {_caller()}")
    log.events.append(Event(kind, op, _caller()))


@contextlib.contextmanager
def watch(strict: bool = False):
    """Record the syncs and uploads of the operators run inside; ``strict`` raises at the first one."""
    log = Log()
    _logs().append((log, strict))
    try:
        yield log
    finally:
        _logs().pop()


@contextlib.contextmanager
def allowed():
    """Switch recording off inside (for the data boundary or the test's own reads)."""
    _logs().append((Log(), False))
    try:
        yield
    finally:
        _logs().pop()


class SimTensor(torch.Tensor):
    """A tensor on the simulated device: a wrapper whose values live in the CPU tensor ``raw``."""

    raw: torch.Tensor

    @staticmethod
    def __new__(cls, raw: torch.Tensor, requires_grad: bool = False):
        out = torch.Tensor._make_wrapper_subclass(
            cls, raw.shape, strides=raw.stride(), storage_offset=raw.storage_offset(), dtype=raw.dtype,
            layout=raw.layout, device=torch.device(DEVICE_TYPE, 0), requires_grad=requires_grad)
        out.raw = raw
        return out

    def __repr__(self, *, tensor_contents=None) -> str:
        return f"SimTensor({self.raw!r})"

    def __reduce_ex__(self, protocol):
        # torch.save of a sim tensor stores its values as a CPU tensor (as map_location="cpu" would load it)
        return self.raw.clone().__reduce_ex__(protocol)

    def tolist(self):
        _record("sync", "Tensor.tolist")
        return self.raw.tolist()

    def numpy(self, *, force: bool = False):
        if not force:
            raise TypeError(f"can't convert {DEVICE_TYPE}:0 device type tensor to numpy. Use Tensor.cpu() to "
                            "copy the tensor to host memory first.")
        _record("sync", "Tensor.numpy")
        return self.raw.numpy(force=True)

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return _run(func, args, kwargs or {})


def _is_sim_device(device) -> bool:
    return device is not None and torch.device(device).type == DEVICE_TYPE


def _bool_index(indices) -> bool:
    return any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in indices or ())


#: Dispatch keys whose as_strided_ kernel only rewrites a tensor's sizes and strides.
_METADATA_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)


def _run(func, args, kwargs):
    """Run one operator of the simulated device on the CPU, applying CUDA's rules."""
    name = func.name()
    transfer = name in TRANSFER_OPS
    index_op = name in INDEX_OPS

    if name in SYNC_OPS:
        _record("sync", name)
    elif name == "aten::_assert_async":
        # a failed device-side assert leaves a CUDA context unusable: geomlin defers its checks instead
        _record("assert", name)
    elif name == "aten::repeat_interleave.Tensor" and kwargs.get("output_size") is None and (
            len(args) < 2 or args[-1] is None):
        _record("sync", "aten::repeat_interleave without output_size")
    elif index_op and _bool_index(args[1] if len(args) > 1 else kwargs.get("indices")):
        _record("sync", f"{name} with a boolean mask")

    generator = kwargs.get("generator")
    if generator is not None and generator.device.type != DEVICE_TYPE:
        raise DeviceMixError(f"Expected a '{DEVICE_TYPE}' device type for generator but found "
                             f"'{generator.device.type}' ({name})")

    uploaded = False

    written_ids = {id(args[i] if i < len(args) else kwargs.get(a.name))
                   for i, a in enumerate(func._schema.arguments) if a.alias_info is not None and a.alias_info.is_write}

    def unwrap(t):
        nonlocal uploaded
        if isinstance(t, SimTensor):
            raw = t.raw
            # the wrapper does not carry the lazy conjugate / negative bits of its values (the CPU kernels
            # below it would then read them unconjugated): read such values resolved, unless written to
            if (raw.is_conj() or raw.is_neg()) and id(t) not in written_ids:
                raw = raw.resolve_conj().resolve_neg()
            return raw
        if isinstance(t, torch.Tensor) and t.device.type == "cpu" and t.dim() > 0:
            if transfer or index_op:
                uploaded = True
            else:
                raise DeviceMixError(
                    f"Expected all tensors to be on the same device, but found a CPU tensor of shape "
                    f"{tuple(t.shape)} in {name} on the '{DEVICE_TYPE}' device (at {_caller()})")
        return t

    raw_args = tree_map(unwrap, args)
    raw_kwargs = tree_map(unwrap, kwargs)
    if uploaded and not (name == "aten::copy_" and not isinstance(args[0], SimTensor)):
        _record("upload", name)
    to_host = False
    if name == "aten::_to_copy":
        if _is_sim_device(kwargs.get("device")):
            raw_kwargs["device"] = torch.device("cpu")
        elif isinstance(args[0], SimTensor) and kwargs.get("device") is not None:
            to_host = True
    elif "device" in raw_kwargs and _is_sim_device(raw_kwargs["device"]):
        raw_kwargs["device"] = torch.device("cpu")
    if name == "aten::copy_" and isinstance(args[1], SimTensor) and not isinstance(args[0], SimTensor):
        to_host = True
    if to_host:
        _record("sync", f"{name} to the host")

    out = func(*raw_args, **raw_kwargs)
    if to_host and name == "aten::_to_copy":
        return out
    if name == "aten::_local_scalar_dense":
        return out

    # operators that write into an argument return that argument (the wrapper, not its raw values)
    schema = func._schema
    returns = schema.returns
    written = {}
    for i, a in enumerate(schema.arguments):
        if a.alias_info is not None and a.alias_info.is_write:
            value = args[i] if i < len(args) else kwargs.get(a.name)
            written[a.alias_info.before_set and next(iter(a.alias_info.before_set))] = value

    def wrap_result(ret_schema, value):
        alias = ret_schema.alias_info
        if alias is not None and alias.is_write and alias.before_set:
            target = written.get(next(iter(alias.before_set)))
            if isinstance(target, SimTensor):
                raw = target.raw
                if tuple(target.shape) != tuple(raw.shape) or target.stride() != raw.stride():
                    # in-place view or resize (squeeze_, out= resized by the kernel): follow the values' layout
                    if target.untyped_storage().nbytes() < raw.untyped_storage().nbytes():
                        # resize_ grew the values (all_gather_object pads its bytes): grow the wrapper too
                        aten.resize_.default.redispatch(
                            _METADATA_KEYS, target, [raw.untyped_storage().nbytes() // raw.element_size()])
                    aten.as_strided_.default.redispatch(_METADATA_KEYS, target, raw.shape, raw.stride(),
                                                        raw.storage_offset())
                return target
        if isinstance(value, torch.Tensor) and not isinstance(value, SimTensor):
            return SimTensor(value)
        if isinstance(value, (list, tuple)):
            return type(value)(SimTensor(v) if isinstance(v, torch.Tensor) else v for v in value)
        return value

    if len(returns) == 1:
        return wrap_result(returns[0], out)
    if len(returns) == 0:
        return out
    return tuple(wrap_result(r, v) for r, v in zip(returns, out))


#: Operators registered explicitly for PrivateUse1: the generic fallback cannot run them when PyTorch
#: calls them with the Python dispatch key excluded (``torch.tensor(..., device=...)``), and
#: composite factories that would otherwise write into a wrapper with ``out=``.
_EXPLICIT = (
    "_to_copy", "copy_", "_copy_from", "_copy_from_and_resize", "empty_strided", "empty.memory_format",
    "lift_fresh", "view", "as_strided", "detach", "alias",
    "arange", "arange.start", "arange.start_step", "linspace", "logspace", "eye", "eye.m", "range",
    "randperm", "randperm.generator", "scalar_tensor", "full", "zeros", "ones", "randn", "rand",
    "randint", "randint.low", "randn.generator", "rand.generator", "randint.generator",
    "randint.low_generator", "normal.float_float", "tril_indices", "triu_indices",
)


# ----------------------------------------------------------------------------- autocast
# CUDA's autocast policy (PyTorch's "Autocast Op Reference", CUDA lists), applied to the simulated
# device, so torch.autocast(DEVICE_TYPE, dtype=...) behaves as torch.autocast("cuda", dtype=...).
#: Run in the autocast dtype (bfloat16 / float16).
AUTOCAST_LOWER = frozenset({
    "_convolution", "conv1d", "conv2d", "conv3d", "conv_tbc", "conv_transpose1d", "conv_transpose2d",
    "conv_transpose3d", "convolution", "prelu", "addmm", "addmv", "addr", "matmul", "einsum", "mm", "mv",
    "linalg_vecdot", "linear", "addbmm", "baddbmm", "bmm", "chain_matmul", "linalg_multi_dot",
    "_thnn_fused_lstm_cell", "_thnn_fused_gru_cell", "lstm_cell", "gru_cell", "rnn_tanh_cell",
    "rnn_relu_cell", "scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention",
})
#: Run in float32 (inputs in a lower precision are cast up).
AUTOCAST_FP32 = frozenset({
    "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p", "reciprocal", "rsqrt",
    "sinh", "tan", "pow", "softplus", "layer_norm", "native_layer_norm", "group_norm", "frobenius_norm",
    "nuclear_norm", "cosine_similarity", "poisson_nll_loss", "cosine_embedding_loss", "nll_loss",
    "nll_loss2d", "hinge_embedding_loss", "kl_div", "l1_loss", "smooth_l1_loss", "huber_loss",
    "mse_loss", "margin_ranking_loss", "multilabel_margin_loss", "soft_margin_loss",
    "triplet_margin_loss", "multi_margin_loss", "binary_cross_entropy_with_logits", "dist", "pdist",
    "cdist", "renorm", "logsumexp", "norm", "linalg_vector_norm", "linalg_matrix_norm",
})
#: Run in float32 unless a dtype argument is given.
AUTOCAST_FP32_OPT_DTYPE = frozenset({"softmax", "log_softmax", "cumprod", "cumsum", "sum", "prod",
                                     "_softmax", "_log_softmax"})
#: Run in the widest floating dtype among the inputs.
AUTOCAST_PROMOTE = frozenset({"addcdiv", "addcmul", "atan2", "bilinear", "cross", "linalg_cross", "dot",
                              "grid_sampler", "index_put", "scatter_add", "tensordot", "cat", "stack"})

_AUTOCAST_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastPrivateUse1)


def _autocast_kernel(op, *args, **kwargs):
    """The AutocastPrivateUse1 fallback: cast floating inputs by CUDA's policy, then run ``op`` below autocast."""
    base = op.name().split("::")[-1].split(".")[0]
    target = None
    if base in AUTOCAST_LOWER:
        target = torch.get_autocast_dtype(DEVICE_TYPE)
    elif base in AUTOCAST_FP32 or (base in AUTOCAST_FP32_OPT_DTYPE and kwargs.get("dtype") is None):
        target = torch.float32
    elif base in AUTOCAST_PROMOTE:
        floats = [t.dtype for t in tree_leaves_tensors((args, kwargs)) if t.is_floating_point()]
        if floats:
            target = floats[0]
            for dt in floats[1:]:
                target = torch.promote_types(target, dt)

    def cast(t):
        if (target is not None and isinstance(t, torch.Tensor) and t.is_floating_point()
                and t.dtype != torch.float64 and t.device.type == DEVICE_TYPE):
            return t.to(target)
        return t

    with torch._C._ExcludeDispatchKeyGuard(_AUTOCAST_KEYS):
        return op(*tree_map(cast, args), **tree_map(cast, kwargs))


def tree_leaves_tensors(tree) -> list:
    from torch.utils._pytree import tree_leaves

    return [t for t in tree_leaves(tree) if isinstance(t, torch.Tensor)]


class _BackendModule:
    """What ``torch.<backend>`` must provide for devices, seeds and autocast."""

    def is_initialized(self) -> bool:
        return True

    def is_available(self) -> bool:
        return True

    def current_device(self) -> int:
        return 0

    def device_count(self) -> int:
        return 1

    def _is_in_bad_fork(self) -> bool:
        return False

    def manual_seed_all(self, seed: int) -> None:
        pass

    def get_amp_supported_dtype(self) -> list[torch.dtype]:
        return [torch.float16, torch.bfloat16]


def install() -> None:
    """Register the ``sim`` device once per process (idempotent)."""
    global _installed
    with _lock:
        if _installed:
            return
        from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

        _setup_privateuseone_for_python_backend(DEVICE_TYPE, backend_module=_BackendModule())
        fallback = torch.library.Library("_", "IMPL")
        fallback.fallback(lambda op, *args, **kwargs: _run(op, args, kwargs), dispatch_key="PrivateUse1")
        fallback.fallback(torch.library.fallthrough_kernel, dispatch_key="AutocastPrivateUse1")
        explicit = torch.library.Library("aten", "IMPL")
        for qualified in _EXPLICIT:
            base, _, overload = qualified.partition(".")
            op = getattr(getattr(aten, base), overload or "default")

            def kernel(*args, _op=op, **kwargs):
                return _run(_op, args, kwargs)

            explicit.impl(qualified, kernel, "PrivateUse1")
        # PyTorch cannot hand a Python *fallback* an operator whose arguments carry the Python key (a
        # SimTensor), so the autocast policy is registered operator by operator
        autocast = torch.library.Library("aten", "IMPL")
        policy = AUTOCAST_LOWER | AUTOCAST_FP32 | AUTOCAST_FP32_OPT_DTYPE | AUTOCAST_PROMOTE
        for qualified in torch._C._dispatch_get_all_op_names():
            namespace, _, rest = qualified.partition("::")
            base, _, overload = rest.partition(".")
            if namespace != "aten" or base not in policy or base.endswith("_") or overload.endswith("out"):
                continue
            op = getattr(getattr(aten, base), overload or "default")
            if any(a.kwarg_only and a.name == "out" for a in op._schema.arguments):
                continue
            autocast.impl(rest, lambda *args, _op=op, **kwargs: _autocast_kernel(_op, *args, **kwargs),
                          "AutocastPrivateUse1")
        _keep.extend([fallback, explicit, autocast])
        _installed = True


_keep: list = []  # the Library objects must outlive install()

install()
#: The simulated device (registered when this module is imported).
DEVICE = torch.device(DEVICE_TYPE, 0)


def to_sim(tree):
    """Every CPU tensor in a nested structure moved to the simulated device, and every object that
    moves itself with ``.to(device)`` (modules, PyG ``Data`` objects, plans such as GATr's
    ``BatchLayout``)."""
    install()

    def move(t):
        if isinstance(t, (torch.Tensor, torch.nn.Module)):
            return t.to(DEVICE)
        if callable(getattr(t, "to", None)) and not isinstance(t, type):
            return t.to(DEVICE)
        return t

    with allowed():
        return tree_map(move, tree)


@contextlib.contextmanager
def cpu_kernels():
    """Run CPU references with the kernels the simulated device runs, so results compare to rounding.

    PyTorch's fused attention kernels cannot be chosen for a ``PrivateUse1`` device from Python, so
    ``scaled_dot_product_attention`` on ``sim`` runs the math backend; inside this context the CPU
    runs it too.
    """
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):
        yield


def to_cpu(tree):
    """The inverse of :func:`to_sim` (values only)."""

    def move(t):
        return t.raw.clone() if isinstance(t, SimTensor) else t

    return tree_map(move, tree)
