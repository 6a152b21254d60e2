"""The feature types beyond the representation algebra, one per kind of tensor geomlin speaks.

=========================  ==========================================  =================================
type                       layout                                      acted on by
=========================  ==========================================  =================================
``Scalars(channels)``      ``(..., channels)`` or ``(...)``            nothing (invariant floats)
``Labels(num_classes)``    ``(...)`` integers in ``[0, num_classes)``  nothing (invariant categories)
``Vectors(d, channels)``   ``(..., [channels,] d)``                    ``x -> R x`` (E(d), O(d), ...)
``Positions(d)``           ``(..., d)``                                ``x -> R x + t`` (E(d), SE(d))
``Multivectors(alg, C)``   ``(..., C, 2^n)``                           versors ``x -> v x^ v^-1``
``SphereCoefficients``     ``(..., C, (lmax+1)^2)``, e3nn order        Wigner matrices of O(3)
``Tensors(G, k, C)``       ``(..., C, n, ..., n)`` (``k`` axes)        ``g`` on each of the ``k`` axes
=========================  ==========================================  =================================

plus [`Rep`][] (``(..., size)``, ``x -> rho(g) x``). Each type knows its group
(``group``), its trailing ``shape`` and its action ``act(g, x)``; see
[`geomlin.reps.feature_type`][].

>>> from geomlin.reps import Positions, Scalars
>>> Positions(3)
Positions(3) under E(3)
>>> Scalars(16).shape
(16,)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from geomlin.groups.base import Group
from geomlin.groups.euclidean import Euclidean
from geomlin.reps.feature_type import (
    EXAMPLE_BATCH,
    FeatureType,
    apply_matrix,
    group_key,
    rotation_part,
    translation_part,
)
from geomlin.validation import check_index, check_int, check_positive_int, check_tensor, tolerance

#: Parity classes of sphere coefficients: ``NATURAL`` functions on the sphere pick up ``(-1)^l``
#: under the inversion ``x -> -x``; ``PSEUDO`` ones ``-(-1)^l``.
NATURAL, PSEUDO = 1, -1


def _channels(channels, name: str = "channels") -> int | None:
    return None if channels is None else check_positive_int(channels, name)


def _channel_suffix(channels: int | None) -> str:
    return "" if channels is None else f", {channels} channel{'s' if channels != 1 else ''}"


class Scalars(FeatureType):
    """Invariant real features ``(..., channels)`` (or ``(...)`` when ``channels`` is None).

    Parameters
    ----------
    channels : int, optional
        size of the last axis; ``None`` for features with no channel axis.
    """

    def __init__(self, channels: int | None = None):
        self.channels = _channels(channels)

    @property
    def shape(self) -> tuple[int, ...]:
        return () if self.channels is None else (self.channels,)

    @property
    def is_invariant(self) -> bool:
        return True

    def act(self, g, x: Tensor) -> Tensor:
        return x

    def key(self) -> tuple:
        return ("Scalars", self.channels)

    def __repr__(self) -> str:
        return "Scalars()" if self.channels is None else f"Scalars({self.channels})"


class Labels(FeatureType):
    """Invariant integer categories ``(...)`` in ``[0, num_classes)`` (atomic species, classes).

    Parameters
    ----------
    num_classes : int
        number of categories; values lie in ``[0, num_classes)``.
    """

    def __init__(self, num_classes: int):
        self.num_classes = check_positive_int(num_classes, "num_classes")

    @property
    def shape(self) -> tuple[int, ...]:
        return ()

    @property
    def is_invariant(self) -> bool:
        return True

    def act(self, g, x: Tensor) -> Tensor:
        return x

    def random(self, lead: Sequence[int] = (EXAMPLE_BATCH,), generator=None, dtype=torch.float64) -> Tensor:
        return torch.randint(self.num_classes, tuple(lead), generator=generator)

    def check(self, x, name: str = "x") -> Tensor:
        """Refuse ``x`` unless it holds integers in ``[0, num_classes)``; returns it.

        On an accelerator the range test is deferred and the returned labels are clamped into range
        ([`geomlin.validation.check_index`][]): use the returned tensor, so that
        an embedding lookup never reads out of bounds before the error is raised.
        """
        check_tensor(x, name, dtype="int")
        if x.device.type == "cpu" and x.numel():
            low, high = torch.aminmax(x)
            if int(low) < 0 or int(high) >= self.num_classes:
                raise ValueError(f"{name} must hold labels in [0, {self.num_classes}), got values in "
                                 f"[{int(low)}, {int(high)}]")
            return x
        return check_index(x, name, self.num_classes, "labels")

    def key(self) -> tuple:
        return ("Labels", self.num_classes)

    def __repr__(self) -> str:
        return f"Labels({self.num_classes})"


def _default_euclidean(d: int, group, kind: str = "Vectors"):
    """``E(d)`` for ``None``; else ``group``, which must act on ``R^d`` where it says its size."""
    if group is None:
        return Euclidean(d)
    size = getattr(group, "d", None)
    if isinstance(size, int) and not isinstance(size, bool) and size != d:
        raise ValueError(f"{kind}({d}, group={group!r}): the group acts on R^{size} but the features live in "
                         f"R^{d}; pass a group of {d} x {d} matrices (e.g. group=SO({d})) or d={size}")
    return group


class Vectors(FeatureType):
    """Vectors ``(..., [channels,] d)`` (velocities, forces, normals): ``x -> R x``, no translation.

    Parameters
    ----------
    d : int
        dimension of the vectors (the last axis).
    channels : int, optional
        size of the channel axis before the last one; ``None`` for no channel axis.
    group : Group or Euclidean, optional
        any sampler whose elements are ``(d, d)`` matrices or rigid transforms:
        E(d) by default, ``SE3()``, ``O(3)``, ``SO(3)``...
    """

    def __init__(self, d: int = 3, channels: int | None = None, group=None):
        self.d = check_positive_int(d, "d")
        self.channels = _channels(channels)
        self.group = _default_euclidean(self.d, group, "Vectors")

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.d,) if self.channels is None else (self.channels, self.d)

    def act(self, g, x: Tensor) -> Tensor:
        return apply_matrix(rotation_part(g), x)

    def layout_key(self) -> tuple:
        return ("Vectors", self.d, self.channels)

    def key(self) -> tuple:
        return self.layout_key() + (group_key(self.group),)

    def __repr__(self) -> str:
        return f"Vectors({self.d}{_channel_suffix(self.channels)}) under {self.group!r}"


class Positions(FeatureType):
    """Points ``(..., d)``: ``x -> R x + t`` under E(d) (default) or SE(d); ``R x`` under a linear group.

    Parameters
    ----------
    d : int
        dimension of the points (the last axis).
    group : Group or Euclidean, optional
        E(d) by default; ``SE3()``, or a linear group such as ``O(3)`` (no translation).
    """

    def __init__(self, d: int = 3, group=None):
        self.d = check_positive_int(d, "d")
        self.group = _default_euclidean(self.d, group, "Positions")

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.d,)

    def act(self, g, x: Tensor) -> Tensor:
        out = apply_matrix(rotation_part(g), x)
        t = translation_part(g, x)
        return out if t is None else out + t

    def layout_key(self) -> tuple:
        return ("Positions", self.d)

    def key(self) -> tuple:
        return self.layout_key() + (group_key(self.group),)

    def __repr__(self) -> str:
        return f"Positions({self.d}) under {self.group!r}"


class Multivectors(FeatureType):
    """Multivectors ``(..., channels, algebra.dim)`` of a Clifford algebra.

    Acted on by the algebra's versor group (``algebra.versor_group()``: Pin(3,0,1) for G(3,0,1),
    the Clifford group otherwise) through ``algebra.act(g, x)``, the twisted sandwich
    ``v x^ v^-1``.

    Parameters
    ----------
    algebra : CliffordAlgebra
        the algebra; the last axis has ``algebra.dim`` components.
    channels : int
        multivector channels (the axis before the last).
    group : optional
        another sampler whose elements ``algebra.act`` understands (default: the versor group).
    """

    def __init__(self, algebra, channels: int, group=None):
        for attr in ("dim", "metric", "act", "versor_group"):
            if not hasattr(algebra, attr):
                raise TypeError(f"Multivectors needs a geomlin CliffordAlgebra, got {type(algebra).__name__}")
        self.algebra = algebra
        self.channels = check_positive_int(channels, "channels")
        self.group = algebra.versor_group() if group is None else group

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.channels, self.algebra.dim)

    def act(self, g, x: Tensor) -> Tensor:
        return self.algebra.act(g, x)

    def layout_key(self) -> tuple:
        return ("Multivectors", tuple(self.algebra.metric), self.channels)

    def key(self) -> tuple:
        return self.layout_key() + (group_key(self.group),)

    def __repr__(self) -> str:
        metric = tuple(self.algebra.metric)
        name = "G(3,0,1)" if metric == (0.0, 1.0, 1.0, 1.0) else f"Cl{metric}"
        return f"Multivectors({name}{_channel_suffix(self.channels)})"


class SphereCoefficients(FeatureType):
    """Spherical-harmonic coefficients of degrees ``0..lmax``: ``(..., channels, (lmax+1)^2)``.

    The last axis is e3nn's real-SH order (``l`` blocks of ``2l+1``, Cartesian ``l=1``), the same
    as the e3nn ``Irreps`` ``"C x 0e + C x 1o + ..."`` per channel (``parity=NATURAL``) or
    ``"0o + 1e + ..."`` (``PSEUDO``). O(3) (default) or SO(3) acts by Wigner matrices.

    Parameters
    ----------
    lmax : int
        largest degree; the last axis has ``(lmax + 1)**2`` coefficients.
    channels : int, optional
        size of the channel axis before the last one; ``None`` for no channel axis.
    parity : int
        ``NATURAL`` (``(-1)^l``, the default) or ``PSEUDO`` (``(-1)^(l+1)``).
    group : Group, optional
        ``O(3)`` (default) or ``SO(3)``.
    """

    def __init__(self, lmax: int, channels: int | None = None, parity: int = NATURAL, group=None):
        self.lmax = check_int(lmax, "lmax", minimum=0)
        self.channels = _channels(channels)
        if parity not in (NATURAL, PSEUDO):
            raise ValueError(f"parity must be NATURAL (1) or PSEUDO (-1), got {parity!r}")
        self.parity = parity
        if group is None:
            from geomlin.groups.classical import O

            group = O(3)
        self.group = _default_euclidean(3, group, "SphereCoefficients")

    @property
    def dim(self) -> int:
        return (self.lmax + 1) ** 2

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.dim,) if self.channels is None else (self.channels, self.dim)

    def irreps(self):
        """The e3nn ``Irreps`` of one channel."""
        from e3nn import o3

        return o3.Irreps([(1, (l, self.parity * (-1) ** l)) for l in range(self.lmax + 1)])

    def act(self, g, x: Tensor) -> Tensor:
        from geomlin.reps.irreps import wigner_D_from_matrix

        return apply_matrix(wigner_D_from_matrix(self.irreps(), rotation_part(g).to(torch.float64)), x)

    def layout_key(self) -> tuple:
        return ("SphereCoefficients", self.lmax, self.channels, self.parity)

    def key(self) -> tuple:
        return self.layout_key() + (group_key(self.group),)

    def __repr__(self) -> str:
        parity = "" if self.parity == NATURAL else ", pseudo"
        return f"SphereCoefficients(lmax={self.lmax}{_channel_suffix(self.channels)}{parity})"


class Tensors(FeatureType):
    """Tensors of order ``k`` over ``R^n``: ``(..., channels, n, ..., n)`` with ``k`` axes of size ``n``.

    A group of ``n x n`` matrices (S(n), O(n), SO(n), Sp(n/2), ...) acts on each of the ``k``
    axes: ``x -> g^{(x) k} x``. Order 0 is invariant. Used by the diagram layers.

    Parameters
    ----------
    group : Group
        a group of ``n x n`` matrices.
    order : int
        the number ``k`` of axes of size ``n``.
    channels : int, optional
        size of the channel axis before them; ``None`` for no channel axis.
    """

    def __init__(self, group: Group, order: int, channels: int | None = None):
        if not isinstance(group, Group):
            raise TypeError(f"Tensors needs a geomlin Group of n x n matrices, got {type(group).__name__}")
        self.group = group
        self.order = check_int(order, "order", minimum=0)
        self.channels = _channels(channels)

    @property
    def n(self) -> int:
        return self.group.d

    @property
    def shape(self) -> tuple[int, ...]:
        head = () if self.channels is None else (self.channels,)
        return head + (self.n,) * self.order

    @property
    def is_invariant(self) -> bool:
        return self.order == 0

    def act(self, g, x: Tensor) -> Tensor:
        g = rotation_part(g).to(dtype=x.dtype, device=x.device)
        for axis in range(x.ndim - self.order, x.ndim):
            x = torch.movedim(torch.movedim(x, axis, -1) @ g.T, -1, axis)
        return x

    def key(self) -> tuple:
        return ("Tensors", group_key(self.group), self.order, self.channels)

    def __repr__(self) -> str:
        return f"Tensors(order {self.order} over {self.group!r}{_channel_suffix(self.channels)})"


class Frames(FeatureType):
    """Frames ``(..., d, d)`` whose *columns* are vectors: ``R -> Q R``.

    The type of predicted rotations (a canonicalizer's ``R``), PCA frames and any matrix whose
    columns transform as vectors.

    Parameters
    ----------
    d : int
        dimension of the frames (``(d, d)`` matrices).
    group : Group or Euclidean, optional
        as for [`Vectors`][] (E(d) by default; a rigid motion acts through its rotation,
        translations leave frames unchanged).
    """

    def __init__(self, d: int = 3, group=None):
        self.d = check_positive_int(d, "d")
        self.group = _default_euclidean(self.d, group, "Frames")

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.d, self.d)

    def act(self, g, x: Tensor) -> Tensor:
        return rotation_part(g).to(dtype=x.dtype, device=x.device) @ x

    def layout_key(self) -> tuple:
        return ("Frames", self.d)

    def key(self) -> tuple:
        return self.layout_key() + (group_key(self.group),)

    def __repr__(self) -> str:
        return f"Frames({self.d}) under {self.group!r}"


#: Quarter turns of the square grid: the rotations of C4 / D4.
_QUARTER_TURNS = 4


def planar_element(g) -> tuple[int, int]:
    """``(k, m)`` of a 2x2 matrix ``g = Rot(k pi / 2) diag(1, -1)^m`` of C4 / D4.

    Raises ``ValueError`` for matrices that are not such an element, to the tolerance of ``g``'s
    dtype ([`geomlin.validation.tolerance`][]). The pixel action needs ``(k, m)``
    as Python ints, so the four entries are read on the host (one synchronisation per action on an accelerator).
    """
    R = rotation_part(g)
    tol = tolerance(R.dtype)
    g = R.detach().to(torch.float64).cpu()
    if g.shape != (2, 2):
        raise ValueError(f"planar image actions need 2x2 matrices of C4 / D4, got shape {tuple(g.shape)}")
    m = int(torch.linalg.det(g) < 0)
    rot = g @ torch.diag(torch.tensor([1.0, -1.0 if m else 1.0], dtype=torch.float64))
    k = round(math.atan2(float(rot[1, 0]), float(rot[0, 0])) / (math.pi / 2)) % _QUARTER_TURNS
    c, s = round(math.cos(k * math.pi / 2)), round(math.sin(k * math.pi / 2))
    expected = torch.tensor([[c, -s], [s, c]], dtype=torch.float64)
    if (rot - expected).abs().max() > tol:
        raise ValueError(f"{g.tolist()} is not a rotation by a multiple of 90 degrees (times a flip), to {tol:.0e}")
    return k, m


def act_on_grid(x: Tensor, k: int, m: int) -> Tensor:
    """``rot90^k(flip^m(x))`` on the last two axes of ``x (..., H, W)``: the pixel permutation of
    ``Rot(k pi / 2) diag(1, -1)^m`` (``flip`` reverses the last axis)."""
    if m:
        x = torch.flip(x, (-1,))
    return torch.rot90(x, k, (-2, -1)) if k else x


def _planar_index(k: int, m: int) -> int:
    return m * _QUARTER_TURNS + k


def _planar_compose(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    """``(k, m)`` of the product ``a b``: ``Rot(ka) F^ma Rot(kb) F^mb = Rot(ka +- kb) F^(ma + mb)``."""
    (ka, ma), (kb, mb) = a, b
    return (ka + (-kb if ma else kb)) % _QUARTER_TURNS, (ma + mb) % 2


def _planar_group(group) -> tuple[object, int]:
    """``(group, order)`` for ``C(4)`` / ``D(4)`` (or ``"C4"`` / ``"D4"``)."""
    from geomlin.groups.classical import C, D

    if isinstance(group, str) and group.strip().upper() in ("C4", "D4"):
        group = D(4) if group.strip().upper() == "D4" else C(4)
    if not isinstance(group, (C, D)) or group.k != _QUARTER_TURNS:
        raise ValueError(f"image types are exact for C(4) and D(4) only (90-degree rotations and flips of "
                         f"square pixel grids), got {group!r}")
    return group, 2 * _QUARTER_TURNS if isinstance(group, D) else _QUARTER_TURNS


class Images(FeatureType):
    """Square images ``(..., channels, side, side)`` under C4 or D4, acting by exact pixel permutations.

    The element ``Rot(k pi / 2) diag(1, -1)^m`` acts as ``rot90^k(flip^m(x))`` on the last two axes
    (see [`act_on_grid`][]).

    Parameters
    ----------
    group : Group or str
        ``C(4)`` / ``D(4)`` or ``"C4"`` / ``"D4"``.
    channels : int or None
        size of the channel axis before the grid; ``None`` for no channel axis.
    side : int, optional
        the side of the square grid (default: any).
    """

    def __init__(self, group, channels: int | None, side: int | None = None):
        self.group, self.order = _planar_group(group)
        self.channels = _channels(channels)
        self.side = None if side is None else check_positive_int(side, "side")

    @property
    def shape(self) -> tuple:
        """``(channels, side, side)``; ``None`` sides (any square image) match any size in ``check``."""
        return (self.channels, self.side, self.side)

    def random(self, lead=(EXAMPLE_BATCH,), generator=None, dtype=torch.float64) -> Tensor:
        if self.side is None or self.channels is None:
            raise ValueError(f"{self!r} has no fixed image shape; give the module an example_inputs() or pass inputs=")
        return super().random(lead, generator, dtype)

    def check(self, x, name: str = "x") -> Tensor:
        check_tensor(x, name, shape=(Ellipsis, *self.shape), what=repr(self))
        if x.shape[-1] != x.shape[-2]:
            raise ValueError(f"{name} must hold square images (H = W, exact 90-degree rotations), got shape "
                             f"{tuple(x.shape)}")
        return x

    def act(self, g, x: Tensor) -> Tensor:
        return act_on_grid(x, *planar_element(g))

    def layout_key(self) -> tuple:
        return ("Images", self.channels, self.side)

    def key(self) -> tuple:
        return self.layout_key() + (group_key(self.group),)

    def __repr__(self) -> str:
        size = "H x W" if self.side is None else f"{self.side} x {self.side}"
        channels = "C" if self.channels is None else self.channels
        return f"Images({channels} x {size}) under {self.group!r}"


class RegularFeatures(FeatureType):
    """Functions on C4 / D4: ``(..., [channels,] |G|, [side, side])`` in the regular representation.

    ``(g . y)[..., a, :, :] = g . y[..., g^{-1} a, :, :]``: the group axis is permuted and, with a
    grid (``side`` given, or ``grid=True`` for any side), the trailing square grid is acted on as by
    [`Images`][] (the features of a group convolution); without a grid the layout is
    ``(..., [channels,] |G|)`` (one logit per element). Element index ``a = m * 4 + k`` for
    ``Rot(k pi / 2) diag(1, -1)^m``.

    Parameters
    ----------
    group : Group or str
        ``C(4)`` / ``D(4)`` or ``"C4"`` / ``"D4"``.
    channels : int, optional
        size of the channel axis before the group axis; ``None`` for no channel axis.
    side : int, optional
        side of the trailing square grid (implies ``grid``).
    grid : bool, optional
        whether a trailing square grid follows the group axis (default: when ``side`` is given).
    """

    def __init__(self, group, channels: int | None = None, side: int | None = None, grid: bool | None = None):
        self.group, self.order = _planar_group(group)
        self.channels = _channels(channels)
        self.side = None if side is None else check_positive_int(side, "side")
        #: Whether a square grid follows the group axis (``True`` when ``side`` is given; ``grid=True``
        #: without ``side`` declares a grid of any side).
        self.grid = (self.side is not None) if grid is None else bool(grid)

    @property
    def shape(self) -> tuple:
        head = () if self.channels is None else (self.channels,)
        tail = (self.side, self.side) if self.grid else ()
        return head + (self.order,) + tail

    def random(self, lead=(EXAMPLE_BATCH,), generator=None, dtype=torch.float64) -> Tensor:
        if self.grid and self.side is None:
            raise ValueError(f"{self!r} has no fixed grid size; give the module an example_inputs() or pass inputs=")
        return super().random(lead, generator, dtype)

    def permutation(self, g) -> Tensor:
        """``(|G|,)`` int64 ``p`` with ``(g . y)[a] = y[p[a]]``, ``p[a] = index(g^{-1} a)``."""
        k, m = planar_element(g)
        inverse = ((-k) % _QUARTER_TURNS if not m else k, m)
        elements = [(a % _QUARTER_TURNS, a // _QUARTER_TURNS) for a in range(self.order)]
        return torch.tensor([_planar_index(*_planar_compose(inverse, e)) for e in elements])

    def act(self, g, x: Tensor) -> Tensor:
        axis = x.ndim - (3 if self.grid else 1)
        out = torch.index_select(x, axis, self.permutation(g).to(x.device))
        return act_on_grid(out, *planar_element(g)) if self.grid else out

    def layout_key(self) -> tuple:
        return ("RegularFeatures", self.order, self.channels, self.grid, self.side)

    def key(self) -> tuple:
        return self.layout_key() + (group_key(self.group),)

    def __repr__(self) -> str:
        grid = "" if not self.grid else (" on H x W" if self.side is None else f" on {self.side} x {self.side}")
        return f"RegularFeatures({self.group!r}{_channel_suffix(self.channels)}{grid})"
