"""``XYZDataset``: molecular trajectories from plain or extended XYZ files."""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np
import torch
from torch_geometric.data import Data

from geomlin.datasets.base import InMemoryList, check_float_dtype
from geomlin.datasets.io.xyz import read_xyz
from geomlin.validation import FileFormatError


class XYZDataset(InMemoryList):
    """Frames of a plain or extended XYZ file as graphs (see [`geomlin.datasets.io.xyz`][]).

    Fields per frame: ``z (N,)`` int64, ``pos (N, 3)``, ``energy (1,)`` when the comment line
    holds one, ``force (N, 3)`` when the file has force columns, and for periodic frames (extended
    XYZ ``Lattice=`` / ``pbc=``) ``cell (1, 3, 3)`` (lattice vectors as rows) and ``pbc (1, 3)`` bool,
    PyG's layout of per-graph attributes, so a batch of ``G`` frames holds ``cell (G, 3, 3)`` and
    ``pbc (G, 3)`` (what [`geomlin.neighbors.periodic.neighbor_list`][] takes). Units are the file's (MD17
    snippets: Angstrom, kcal/mol, kcal/mol/Angstrom; ASE extended XYZ: Angstrom, eV, eV/Angstrom);
    ``energy_unit`` / ``length_unit`` only label them. Stored in ``dtype`` (float64 default, so
    values equal the file's). Either every frame has an energy (forces, a cell) or none does.
    """

    def __init__(self, path: str | os.PathLike, transform: Callable | None = None,
                 pre_transform: Callable | None = None, dtype: torch.dtype = torch.float64,
                 energy_unit: str = "file's unit", length_unit: str = "Angstrom"):
        self._start(transform, pre_transform)
        check_float_dtype(dtype)
        self.path = os.fspath(path)
        self.energy_unit, self.length_unit = energy_unit, length_unit
        frames = read_xyz(self.path)
        has_e = [f.energy is not None for f in frames]
        has_f = [f.forces is not None for f in frames]
        has_c = [f.cell is not None for f in frames]
        for what, flags in (("an energy", has_e), ("forces", has_f), ("a cell (Lattice=)", has_c)):
            if any(flags) and not all(flags):
                k = flags.index(not flags[0])
                raise FileFormatError(self.path, f"frame {k} {'lacks' if flags[0] else 'has'} {what} but frame 0 "
                                      f"{'does' if flags[0] else 'does not'}; all frames must agree",
                                      line=frames[k].line, record=k)
        sizes = {len(f.z) for f in frames}
        if len(sizes) == 1:
            fields = {"z": torch.from_numpy(np.stack([f.z for f in frames])),
                      "pos": torch.from_numpy(np.stack([f.pos for f in frames])).to(dtype)}
            if has_e[0]:
                fields["energy"] = torch.tensor([[f.energy] for f in frames], dtype=dtype)
            if has_f[0]:
                fields["force"] = torch.from_numpy(np.stack([f.forces for f in frames])).to(dtype)
            if has_c[0]:
                fields["cell"] = torch.from_numpy(np.stack([f.cell for f in frames])[:, None]).to(dtype)
                fields["pbc"] = torch.from_numpy(np.stack([f.pbc for f in frames])[:, None])
            self._set_stacked(fields)
        else:
            graphs = []
            for f in frames:
                d = Data(z=torch.from_numpy(f.z), pos=torch.from_numpy(f.pos).to(dtype))
                if f.energy is not None:
                    d.energy = torch.tensor([f.energy], dtype=dtype)
                if f.forces is not None:
                    d.force = torch.from_numpy(f.forces).to(dtype)
                if f.cell is not None:
                    d.cell = torch.from_numpy(f.cell[None]).to(dtype)
                    d.pbc = torch.from_numpy(f.pbc[None])
                graphs.append(d)
            self._set_graphs(graphs)
