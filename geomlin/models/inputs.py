"""How the models of [`geomlin.models`][] take their inputs: PyG ``Data`` / ``Batch`` objects and tensors.

Every model takes a batch in one of three forms, with the same results (tested to 1e-6 in float32
and 1e-12 in float64):

* **padded tensors** ``(B, N, ...)`` with ``mask=`` ``(B, N)`` bool (True = real item);
* **flat tensors** ``(N_total, ...)`` with ``batch=``: PyG's batch vector ``(N_total,)`` (sorted), or
  the [`BatchLayout`][geomlin.batching.BatchLayout] planned from it at the data boundary
  ([`geomlin.batching.batch_layout`][]; it carries the number of graphs and the sizes, so that
  the forward reads nothing back from an accelerator);
* **a PyG ``Data`` or ``Batch``** (one graph, or graphs collated by a ``torch_geometric``
  ``DataLoader``) as the first argument: the model reads the fields it needs by name
  ([`MOLECULE_FIELDS`][] for the potentials, [`PARTICLE_FIELDS`][] for the n-body models, ``pos``
  for the point-cloud classifiers) and returns what the flat tensors give.

Outputs per graph are ``(B, ...)`` in every form; outputs per item are ``(B, N, ...)`` for padded
inputs and ``(N_total, ...)`` for flat ones.

This module also holds the potentials' input checks (`check_molecule_inputs`).
"""

from __future__ import annotations

from torch import Tensor

from geomlin.batching import BatchLayout, as_layout, layout_of
from geomlin.validation import check_index, check_mask, check_tensor

#: The fields a potential reads from a PyG ``Data`` / ``Batch``: positions and atomic numbers (PyG's QM9 names).
MOLECULE_FIELDS = ("pos", "z")
#: The fields an n-body model reads: positions, velocities ``(n, 3)`` and charges ``(n, 1)``.
PARTICLE_FIELDS = ("pos", "vel", "charges")
#: What a species index counts, in error messages ("species must index atom types in [0, 5) ...").
SPECIES = "atom types"


def is_graph_data(x) -> bool:
    """Whether ``x`` is a PyTorch Geometric ``Data`` or ``Batch`` (not a tensor)."""
    if isinstance(x, Tensor) or x is None:
        return False
    from torch_geometric.data.data import BaseData

    return isinstance(x, BaseData)


def graph_fields(data, names: tuple[str, ...], model: str, **given) -> tuple[tuple, BatchLayout]:
    """The fields ``names`` of a PyG ``Data`` / ``Batch`` and its flat layout.

    ``given`` are the model's other layout or input keywords, which must be None with a data object
    (the object carries them). Raises ValueError naming a missing field.
    """
    from torch_geometric.data import Batch

    kind = "Batch" if isinstance(data, Batch) else "Data"
    extra = [k for k, v in given.items() if v is not None]
    if extra:
        raise ValueError(f"{model} got a PyG {kind} and {extra[0]}=; the data object carries its layout and "
                         f"inputs (pass tensors to give {extra[0]})")
    values = []
    for name in names:
        value = getattr(data, name, None)
        if value is None:
            raise ValueError(f"{model} reads the fields {names} of a PyG {kind}, but it has no field {name!r}")
        values.append(check_tensor(value, f"data.{name}", dtype="any"))
    return tuple(values), layout_of(data)


def model_layout(x: Tensor, mask: Tensor | None, batch, item_dims: int = 1) -> BatchLayout:
    """The layout of a model's tensor input ``x``: padded ``(B, N, ...)`` with ``mask``, or flat
    ``(N_total, ...)`` with ``batch`` (a batch vector or a [`BatchLayout`][geomlin.batching.BatchLayout]).

    ``item_dims`` is the number of trailing axes of one item (``pos (..., 3)``: 1), so that the two
    layouts are told apart by ``x.ndim``.
    """
    flat = batch is not None and (not isinstance(batch, BatchLayout) or batch.is_flat)
    want = item_dims + (1 if flat else 2)
    if x.ndim != want:
        form = "flat inputs (N_total, ...) with batch=" if flat else "padded inputs (B, N, ...) (a flat batch needs batch=)"
        raise ValueError(f"{form} need {want} dimensions here, got shape {tuple(x.shape)}")
    layout = as_layout(mask, batch, num_items=x.shape[0] if flat else None)
    if layout.is_flat and layout.mask is not None:
        raise ValueError("a flat batch with padding items (a mask inside the layout) is for GATr only; "
                         "leave the padding out of the batch")
    return layout


def check_molecule_inputs(pos: Tensor, species: Tensor, num_species: int, layout: BatchLayout) -> Tensor:
    """Validate a batch of molecules; return ``species`` (clamped into range on accelerators).

    Padded: ``pos (B, N, 3)``, integer ``species (B, N)``, the layout's ``mask (B, N)``; flat:
    ``pos (N_total, 3)``, ``species (N_total,)``. ``pos`` finite, species in ``[0, num_species)``.
    The value checks go through [`geomlin.validation.check_finite`][] and
    [`geomlin.validation.check_index`][]: at once on every device, except on an accelerator inside
    [`geomlin.validation.deferred_checks`][] (the training loop), where they are deferred (no host
    sync) and the returned species are clamped so an embedding never reads out of bounds before the error.
    """
    if species is None and isinstance(pos, Tensor):
        raise ValueError("species is required with tensor positions: pass species (B, N) (flat: (N_total,)) "
                         "beside pos, or a PyG Data / Batch with fields pos and z")
    if layout.is_flat:
        check_tensor(pos, "pos", shape=(None, 3), finite=True, what="N_total atoms of a flat batch")
    else:
        check_tensor(pos, "pos", shape=(None, None, 3), finite=True,
                     what="B molecules of N atoms; a flat PyG batch needs batch=")
    check_tensor(species, "species", dtype="int")
    items = tuple(pos.shape[:-1])
    if tuple(species.shape) != items:
        form = "(N_total,)" if layout.is_flat else "(B, N)"
        raise ValueError(f"species must have shape {form} = {items} to match pos, got {tuple(species.shape)}")
    species = check_index(species, "species", num_species, SPECIES)
    if layout.mask is not None and not layout.is_flat:
        check_mask(layout.mask, "mask", items)
    return species


def molecule_inputs(model: str, pos, species: Tensor | None, mask: Tensor | None, batch,
                    num_species: int) -> tuple[Tensor, Tensor, BatchLayout]:
    """A potential's molecules in any of the three forms as checked ``(pos, species, layout)``.

    ``pos`` may be a PyG ``Data`` / ``Batch`` ([`MOLECULE_FIELDS`][]); the checks are
    `check_molecule_inputs`'s. ``model`` names the caller in error messages.
    """
    if is_graph_data(pos):
        (pos, species), batch = graph_fields(pos, MOLECULE_FIELDS, model, species=species, mask=mask, batch=batch)
    layout = model_layout(pos, mask, batch)
    return pos, check_molecule_inputs(pos, species, num_species, layout), layout


def particle_inputs(model: str, pos, vel: Tensor | None, charges: Tensor | None, mask: Tensor | None,
                    batch) -> tuple[Tensor, Tensor, Tensor, BatchLayout]:
    """An n-body model's systems in any of the three forms as checked ``(pos, vel, charges, layout)``.

    ``pos`` and ``vel`` ``(B, n, 3)`` (flat: ``(N_total, 3)``), ``charges (B, n, 1)``, finite; ``pos``
    may be a PyG ``Data`` / ``Batch`` ([`PARTICLE_FIELDS`][]). ``model`` names the caller in error
    messages.
    """
    if is_graph_data(pos):
        (pos, vel, charges), batch = graph_fields(pos, PARTICLE_FIELDS, model, vel=vel, charges=charges, mask=mask,
                                                  batch=batch)
    layout = model_layout(pos, mask, batch)
    check_tensor(pos, "pos", shape=(..., 3), finite=True, what="particles")
    check_tensor(vel, "vel", shape=tuple(pos.shape), finite=True)
    # the exact shape (not just the count): charges (n, B, 1) would be silently reordered
    check_tensor(charges, "charges", shape=(*pos.shape[:-1], 1), dtype=("float", "int"), finite=True,
                 what="one charge per particle, as pos")
    return pos, vel, charges, layout
