"""Offline GFN2-xTB labels and Langevin MD trajectories, of molecules and of periodic boxes (optional extra ``xtb``).

Needs the PyPI package ``tblite`` (``pip install tblite``; set ``OMP_NUM_THREADS=1`` on small
machines). Energies and forces come from tblite's single points (Bannwarth et al. 2019,
GFN2-xTB), in free space or in a periodic cell (tblite's Ewald sums over the lattice); dynamics
use the BAOAB Langevin splitting (Leimkuhler & Matthews 2013): half kick, half drift,
Ornstein-Uhlenbeck velocity update, half drift, new forces, half kick. Trajectories are saved in
revised-MD17 format ([`write_trajectory`][]) or as extended XYZ with the cell
([`write_xyz_trajectory`][]). [`water_box`][] builds a starting structure of liquid water in a
periodic cube (no tblite needed).

Units: positions in Angstrom, energies kcal/mol, forces kcal/mol/Angstrom (MD17's), time fs,
masses amu, temperature K.
"""

from __future__ import annotations

import os

import numpy as np

from geomlin.datasets.elements import MAX_ATOMIC_NUMBER
from geomlin.datasets.io.xyz import XYZFrame, write_xyz
from geomlin.io_atomic import atomic_write
from geomlin.validation import check_float, check_int, check_positive_float, check_positive_int

BOHR_TO_ANGSTROM = 0.529177210903          # CODATA 2018
HARTREE_TO_KCALMOL = 627.5094740631        # CODATA 2018
BOLTZMANN_KCALMOL = 0.0019872042586        # k_B in kcal/(mol K)
ACCEL_UNIT = 4.184e-4                      # (kcal/mol/Angstrom) / amu -> Angstrom / fs^2
#: Standard atomic weights (amu) of the elements typical in organic molecules.
ATOMIC_MASSES = {1: 1.008, 5: 10.81, 6: 12.011, 7: 14.007, 8: 15.999, 9: 18.998, 14: 28.085, 15: 30.974,
                 16: 32.06, 17: 35.45, 35: 79.904, 53: 126.90}
#: Molecules of liquid water per cubic Angstrom at 300 K and 1 bar (0.997 g/cm^3: about 0.1 atoms per
#: cubic Angstrom).
WATER_DENSITY = 0.03334
#: Geometry of one water molecule (Angstrom; O first, then the two H): the experimental gas-phase
#: structure, O-H 0.9578 Angstrom and H-O-H 104.48 degrees.
WATER = np.array([[0.0, 0.0, 0.0], [0.7572, 0.5865, 0.0], [-0.7572, 0.5865, 0.0]])
#: Random rotations among which [`water_box`][] picks each molecule's.
WATER_ROTATIONS = 64


def _tblite():
    try:
        from tblite.interface import Calculator
    except ImportError as err:
        raise ImportError("geomlin.datasets.xtb needs the optional extra 'xtb': pip install tblite") from err
    return Calculator


def _check_structure(z, pos) -> tuple[np.ndarray, np.ndarray]:
    z, pos = np.asarray(z), np.asarray(pos)
    if z.dtype.kind not in "iu":
        raise TypeError(f"z must hold integer atomic numbers, got dtype {z.dtype}")
    if pos.dtype.kind not in "iuf":
        raise TypeError(f"pos must be a real array, got dtype {pos.dtype}")
    z, pos = z.astype(np.int64), pos.astype(np.float64)
    if z.ndim != 1 or z.shape[0] == 0 or pos.shape != (z.shape[0], 3):
        raise ValueError(f"need z (N,) with N >= 1 and pos (N, 3), got {z.shape} and {pos.shape}")
    if z.min() < 1 or z.max() > MAX_ATOMIC_NUMBER:
        raise ValueError(f"atomic numbers must be in 1..{MAX_ATOMIC_NUMBER}, got {z.tolist()}")
    if not np.isfinite(pos).all():
        raise ValueError("pos contains NaN or infinite coordinates")
    return z, pos


def _check_cell(cell, pbc) -> tuple[np.ndarray | None, np.ndarray | None]:
    """``cell (3, 3)`` finite lattice vectors (rows, Angstrom) and ``pbc (3,)`` bool (default all True), or None."""
    if cell is None:
        if pbc is not None:
            raise ValueError("pbc needs the cell it makes periodic: pass cell (3, 3) as well")
        return None, None
    cell = np.asarray(cell, dtype=np.float64)
    if cell.shape != (3, 3) or not np.isfinite(cell).all():
        raise ValueError(f"cell must be 3 finite lattice vectors as rows (3, 3), got shape {cell.shape}")
    pbc = np.ones(3, dtype=bool) if pbc is None else np.asarray(pbc)
    if pbc.shape != (3,) or pbc.dtype != bool:
        raise ValueError(f"pbc must be three bools, got {pbc!r}")
    if not abs(np.linalg.det(cell)) > 1e-6:
        raise ValueError(f"cell must have three independent lattice vectors, got {cell.tolist()}")
    return cell, pbc


def xtb_energy_forces(z, pos, method: str = "GFN2-xTB", charge: float = 0.0, uhf: int = 0, cell=None,
                      pbc=None) -> tuple[float, np.ndarray]:
    """Energy (kcal/mol) and forces ``(N, 3)`` (kcal/mol/Angstrom) of one structure, ``pos (N, 3)`` in Angstrom.

    With ``cell (3, 3)`` (lattice vectors as rows, Angstrom) the structure is periodic along the axes
    ``pbc (3,)`` marks (default all three); atoms may lie outside the cell.
    """
    calc_cls = _tblite()
    z, pos = _check_structure(z, pos)
    cell, pbc = _check_cell(cell, pbc)
    lattice = {} if cell is None else {"lattice": cell / BOHR_TO_ANGSTROM, "periodic": pbc}
    calc = calc_cls(method, z, pos / BOHR_TO_ANGSTROM, charge=charge, uhf=uhf, **lattice)
    calc.set("verbosity", 0)
    res = calc.singlepoint()
    energy = float(res.get("energy")) * HARTREE_TO_KCALMOL
    forces = -np.asarray(res.get("gradient")) * HARTREE_TO_KCALMOL / BOHR_TO_ANGSTROM
    return energy, forces


def langevin_trajectory(z, pos, num_frames: int, temperature: float = 500.0, dt_fs: float = 0.5,
                        friction_per_fs: float = 0.01, stride: int = 10, equilibration_steps: int = 1000,
                        seed: int = 0, method: str = "GFN2-xTB", charge: float = 0.0, uhf: int = 0,
                        masses=None, progress: bool = True, cell=None, pbc=None) -> dict[str, np.ndarray]:
    """Langevin NVT dynamics on the xTB surface; every ``stride``-th step after equilibration is a frame.

    Returns revised-MD17 arrays: ``nuclear_charges (N,)``, ``coords (M, N, 3)`` Angstrom,
    ``energies (M,)`` kcal/mol, ``forces (M, N, 3)`` kcal/mol/Angstrom, plus string ``method``,
    ``units`` and ``md`` describing the run, and with ``cell (3, 3)`` (a periodic box, see
    [`xtb_energy_forces`][]) also ``cell (3, 3)`` and ``pbc (3,)``; the coordinates are not wrapped
    into the cell. Deterministic given ``seed``.
    """
    z, x = _check_structure(z, pos)
    cell, pbc = _check_cell(cell, pbc)
    num_frames = check_positive_int(num_frames, "num_frames")
    stride = check_positive_int(stride, "stride")
    equilibration_steps = check_int(equilibration_steps, "equilibration_steps", minimum=0)
    dt_fs = check_positive_float(dt_fs, "dt_fs")
    temperature = check_float(temperature, "temperature", minimum=0.0)
    friction_per_fs = check_float(friction_per_fs, "friction_per_fs", minimum=0.0)
    if masses is None:
        missing = sorted({int(a) for a in z if int(a) not in ATOMIC_MASSES})
        if missing:
            raise ValueError(f"no built-in atomic mass for Z={missing}; pass masses=(N,) in amu")
        masses = np.array([ATOMIC_MASSES[int(a)] for a in z])
    m = np.asarray(masses, dtype=np.float64)
    if m.shape != z.shape or not np.isfinite(m).all() or (m <= 0).any():
        raise ValueError(f"masses must be {z.shape[0]} positive finite numbers (amu), got {masses!r}")
    m = m[:, None]
    rng = np.random.default_rng(seed)
    kt = BOLTZMANN_KCALMOL * temperature
    sigma = np.sqrt(kt * ACCEL_UNIT / m)                     # thermal velocity scale, Angstrom/fs
    c1 = np.exp(-friction_per_fs * dt_fs)
    c2 = np.sqrt(1.0 - c1 * c1)
    v = sigma * rng.standard_normal(x.shape)
    v -= (m * v).sum(0) / m.sum()                            # no centre-of-mass drift
    e, f = xtb_energy_forces(z, x, method, charge, uhf, cell, pbc)
    total = equilibration_steps + num_frames * stride
    coords, energies, forces = [], [], []
    steps = range(1, total + 1)
    if progress:
        from tqdm.auto import tqdm
        steps = tqdm(steps, desc="xTB Langevin MD", unit="step")
    for step in steps:
        v += 0.5 * dt_fs * ACCEL_UNIT * f / m
        x = x + 0.5 * dt_fs * v
        v = c1 * v + c2 * sigma * rng.standard_normal(x.shape)
        x = x + 0.5 * dt_fs * v
        e, f = xtb_energy_forces(z, x, method, charge, uhf, cell, pbc)
        v += 0.5 * dt_fs * ACCEL_UNIT * f / m
        if step > equilibration_steps and (step - equilibration_steps) % stride == 0:
            coords.append(x.copy())
            energies.append(e)
            forces.append(f.copy())
    out = {
        "nuclear_charges": z, "coords": np.stack(coords), "energies": np.asarray(energies),
        "forces": np.stack(forces), "method": np.array(f"{method} via tblite (geomlin.datasets.xtb)"),
        "units": np.array("coords: Angstrom; energies: kcal/mol; forces: kcal/mol/Angstrom"),
        "md": np.array(f"Langevin BAOAB T={temperature}K dt={dt_fs}fs friction={friction_per_fs}/fs "
                       f"equil={equilibration_steps} steps stride={stride} seed={seed}"),
    }
    if cell is not None:
        out["cell"], out["pbc"] = cell, pbc
    return out


def write_trajectory(path: str | os.PathLike, trajectory: dict[str, np.ndarray]) -> None:
    """Save a trajectory dict as a revised-MD17 ``.npz`` (atomically, [`geomlin.io_atomic.atomic_write`][])."""
    atomic_write(path, lambda fh: np.savez(fh, **trajectory))


def write_xyz_trajectory(path: str | os.PathLike, trajectory: dict[str, np.ndarray]) -> None:
    """Save a trajectory dict of [`langevin_trajectory`][] as extended XYZ with its cell, in its units
    (kcal/mol, kcal/mol/Angstrom), atomically ([`geomlin.datasets.io.xyz.write_xyz`][])."""
    cell, pbc = trajectory.get("cell"), trajectory.get("pbc")
    write_xyz(path, [XYZFrame(trajectory["nuclear_charges"], x, float(e), f, {}, cell, pbc)
                     for x, e, f in zip(trajectory["coords"], trajectory["energies"], trajectory["forces"])])


def water_box(num_molecules: int, density: float = WATER_DENSITY, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A cubic periodic box of liquid water: rigid molecules of [`WATER`][] on a cubic grid, turned apart.

    The box holds ``num_molecules`` at ``density`` (molecules per cubic Angstrom; default liquid water,
    about 0.1 atoms per cubic Angstrom); the molecules sit on the first sites of the smallest cubic grid
    that holds them (site spacing about 3.1 Angstrom at the default density, close to the O-O distance
    of the liquid). Each molecule takes the best of [`WATER_ROTATIONS`][] random rotations (QR of
    Gaussian matrices): the one whose atoms stay farthest from those of the molecules already placed
    on the 26 neighbouring sites (across the periodic faces too; the sites are placed in the colour
    classes of a proper colouring of the periodic grid, each class at once), so no two atoms of
    different molecules start closer than about 1.6 Angstrom. A starting structure for MD (not
    relaxed) and the geometry of the scaling benchmarks; linear in the number of molecules.

    Returns
    -------
    z : ndarray of shape (3 M,)
        int64 atomic numbers, ``O H H`` per molecule.
    pos : ndarray of shape (3 M, 3)
        float64 positions, Angstrom (oxygens inside the cell).
    cell : ndarray of shape (3, 3)
        the cube's lattice vectors as rows, ``L I`` with ``L = (M / density)^(1/3)``.
    """
    m = check_positive_int(num_molecules, "num_molecules")
    density = check_positive_float(density, "density")
    side = int(np.ceil(m ** (1 / 3) - 1e-9))
    length = (m / density) ** (1 / 3)
    grid = np.stack(np.meshgrid(*[np.arange(side)] * 3, indexing="ij"), -1).reshape(-1, 3)
    centres = (grid[:m] + 0.5) * (length / side)
    rng = np.random.default_rng(seed)
    q, r = np.linalg.qr(rng.standard_normal((m, WATER_ROTATIONS, 3, 3)))
    q = q * np.sign(np.diagonal(r, axis1=-2, axis2=-1))[..., None, :]        # Haar-uniform orthogonal
    q[np.linalg.det(q) < 0, :, 0] *= -1                                      # rotations, not reflections
    options = np.einsum("mrij,aj->mrai", q, WATER)                           # (M, R, 3, 3) atom offsets
    spacing, index = length / side, np.array([side * side, side, 1])
    placed = np.full((side ** 3, 3, 3), np.nan)                              # atoms per site, NaN: empty
    steps = np.stack(np.meshgrid(*[np.arange(-1, 2)] * 3, indexing="ij"), -1).reshape(-1, 3)
    steps = steps[np.abs(steps).sum(1) > 0]                                  # the 26 neighbouring sites
    # sites of one colour are never neighbours (a proper colouring of the periodic grid, per axis 2 or
    # 3 colours), so each colour's molecules are turned at once, given the colours before
    colour = np.where((side % 2 == 1) & (grid[:m] == side - 1) & (side > 1), 2, grid[:m] % 2) @ np.array([9, 3, 1])
    for c in np.unique(colour):
        for sites in np.array_split(np.flatnonzero(colour == c), max(1, int(np.sum(colour == c)) // 256)):
            near = grid[sites][:, None, :] + steps                           # (S, 26, 3)
            wrapped = near % side                                            # their periodic images
            others = (placed[wrapped @ index] + ((near - wrapped) * spacing)[:, :, None, :]).reshape(len(sites), -1, 3)
            empty = np.isnan(others[..., 0])                                 # (S, 78): sites not placed yet
            others = np.where(empty[..., None], 0.0, others)
            mine = centres[sites][:, None, None, :] + options[sites]         # (S, R, 3, 3)
            flat = mine.reshape(len(sites), -1, 3)
            d2 = ((flat ** 2).sum(-1)[:, :, None] + (others ** 2).sum(-1)[:, None, :]
                  - 2 * flat @ others.transpose(0, 2, 1))                    # (S, 3 R, 78) squared distances
            d2 = np.where(empty[:, None, :], np.inf, d2)
            gap = d2.reshape(len(sites), WATER_ROTATIONS, -1).min(axis=2)    # (S, R)
            placed[grid[sites] @ index] = mine[np.arange(len(sites)), gap.argmax(axis=1)]
    pos = placed[grid[:m] @ index]
    return np.tile([8, 1, 1], m).astype(np.int64), pos.reshape(-1, 3), length * np.eye(3)
