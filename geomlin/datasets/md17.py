"""MD17-style trajectories from ``.npz`` files: ``NPZTrajectory`` (one file) and ``MD17`` (by molecule name).

Two key conventions are accepted:

* original MD17 (Chmiela et al. 2017, sGDML): ``z (N,)``, ``R (M, N, 3)`` Angstrom,
  ``E (M, 1)`` kcal/mol, ``F (M, N, 3)`` kcal/mol/Angstrom;
* revised MD17 (Christensen & von Lilienfeld 2020): ``nuclear_charges (N,)``,
  ``coords (M, N, 3)``, ``energies (M,)``, ``forces (M, N, 3)``, same units.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor

from geomlin.datasets.base import InMemoryList, check_float_dtype
from geomlin.datasets.elements import MAX_ATOMIC_NUMBER
from geomlin.validation import FileFormatError, check_bool, check_choice, check_file, check_int

#: field -> (original MD17 key, revised MD17 key)
NPZ_KEYS = {"z": ("z", "nuclear_charges"), "pos": ("R", "coords"), "energy": ("E", "energies"),
            "force": ("F", "forces")}
MD17_UNITS = {"pos": "Angstrom", "energy": "kcal/mol", "force": "kcal/mol/Angstrom"}
SPLIT_COUNT = 5
RMD17_SOURCE = "revised MD17, https://figshare.com/articles/dataset/Revised_MD17_dataset_rMD17_/12672038"
MD17_SOURCE = "original MD17, http://www.sgdml.org/#datasets (files md17_<molecule>.npz)"
_RMD17_URL = "https://figshare.com/ndownloader/files/23950376"
_MD17_URL = "http://quantum-machine.org/gdml/data/npz/md17_{}.npz"


def read_npz_trajectory(path: str | os.PathLike, require_forces: bool = True) -> dict[str, np.ndarray]:
    """Arrays ``z (N,)`` int64, ``pos (M, N, 3)``, ``energy (M,)``, ``force (M, N, 3)`` float64 from an MD17 npz.

    With ``require_forces=False`` a file without a forces array is read too (energies only), and
    ``force`` is then ``None``.

    Raises FileNotFoundError for a missing file; [`FileFormatError`][]
    (a ValueError) naming the file for an unreadable archive, missing keys (listing both
    conventions and the keys found), non-numeric arrays, atomic numbers outside 1..118, no frames
    or no atoms, inconsistent shapes or non-finite values (naming the first bad frame).
    """
    path = os.fspath(check_file(path, "path"))
    check_bool(require_forces, "require_forces")
    try:
        archive = np.load(path, allow_pickle=False)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as err:
        raise FileFormatError(path, f"not a readable .npz archive ({err})") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise FileFormatError(path, f"expected an .npz archive of named arrays, got a single "
                              f"{type(archive).__name__}")
    try:
        with archive as f:
            files = set(f.files)
            out = {}
            for field, keys in NPZ_KEYS.items():
                key = next((k for k in keys if k in files), None)
                if key is None and field == "force" and not require_forces:
                    out[field] = None
                    continue
                if key is None:
                    conv = "; ".join(f"{fld}: {' or '.join(ks)}" for fld, ks in NPZ_KEYS.items())
                    raise FileFormatError(path, f"missing the {field!r} array (key {' or '.join(keys)}); an MD17 "
                                          f"file needs {conv}; found keys {sorted(files)}")
                out[field] = f[key]
            info = {k: str(f[k]) for k in ("units", "method", "smiles") if k in files and f[k].dtype.kind == "U"}
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as err:
        if isinstance(err, FileFormatError):
            raise
        raise FileFormatError(path, f"not a readable .npz archive ({err})") from None
    z, pos, energy, force = out["z"], out["pos"], out["energy"], out["force"]
    if z.ndim != 1 or z.dtype.kind not in "iu":
        raise FileFormatError(path, f"atomic numbers must be an integer (N,) array, got {z.dtype} {z.shape}")
    n = z.shape[0]
    if n == 0:
        raise FileFormatError(path, "the trajectory has no atoms (z has shape (0,))")
    if z.min() < 1 or z.max() > MAX_ATOMIC_NUMBER:
        bad = int(np.flatnonzero((z < 1) | (z > MAX_ATOMIC_NUMBER))[0])
        raise FileFormatError(path, f"atomic numbers must be in 1..{MAX_ATOMIC_NUMBER}, got z[{bad}] = {int(z[bad])}")
    arrays = (("positions", pos), ("energies", energy)) + ((("forces", force),) if force is not None else ())
    for name, arr in arrays:
        if arr.dtype.kind not in "iuf":
            raise FileFormatError(path, f"{name} must be a real numeric array, got dtype {arr.dtype}")
    if pos.ndim != 3 or pos.shape[1:] != (n, 3):
        raise FileFormatError(path, f"positions must be (M, {n}, 3) for {n} atoms, got {pos.shape}")
    m = pos.shape[0]
    if m == 0:
        raise FileFormatError(path, "the trajectory has no frames (positions have shape (0, N, 3))")
    energy = energy.reshape(-1) if energy.ndim == 2 and energy.shape[1] == 1 else energy
    if energy.shape != (m,):
        raise FileFormatError(path, f"energies must be (M,) or (M, 1) with M = {m} frames, got {out['energy'].shape}")
    if force is not None and force.shape != pos.shape:
        raise FileFormatError(path, f"forces must have the positions' shape {pos.shape}, got {force.shape}")
    pos, energy = np.asarray(pos, dtype=np.float64), np.asarray(energy, dtype=np.float64)
    force = None if force is None else np.asarray(force, dtype=np.float64)
    arrays = (("positions", pos), ("energies", energy)) + ((("forces", force),) if force is not None else ())
    for name, arr in arrays:
        finite = np.isfinite(arr.reshape(m, -1)).all(axis=1)
        if not finite.all():
            raise FileFormatError(path, f"frame {int(np.flatnonzero(~finite)[0])} has non-finite (NaN or infinite) "
                                  f"{name}")
    return {"z": z.astype(np.int64), "pos": pos, "energy": energy, "force": force, "info": info}


class NPZTrajectory(InMemoryList):
    """One MD17-style ``.npz`` trajectory as a dataset of frames.

    Fields per frame: ``z (N,)`` int64, ``pos (N, 3)`` Angstrom, ``energy (1,)`` kcal/mol,
    ``force (N, 3)`` kcal/mol/Angstrom (MD17 units; ``units`` reports the file's own ``units``
    string when it has one). Stored in ``dtype`` (float64 default: values equal the file's).
    """

    def __init__(self, path: str | os.PathLike, transform: Callable | None = None,
                 pre_transform: Callable | None = None, dtype: torch.dtype = torch.float64):
        self._start(transform, pre_transform)
        check_float_dtype(dtype)
        self.path = os.fspath(path)
        arrays = read_npz_trajectory(self.path)
        self.units = dict(MD17_UNITS)
        self.info = arrays.pop("info")
        m = arrays["pos"].shape[0]
        self._set_stacked({
            "z": torch.from_numpy(arrays["z"]).expand(m, -1),
            "pos": torch.from_numpy(arrays["pos"]).to(dtype),
            "energy": torch.from_numpy(arrays["energy"]).to(dtype)[:, None],
            "force": torch.from_numpy(arrays["force"]).to(dtype),
        })


def _candidates(molecule: str, revised: bool) -> list[str]:
    if revised:
        names = [f"rmd17_{molecule}.npz", f"{molecule}.npz", f"xtb_md_{molecule}.npz"]
        return [os.path.join(sub, nm) for sub in ("npz_data", os.path.join("rmd17", "npz_data"), "") for nm in names]
    return [f"md17_{molecule}.npz", f"{molecule}.npz", os.path.join("raw", f"md17_{molecule}.npz")]


class MD17(NPZTrajectory):
    """MD17 / revised MD17 trajectory of one ``molecule`` found under ``root`` (offline).

    With ``revised=True`` the file is looked up as ``<root>/npz_data/rmd17_<molecule>.npz`` (the
    layout of the rMD17 archive), ``<root>/rmd17/npz_data/...``, ``<root>/rmd17_<molecule>.npz``,
    ``<root>/<molecule>.npz`` or ``<root>/xtb_md_<molecule>.npz`` (geomlin's bundled xTB
    trajectories); with ``revised=False`` as ``<root>/md17_<molecule>.npz``. The official rMD17
    splits ``<root>/splits/index_{train,test}_0{1..5}.csv`` are used when present:
    ``split="train"`` / ``"test"`` with ``split_index`` in 1..5 restricts the dataset to that split,
    and [`split_indices`][] returns them. Fields and units as [`NPZTrajectory`][].
    """

    def __init__(self, root: str | os.PathLike, molecule: str, revised: bool = True, split: str | None = None,
                 split_index: int = 1, transform: Callable | None = None, pre_transform: Callable | None = None,
                 dtype: torch.dtype = torch.float64, download: bool = False):
        if not isinstance(molecule, str) or not molecule.strip():
            raise ValueError(f"molecule must be a non-empty name such as 'ethanol', got {molecule!r}")
        check_choice(split, "split", ("train", "test", None))
        split_index = check_int(split_index, "split_index", minimum=1, maximum=SPLIT_COUNT)
        self.root_dir, self.molecule, self.revised = os.fspath(root), molecule, revised
        path = self._locate()
        if path is None and download:
            self._download()
            path = self._locate()
        if path is None:
            tried = ", ".join(_candidates(molecule, revised))
            raise FileNotFoundError(
                f"{'revised ' if revised else ''}MD17 file for {molecule!r} not found under {self.root_dir!r}; "
                f"looked for {tried}. Official source: {RMD17_SOURCE if revised else MD17_SOURCE}. Unpack it "
                "into that folder (rMD17: keep its npz_data/ and splits/ folders) or pass download=True.")
        super().__init__(path, transform=transform, pre_transform=pre_transform, dtype=dtype)
        if split is not None:
            self._indices = self.split_indices(split_index)[split].tolist()

    def _locate(self) -> str | None:
        for rel in _candidates(self.molecule, self.revised):
            p = os.path.join(self.root_dir, rel)
            if os.path.isfile(p):
                return p
        return None

    def _download(self) -> None:
        from torch_geometric.data import download_url, extract_tar

        os.makedirs(self.root_dir, exist_ok=True)
        if self.revised:
            archive = download_url(_RMD17_URL, self.root_dir, filename="rmd17.tar.bz2")
            extract_tar(archive, self.root_dir, mode="r:bz2")
            os.remove(archive)
        else:
            download_url(_MD17_URL.format(self.molecule), self.root_dir)

    def _split_dir(self) -> str | None:
        for sub in ("splits", os.path.join("rmd17", "splits")):
            d = os.path.join(self.root_dir, sub)
            if os.path.isdir(d):
                return d
        return None

    def split_indices(self, k: int = 1) -> dict[str, Tensor]:
        """The official rMD17 split ``k`` (1..5): ``{"train": (1000,), "test": (1000,)}`` int64 frame indices."""
        k = check_int(k, "split_index", minimum=1, maximum=SPLIT_COUNT)
        folder = self._split_dir()
        if folder is None:
            raise FileNotFoundError(f"no splits/ folder under {self.root_dir!r}; the rMD17 archive ships "
                                    f"splits/index_train_0{k}.csv and splits/index_test_0{k}.csv")
        out = {}
        n = int(self.slices["pos"].numel() - 1)
        for part in ("train", "test"):
            p = os.path.join(folder, f"index_{part}_0{int(k)}.csv")
            if not os.path.isfile(p):
                raise FileNotFoundError(f"split file not found: {p}")
            try:
                idx = np.loadtxt(p, dtype=np.int64, ndmin=1)
            except ValueError as err:
                raise FileFormatError(p, f"expected one integer frame index per line ({err})") from None
            if idx.size == 0:
                raise FileFormatError(p, "empty split file; expected one integer frame index per line")
            if idx.min() < 0 or idx.max() >= n:
                raise FileFormatError(p, f"indices must lie in [0, {n}), got range [{idx.min()}, {idx.max()}]")
            out[part] = torch.from_numpy(idx)
        return out
