"""Writers of QM9 in its three source layouts (MoleculeNet SDF + CSV, dsgdb9nsd XYZ, qm9pack CSV).

An independent oracle for the readers: molecules are held as *text* (the numbers exactly as a
file writes them), read from the bundled MoleculeNet sample with plain string slicing (not
geomlin's readers) and written back in each layout. The same text in every layout means the
same float64 values, so datasets read from the three must be identical.

``python -m tests.datasets.qm9_formats`` rewrites the bundled samples ``datasets/qm9/xyz`` and
``datasets/qm9/qm9pack`` from ``datasets/qm9/gdb9.sdf`` + ``gdb9.sdf.csv``, with the Mulliken
charges, frequencies, SMILES and InChI of the installed qm9pack (positions and properties stay
MoleculeNet's, so the three bundled samples hold the same numbers).
"""

from __future__ import annotations

import csv
import io
import random
import tarfile
from dataclasses import dataclass, field, replace
from decimal import Decimal
from pathlib import Path

import numpy as np

from geomlin.datasets.elements import ATOMIC_NUMBERS
from geomlin.datasets.qm9 import ATOM_REFERENCE_HARTREE, MOLECULENET_HARTREE_TO_KCALMOL

#: The 15 properties of an XYZ file's line 2 and the MoleculeNet CSV column of each.
XYZ_PROPERTIES = ("A", "B", "C", "mu", "alpha", "homo", "lumo", "gap", "r2", "zpve", "u0", "u298", "h298", "g298",
                  "cv")
ATOMIZATION = ("u0_atom", "u298_atom", "h298_atom", "g298_atom")
CSV_HEADER = ("mol_id", *XYZ_PROPERTIES, *ATOMIZATION)
QM9PACK_HEADER = ("XYZ_file,Index,SMILES,InChi,N_atoms,Stoichiometry,Elements,XYZ_Ang,Mulliken_pop,"
                  "Harmonic_Freq_cmi,RotA_GHz,RotB_GHz,RotC_GHz,Dipole_debye,Polarizability_bohr3,HOMO_au,LUMO_au,"
                  "HOMO_LUMO_gap_au,R2_bohr2,ZPVE_au,InternalEnergy_0K_au,InternalEnergy_298K_au,Enthalphy_298K_au,"
                  "GibbsFreeEnergy_298K_au,Heatcapacity_Cv_cal_mol_K")
STOICHIOMETRY = ("H", "C", "N", "O", "F")
#: Coordinates below this magnitude are written with exponents (XYZ: Mathematica's ``*^``, qm9pack: ``E``), as
#: the originals do for the smallest ones.
MATHEMATICA_BELOW = Decimal("0.01")


@dataclass
class Molecule:
    """One QM9 molecule as text: ``coords`` and ``properties`` are the strings a file holds."""

    index: int
    symbols: list[str]
    coords: list[tuple[str, str, str]]
    properties: list[str]                 # XYZ_PROPERTIES, file units
    atomization: list[str]                # ATOMIZATION (kcal/mol), MoleculeNet only
    bonds: list[tuple[int, int, int]] = field(default_factory=list)   # 1-based atoms, V2000 type
    charges: list[str] | None = None
    frequencies: list[str] | None = None
    smiles: str = "C"
    inchi: str = "InChI=1S/CH4/h1H4"

    @property
    def values(self) -> np.ndarray:
        return np.array([[float(c) for c in xyz] for xyz in self.coords])


def read_moleculenet_text(folder: Path) -> list[Molecule]:
    """Molecules of ``gdb9.sdf`` + ``gdb9.sdf.csv`` by string slicing (V2000 columns, CSV fields)."""
    rows = list(csv.DictReader(io.StringIO((folder / "gdb9.sdf.csv").read_text())))
    out = []
    for block, row in zip((folder / "gdb9.sdf").read_text().split("$$$$\n"), rows):
        lines = block.splitlines()
        na, nb = int(lines[3][:3]), int(lines[3][3:6])
        atoms = lines[4:4 + na]
        coords = [tuple(line[10 * c:10 * (c + 1)].strip() for c in range(3)) for line in atoms]
        bonds = [(int(b[:3]), int(b[3:6]), int(b[6:9])) for b in lines[4 + na:4 + na + nb]]
        name = lines[0].strip()
        assert name == row["mol_id"], (name, row["mol_id"])
        out.append(Molecule(int(name.split("_")[1]), [a[31:34].strip() for a in atoms], coords,
                            [row[c] for c in XYZ_PROPERTIES], [row[c] for c in ATOMIZATION], bonds))
    return out


def write_moleculenet(folder: Path, molecules: list[Molecule]) -> None:
    """``gdb9.sdf`` (V2000, 4-decimal columns) and ``gdb9.sdf.csv`` as in MoleculeNet's qm9.zip."""
    folder.mkdir(parents=True, exist_ok=True)
    sdf = []
    for m in molecules:
        counts = f"{len(m.symbols):3d}{len(m.bonds):3d}  0     0  0  0  0  0  0999 V2000"
        sdf += [f"gdb_{m.index}", "  -OEChem-03231823243D", "", counts]
        for sym, (x, y, z) in zip(m.symbols, m.coords):
            sdf.append(f"{float(x):10.4f}{float(y):10.4f}{float(z):10.4f} {sym:<3} 0  0  0  0  0  0  0  0  0  0  0  0")
        sdf += [f"{i:3d}{j:3d}{t:3d}  0  0  0  0" for i, j, t in m.bonds]
        sdf += ["M  END", "$$$$"]
    (folder / "gdb9.sdf").write_text("\n".join(sdf) + "\n")
    rows = [",".join(CSV_HEADER)] + [",".join([f"gdb_{m.index}", *m.properties, *m.atomization]) for m in molecules]
    (folder / "gdb9.sdf.csv").write_text("\n".join(rows) + "\n")


def mathematica(text: str) -> str:
    """``text`` in Mathematica's exponent notation (``-0.0021`` -> ``-2.1*^-3``), the same number."""
    return f"{Decimal(text):e}".replace("e", "*^")


def scientific(text: str) -> str:
    """``text`` in qm9pack's exponent notation for small numbers (``0.0022`` -> ``2.2E-3``)."""
    return f"{Decimal(text):E}"


def xyz_text(m: Molecule) -> str:
    """One ``dsgdb9nsd_NNNNNN.xyz`` file: count, ``gdb`` line, atoms, frequencies, SMILES, InChI."""
    charges = m.charges or ["0.0"] * len(m.symbols)
    lines = [str(len(m.symbols)), f"gdb {m.index}\t" + "\t".join(m.properties) + "\t"]
    for sym, xyz, q in zip(m.symbols, m.coords, charges):
        cols = [mathematica(c) if 0 < abs(Decimal(c)) < MATHEMATICA_BELOW else c for c in xyz]
        lines.append(f"{sym}\t" + "\t".join(f"{c:>13}" for c in cols) + f"\t{q:>10}")
    lines.append("\t".join(m.frequencies or ["0.0"]))
    lines.append(f"{m.smiles}\t{m.smiles}")
    lines.append(f"{m.inchi}\t{m.inchi}")
    return "\n".join(lines) + "\n"


def xyz_name(m: Molecule) -> str:
    return f"dsgdb9nsd_{m.index:06d}.xyz"


def write_xyz_folder(folder: Path, molecules: list[Molecule]) -> None:
    """One ``dsgdb9nsd_NNNNNN.xyz`` per molecule in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for m in molecules:
        (folder / xyz_name(m)).write_text(xyz_text(m))


def write_xyz_archive(path: Path, molecules: list[Molecule], shuffle: int | None = None,
                      compression: str = "bz2") -> None:
    """``dsgdb9nsd.xyz.tar.bz2``: the XYZ files as members (in a seeded random order if ``shuffle``).

    Members carry fixed metadata (mtime 0, root owner) so the archive's bytes depend on the
    molecules alone. ``compression=""`` writes a plain tar.
    """
    order = list(molecules)
    if shuffle is not None:
        random.Random(shuffle).shuffle(order)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, f"w:{compression}", format=tarfile.GNU_FORMAT) as tar:
        for m in order:
            data = xyz_text(m).encode()
            info = tarfile.TarInfo(xyz_name(m))
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))


def qm9pack_row(m: Molecule) -> str:
    """One row of qm9pack's ``qm9_part<k>.csv`` (its quoting: text fields in double quotes)."""
    counts = [m.symbols.count(s) for s in STOICHIOMETRY]
    xyz = ",".join("[" + ",".join(scientific(v) if 0 < abs(Decimal(v)) < MATHEMATICA_BELOW else v for v in c) + "]"
                   for c in m.coords)
    fields = [f'"{xyz_name(m)}"', str(m.index), f'"{m.smiles}"', f'"{m.inchi}"', str(len(m.symbols)),
              '"[' + ",".join(map(str, counts)) + ']"', '"[' + ",".join(f"'{s}'" for s in m.symbols) + ']"',
              f'"[{xyz}]"', '"[' + ",".join(m.charges or ["0."] * len(m.symbols)) + ']"',
              '"[' + ",".join(m.frequencies or ["0."]) + ']"', *m.properties]
    return ",".join(fields)


def write_qm9pack(folder: Path, molecules: list[Molecule], parts: int = 1) -> list[Path]:
    """``qm9_part1.csv`` ... ``qm9_part<parts>.csv`` with the molecules split evenly, in order."""
    folder.mkdir(parents=True, exist_ok=True)
    chunks = np.array_split(np.arange(len(molecules)), parts)
    paths = []
    for k, chunk in enumerate(chunks, start=1):
        path = folder / f"qm9_part{k}.csv"
        path.write_text("\n".join([QM9PACK_HEADER] + [qm9pack_row(molecules[i]) for i in chunk]) + "\n")
        paths.append(path)
    return paths


def write_uncharacterized(path: Path, indices: list[int]) -> None:
    """``uncharacterized.txt`` in the original distribution's layout (text, a table, a rule at the end)."""
    rule = "=" * 150
    lines = ["", "", "", "",
             "List of molecules among the 133885 GDB9 molecules for which the Corina generated Cartesian coordinates",
             "and the B3LYP/6-31G(2df,p) equilibrium geometry lead to different SMILES and InChI strings. Given are",
             "the indices of these molecules in the database, three SMILES, and the L1 norm of the difference of",
             "the Coulomb matrices (D_IJ in au).", "", rule,
             "#   Index      GDB17 SMILES      SMILES for B3LYP XYZ      SMILES for Corina generated XYZ      D_IJ",
             rule]
    lines += [f"{i:8d}      C      C      C      1.000000" for i in indices]
    lines.append(rule)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def read_qm9pack_text(paths: list[Path], limit: int | None = None, moleculenet: bool = False) -> list[Molecule]:
    """Molecules of qm9pack's tables with Python's csv module (not geomlin's reader), as text.

    With ``moleculenet=True`` also ``atomization``, MoleculeNet's ``(E - sum of atom references) *
    627.509`` in kcal/mol, and ``bonds`` from :func:`distance_bonds`, so the molecules can be
    written as MoleculeNet's SDF + CSV (for timing PyG's processing; the bonds are not QM9's own).
    """
    csv.field_size_limit(1 << 30)
    out = []
    for path in paths:
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                symbols = [s.strip("'") for s in row["Elements"].strip("[]").split(",")]
                coords = [tuple(c.split(",")) for c in row["XYZ_Ang"][2:-2].split("],[")]
                props = [row[c] for c in list(row)[10:]]
                atomization, bonds = [], []
                if moleculenet:
                    z = [ATOMIC_NUMBERS[s] for s in symbols]
                    atomization = [repr((float(e) - sum(ATOM_REFERENCE_HARTREE[k][a] for a in z))
                                        * MOLECULENET_HARTREE_TO_KCALMOL)
                                   for e, k in zip(props[10:14], ("U0", "U", "H", "G"))]
                    bonds = distance_bonds(z, np.array([[float(v) for v in c] for c in coords]))
                out.append(Molecule(int(row["Index"]), symbols, coords, props, atomization,
                                    bonds, row["Mulliken_pop"].strip("[]").split(","),
                                    row["Harmonic_Freq_cmi"].strip("[]").split(","), row["SMILES"], row["InChi"]))
                if limit is not None and len(out) >= limit:
                    return out
    return out


#: Covalent radii (Angstrom) of H, C, N, O, F and the tolerance of :func:`distance_bonds`.
COVALENT_RADIUS = {1: 0.31, 6: 0.76, 7: 0.71, 8: 0.66, 9: 0.57}
BOND_TOLERANCE = 1.15


def distance_bonds(z: list[int], pos: np.ndarray) -> list[tuple[int, int, int]]:
    """Single bonds ``(i, j, 1)`` (1-based) between atoms closer than 1.15 x their summed covalent radii."""
    r = np.array([COVALENT_RADIUS[a] for a in z])
    d = np.linalg.norm(pos[:, None] - pos[None], axis=-1)
    i, j = np.nonzero(np.triu(d < BOND_TOLERANCE * (r[:, None] + r[None]), k=1))
    return [(int(a) + 1, int(b) + 1, 1) for a, b in zip(i, j)]


def with_qm9pack_extras(molecules: list[Molecule], data_folder: Path) -> list[Molecule]:
    """The molecules with the charges, frequencies, SMILES and InChI of qm9pack's rows of the same index.

    Checks that qm9pack lists the same elements in the same order and positions that round to the
    SDF's four decimals.
    """
    wanted = {m.index: m for m in molecules}
    extras = {}
    csv.field_size_limit(1 << 30)
    with open(data_folder / "qm9_part1.csv", newline="") as f:
        for row in csv.DictReader(f):
            i = int(row["Index"])
            if i in wanted:
                extras[i] = row
            if len(extras) == len(wanted):
                break
    out = []
    for m in molecules:
        row = extras[m.index]
        symbols = [s.strip("'") for s in row["Elements"].strip("[]").split(",")]
        pos = np.array([[float(v) for v in c.split(",")] for c in row["XYZ_Ang"][2:-2].split("],[")])
        assert symbols == m.symbols and np.abs(pos - m.values).max() <= 5.0001e-5, m.index
        out.append(replace(m, charges=row["Mulliken_pop"].strip("[]").split(","),
                           frequencies=row["Harmonic_Freq_cmi"].strip("[]").split(","),
                           smiles=row["SMILES"], inchi=row["InChi"]))
    return out


def require_qm9pack() -> Path:
    """The installed qm9pack's data folder; skip the test without it (fail under ``CI=true``: ``dev`` has it).

    Not :func:`tests.oracles.require`: importing qm9pack needs setuptools' ``pkg_resources``,
    which geomlin does not (it reads the package's files without importing it).
    """
    import pytest

    from geomlin.datasets.io.qm9pack import installed_data_folder
    from tests.oracles import in_ci

    folder = installed_data_folder()
    if folder is None:
        message = "qm9pack is missing (pip install -e '.[dev]' or pip install qm9pack)"
        if in_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return folder


def make_bundled_samples(sample: Path, out: Path | None = None) -> None:
    """Write ``out/xyz/dsgdb9nsd.xyz.tar.bz2`` and ``out/qm9pack/qm9_part1.csv`` from the sample's SDF + CSV.

    ``out`` defaults to ``sample`` (rewriting the bundled files).
    """
    from geomlin.datasets.io.qm9pack import installed_data_folder

    data = installed_data_folder()
    if data is None:
        raise SystemExit("qm9pack is not installed (pip install qm9pack): its charges, frequencies, SMILES and "
                         "InChI fill the samples")
    out = sample if out is None else out
    molecules = with_qm9pack_extras(read_moleculenet_text(sample), data)
    write_xyz_archive(out / "xyz" / "dsgdb9nsd.xyz.tar.bz2", molecules)
    write_qm9pack(out / "qm9pack", molecules)


if __name__ == "__main__":
    make_bundled_samples(Path(__file__).resolve().parents[2] / "datasets" / "qm9")
