"""Energies and forces of a potential for molecular dynamics: one compiled graph for a whole trajectory.

An MD run calls the same potential thousands of times on molecules of the same size. With the
static-shape neighbour list (``max_neighbors=K`` on [`GauntPotential`][geomlin.models.GauntPotential] and
[`EGNNPotential`][geomlin.models.EGNNPotential], built by [`padded_neighbors`][geomlin.models.graphs.padded_neighbors])
every shape of the forward depends only on ``B, N, K``, so [`EnergyAndForces`][] compiles the
energy once (``torch.compile(fullgraph=True, dynamic=False)``) and the forces ``-dE/dpos`` run
through the backward graph AOTAutograd compiled with it: no recompilation on later steps, no
host sync in the step (on an accelerator the neighbour overflow test and the input checks are
deferred, [`geomlin.validation.deferred_checks`][]: open one scope around the trajectory and they
are read once, at its end). On CUDA, ``mode="reduce-overhead"`` replays both
graphs as CUDA graphs. [`velocity_verlet_step`][] is the integrator of such a loop.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from geomlin.batching import to_flat, to_padded
from geomlin.models.graphs import count_neighbors
from geomlin.models.inputs import MOLECULE_FIELDS, graph_fields, is_graph_data
from geomlin.reps import Scalars, Vectors
from geomlin.validation import check_condition, check_tensor, deferred_checks

#: The torch.compile modes that replay CUDA graphs (their outputs are overwritten by the next replay).
CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")


def require_autograd(what: str) -> None:
    """Refuse at once under ``torch.inference_mode``, where forces (``-dE/dpos`` by autograd) cannot be computed.

    PyTorch Lightning runs ``validate()`` / ``test()`` / ``predict()`` under ``inference_mode`` by
    default; without this check a force model fails deep inside autograd ("element 0 of tensors
    does not require grad"). Skipped while traced (dynamo cannot read the inference-mode flag).
    """
    if not torch.compiler.is_compiling() and torch.is_inference_mode_enabled():
        raise RuntimeError(f"{what} computes forces by autograd, which torch.inference_mode disables (PyTorch "
                           "Lightning validates and tests under it by default): use Trainer(inference_mode=False), "
                           "or torch.no_grad() instead of torch.inference_mode()")


def _neighbor_lists(potential: nn.Module) -> list[tuple[float, int]]:
    """The ``(cutoff, max_neighbors)`` of every submodule that uses a padded neighbour list."""
    found = []
    for module in potential.modules():
        k = getattr(module, "max_neighbors", None)
        if k is not None and (float(module.cutoff), int(k)) not in found:
            found.append((float(module.cutoff), int(k)))
    return found


class EnergyAndForces(nn.Module):
    """Energy ``E (B,)`` and forces ``-dE/dpos (B, N, 3)`` of a potential, for inference (MD, relaxation).

    Parameters
    ----------
    potential : nn.Module
        ``potential(pos (B, N, 3), species (B, N)[, mask=mask]) -> energy (B,)`` (the potentials of
        [`geomlin.models`][]), or a module with such an ``energy`` method
        ([`MoleculeEnergyModel`][geomlin.models.energy.MoleculeEnergyModel]). Give it ``max_neighbors`` for
        the static-shape path; with all pairs the shapes are static too, at ``O(N^2)`` edges.
    backend : str or callable, optional
        ``torch.compile`` backend of the energy (default ``"inductor"``); ``None`` runs it eagerly.
    mode : str, optional
        ``torch.compile`` mode; ``"reduce-overhead"`` records the forward and backward graphs as
        CUDA graphs (CUDA only; on the CPU it compiles as the default mode). The outputs are then
        copied out of the graphs' memory, so earlier steps' results stay valid.

    Shapes
    ------
    ``forward(pos, species, mask=None) -> (energy (B,), forces (B, N, 3))``, detached, in ``pos``'s
    dtype. The energy is compiled once per input layout (shapes, dtypes, device, ``mask`` given or
    not): a trajectory of fixed-size molecules compiles on the first step only. ``forward(data)``
    takes a PyG ``Data`` / ``Batch`` (fields ``pos`` and ``z``, molecules of any sizes) and returns
    ``(energy (B,), forces (N_total, 3))`` in its flat order; it runs on the padded layout
    (``geomlin.batching.to_padded``), so it compiles once per largest molecule.

    Notes
    -----
    Every step also tests that no atom has more neighbours within the cutoff than the potential's
    ``max_neighbors`` (counted inside the compiled graph, where values cannot be refused): a
    ValueError. Each call runs in a [`geomlin.validation.deferred_checks`][] scope: on an
    accelerator its checks stay on the device and are read when the call ends, or, inside a scope
    of the caller's (around a whole trajectory), when that scope ends (no host sync per step).
    Nothing is truncated silently; rebuild the potential with a larger ``max_neighbors`` (a new
    compilation) when it fires.

    The backward also computes the gradients of the parameters that require them; freeze the
    potential (``potential.requires_grad_(False)``) for pure inference.

    Under ``torch.inference_mode`` (PyTorch Lightning's default for ``validate()`` / ``test()``)
    forces cannot be computed: the call is refused at once ([`require_autograd`][]).
    ``geomlin.deploy.export(step, (pos, species))`` exports the step as its potential's
    ``(pos, species) -> (energy, forces)`` program.
    """

    def __init__(self, potential: nn.Module, backend: str | Callable | None = "inductor", mode: str | None = None):
        super().__init__()
        if not isinstance(potential, nn.Module):
            raise TypeError(f"potential must be an nn.Module, got {type(potential).__name__}")
        self.potential = potential
        self.backend = backend
        self.mode = mode
        self.neighbor_lists = _neighbor_lists(potential)
        step = self._energy
        self._step = step if backend is None else torch.compile(step, backend=backend, mode=mode, fullgraph=True,
                                                                dynamic=False)
        self._warm = backend is None
        self.type_in = getattr(potential, "type_in", None)  # positions and species, as the potential declares
        self.type_out = (Scalars(), Vectors(3))

    def _energy(self, pos: Tensor, species: Tensor, mask: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
        """The traced step: energy ``(B,)``, its sum, and whether every padded list holds all neighbours."""
        energy_of = getattr(self.potential, "energy", self.potential)
        energy = energy_of(pos, species) if mask is None else energy_of(pos, species, mask=mask)
        fits = [(count_neighbors(pos, cutoff, mask) <= k).all() for cutoff, k in self.neighbor_lists]
        fits = torch.stack(fits).all() if fits else torch.ones((), dtype=torch.bool, device=pos.device)
        return energy, energy.sum(), fits

    def forward(self, pos, species: Tensor | None = None, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        with deferred_checks():
            if is_graph_data(pos):
                (flat_pos, z), layout = graph_fields(pos, MOLECULE_FIELDS, "EnergyAndForces", species=species,
                                                     mask=mask)
                padded_pos, real = to_padded(flat_pos, layout)
                energy, forces = self._forward(padded_pos, to_padded(z, layout)[0], real)
                return energy, to_flat(forces, layout)
            if species is None:
                raise TypeError("EnergyAndForces takes (pos (B, N, 3), species (B, N)) or a PyG Data / Batch with "
                                "fields pos and z; species is missing")
            return self._forward(pos, species, mask)

    def _forward(self, pos: Tensor, species: Tensor, mask: Tensor | None) -> tuple[Tensor, Tensor]:
        check_tensor(pos, "pos", shape=(None, None, 3), dtype=(torch.float32, torch.float64),
                     what="B molecules of N atoms")
        require_autograd("EnergyAndForces")
        if self.mode in CUDA_GRAPH_MODES:
            torch.compiler.cudagraph_mark_step_begin()  # the previous step's graph outputs may be reused
        if not self._warm:
            # one eager call first: it fills the host-side caches the potentials build lazily (the Gaunt
            # tables per device and dtype), which the compiled graph then reads as constants; filled
            # while tracing, they would fail the guards of the first graph and compile a second one
            with torch.no_grad():
                self._energy(pos, species, mask)
            self._warm = True
        with torch.enable_grad():
            leaf = pos.detach().requires_grad_(True)
            energy, total, fits = self._step(leaf, species, mask)
            (grad,) = torch.autograd.grad(total, leaf)
        if self.neighbor_lists:
            lists = " or ".join(f"max_neighbors={k} neighbours within cutoff={c}" for c, k in self.neighbor_lists)
            check_condition(fits, f"an atom has more than {lists}: rebuild the potential with a larger "
                                  f"max_neighbors (no neighbour is ever dropped silently)")
        energy, forces = energy.detach(), -grad
        if self.mode in CUDA_GRAPH_MODES:
            energy, forces = energy.clone(), forces.clone()
        return energy, forces

    def example_inputs(self, generator: torch.Generator | None = None, dtype: torch.dtype = torch.float64):
        """The potential's example inputs."""
        return self.potential.example_inputs(generator=generator, dtype=dtype)

    def extra_repr(self) -> str:
        lists = ", ".join(f"cutoff={c}, max_neighbors={k}" for c, k in self.neighbor_lists) or "all pairs"
        return f"{lists}, mode={self.mode!r}"


def velocity_verlet_step(model: Callable, pos: Tensor, vel: Tensor, forces: Tensor, species: Tensor,
                         masses: Tensor, dt: float, mask: Tensor | None = None
                         ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """One velocity-Verlet step (Swope et al., J. Chem. Phys. 76, 637 (1982), Eq. 5).

    ``v' = v + dt F / 2m``, ``x' = x + dt v'``, ``F' = F(x')``, ``v'' = v' + dt F' / 2m``.

    Parameters
    ----------
    model : callable
        ``model(pos, species, mask) -> (energy (B,), forces (B, N, 3))``, e.g. [`EnergyAndForces`][].
    pos, vel, forces : Tensor
        ``(B, N, 3)`` positions, velocities and the forces at ``pos``.
    species : Tensor
        ``(B, N)`` int64.
    masses : Tensor
        ``(N,)``, ``(B, N)`` or ``(B, N, 1)`` positive masses (broadcast against ``(B, N, 1)``).
    dt : float
        Time step, in units consistent with the others (``force / mass * dt^2`` is a length).
    mask : Tensor, optional
        ``(B, N)`` bool real atoms, handed to ``model``.

    Returns
    -------
    ``(pos', vel'', energy (B,), forces')`` at the end of the step.
    """
    inv_mass = 1.0 / (masses if masses.ndim == 3 else masses[..., None])
    half = vel + (0.5 * dt) * forces * inv_mass
    pos = pos + dt * half
    energy, forces = model(pos, species, mask)
    return pos, half + (0.5 * dt) * forces * inv_mass, energy, forces
