"""From a trained model to a simulation: export, packages with checked inputs, loading, the ASE calculator.

[`export`][geomlin.deploy.export.export] turns a model into a ``torch.export.ExportedProgram`` whose
batch and item sizes are symbolic ([`dynamic_shapes`][geomlin.deploy.export.dynamic_shapes] declares
which dims are free), [`package`][geomlin.deploy.export.package] compiles one with AOTInductor into
a ``.pt2`` file that runs without Python model code (and without geomlin), with geomlin's metadata
stored inside. [`load`][geomlin.deploy.loading.load] (also ``geomlin.load``) turns a ``geomlin train``
checkpoint or a package back into a ready ``nn.Module`` with its [`ModelCard`][geomlin.deploy.card.ModelCard]
(task, config, training data, units, species map); a package comes back as a
[`PackagedModel`][geomlin.deploy.packaged.PackagedModel], which checks its inputs.
``geomlin.deploy.calculator`` holds the ASE calculator (optional extra ``ase``, imported only there).

Which sizes are dynamic
    Every tensor input's dim 0 is the batch (``Dim("batch", 1..MAX_BATCH)``) and dim 1 of every
    tensor with two or more dims is the items (points, atoms, bodies:
    ``Dim("items", 2..MAX_ITEMS)``); feature dims (``3``, channels) stay static. A model whose
    items dim departs from that declares it in its class attribute ``export_shapes``
    ([`ExportShapes`][geomlin.reps.declarations.ExportShapes]), with the reason.

Potentials (energy and forces)
    A module with an ``energy(pos, species)`` method (the molecule models of ``geomlin train
    molecules``) or an [`EnergyAndForces`][geomlin.models.md.EnergyAndForces] step is exported as
    ``(pos, species) -> (energy (B,), forces (B, N, 3))`` with ``forces = -dE/dpos``.
    ``torch.export`` of a ``forward`` that calls ``torch.autograd.grad`` fails in PyTorch 2.13
    (fake tensors left among the lifted constants, or symbolic sizes not tracked;
    pytorch/pytorch#125984, #187907). The documented workaround (the one NequIP uses): first trace
    the forward *and* its backward with ``make_fx(tracing_mode="symbolic")``, which runs the
    autograd engine under the tracer and records the backward's ATen ops into one plain graph,
    then ``torch.export`` that graph. Duck shaping is off while tracing (a batch that happens to
    equal a feature size would otherwise be tied to it), and the tracing runs with
    ``torch.compiler.is_compiling()`` true, so geomlin takes the same sync-free paths as under
    ``torch.compile`` (no value reads on the host).

What is checked where
    At the eager boundary (the model's own ``forward`` in Python) every check of
    [`geomlin.validation`][] runs. A [`PackagedModel`][geomlin.deploy.packaged.PackagedModel]
    (``geomlin.load`` of a package, and the ASE calculator) checks each call against the input
    specs stored in the package before the graph runs: dtype, rank, static sizes, the exported
    size ranges, finite values and the species range, and makes every input contiguous.
    Inside the graph, value checks made with [`geomlin.validation.check_condition`][] become
    ``torch._assert_async`` ops (CPU packages). A bare ``torch._inductor.aoti_load_package``
    call bypasses the first layer: see docs/deployment.md for what it leaves unchecked.
"""

from geomlin.deploy.card import ModelCard
from geomlin.deploy.export import (
    MAX_BATCH,
    MAX_ITEMS,
    METADATA_KEY,
    MIN_ITEMS,
    PACKAGE_FORMAT,
    KeywordsAsPositional,
    build_metadata,
    describe_dims,
    dynamic_shapes,
    export,
    export_shapes,
    fit_inputs,
    input_specs,
    is_potential,
    items_range,
    package,
    program_inputs,
)
from geomlin.deploy.loading import checkpoint_model, is_package, load, load_package, resolve_path
from geomlin.deploy.packaged import PackagedModel, read_metadata
from geomlin.deploy.units import Units

__all__ = ["MAX_BATCH", "MAX_ITEMS", "METADATA_KEY", "MIN_ITEMS", "PACKAGE_FORMAT", "KeywordsAsPositional",
           "ModelCard", "PackagedModel", "Units", "build_metadata", "checkpoint_model", "describe_dims",
           "dynamic_shapes", "export", "export_shapes", "fit_inputs", "input_specs", "is_package", "is_potential",
           "items_range", "load", "load_package", "package", "program_inputs", "read_metadata", "resolve_path"]
