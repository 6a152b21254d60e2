"""EnergyAndForces and velocity_verlet_step (geomlin.models.md): an MD-style loop on the bundled xTB
ethanol trajectory compiles once (issue 21).

Oracle: the same potential run eagerly (``backend=None``), frame by frame in batches. The compiled
step is counted with ``torch._dynamo.testing.CompileCounterWithBackend`` and every step after the
first runs under ``error_on_recompile``. The default run traces with ``aot_eager`` (dynamo +
AOTAutograd, no C++ compile) for 50 steps; the 1,000-step runs with inductor are slow (about a
minute of C++ compilation each on a 2-core machine).
"""

import time
from pathlib import Path

import pytest
import torch
from torch._dynamo.testing import CompileCounterWithBackend

from geomlin.datasets.md17 import read_npz_trajectory
from geomlin.models import EGNNPotential, GauntPotential
from geomlin.models.md import EnergyAndForces, velocity_verlet_step
from geomlin.validation import deferred_checks
from tests.device import simulated as sim  # registers the device before any backward runs

ETHANOL = Path(__file__).resolve().parents[2] / "datasets" / "md" / "xtb_md_ethanol.npz"
#: Atomic number -> species index of the tiny potentials (ethanol: H, C, O).
SPECIES = {1: 0, 6: 1, 8: 2}
#: Every ethanol frame has 8 neighbours per atom within 5 Angstrom (all pairs), so K = 8 fits.
CUTOFF, MAX_NEIGHBORS = 5.0, 8
RTOL, ATOL = 1e-5, 1e-6  # float32, compiled against eager
#: Eager single-frame steps timed for the printed comparison.
TIMED_EAGER_STEPS = 20


def _ethanol(dtype=torch.float32):
    data = read_npz_trajectory(ETHANOL)
    pos = torch.as_tensor(data["pos"], dtype=dtype)                    # (1000, 9, 3) Angstrom
    species = torch.tensor([SPECIES[int(z)] for z in data["z"]])[None]  # (1, 9)
    return pos, species


def _potential(kind: str, dtype=torch.float32, **kwargs):
    torch.manual_seed(0)
    if kind == "gaunt":
        net = GauntPotential(num_species=3, hidden_channels=8, lmax=1, num_blocks=2, **kwargs)
    else:
        net = EGNNPotential(num_species=3, hidden_channels=8, num_blocks=2, num_basis=8, **kwargs)
    return net.to(dtype).requires_grad_(False)


def _eager_reference(net, pos, species, chunk=250):
    eager = EnergyAndForces(net, backend=None)
    out = [eager(pos[i:i + chunk], species.expand(pos[i:i + chunk].shape[0], -1)) for i in range(0, len(pos), chunk)]
    return torch.cat([e for e, _ in out]), torch.cat([f for _, f in out])


def _md_loop(kind: str, backend: str, steps: int):
    """``steps`` energy-and-forces calls cycling through the trajectory's frames; compiled once."""
    pos, species = _ethanol()
    net = _potential(kind, cutoff=CUTOFF, max_neighbors=MAX_NEIGHBORS)
    frames = pos[torch.arange(steps) % pos.shape[0]]
    want_e, want_f = _eager_reference(net, frames, species)
    eager = EnergyAndForces(net, backend=None)
    start = time.perf_counter()
    for i in range(TIMED_EAGER_STEPS):
        eager(frames[i:i + 1], species)
    eager_step = (time.perf_counter() - start) / TIMED_EAGER_STEPS
    torch._dynamo.reset()
    counter = CompileCounterWithBackend(backend)
    model = EnergyAndForces(net, backend=counter)
    start = time.perf_counter()
    energies, forces = map(list, zip(model(frames[:1], species)))
    first = time.perf_counter() - start
    assert counter.frame_count == 1
    start = time.perf_counter()
    with torch._dynamo.config.patch(error_on_recompile=True):
        for i in range(1, steps):
            e, f = model(frames[i:i + 1], species)
            energies.append(e)
            forces.append(f)
    per_step = (time.perf_counter() - start) / max(steps - 1, 1)
    assert counter.frame_count == 1, "recompiled after the first step"
    torch.testing.assert_close(torch.cat(energies), want_e, rtol=RTOL, atol=ATOL)
    torch.testing.assert_close(torch.cat(forces), want_f, rtol=RTOL, atol=ATOL)
    print(f"\n{kind} {backend} {steps} steps: first step (compile) {first:.1f} s, compiled {1e3 * per_step:.2f} ms/step, "
          f"eager {1e3 * eager_step:.2f} ms/step")


@pytest.mark.parametrize("kind", ["gaunt", "egnn"])
def test_md_loop_compiles_once_and_matches_eager(kind):
    _md_loop(kind, "aot_eager", 50)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["gaunt", "egnn"])
def test_md_loop_of_1000_steps_with_inductor(kind):
    _md_loop(kind, "inductor", 1000)


def test_overflow_inside_the_compiled_step_is_an_error():
    """With a 2 Angstrom cutoff frame 0 has at most 5 neighbours per atom and frame 1 more: the compiled
    step refuses frame 1. On the CPU the potential's own check is an assert inside the graph
    (``torch._assert_async``: a RuntimeError with the same message); else the wrapper's check after
    the step raises the ValueError."""
    pos, species = _ethanol()
    net = _potential("egnn", cutoff=2.0, max_neighbors=5)
    torch._dynamo.reset()
    model = EnergyAndForces(net, backend="aot_eager")
    model(pos[:1], species)
    with pytest.raises((ValueError, RuntimeError), match="more than max_neighbors=5 neighbours within cutoff=2.0"):
        model(pos[1:2], species)
    with pytest.raises(ValueError, match="more than max_neighbors=5 neighbours within cutoff=2.0"):
        EnergyAndForces(net, backend=None)(pos[1:2], species)


def test_velocity_verlet_compiled_follows_eager():
    """20 velocity-Verlet steps from frame 0 (float64): the compiled run follows the eager one, and the
    total energy drifts little at a small step."""
    pos, species = _ethanol(torch.float64)
    net = _potential("egnn", torch.float64, cutoff=CUTOFF, max_neighbors=MAX_NEIGHBORS)
    masses = torch.tensor([1.008, 12.011, 15.999], dtype=torch.float64)[species]   # (1, 9)
    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")
    runs = {}
    for name, model in (("eager", EnergyAndForces(net, backend=None)), ("compiled", EnergyAndForces(net, backend=counter))):
        x, v = pos[:1].clone(), torch.zeros_like(pos[:1])
        e, f = model(x, species)
        totals = []
        for _ in range(20):
            x, v, e, f = velocity_verlet_step(model, x, v, f, species, masses, dt=0.01)
            totals.append(e + 0.5 * (masses[..., None] * v * v).sum(dim=(1, 2)))
        runs[name] = (x, v, torch.cat(totals))
    assert counter.frame_count == 1
    for a, b in zip(runs["compiled"], runs["eager"]):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)
    totals = runs["eager"][2]
    assert (runs["eager"][0] - pos[:1]).abs().max() > 1e-6  # the atoms moved
    assert (totals - totals[0]).abs().max() < 1e-3 * max(totals[0].abs().item(), 1.0)


def test_refuses_what_is_not_a_module():
    with pytest.raises(TypeError, match="potential must be an nn.Module"):
        EnergyAndForces(lambda pos, species: pos.sum())


@pytest.mark.slow
def test_reduce_overhead_mode_compiles_once_on_the_cpu():
    """mode="reduce-overhead" (CUDA graphs on CUDA; on the CPU inductor skips them): the wrapper's step
    marking and output copies run, one graph, eager numbers. Counted with dynamo's own statistics."""
    from torch._dynamo.utils import counters

    pos, species = _ethanol()
    net = _potential("egnn", cutoff=CUTOFF, max_neighbors=MAX_NEIGHBORS)
    want_e, want_f = _eager_reference(net, pos[:20], species)
    torch._dynamo.reset()
    counters.clear()
    model = EnergyAndForces(net, mode="reduce-overhead")
    out = [model(pos[:1], species)]
    with torch._dynamo.config.patch(error_on_recompile=True):
        out += [model(pos[i:i + 1], species) for i in range(1, 20)]
    assert counters["stats"]["unique_graphs"] == 1
    torch.testing.assert_close(torch.cat([e for e, _ in out]), want_e, rtol=RTOL, atol=ATOL)
    torch.testing.assert_close(torch.cat([f for _, f in out]), want_f, rtol=RTOL, atol=ATOL)


def test_eager_step_is_sync_free_on_an_accelerator_and_defers_the_overflow():
    """On the simulated device, inside the caller's deferred-checks scope (around a trajectory), a step
    (energy, forces, neighbour test) records no host sync; a frame with too many neighbours is raised
    when that scope ends, or at the end of the call without one."""
    pos, species = _ethanol()
    net = _potential("gaunt", cutoff=2.0, max_neighbors=5)
    want = EnergyAndForces(net, backend=None)(pos[:1], species)
    net, frames, species = sim.to_sim((net, pos[:2], species))
    model = EnergyAndForces(net, backend=None)
    model(frames[:1], species)  # the first call on a device uploads the Gaunt tables
    with deferred_checks(), sim.watch() as log:  # the scope reads the checks after the watch (they pass)
        got = model(frames[:1], species)
    assert not log.events, log.report()
    for a, b in zip(sim.to_cpu(got), want):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)
    # frame 1 has an atom with 6 neighbours within 2 Angstrom
    with pytest.raises(ValueError, match="more than max_neighbors=5 .*deferred_checks"), deferred_checks():
        with sim.watch() as log:
            model(frames[1:2], species)
        assert not log.events, log.report()
    with pytest.raises(ValueError, match="more than max_neighbors=5"):  # no scope of the caller's: at the call's end
        model(frames[1:2], species)


def test_energy_and_forces_exports_with_torch_export():
    """``deploy.export`` of the step (issue 34): the program at other sizes equals the eager step."""
    from geomlin import deploy

    pos, species = _ethanol()
    net = _potential("egnn")
    step = EnergyAndForces(net, backend=None)
    program = deploy.export(step, (pos[:2], species.expand(2, -1).clone()))
    frames = pos[2:5, :8].contiguous()
    got = program.module()(frames, species[:, :8].expand(3, -1).clone())
    for g, w in zip(got, step(frames, species[:, :8].expand(3, -1))):
        torch.testing.assert_close(g, w, rtol=RTOL, atol=1e-5)


def test_export_of_a_potential_checks_its_inputs_before_running_it():
    from geomlin import deploy
    from geomlin.models import MoleculeEnergyModel

    pos, _ = _ethanol()
    with pytest.raises(ValueError, match=r"exported as \(pos, species\) -> \(energy, forces\); got 1 positional"):
        deploy.export(MoleculeEnergyModel(_potential("egnn")), (pos[:2],))
    with pytest.raises(ValueError, match=r"species is required with tensor positions"):
        deploy.export(_potential("egnn"), (pos[:2],))
