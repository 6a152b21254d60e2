"""[`PackagedModel`][]: an AOTInductor package as an ``nn.Module`` whose inputs are checked before the graph runs.

A compiled package trusts its inputs. AOTInductor compiles every kernel for the dtypes, ranks and
strides of the traced (contiguous) example and reads memory at those offsets; the code that
checks a call against them is in every package but runs only when the environment variable
``AOTI_RUNTIME_CHECK_INPUTS=1`` is set (PyTorch 2.13). Called bare, with it unset, a float32
Gaunt package of ``geomlin export`` (measured on three bundled ethanol frames) gives: for positions
transposed in memory (``pos.transpose(1, 2).contiguous().transpose(1, 2)``, the same values)
energies off by 44 kcal/mol, no error; for a view ``padded[:, :9]`` of a ``(3, 12, 3)`` array, a
misleading "coincident positions" error (it read other atoms); for float64 positions "x1 contains
NaN or inf values"; for int32 species "species must index atom types in [0, 9)"; for unbatched
``(9, 3)`` / ``(9,)`` inputs nine energies; for 2 atoms (outside the exported 3..4096) numbers.
[`PackagedModel`][] checks every call against the input specs stored in the package (dtype,
rank, static sizes, the exported size ranges, species range, finite values) and hands the graph
contiguous tensors, so a call either gets the eager model's numbers or a one-line error naming
the input.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import torch
from torch import Tensor, nn

from geomlin.deploy.card import ModelCard
from geomlin.deploy.export import METADATA_KEY, PACKAGE_FORMAT, PERIODIC_OUTPUTS, POTENTIAL_OUTPUTS
from geomlin.validation import check_finite, check_index


def read_metadata(compiled) -> dict:
    """geomlin's metadata of a loaded AOTInductor model (``{}`` for a package geomlin did not write)."""
    text = compiled.get_metadata().get(METADATA_KEY)
    return json.loads(text) if text else {}


def _dim_name(dims: list, i: int) -> str:
    return {"batch": "B", "items": "N", "atoms": "N", "edges": "E"}.get(dims[i], str(dims[i])) if isinstance(
        dims[i], str) else str(dims[i])


class PackagedModel(nn.Module):
    """A ``.pt2`` package written by [`geomlin.deploy.package`][geomlin.deploy.export.package], checked at each call.

    ``forward`` takes the inputs of the exported program (for a potential ``pos (B, N, 3)``,
    ``species (B, N)``, returning ``(energy (B,), forces (B, N, 3))``; for a periodic potential
    ``(pos (N, 3), species (N,), edge_index (2, E), shift (E, 3), cell (1, 3, 3))``, returning
    ``(energy (1,), forces (N, 3), stress (1, 3, 3))``, [`is_periodic`][geomlin.deploy.export.is_periodic]) and refuses, with a one-line
    ``TypeError`` / ``ValueError`` naming the input, anything the graph would misread:

    * **dtype**: floating inputs must have the exported dtype; float64 positions given to a
      float32 package are refused (cast them with ``.float()``, or export in float64), never cast
      silently. Integer inputs (species) of any integer dtype are widened to the exported one
      (exact);
    * **rank and static sizes**: an unbatched ``(N, 3)`` / ``(N,)`` input is refused (add the batch
      dim: ``pos[None]``);
    * **sizes**: the batch and the items (atoms, points) must lie within the exported ranges
      (metadata ``dims``) and agree across inputs;
    * **values**: NaN or infinite floats, species outside ``[0, num_species)``, edge indices
      outside the atoms (a periodic program's ``edge_index``);
    * **strides**: every input is handed to the graph contiguous, so a view gives the numbers of
      its contiguous copy.

    Parameters
    ----------
    compiled : callable
        The loaded package (``torch._inductor.aoti_load_package``), or any callable that takes the
        program's inputs (an exported program's ``module()``).
    metadata : dict
        geomlin's metadata of the package ([`geomlin.deploy.export.build_metadata`][]).
    path : str or Path
        The file, for messages. [`open`][geomlin.deploy.packaged.PackagedModel.open] reads one.

    Attributes
    ----------
    is_potential, is_periodic : bool
        whether the program returns energy and forces, and whether it is the periodic program
        ([`geomlin.deploy.export.is_periodic`][]).
    card : ModelCard
        Task, config, units and species map from the metadata.
    type_in, type_out
        The declared feature types of the exported model (set by ``geomlin.load``; ``None`` here).
    """

    def __init__(self, compiled, metadata: dict, path: str | Path = ""):
        super().__init__()
        self.compiled = compiled
        self.path = Path(path)
        self.metadata = dict(metadata)
        if self.metadata.get("format") != PACKAGE_FORMAT:
            raise ValueError(f"{path} is not a package written by geomlin (no geomlin metadata)")
        self.specs = list(self.metadata.get("program_inputs", []))
        if not self.specs:
            raise ValueError(f"{path} was written by an older geomlin and records no input specs; export it again")
        self.dims = dict(self.metadata.get("dims", {}))
        self.card = ModelCard.from_metadata(self.metadata, source=str(path))
        self.is_potential = self.metadata.get("outputs") in (POTENTIAL_OUTPUTS, PERIODIC_OUTPUTS)
        self.is_periodic = self.metadata.get("outputs") == PERIODIC_OUTPUTS
        self.type_in = self.type_out = None

    @classmethod
    def open(cls, path: str | Path) -> PackagedModel:
        """The package in file ``path``; a one-line error naming the file when it is missing or not a package."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"package not found: {path}" + ("; it is a folder" if path.is_dir() else ""))
        if not zipfile.is_zipfile(path):
            raise ValueError(f"cannot load package {path}: not an AOTInductor package (not a zip archive)")
        try:
            compiled = torch._inductor.aoti_load_package(str(path))
        except Exception as exc:  # noqa: BLE001 - a foreign or corrupt archive: one line naming the file
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            raise ValueError(f"cannot load package {path}: {first}") from None
        return cls(compiled, read_metadata(compiled), path)

    @property
    def dtype(self) -> torch.dtype:
        """The floating dtype the package was exported in."""
        floats = [s["dtype"] for s in self.specs if s["dtype"].startswith(("float", "bfloat"))]
        return getattr(torch, floats[0]) if floats else torch.float32

    @property
    def device(self) -> torch.device:
        """The device the package was compiled for."""
        return torch.device(self.metadata.get("device", "cpu"))

    def train(self, mode: bool = True) -> PackagedModel:
        """A compiled package has no training mode: only the flag is set (nothing below is switched)."""
        self.training = bool(mode)
        return self

    def _apply(self, fn, recurse=True):
        # .to() / .double() cannot change compiled kernels: refuse instead of pretending
        raise TypeError(f"a compiled package runs in {self.dtype} on {self.device}; it cannot be moved or cast "
                        "(export the model again for another dtype or device)")

    def check_inputs(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        """The inputs as the graph takes them (contiguous, exported integer dtype), or a one-line error."""
        positional = [s for s in self.specs if not s["keyword"]]
        keyword = {s["name"]: s for s in self.specs if s["keyword"]}
        if len(args) != len(positional) or set(kwargs) != set(keyword):
            want = ", ".join([s["name"] for s in positional] + [f"{k}=" for k in keyword])
            raise TypeError(f"this package takes ({want}); got {len(args)} positional input(s) and keyword "
                            f"inputs {sorted(kwargs)}")
        sizes: dict[str, tuple[int, str]] = {}
        out_args = tuple(self._check(x, s, sizes) for x, s in zip(args, positional))
        out_kwargs = {k: self._check(v, keyword[k], sizes) for k, v in kwargs.items()}
        return out_args, out_kwargs

    def _check(self, x, spec: dict, sizes: dict) -> Tensor:
        name, dims = spec["name"], spec["dims"]
        want = getattr(torch, spec["dtype"])
        shape = "(" + ", ".join(_dim_name(dims, i) for i in range(len(dims))) + ")"
        if not isinstance(x, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor {shape}, got {type(x).__name__}")
        if x.device != self.device:
            raise ValueError(f"{name} must be on {self.device} (the package's device), got {x.device}")
        if x.ndim != len(dims):
            hint = f"; add the batch dim: {name}[None]" if x.ndim == len(dims) - 1 and dims[0] == "batch" else ""
            raise ValueError(f"{name} must have shape {shape} ({len(dims)} dims), got {tuple(x.shape)}{hint}")
        if want.is_floating_point:
            if x.dtype != want:
                raise TypeError(f"{name} must be {want} (the package was exported in {want}), got {x.dtype}; "
                                f"cast it ({name}.to({want})) or export the model in {x.dtype}")
        elif want == torch.bool:
            if x.dtype != torch.bool:
                raise TypeError(f"{name} must be torch.bool, got {x.dtype}")
        elif x.dtype.is_floating_point or x.dtype.is_complex or x.dtype == torch.bool:
            raise TypeError(f"{name} must hold integers ({want}), got {x.dtype}")
        for i, d in enumerate(dims):
            n = int(x.shape[i])
            if isinstance(d, int):
                if n != d:
                    raise ValueError(f"{name} must have size {d} in dim {i} {shape}, got shape {tuple(x.shape)}")
                continue
            lo, hi = self.dims[d]
            what = {"batch": "batch size", "edges": "number of edges"}.get(d, "number of items (atoms, points)")
            if not lo <= n <= hi:
                raise ValueError(f"{name}: {what} {n} is outside the exported range {lo}..{hi} "
                                 f"(shape {tuple(x.shape)})")
            seen = sizes.setdefault(d, (n, name))
            if seen[0] != n:
                raise ValueError(f"{name} has {what} {n} but {seen[1]} has {seen[0]}")
        if x.is_floating_point():
            check_finite(x, name)
        elif "labels" in spec:
            check_index(x, name, spec["labels"], "species" if name == "species" else "classes")
        elif "indexes" in spec and spec["indexes"] in sizes:
            check_index(x, name, sizes[spec["indexes"]][0], spec["indexes"])
        return x.to(want).contiguous()

    def forward(self, *args, **kwargs):
        """The package's outputs for checked inputs (a tuple for several outputs)."""
        args, kwargs = self.check_inputs(args, kwargs)
        out = self.compiled(*args, **kwargs)
        return tuple(out) if isinstance(out, (list, tuple)) and len(out) > 1 else (
            out[0] if isinstance(out, (list, tuple)) else out)

    def extra_repr(self) -> str:
        inputs = ", ".join(f"{s['name']} {s['dtype']}" for s in self.specs)
        return f"{self.path.name}: {self.metadata.get('class')} ({inputs})"
