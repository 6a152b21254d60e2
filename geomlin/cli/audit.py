"""``geomlin audit``: measure a trained model's equivariance error under its declared group.

Two kinds of target:

* a checkpoint written by ``geomlin train`` — every model in it is rebuilt, loaded,
  moved to float64 and checked;
* a module reference ``package.module:name`` or ``path/to/file.py:name`` where
  ``name`` is an ``nn.Module`` instance, a class (built without arguments) or a
  factory function.

What is checked, in this order: an ``equivariance_spec()`` method of the module (returning an
[`AuditSpec`][]); else the module's declared feature types
(``type_in`` / ``type_out``, or e3nn ``irreps_in`` / ``irreps_out``; see
[`geomlin.reps.declarations`][]): the group of the declared types
([`declared_group`][geomlin.reps.declarations.declared_group]) acting on the module's own
[`example_inputs`][geomlin.reps.declarations.example_inputs]; else, for a checkpoint's model that declares
nothing (the non-equivariant baselines), the symmetry its task claims
([`audit_spec`][geomlin.train.tasks.base.Task.audit_spec]), which such a model is expected to fail;
else ``rep_in`` / ``rep_out`` attributes. The measurement is
[`geomlin.testing.equivariance_check`][] in float64.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from geomlin.train.errors import UserError
from geomlin.train.tasks.base import AuditSpec

#: Relative error below which a float64 model counts as exactly equivariant.
EXACT_TOL = 1e-9
#: Relative error below which a float32 model (an AOTInductor package) counts as exactly equivariant.
FLOAT32_EXACT_TOL = 1e-4
#: Relative error below which a model counts as approximately equivariant.
APPROX_TOL = 1e-3


@dataclass
class AuditResult:
    """One audited model: its name, the symmetry checked, the worst relative error, a verdict."""

    name: str
    symmetry: str
    max_error: float
    num_samples: int
    #: The dtype the model ran in (a package runs in float32).
    dtype: str = "float64"

    @property
    def verdict(self) -> str:
        if self.max_error <= (EXACT_TOL if self.dtype == "float64" else FLOAT32_EXACT_TOL):
            return f"equivariant ({self.dtype} precision)"
        if self.max_error <= APPROX_TOL:
            return "approximately equivariant"
        return "NOT equivariant"


def _measure(name: str, spec: AuditSpec, num_samples: int, seed: int, dtype: str = "float64") -> AuditResult:
    from geomlin.testing import equivariance_check

    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        report = equivariance_check(spec.fn, spec.group, spec.type_in, spec.type_out, spec.inputs,
                                    num_samples=num_samples, generator=g, kwargs=spec.kwargs,
                                    dtype=getattr(torch, dtype))
    return AuditResult(name, spec.description, float(report.max_error), num_samples, dtype)


def _type_names(types: tuple) -> str:
    names = ["-" if t is None else repr(t) for t in types]
    return names[0] if len(names) == 1 else "(" + ", ".join(names) + ")"


def declared_spec(model: nn.Module, seed: int = 1) -> AuditSpec | None:
    """The audit of a module that declares its feature types, or None when it declares none.

    The group is the smallest one acting on the declared types; the inputs are the module's
    ``example_inputs`` (or random tensors of the declared types), drawn with ``seed``.
    """
    from geomlin.reps import declared_group, declared_types, example_inputs

    try:
        types_in, types_out = declared_types(model)
    except TypeError:
        return None
    group = declared_group(model)
    if group is None:
        return None
    args, kwargs = example_inputs(model, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return AuditSpec(fn=model, group=group, type_in=types_in, type_out=types_out, inputs=args, kwargs=kwargs,
                     description=f"declared types {_type_names(types_in)} -> {_type_names(types_out)}")


def _as_float64(model: nn.Module) -> nn.Module:
    # In place: the audited modules are built for the audit (and some reps do not deep-copy).
    model = model.double()
    model.eval()
    return model


def checkpoint_model(ckpt: dict, name: str, path: str | Path) -> nn.Module:
    """Model ``name`` of a loaded checkpoint, rebuilt by its task from the run's config, with its weights."""
    from geomlin.train.tasks import get_task

    task = get_task(ckpt["task"])
    info = dict(ckpt.get("run", {}).get("data", {}))
    model = task.build_model(name, dict(ckpt["config"]), info)
    try:
        model.load_state_dict(ckpt["models"][name])
    except RuntimeError as exc:
        raise UserError(f"corrupt checkpoint {path}: model '{name}' does not load "
                        f"({str(exc).splitlines()[0]})") from None
    return model


def audit_checkpoint(path: str | Path, num_samples: int = 10, seed: int = 0,
                     only: list[str] | None = None) -> list[AuditResult]:
    """Audit every model (or those named in ``only``) of a ``geomlin train`` checkpoint."""
    from geomlin.train.checkpoint import load_checkpoint
    from geomlin.train.tasks import get_task

    ckpt = load_checkpoint(path)
    task = get_task(ckpt["task"])
    info = dict(ckpt.get("run", {}).get("data", {}))
    results = []
    names = list(ckpt["models"])
    for n in only or names:
        if n not in ckpt["models"]:
            raise UserError(f"checkpoint {path} has no model '{n}'; it holds {', '.join(names)}")
        model = _as_float64(checkpoint_model(ckpt, n, path))
        spec = declared_spec(model) or task.audit_spec(n, model, info)
        if spec is None:
            raise UserError(f"model '{n}' declares no feature types and task {task.name} claims no symmetry "
                            "for it")
        results.append(_measure(n, spec, num_samples, seed))
    return results


def _one_line(exc: BaseException) -> str:
    """``Type: first line of the message`` of an exception raised by user code."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__


def _load_object(ref: str):
    target, sep, attr = ref.rpartition(":")
    if not sep or not target or not attr:
        raise UserError(f"expected a checkpoint file or 'module:name' / 'file.py:name', got {ref!r}")
    if target.endswith(".py"):
        path = Path(target)
        if not path.is_file():
            raise UserError(f"python file not found: {path}")
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except SyntaxError as exc:
            raise UserError(f"cannot load {path}: syntax error at line {exc.lineno}: {exc.msg}") from None
        except Exception as exc:  # noqa: BLE001 - user code: any failure is reported on one line
            raise UserError(f"cannot load {path}: running it raised {_one_line(exc)}") from None
        sys.modules.setdefault(path.stem, module)
    else:
        try:
            module = importlib.import_module(target)
        except SyntaxError as exc:
            raise UserError(f"cannot import module '{target}': syntax error in {exc.filename} at line "
                            f"{exc.lineno}: {exc.msg}") from None
        except ImportError as exc:
            raise UserError(f"cannot import module '{target}': {exc}") from None
        except Exception as exc:  # noqa: BLE001 - user code: any failure is reported on one line
            raise UserError(f"cannot import module '{target}': importing it raised {_one_line(exc)}") from None
    if not hasattr(module, attr):
        raise UserError(f"module '{target}' has no attribute '{attr}'")
    return getattr(module, attr)


def _implicit_spec(model: nn.Module) -> AuditSpec | None:
    from geomlin.reps.base import Rep

    rin, rout = getattr(model, "rep_in", None), getattr(model, "rep_out", None)
    if isinstance(rin, Rep) and isinstance(rout, Rep):
        group = rin.group or rout.group
        if group is None:
            return None
        x = torch.randn(4, rin.size, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
        return AuditSpec(fn=model, group=group, type_in=rin, type_out=rout, inputs=(x,),
                         description=f"{rin!r} -> {rout!r} under {group!r}")
    iin, iout = getattr(model, "irreps_in", None), getattr(model, "irreps_out", None)
    if iin is not None and iout is not None:
        from e3nn import o3

        from geomlin.groups import O

        iin, iout = o3.Irreps(iin), o3.Irreps(iout)
        x = torch.randn(4, iin.dim, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
        return AuditSpec(fn=model, group=O(3), type_in=iin, type_out=iout, inputs=(x,),
                         description=f"{iin} -> {iout} under O(3)")
    return None


def audit_module(ref: str, num_samples: int = 10, seed: int = 0) -> list[AuditResult]:
    """Audit the module named by ``ref`` (``package.module:name`` or ``file.py:name``)."""
    obj = _load_object(ref)
    if isinstance(obj, type) or (callable(obj) and not isinstance(obj, nn.Module)):
        try:
            obj = obj()
        except TypeError as exc:
            raise UserError(f"{ref} must be a module instance, a class or a factory callable without "
                            f"required arguments: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - user code: any failure is reported on one line
            raise UserError(f"{ref}: calling it to build the model raised {_one_line(exc)}") from None
    if not isinstance(obj, nn.Module):
        raise UserError(f"{ref} is a {type(obj).__name__}, not a torch.nn.Module")
    model = _as_float64(obj)
    if hasattr(model, "equivariance_spec"):
        spec = model.equivariance_spec()
        if isinstance(spec, dict):
            spec = AuditSpec(**spec)
    else:
        spec = declared_spec(model) or _implicit_spec(model)
    if spec is None:
        raise UserError(f"{ref} declares no symmetry group: give it type_in / type_out feature types "
                        "(geomlin.reps), an equivariance_spec() method (returning geomlin.train.AuditSpec) "
                        "or rep_in/rep_out or irreps_in/irreps_out")
    return [_measure(ref.rpartition(":")[2], spec, num_samples, seed)]


def load_package(path: str | Path):
    """``(compiled model, geomlin metadata)`` of an AOTInductor package written by ``geomlin export``."""
    from geomlin import deploy

    try:
        loaded = deploy.load(path)
    except Exception as exc:  # noqa: BLE001 - a foreign or corrupt file: reported on one line
        raise UserError(f"cannot load package {path}: {_one_line(exc)}") from None
    meta = deploy.read_metadata(loaded)
    if meta.get("format") != deploy.PACKAGE_FORMAT or "task" not in meta:
        raise UserError(f"{path} is not a package written by geomlin export (no geomlin metadata)")
    return loaded, meta


def _float32(x):
    return x.float() if isinstance(x, torch.Tensor) and x.is_floating_point() else x


def audit_package(path: str | Path, num_samples: int = 10, seed: int = 0) -> tuple[list[AuditResult], dict]:
    """Audit an AOTInductor package (``geomlin export``) in float32; returns the results and its metadata.

    The task rebuilds the model from the config stored in the package (random weights: only its
    declared feature types, symmetry and example inputs are used); the package itself is what
    [`geomlin.testing.equivariance_check`][] measures.
    """
    from geomlin import deploy
    from geomlin.train.tasks import get_task

    loaded, meta = load_package(path)
    task = get_task(meta["task"])
    name, info = meta["model"], dict(meta.get("info", {}))
    model = task.build_model(name, dict(meta["config"]), info).eval()
    spec = declared_spec(model) or task.audit_spec(name, model, info)
    if spec is None:
        raise UserError(f"model '{name}' declares no feature types and task {task.name} claims no symmetry for it")
    args, kwargs = deploy.fit_inputs(model, tuple(_float32(x) for x in spec.inputs),
                                     {k: _float32(v) for k, v in spec.kwargs.items()})

    def contiguous(x):
        return x.contiguous() if isinstance(x, torch.Tensor) else x

    def run(*a, **k):  # a package is compiled for contiguous float32 inputs, and does not check strides
        p_args, p_kwargs = deploy.program_inputs(model, a, k)
        return loaded(*map(contiguous, p_args), **{n: contiguous(v) for n, v in p_kwargs.items()})

    spec = AuditSpec(fn=run, group=spec.group, type_in=spec.type_in, type_out=spec.type_out, inputs=args,
                     kwargs=kwargs, description=spec.description)
    return [_measure(name, spec, num_samples, seed, dtype="float32")], meta


def format_metadata(meta: dict) -> str:
    """The metadata of a package as indented ``key: value`` lines."""
    lines = []
    for key in sorted(meta):
        if key in ("config", "info"):
            continue
        value = meta[key]
        lines.append(f"  {key}: {value if isinstance(value, str) else json.dumps(value, sort_keys=True)}")
    return "\n".join(lines)


def audit(target: str, num_samples: int = 10, seed: int = 0, only: list[str] | None = None) -> list[AuditResult]:
    """Audit a checkpoint file or a ``module:name`` reference; see the module docstring."""
    if num_samples < 1:
        raise UserError(f"--samples must be at least 1, got {num_samples}")
    if Path(target).is_file() and target.endswith(".pt2"):
        return audit_package(target, num_samples, seed)[0]
    if Path(target).is_file():
        return audit_checkpoint(target, num_samples, seed, only)
    if ":" in target and not target.endswith((".pt", ".pth")):
        return audit_module(target, num_samples, seed)
    raise UserError(f"checkpoint not found: {target}")


def format_report(target: str, results: list[AuditResult]) -> str:
    """The audit report as text: one line per model with its worst relative error and verdict."""
    width = max(len(r.name) for r in results)
    head = f"Equivariance audit of {target} ({results[0].dtype}, {results[0].num_samples} random group elements each)"
    lines = [head]
    for r in results:
        lines.append(f"  {r.name:<{width}}  max relative error {r.max_error:9.2e}  {r.verdict}")
        lines.append(f"  {'':<{width}}  symmetry: {r.symmetry}")
    return "\n".join(lines)
