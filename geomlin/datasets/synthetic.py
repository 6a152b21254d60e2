"""Generated datasets that need no files: procedural point-cloud shapes and charged N-body.

``SyntheticShapes`` is a point-cloud classification set (10 analytic surfaces)
so point-cloud demos and equivariance experiments run anywhere in seconds.
``NBody`` is the charged-particle system of Kipf et al. 2018 (NRI) in the 3D
form used by EGNN (Satorras et al. 2021, Sec. 5.1) and GATr (Brehmer et al.
2023): predict the positions of ``n`` charged particles a fixed time ahead.
Both are deterministic given ``seed`` and build 10^4 samples in about a second.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from geomlin.datasets.base import InMemoryList, check_float_dtype
from geomlin.datasets.surface import sample_surface
from geomlin.groups import SO, O, as_group, haar_orthogonal
from geomlin.validation import (
    check_bool,
    check_float,
    check_int,
    check_positive_float,
    check_positive_int,
    check_tensor,
)

#: Class names of [`SyntheticShapes`][], in label order.
SHAPE_CLASSES = ("sphere", "ellipsoid", "cube", "cylinder", "cone", "torus", "pyramid",
                 "octahedron", "tetrahedron", "helix")

# Canonical shape sizes (before the random isotropic scale): all fit in a ball of radius ~1.
ELLIPSOID_AXES = (1.0, 0.6, 0.35)
CUBE_HALF = 0.6
CYLINDER_RADIUS, CYLINDER_HEIGHT = 0.5, 1.6
CONE_RADIUS, CONE_HEIGHT = 0.7, 1.4
TORUS_MAJOR, TORUS_MINOR = 0.75, 0.25
PYRAMID_HALF_BASE, PYRAMID_HEIGHT = 0.7, 1.2
HELIX_RADIUS, HELIX_TURNS, HELIX_HEIGHT, HELIX_TUBE = 0.6, 3.0, 1.8, 0.05

ROTATION_GROUPS = (SO(3), O(3))


def _cube_mesh() -> tuple[Tensor, Tensor]:
    v = torch.tensor([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=torch.float64)
    quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    f = [(q[0], q[1], q[2]) for q in quads] + [(q[0], q[2], q[3]) for q in quads]
    return v * CUBE_HALF, torch.tensor(f)


def _pyramid_mesh() -> tuple[Tensor, Tensor]:
    h, b = PYRAMID_HEIGHT, PYRAMID_HALF_BASE
    v = torch.tensor([[-b, -b, 0], [b, -b, 0], [b, b, 0], [-b, b, 0], [0, 0, h]], dtype=torch.float64)
    f = torch.tensor([[0, 2, 1], [0, 3, 2], [0, 1, 4], [1, 2, 4], [2, 3, 4], [3, 0, 4]])
    return v, f


def _octahedron_mesh() -> tuple[Tensor, Tensor]:
    v = torch.tensor([[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1]], dtype=torch.float64)
    f = torch.tensor([[a, b, c] for a in (0, 1) for b in (2, 3) for c in (4, 5)])
    return v, f


def _tetrahedron_mesh() -> tuple[Tensor, Tensor]:
    v = torch.tensor([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]], dtype=torch.float64) * 0.7
    f = torch.tensor([[0, 1, 2], [0, 3, 1], [0, 2, 3], [1, 3, 2]])
    return v, f


MESHES = {"cube": _cube_mesh, "pyramid": _pyramid_mesh, "octahedron": _octahedron_mesh,
          "tetrahedron": _tetrahedron_mesh}


def _unit_sphere(shape, g) -> Tensor:
    x = torch.randn(*shape, 3, generator=g, dtype=torch.float64)
    return x / x.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def _disk(shape, radius, g) -> Tensor:
    r = radius * torch.rand(shape, generator=g, dtype=torch.float64).sqrt()
    th = 2 * math.pi * torch.rand(shape, generator=g, dtype=torch.float64)
    return torch.stack([r * th.cos(), r * th.sin()], dim=-1)


def _cylinder(b, n, g) -> Tensor:
    r, h = CYLINDER_RADIUS, CYLINDER_HEIGHT
    lateral = 2 * math.pi * r * h
    p_lat = lateral / (lateral + 2 * math.pi * r * r)
    th = 2 * math.pi * torch.rand(b, n, generator=g, dtype=torch.float64)
    side = torch.stack([r * th.cos(), r * th.sin(), h * (torch.rand(b, n, generator=g, dtype=torch.float64) - 0.5)],
                       dim=-1)
    cap_z = h * (torch.randint(0, 2, (b, n), generator=g).double() - 0.5)
    cap = torch.cat([_disk((b, n), r, g), cap_z[..., None]], dim=-1)
    on_side = torch.rand(b, n, generator=g, dtype=torch.float64) < p_lat
    return torch.where(on_side[..., None], side, cap)


def _cone(b, n, g) -> Tensor:
    r, h = CONE_RADIUS, CONE_HEIGHT
    lateral = math.pi * r * math.hypot(r, h)
    p_lat = lateral / (lateral + math.pi * r * r)
    # Area density on the mantle grows linearly with the distance s from the apex -> s = sqrt(u).
    s = torch.rand(b, n, generator=g, dtype=torch.float64).sqrt()
    th = 2 * math.pi * torch.rand(b, n, generator=g, dtype=torch.float64)
    side = torch.stack([r * s * th.cos(), r * s * th.sin(), h / 2 - h * s], dim=-1)
    base = torch.cat([_disk((b, n), r, g), torch.full((b, n, 1), -h / 2, dtype=torch.float64)], dim=-1)
    on_side = torch.rand(b, n, generator=g, dtype=torch.float64) < p_lat
    return torch.where(on_side[..., None], side, base)


def _torus(b, n, g) -> Tensor:
    big, small = TORUS_MAJOR, TORUS_MINOR
    out = torch.empty(b, n, 3, dtype=torch.float64)
    todo = torch.arange(b)
    while todo.numel():
        # Rejection on the tube angle v: the area element is proportional to (R + r cos v).
        m = 2 * n + 16
        u = 2 * math.pi * torch.rand(todo.numel(), m, generator=g, dtype=torch.float64)
        v = 2 * math.pi * torch.rand(todo.numel(), m, generator=g, dtype=torch.float64)
        keep = torch.rand(todo.numel(), m, generator=g, dtype=torch.float64) * (big + small) < big + small * v.cos()
        enough = keep.sum(dim=1) >= n
        # Stable sort puts accepted candidates first, in their drawn order.
        order = torch.sort((~keep).to(torch.int8), dim=1, stable=True).indices[:, :n]
        u, v = u.gather(1, order), v.gather(1, order)
        rad = big + small * v.cos()
        pts = torch.stack([rad * u.cos(), rad * u.sin(), small * v.sin()], dim=-1)
        out[todo[enough]] = pts[enough]
        todo = todo[~enough]
    return out


def _helix(b, n, g) -> Tensor:
    t = torch.rand(b, n, generator=g, dtype=torch.float64)
    ang = 2 * math.pi * HELIX_TURNS * t
    centre = torch.stack([HELIX_RADIUS * ang.cos(), HELIX_RADIUS * ang.sin(), HELIX_HEIGHT * (t - 0.5)], dim=-1)
    return centre + HELIX_TUBE * torch.randn(b, n, 3, generator=g, dtype=torch.float64)


def shape_points(name: str, num_shapes: int, num_points: int, generator: torch.Generator | None = None) -> Tensor:
    """Canonical (unscaled, unrotated) samples of one shape class: ``(num_shapes, num_points, 3)`` float64.

    Points are uniform on the surface (area-weighted) for every class except the
    ellipsoid (a scaled uniform sphere) and the helix (a Gaussian tube around the curve).
    """
    b, n, g = num_shapes, num_points, generator
    if name == "sphere":
        return _unit_sphere((b, n), g)
    if name == "ellipsoid":
        return _unit_sphere((b, n), g) * torch.tensor(ELLIPSOID_AXES, dtype=torch.float64)
    if name in MESHES:
        v, f = MESHES[name]()
        return sample_surface(v, f, b * n, generator=g).reshape(b, n, 3)
    if name == "cylinder":
        return _cylinder(b, n, g)
    if name == "cone":
        return _cone(b, n, g)
    if name == "torus":
        return _torus(b, n, g)
    if name == "helix":
        return _helix(b, n, g)
    raise ValueError(f"unknown shape class {name!r}; expected one of {SHAPE_CLASSES}")


def _random_rotations(n: int, rotation, g: torch.Generator) -> Tensor | None:
    """``n`` Haar-random rotations of ``rotation`` (``SO(3)`` / ``O(3)`` or their names), or None."""
    if rotation is not None:
        rotation = as_group(rotation, "rotation")
        if rotation not in ROTATION_GROUPS:
            raise ValueError(f"rotation must be None, SO(3) or O(3) (or their names 'SO3', 'O3'), got {rotation}")
    if rotation is None:
        return None
    return haar_orthogonal(n, 3, generator=g, special=rotation == SO(3))


def synthetic_shapes(num_per_class: int, num_points: int = 1024, seed: int = 0,
                     classes: Sequence[str] | None = None, scale_range: tuple[float, float] = (0.75, 1.25),
                     jitter: float = 0.01, rotation=None, shuffle: bool = True,
                     dtype: torch.dtype = torch.float32) -> tuple[Tensor, Tensor]:
    """The whole [`SyntheticShapes`][] set as two tensors (fast path for batched training).

    Returns
    -------
    pos : Tensor of shape (M, num_points, 3)
        in ``dtype``, ``M = num_per_class * len(classes)``; each cloud is
        centred at its mean, scaled by a uniform factor from ``scale_range``, optionally rotated
        (``rotation=SO(3)`` or ``"SO3"``: Haar rotations, ``O(3)`` / ``"O3"``: rotations and reflections)
        and jittered with
        isotropic Gaussian noise of standard deviation ``jitter``.
    y : Tensor of shape (M,)
        int64 labels, the index of the class in ``classes`` (default [`SHAPE_CLASSES`][]).
    """
    check_positive_int(num_per_class, "num_per_class")
    check_positive_int(num_points, "num_points")
    seed = check_int(seed, "seed", minimum=0)
    check_float_dtype(dtype)
    if isinstance(classes, str):
        raise TypeError(f"classes must be a sequence of class names, got the string {classes!r}")
    classes = tuple(SHAPE_CLASSES if classes is None else classes)
    unknown = [c for c in classes if c not in SHAPE_CLASSES]
    if unknown or not classes or len(set(classes)) != len(classes):
        raise ValueError(f"classes must be distinct names from {SHAPE_CLASSES}, got {classes}")
    if len(scale_range) != 2:
        raise ValueError(f"scale_range must be a pair (low, high), got {scale_range!r}")
    lo = check_positive_float(scale_range[0], "scale_range[0]")
    hi = check_float(scale_range[1], "scale_range[1]", minimum=lo)
    jitter = check_float(jitter, "jitter", minimum=0.0)
    g = torch.Generator().manual_seed(seed)
    pos = torch.cat([shape_points(c, num_per_class, num_points, g) for c in classes])
    y = torch.arange(len(classes)).repeat_interleave(num_per_class)
    m = pos.shape[0]
    pos = pos - pos.mean(dim=1, keepdim=True)
    pos = pos * (lo + (hi - lo) * torch.rand(m, 1, 1, generator=g, dtype=torch.float64))
    rot = _random_rotations(m, rotation, g)
    if rot is not None:
        pos = pos @ rot.transpose(-1, -2)
    pos = pos + jitter * torch.randn(pos.shape, generator=g, dtype=torch.float64)
    if shuffle:
        perm = torch.randperm(m, generator=g)
        pos, y = pos[perm], y[perm]
    return pos.to(dtype), y


class SyntheticShapes(InMemoryList):
    """Procedural point-cloud classification set: 10 analytic shape classes, no files needed.

    Each graph has ``pos (num_points, 3)`` (float32 by default) and ``y (1,)`` int64, the class
    index into ``classes`` ([`SHAPE_CLASSES`][] by default: sphere, ellipsoid, cube, cylinder,
    cone, torus, pyramid, octahedron, tetrahedron, helix). Deterministic given ``seed``; the
    sample order is shuffled (``shuffle=True``) so any contiguous slice is class-balanced in
    expectation. See [`synthetic_shapes`][] for the random scale, jitter and rotation.

    >>> ds = SyntheticShapes(num_per_class=4, num_points=256, seed=0, rotation="SO3")
    >>> len(ds), ds[0].pos.shape, ds.num_classes
    (40, torch.Size([256, 3]), 10)
    """

    def __init__(self, num_per_class: int, num_points: int = 1024, seed: int = 0,
                 classes: Sequence[str] | None = None, scale_range: tuple[float, float] = (0.75, 1.25),
                 jitter: float = 0.01, rotation=None, shuffle: bool = True,
                 dtype: torch.dtype = torch.float32, transform: Callable | None = None,
                 pre_transform: Callable | None = None):
        self._start(transform, pre_transform)
        self.classes = tuple(SHAPE_CLASSES if classes is None else classes)
        pos, y = synthetic_shapes(num_per_class, num_points, seed, self.classes, scale_range, jitter,
                                  rotation, shuffle, dtype)
        self._set_stacked({"pos": pos, "y": y[:, None]})

    @property
    def num_classes(self) -> int:
        return len(self.classes)


# --------------------------------------------------------------------------- N-body

#: Defaults of the NRI / EGNN charged-particle simulation.
NBODY_DT = 1e-3
NBODY_BURN_IN_STEPS = 3000   # EGNN's input is frame 30 of a trajectory sampled every 100 steps
NBODY_HORIZON_STEPS = 1000   # ... and its target frame 40: 1000 steps = 1.0 time unit ahead
NBODY_VEL_NORM = 0.5
NBODY_LOC_STD = 1.0


def _pair_weights(charges: Tensor, strength: float) -> Tensor:
    """``k q_i q_j`` with a zero diagonal: ``(..., n, n)`` from charges ``(..., n, 1)``."""
    q = charges[..., 0]
    qq = strength * q[..., :, None] * q[..., None, :]
    n = q.shape[-1]
    return qq * (1 - torch.eye(n, dtype=qq.dtype, device=qq.device))


def _forces_coord_major(pt: Tensor, weights: Tensor, max_force: float | None) -> Tensor:
    """Forces in coordinate-major layout: ``pt (3, ..., n)`` -> ``(3, ..., n)``.

    Coordinate-major keeps the tiny ``n x n`` pair blocks contiguous, about 3x faster than
    ``(..., n, n, 3)`` for thousands of 5-particle systems.
    """
    diff = pt[..., :, None] - pt[..., None, :]                                # x_i - x_j, (3, ..., n, n)
    # The diagonal has weight 0; adding 1 there keeps r^-3 finite without a mask.
    r2 = diff[0] * diff[0] + diff[1] * diff[1] + diff[2] * diff[2]
    r2 = r2 + torch.eye(pt.shape[-1], dtype=pt.dtype, device=pt.device)
    r2 = r2.clamp_min(1e-24)
    force = ((weights * torch.rsqrt(r2) / r2) * diff).sum(dim=-1)
    if max_force is not None:
        norm = force.norm(dim=0)
        force = force * (max_force / norm.clamp_min(max_force))
    return force


def _check_charges(pos: Tensor, charges: Tensor) -> None:
    check_tensor(pos, "pos", shape=(..., None, 3))
    check_tensor(charges, "charges", dtype="any", finite=True)
    if charges.shape != pos.shape[:-1] + (1,):
        raise ValueError(f"charges must have shape {tuple(pos.shape[:-1]) + (1,)} (..., n, 1) to match pos "
                         f"{tuple(pos.shape)}, got {tuple(charges.shape)}")


def coulomb_forces(pos: Tensor, charges: Tensor, strength: float = 1.0, max_force: float | None = None) -> Tensor:
    """Pairwise Coulomb forces ``F_i = k sum_j q_i q_j (x_i - x_j) / |x_i - x_j|^3`` (like charges repel).

    Parameters
    ----------
    pos : Tensor of shape (..., n, 3)
        float positions.
    charges : Tensor of shape (..., n, 1)
        float charges.
    strength : float
        the constant ``k``.
    max_force : float | None
        if given, each particle's force is rescaled to at most this norm (a rotation-
        equivariant version of NRI's per-component clipping, which keeps close encounters stable).

    Returns
    -------
    Tensor
        ``(..., n, 3)`` forces, same dtype as ``pos``.
    """
    _check_charges(pos, charges)
    pt = pos.movedim(-1, 0)
    return _forces_coord_major(pt, _pair_weights(charges.to(pos.dtype), strength), max_force).movedim(0, -1)


def simulate_charged_particles(pos: Tensor, vel: Tensor, charges: Tensor, num_steps: int, dt: float = NBODY_DT,
                               strength: float = 1.0, max_force: float | None = 0.1 / NBODY_DT,
                               progress: bool = False) -> tuple[Tensor, Tensor]:
    """Integrate unit-mass charged particles with semi-implicit Euler (NRI's integrator).

    ``v <- v + dt F(x)``, then ``x <- x + dt v``, ``num_steps`` times. The map is
    E(3)-equivariant: ``simulate(R x + t, R v, q) = (R x' + t, R v')``.

    Parameters
    ----------
    pos, vel : Tensor of shape (..., n, 3)
        float.
    charges : Tensor of shape (..., n, 1)
        float.
    progress : bool
        show a tqdm bar over the steps.

    Returns
    -------
    tuple[Tensor, Tensor]
        ``(pos, vel)`` after ``num_steps * dt`` time units, each ``(..., n, 3)``.
    """
    check_tensor(pos, "pos", shape=(..., None, 3), finite=True)
    check_tensor(vel, "vel", shape=tuple(pos.shape), finite=True)
    _check_charges(pos, charges)
    num_steps = check_int(num_steps, "num_steps", minimum=0)
    dt = check_positive_float(dt, "dt")
    strength = check_float(strength, "strength")
    if max_force is not None:
        max_force = check_positive_float(max_force, "max_force")
    weights = _pair_weights(charges.to(pos.dtype), strength)
    steps = range(num_steps)
    if progress:
        from tqdm.auto import tqdm
        steps = tqdm(steps, desc="N-body", unit="step", leave=False)
    pt, vt = pos.movedim(-1, 0).contiguous(), vel.movedim(-1, 0).contiguous()
    for _ in steps:
        vt = vt + dt * _forces_coord_major(pt, weights, max_force)
        pt = pt + dt * vt
    return pt.movedim(0, -1).contiguous(), vt.movedim(0, -1).contiguous()


def nbody(num_samples: int, num_particles: int = 5, seed: int = 0, burn_in_steps: int = NBODY_BURN_IN_STEPS,
          horizon_steps: int = NBODY_HORIZON_STEPS, dt: float = NBODY_DT, loc_std: float = NBODY_LOC_STD,
          vel_norm: float = NBODY_VEL_NORM, strength: float = 1.0, progress: bool | None = None
          ) -> dict[str, Tensor]:
    """Simulate ``num_samples`` independent charged systems at once (float64).

    Initial state as in NRI: positions ``N(0, loc_std^2)``, velocities of norm ``vel_norm`` in
    random directions, charges ``+-1`` with equal probability. The system runs ``burn_in_steps``
    to reach the input state, then ``horizon_steps`` more to the target.

    Parameters
    ----------
    num_samples, num_particles : int
        systems to simulate and particles per system (``>= 2``).
    seed : int
        seed of the initial states and charges.
    burn_in_steps, horizon_steps : int
        integration steps before the input state and between input and target.
    dt, loc_std, vel_norm, strength : float
        time step, initial position spread, initial speed and Coulomb constant.
    progress : bool, optional
        show tqdm bars over the integration steps; ``None`` (default) shows them for large runs
        (more than ``1e7`` particle steps), ``False`` never.

    Returns
    -------
    dict[str, Tensor]
        dict with ``pos, vel, target_pos, target_vel`` ``(M, n, 3)`` and ``charges`` ``(M, n, 1)``, float64.
    """
    check_positive_int(num_samples, "num_samples")
    num_particles = check_int(num_particles, "num_particles", minimum=2)
    seed = check_int(seed, "seed", minimum=0)
    burn_in_steps = check_int(burn_in_steps, "burn_in_steps", minimum=0)
    horizon_steps = check_positive_int(horizon_steps, "horizon_steps")
    dt = check_positive_float(dt, "dt")
    loc_std = check_positive_float(loc_std, "loc_std")
    vel_norm = check_float(vel_norm, "vel_norm", minimum=0.0)
    g = torch.Generator().manual_seed(seed)
    shape = (num_samples, num_particles)
    pos = loc_std * torch.randn(*shape, 3, generator=g, dtype=torch.float64)
    vel = vel_norm * _unit_sphere(shape, g)
    charges = torch.randint(0, 2, (*shape, 1), generator=g).double() * 2 - 1
    max_force = 0.1 / dt
    if progress is None:
        progress = num_samples * num_particles * (burn_in_steps + horizon_steps) > 10**7
    else:
        check_bool(progress, "progress")
    pos, vel = simulate_charged_particles(pos, vel, charges, burn_in_steps, dt, strength, max_force, progress)
    tpos, tvel = simulate_charged_particles(pos, vel, charges, horizon_steps, dt, strength, max_force, progress)
    return {"pos": pos, "vel": vel, "charges": charges, "target_pos": tpos, "target_vel": tvel}


class NBody(InMemoryList):
    """Charged N-body dynamics (NRI / EGNN / GATr benchmark): predict positions ``horizon`` ahead.

    Fields per graph (float32 by default): ``pos (n, 3)`` input positions, ``vel (n, 3)``
    velocities, ``charges (n, 1)`` in ``{-1, +1}``, ``y`` and ``target_pos (n, 3)`` positions
    after ``horizon_steps * dt`` time units (default 1000 x 0.001 = 1.0, EGNN's frame 30 -> 40),
    ``target_vel (n, 3)``; with ``fully_connected=True`` also ``edge_index (2, n(n-1))`` and
    ``edge_attr (n(n-1), 1) = q_i q_j`` as in EGNN. Units are the simulation's dimensionless
    units (unit masses, Coulomb constant ``strength``). E(3)-equivariant: rotating, reflecting or
    translating the input moves the target the same way. Deterministic given ``seed``.

    >>> ds = NBody(num_samples=8, num_particles=5, seed=0, burn_in_steps=10, horizon_steps=10)
    >>> ds[0].pos.shape, ds[0].y.shape, ds.horizon
    (torch.Size([5, 3]), torch.Size([5, 3]), 0.01)
    """

    def __init__(self, num_samples: int, num_particles: int = 5, seed: int = 0,
                 burn_in_steps: int = NBODY_BURN_IN_STEPS, horizon_steps: int = NBODY_HORIZON_STEPS,
                 dt: float = NBODY_DT, loc_std: float = NBODY_LOC_STD, vel_norm: float = NBODY_VEL_NORM,
                 strength: float = 1.0, fully_connected: bool = True, dtype: torch.dtype = torch.float32,
                 transform: Callable | None = None, pre_transform: Callable | None = None):
        self._start(transform, pre_transform)
        check_float_dtype(dtype)
        sim = nbody(num_samples, num_particles, seed, burn_in_steps, horizon_steps, dt, loc_std, vel_norm, strength)
        self.dt, self.horizon_steps, self.num_particles = dt, horizon_steps, num_particles
        #: Prediction horizon in simulation time units.
        self.horizon = horizon_steps * dt
        fields = {k: v.to(dtype) for k, v in sim.items()}
        fields["y"] = fields["target_pos"]
        if fully_connected:
            i, j = torch.meshgrid(torch.arange(num_particles), torch.arange(num_particles), indexing="ij")
            keep = i != j
            ei = torch.stack([i[keep], j[keep]])
            fields["edge_index"] = ei.expand(num_samples, 2, ei.shape[1])
            q = fields["charges"]
            fields["edge_attr"] = q[:, ei[0]] * q[:, ei[1]]
        self._set_stacked(fields)
