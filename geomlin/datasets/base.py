"""A rootless in-memory PyTorch Geometric dataset built from graphs held in memory.

Datasets that are generated (``SyntheticShapes``, ``NBody``) or read from a
single file (``NPZTrajectory``, ``XYZDataset``, ``SDFDataset``) need no
``raw/`` and ``processed/`` folders; they collate their graphs once and behave
like any ``torch_geometric.data.InMemoryDataset`` (indexing, slicing,
``DataLoader``, ``transform`` applied on access).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import torch
from torch import Tensor
from torch_geometric.data import Data, InMemoryDataset


def check_float_dtype(dtype, name: str = "dtype") -> torch.dtype:
    """A floating-point ``torch.dtype`` for stored coordinates (an integer dtype would truncate them)."""
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"{name} must be a torch.dtype such as torch.float32, got {dtype!r}")
    if not dtype.is_floating_point:
        raise TypeError(f"{name} must be a floating-point dtype (coordinates would be truncated), got {dtype}")
    return dtype


class InMemoryList(InMemoryDataset):
    """In-memory dataset over ``data_list``; ``pre_transform`` is applied once here.

    Parameters
    ----------
    data_list : Sequence[Data]
        the graphs (``torch_geometric.data.Data``), at least one.
    transform : Callable | None
        applied to every graph on access (PyG semantics).
    pre_transform : Callable | None
        applied once to every graph before collation.
    """

    def __init__(self, data_list: Sequence[Data], transform: Callable | None = None,
                 pre_transform: Callable | None = None):
        super().__init__(None, transform=transform, pre_transform=pre_transform, log=False)
        self._set_graphs(data_list)

    def _start(self, transform: Callable | None, pre_transform: Callable | None,
               pre_filter: Callable | None = None) -> None:
        """Initialise the PyG base without a root (no raw/ or processed/ folders of PyG's own).

        Subclasses call this first, then store their graphs with ``_set_graphs`` / ``_set_stacked``
        or load a cache of their own.
        """
        InMemoryDataset.__init__(self, None, transform=transform, pre_transform=pre_transform,
                                 pre_filter=pre_filter, log=False)

    def _set_graphs(self, data_list: Sequence[Data]) -> None:
        data_list = list(data_list)
        if not data_list:
            raise ValueError(f"{type(self).__name__}: no graphs to collate (empty data list)")
        if self.pre_transform is not None:
            data_list = [self.pre_transform(d) for d in data_list]
        self.data, self.slices = self.collate(data_list)

    def _set_stacked(self, fields: Mapping[str, Tensor]) -> None:
        """Store equally sized graphs stacked on a leading axis, without a Python loop.

        ``fields[key]`` has shape ``(M, *shape)``: graph ``i`` gets ``fields[key][i]``.
        The collated storage is assembled directly (one concatenation per field), so
        10^5 generated graphs are stored in well under a second. With a
        ``pre_transform`` the graphs are materialised and collated the ordinary way.
        """
        sizes = {k: int(v.shape[0]) for k, v in fields.items()}
        if not sizes or len(set(sizes.values())) != 1:
            raise ValueError(f"stacked fields need one common leading size, got {sizes}")
        m = next(iter(sizes.values()))
        if m == 0:
            raise ValueError(f"{type(self).__name__}: no graphs to collate (leading size 0)")
        if self.pre_transform is not None:
            self._set_graphs(Data(**{k: v[i] for k, v in fields.items()}) for i in range(m))
            return
        probe = Data(**{k: v[0] for k, v in fields.items()})
        store, slices = {}, {}
        for key, v in fields.items():
            item = v[0]
            if item.dim() == 0:
                store[key], slices[key] = v.clone(), torch.arange(m + 1)
                continue
            dim = probe.__cat_dim__(key, item) % item.dim()
            store[key] = torch.cat(v.unbind(0), dim=dim)
            slices[key] = torch.arange(m + 1) * item.shape[dim]
        self.data, self.slices = Data(**store), slices

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self)})"
