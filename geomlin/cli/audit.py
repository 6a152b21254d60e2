"""``geomlin audit``: measure a trained model's equivariance error under its declared group, or its physics.

Three kinds of target:

* a checkpoint written by ``geomlin train`` (or its run folder) — every model in it is rebuilt,
  loaded ([`geomlin.load`][geomlin.deploy.loading.load]), moved to float64 and checked;
* a package written by ``geomlin export`` — the package itself is measured, in float32;
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

``--physics`` audits an energy model instead ([`geomlin.deploy.physics`][]): forces against finite
differences of the energy, symmetry of energy and forces, and energy drift in NVE, on the bundled
molecules, each figure printed with its threshold.

Every audit exits with status 1 when any model or figure fails its check (a model "NOT
equivariant", a figure above its threshold), so it can guard a CI job; 0 when all pass.
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
    def passed(self) -> bool:
        """Equivariant, exactly or up to [`APPROX_TOL`][]."""
        return self.max_error <= APPROX_TOL

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


def audit_checkpoint(path: str | Path, num_samples: int = 10, seed: int = 0,
                     only: list[str] | None = None) -> list[AuditResult]:
    """Audit every model (or those named in ``only``) of a ``geomlin train`` checkpoint."""
    from geomlin.deploy.loading import checkpoint_model
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

    loaded = deploy.load_package(path)
    meta = loaded.metadata
    if "task" not in meta:
        raise UserError(f"{path} is not a package written by geomlin export (it records no task)")
    task = get_task(meta["task"])
    name, info = meta["model"], dict(meta.get("info", {}))
    model = task.build_model(name, dict(meta["config"]), info).eval()
    spec = declared_spec(model) or task.audit_spec(name, model, info)
    if spec is None:
        raise UserError(f"model '{name}' declares no feature types and task {task.name} claims no symmetry for it")
    args, kwargs = deploy.fit_inputs(model, tuple(_float32(x) for x in spec.inputs),
                                     {k: _float32(v) for k, v in spec.kwargs.items()})

    def run(*a, **k):  # the package checks its inputs (and makes them contiguous)
        p_args, p_kwargs = deploy.program_inputs(model, a, k)
        return loaded(*p_args, **p_kwargs)

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
    from geomlin import deploy

    if _is_reference(target):
        return audit_module(target, num_samples, seed)
    path = deploy.resolve_path(target)
    if deploy.is_package(path):
        return audit_package(path, num_samples, seed)[0]
    return audit_checkpoint(path, num_samples, seed, only)


def _is_reference(target: str) -> bool:
    """``module:name`` / ``file.py:name`` rather than a file or folder."""
    return ":" in target and not Path(target).exists() and not target.endswith((".pt", ".pth", ".pt2"))


def format_report(target: str, results: list[AuditResult]) -> str:
    """The audit report as text: one line per model with its worst relative error and verdict."""
    width = max(len(r.name) for r in results)
    head = f"Equivariance audit of {target} ({results[0].dtype}, {results[0].num_samples} random group elements each)"
    lines = [head]
    for r in results:
        lines.append(f"  {r.name:<{width}}  max relative error {r.max_error:9.2e}  {r.verdict}")
        lines.append(f"  {'':<{width}}  symmetry: {r.symmetry}")
    return "\n".join(lines)


def _physics_models(target: str, only: list[str] | None) -> list[tuple[str, nn.Module]]:
    """``(name, model)`` of every energy model a ``--physics`` target names."""
    from geomlin import deploy
    from geomlin.train.checkpoint import load_checkpoint

    if _is_reference(target):
        obj = _load_object(target)
        if isinstance(obj, type) or (callable(obj) and not isinstance(obj, nn.Module)):
            try:
                obj = obj()
            except Exception as exc:  # noqa: BLE001 - user code: any failure is reported on one line
                raise UserError(f"{target}: calling it to build the model raised {_one_line(exc)}") from None
        if not isinstance(obj, nn.Module):
            raise UserError(f"{target} is a {type(obj).__name__}, not a torch.nn.Module")
        return [(target.rpartition(":")[2], obj)]
    path = deploy.resolve_path(target)
    if deploy.is_package(path):
        if only:
            raise UserError("--model chooses models of a checkpoint; a package holds one")
        packaged = deploy.load_package(path)
        return [(packaged.card.name or path.stem, packaged)]
    names = only or list(load_checkpoint(path)["models"])
    return [(n, deploy.load(path, model=n)) for n in names]


def audit_physics(target: str, num_samples: int = 4, seed: int = 0, only: list[str] | None = None,
                  nve_steps: int | None = None) -> dict[str, list]:
    """``{model name: figures}`` of [`geomlin.deploy.physics.physics_audit`][] for every energy model of ``target``."""
    from geomlin.deploy.physics import NVE_STEPS, physics_audit

    out = {}
    for name, model in _physics_models(target, only):
        try:
            out[name] = physics_audit(model, num_samples=num_samples, seed=seed, nve_steps=nve_steps or NVE_STEPS)
        except (ValueError, TypeError) as exc:
            raise UserError(f"model '{name}': {str(exc).splitlines()[0]}") from None
    return out


def format_physics(target: str, results: dict[str, list]) -> str:
    """The physics audit as text: one line per figure with its threshold and PASS / FAIL."""
    lines = [f"Physics audit of {target} (bundled molecules; value <= threshold passes)"]
    for name, figures in results.items():
        lines.append(f"  {name}")
        width = max(len(f.check) for f in figures)
        for f in figures:
            unit = "" if f.unit == "relative" else f" {f.unit}"
            lines.append(f"    {f.molecule:<13} {f.check:<{width}}  {f.value:9.2e} <= {f.threshold:.0e}{unit}  "
                         f"{'PASS' if f.passed else 'FAIL'}")
    failed = sum(not f.passed for figures in results.values() for f in figures)
    lines.append("All figures within their thresholds." if not failed else f"{failed} figure(s) FAIL.")
    return "\n".join(lines)


def run(target: str, num_samples: int | None = None, seed: int = 0, model: str | None = None,
        physics: bool = False, nve_steps: int | None = None) -> int:
    """``geomlin audit``: print the report; the exit status is 1 when any check fails, else 0."""
    only = [m.strip() for m in model.split(",")] if model else None
    if nve_steps is not None and not physics:
        raise UserError("--nve-steps sets the NVE run of --physics; add --physics")
    if physics:
        results = audit_physics(target, num_samples=num_samples or 4, seed=seed, only=only, nve_steps=nve_steps)
        print(format_physics(target, results))
        return 0 if all(f.passed for figures in results.values() for f in figures) else 1
    from geomlin import deploy

    num_samples = num_samples or 10
    if not _is_reference(target) and deploy.is_package(deploy.resolve_path(target)):
        if only:
            raise UserError("--model chooses models of a checkpoint; a package holds one")
        results, meta = audit_package(deploy.resolve_path(target), num_samples=num_samples, seed=seed)
        print(f"Package {target}\n{format_metadata(meta)}")
    else:
        results = audit(target, num_samples=num_samples, seed=seed, only=only)
    print(format_report(target, results))
    failed = [r.name for r in results if not r.passed]
    if failed:
        print(f"NOT equivariant: {', '.join(failed)} (exit status 1)")
    return 1 if failed else 0
