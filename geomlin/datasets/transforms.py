"""Geometric transforms for PyG ``Data``: random rotations / translations, centring, scaling,
surface sampling and radius / kNN graphs. All subclass ``torch_geometric.transforms.BaseTransform``
and compose with PyG's transforms (``torch_geometric.transforms.Compose``).

Attributes are acted on by type: *positions* (``pos``, ``target_pos`` by default) move under
rotations, translations and scaling; *vectors* (``normal``, ``force``, ``vel``, ``target_vel``)
only rotate; everything else (labels, energies, charges) is left alone. Pass your own
``position_attrs`` / ``vector_attrs`` when a dataset stores e.g. target positions in ``y``.

``radius_graph`` and ``knn_graph`` are exact neighbour searches on a uniform grid
([`geomlin.neighbors`][], plain torch), so they need neither
``torch-cluster`` nor ``pyg-lib``, which PyG's own ``RadiusGraph`` / ``KNNGraph`` require.

Devices: every transform works where the ``Data`` lives and leaves every field there. Random
transforms draw on the data's device, so a ``generator`` must be on that device (``None`` uses
the device's default generator). The random and geometric transforms make no host sync (their
value checks are deferred on accelerators, see [`geomlin.validation`][]); the graph
transforms and [`SamplePoints`][] read a few sizes back (see
[`geomlin.neighbors`][] and [`sample_surface`][]), once per call, which is
why they belong at the data boundary (a dataset ``transform`` on the CPU, or once per batch on the device).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.transforms import BaseTransform

from geomlin.datasets.surface import sample_surface
from geomlin.groups import SO, O, as_group
from geomlin.neighbors import knn_pairs, radius_pairs
from geomlin.validation import (
    check_batch_vector,
    check_condition,
    check_finite,
    check_float,
    check_generator,
    check_positive_float,
    check_positive_int,
    check_tensor,
)

POSITION_ATTRS = ("pos", "target_pos")
VECTOR_ATTRS = ("normal", "force", "vel", "target_vel")


def _present(data: Data, attrs: Sequence[str]) -> list[str]:
    return [a for a in attrs if a in data and torch.is_tensor(data[a]) and data[a].shape[-1:] == (3,)]


def _require_pos(data: Data, who: str) -> Tensor:
    pos = getattr(data, "pos", None)
    if pos is None or not torch.is_tensor(pos) or pos.dim() != 2 or pos.shape[-1] != 3:
        got = None if pos is None else tuple(pos.shape) if torch.is_tensor(pos) else type(pos).__name__
        raise ValueError(f"{who} needs data.pos of shape (N, 3), got {got}")
    if not pos.is_floating_point():
        raise TypeError(f"{who} needs floating-point data.pos, got {pos.dtype}")
    # NaN or inf positions are bad data, not geometry: named as such (deferred on accelerators)
    return check_finite(pos, f"{who}: data.pos")


def _haar_orthogonal_3d(generator: torch.Generator | None, device, special: bool) -> Tensor:
    """One Haar-random ``(3, 3)`` float64 matrix of O(3) (SO(3) when ``special``), drawn on ``device``.

    The construction of [`geomlin.groups.haar_orthogonal`][geomlin.groups.base.haar_orthogonal] (QR of a
    Gaussian matrix, signs of ``diag(R)`` absorbed, the first column flipped when ``det = -1``; Mezzadri 2007, Sec. 5), and
    the same numbers from the same generator, but drawn where the data lives and without boolean
    masks, so it runs on an accelerator without host syncs. (To fold into ``haar_orthogonal`` once
    that takes a ``device``.)
    """
    z = torch.randn(3, 3, generator=generator, dtype=torch.float64, device=device)
    q, r = torch.linalg.qr(z)
    signs = torch.sign(torch.diagonal(r))
    q = q * torch.where(signs == 0, torch.ones_like(signs), signs)[None, :]
    if special:
        q = torch.cat([q[:, :1] * torch.linalg.det(q), q[:, 1:]], dim=1)
    return q


class RandomRotation(BaseTransform):
    """Rotate (``group=SO(3)``, or its name ``"SO3"``) or rotate-and-reflect (``O(3)``, ``"O3"``) by a
    Haar-random matrix ``R``.

    Positions and vectors ``(N, 3)`` become ``x @ R.T`` (about the origin). ``R`` is drawn with
    the construction of [`geomlin.groups.haar_orthogonal`][geomlin.groups.base.haar_orthogonal] (uniform on
    SO(3) / O(3)) from ``generator``, on the data's device; with ``store_matrix`` it is saved as ``data.rotation (1, 3, 3)``.
    """

    def __init__(self, group="SO3", position_attrs: Sequence[str] = POSITION_ATTRS,
                 vector_attrs: Sequence[str] = VECTOR_ATTRS, generator: torch.Generator | None = None,
                 store_matrix: bool = False):
        group = as_group(group)
        if group not in (SO(3), O(3)):
            raise ValueError(f"group must be SO(3) or O(3) (or their names 'SO3', 'O3'), got {group}")
        self.group, self.generator, self.store_matrix = group, generator, store_matrix
        self.position_attrs, self.vector_attrs = tuple(position_attrs), tuple(vector_attrs)

    def forward(self, data: Data) -> Data:
        pos = _require_pos(data, "RandomRotation")
        generator = check_generator(self.generator, "RandomRotation: generator", pos.device)
        R = _haar_orthogonal_3d(generator, pos.device, special=self.group == SO(3))
        for a in _present(data, self.position_attrs + self.vector_attrs):
            data[a] = data[a] @ R.T.to(data[a].dtype)
        if self.store_matrix:
            data.rotation = R[None].to(data.pos.dtype)
        return data

    def __repr__(self) -> str:
        return f"RandomRotation(group={self.group})"


class RandomTranslation(BaseTransform):
    """Translate positions by ``t ~ N(0, scale^2 I_3)`` (one ``t`` per graph); vectors are unchanged."""

    def __init__(self, scale: float = 1.0, position_attrs: Sequence[str] = POSITION_ATTRS,
                 generator: torch.Generator | None = None):
        scale = check_float(scale, "scale", minimum=0.0)
        self.scale, self.position_attrs, self.generator = scale, tuple(position_attrs), generator

    def forward(self, data: Data) -> Data:
        pos = _require_pos(data, "RandomTranslation")
        generator = check_generator(self.generator, "RandomTranslation: generator", pos.device)
        t = torch.randn(3, generator=generator, dtype=torch.float64, device=pos.device) * self.scale
        for a in _present(data, self.position_attrs):
            data[a] = data[a] + t.to(data[a].dtype)
        return data

    def __repr__(self) -> str:
        return f"RandomTranslation(scale={self.scale})"


class Center(BaseTransform):
    """Subtract the centroid of ``pos`` (mean over nodes) from every position attribute."""

    def __init__(self, position_attrs: Sequence[str] = POSITION_ATTRS):
        self.position_attrs = tuple(position_attrs)

    def forward(self, data: Data) -> Data:
        c = _require_pos(data, "Center").mean(dim=0, keepdim=True)
        for a in _present(data, self.position_attrs):
            data[a] = data[a] - c.to(data[a].dtype)
        return data

    def __repr__(self) -> str:
        return "Center()"


class NormalizeScale(BaseTransform):
    r"""Centre ``pos`` and scale positions so the farthest point of ``pos`` has norm 1 (PyG's convention):

    $$x_i \mapsto \frac{x_i - c}{\max_j \lVert x_j - c \rVert}, \qquad c = \frac{1}{N} \sum_j x_j,$$

    for ``pos`` and every other position attribute (with the centroid $c$ and radius of ``pos``).

    Positions with NaN or inf are refused as such (``data.pos contains NaN or inf values``), a
    cloud whose points all coincide as degenerate (there is no scale to divide by).
    """

    def __init__(self, position_attrs: Sequence[str] = POSITION_ATTRS):
        self.position_attrs = tuple(position_attrs)

    def forward(self, data: Data) -> Data:
        pos = _require_pos(data, "NormalizeScale")
        c = pos.mean(dim=0, keepdim=True)
        radius = (pos - c).norm(dim=-1).max()
        check_condition(radius > 0, f"NormalizeScale: degenerate point cloud (all {pos.shape[0]} points coincide)")
        radius = radius.clamp_min(torch.finfo(radius.dtype).tiny)  # finite until a deferred check is raised
        for a in _present(data, self.position_attrs):
            data[a] = (data[a] - c.to(data[a].dtype)) / radius.to(data[a].dtype)
        return data

    def __repr__(self) -> str:
        return "NormalizeScale()"


class SamplePoints(BaseTransform):
    """Replace a mesh (``pos`` vertices ``(V, 3)``, ``face`` ``(3, F)`` as in PyG) by ``num`` surface points.

    Area-weighted uniform sampling
    ([`geomlin.datasets.surface.sample_surface`][]); with
    ``include_normals`` the face normal of each point is stored as ``data.normal``. ``face`` is removed. Deterministic given ``generator`` (on the mesh's device).
    """

    def __init__(self, num: int, include_normals: bool = False, generator: torch.Generator | None = None):
        num = check_positive_int(num, "num")
        self.num, self.include_normals, self.generator = num, include_normals, generator

    def forward(self, data: Data) -> Data:
        pos = _require_pos(data, "SamplePoints")
        face = getattr(data, "face", None)
        if face is None or not torch.is_tensor(face) or face.dim() != 2 or face.shape[0] != 3:
            got = None if face is None else tuple(face.shape) if torch.is_tensor(face) else type(face).__name__
            raise ValueError(f"SamplePoints needs data.face of shape (3, F) (PyG layout), got {got}")
        generator = check_generator(self.generator, "SamplePoints: generator", pos.device)
        out = sample_surface(pos, face.t(), self.num, generator, include_normals=self.include_normals)
        if self.include_normals:
            data.pos, data.normal = out
        else:
            data.pos = out
        del data.face
        return data

    def __repr__(self) -> str:
        return f"SamplePoints({self.num})"


def _check_graph_inputs(pos: Tensor, batch: Tensor | None, who: str) -> None:
    check_tensor(pos, f"{who}: pos", ndim=2, finite=True, what="N points of dimension d")
    if batch is not None:
        check_batch_vector(batch, f"{who}: batch", pos.shape[0])


def radius_graph(pos: Tensor, r: float, batch: Tensor | None = None, loop: bool = False,
                 max_num_neighbors: int | None = None) -> Tensor:
    """All pairs within distance ``r`` (same graph only): ``edge_index (2, E)`` int64, rows (source j, target i).

    Parameters
    ----------
    pos : Tensor of shape (N, d)
        float positions.
    batch : Tensor | None
        optional ``(N,)`` graph index of each node.
    loop : bool
        include self-loops.
    max_num_neighbors : int | None
        keep at most this many nearest sources per target.

    Notes
    -----
    Edges are sorted by target, then by distance (ties by source index). Exact: a cell-list search
    ([`geomlin.neighbors.radius_pairs`][]) with float64
    distances, no compiled extension. On an accelerator it reads two or three sizes back (one more with ``max_num_neighbors``).
    """
    _check_graph_inputs(pos, batch, "radius_graph")
    r = check_positive_float(r, "r")
    if max_num_neighbors is not None:
        max_num_neighbors = check_positive_int(max_num_neighbors, "max_num_neighbors")
    src, dst, _ = radius_pairs(pos, r, batch, loop)
    if max_num_neighbors is not None and dst.numel():
        rank = torch.arange(dst.numel(), device=dst.device) - torch.searchsorted(dst, dst, right=False)
        keep = (rank < max_num_neighbors).nonzero().squeeze(1)   # one more host sync on accelerators
        src, dst = src[keep], dst[keep]
    return torch.stack([src, dst])


def knn_graph(pos: Tensor, k: int, batch: Tensor | None = None, loop: bool = False) -> Tensor:
    """The ``k`` nearest sources of every node (same graph only): ``edge_index (2, N k')`` int64.

    Rows are (source j, target i) as in PyG's ``flow="source_to_target"``; a graph with fewer than
    ``k + 1`` nodes contributes all its pairs. Sorted by target, then distance (ties by index).
    Exact ([`geomlin.neighbors.knn_pairs`][]: cell-list searches
    of growing radius; on an accelerator three or four host syncs per round, usually one or two rounds).
    """
    _check_graph_inputs(pos, batch, "knn_graph")
    k = check_positive_int(k, "k")
    src, dst, _ = knn_pairs(pos, k, batch, loop)
    return torch.stack([src, dst])


class RadiusGraph(BaseTransform):
    """Set ``data.edge_index`` to the radius graph of ``data.pos`` (see [`radius_graph`][])."""

    def __init__(self, r: float, loop: bool = False, max_num_neighbors: int | None = None):
        if max_num_neighbors is not None:
            max_num_neighbors = check_positive_int(max_num_neighbors, "max_num_neighbors")
        self.r, self.loop, self.max_num_neighbors = check_positive_float(r, "r"), loop, max_num_neighbors

    def forward(self, data: Data) -> Data:
        pos = _require_pos(data, "RadiusGraph")
        data.edge_index = radius_graph(pos, self.r, getattr(data, "batch", None), self.loop, self.max_num_neighbors)
        data.edge_attr = None
        return data

    def __repr__(self) -> str:
        return f"RadiusGraph(r={self.r})"


class KNNGraph(BaseTransform):
    """Set ``data.edge_index`` to the k-nearest-neighbour graph of ``data.pos`` (see [`knn_graph`][])."""

    def __init__(self, k: int = 6, loop: bool = False):
        self.k, self.loop = check_positive_int(k, "k"), loop

    def forward(self, data: Data) -> Data:
        pos = _require_pos(data, "KNNGraph")
        data.edge_index = knn_graph(pos, self.k, getattr(data, "batch", None), self.loop)
        data.edge_attr = None
        return data

    def __repr__(self) -> str:
        return f"KNNGraph(k={self.k})"
