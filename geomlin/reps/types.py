"""The feature types beyond the representation algebra, one per kind of tensor geomlin speaks.

=========================  ==========================================  =================================
type                       layout                                      acted on by
=========================  ==========================================  =================================
``Scalars(channels)``      ``(..., channels)`` or ``(...)``            nothing (invariant floats)
``Labels(num_classes)``    ``(...)`` integers in ``[0, num_classes)``  nothing (invariant categories)
``Vectors(d, channels)``   ``(..., [channels,] d)``                    ``x -> R x`` (E(d), O(d), ...)
``Positions(d)``           ``(..., d)``                                ``x -> R x + t`` (E(d), SE(d))
``Frames(d)``              ``(..., d, d)``, columns are vectors        ``R -> Q R``
``Multivectors(alg, C)``   ``(..., [C,] 2^n)``                         versors ``x -> v x^ v^-1``
``SphereCoefficients``     ``(..., C, (lmax+1)^2)``, e3nn order        Wigner matrices of O(3)
``Tensors(G, k, C)``       ``(..., C, n, ..., n)`` (``k`` axes)        ``g`` on each of the ``k`` axes
=========================  ==========================================  =================================

plus [`Rep`][] (``(..., size)``, ``x -> rho(g) x``) and the image types of
[`geomlin.reps.images`][]. Each type knows its group (``group``: a group or a name
[`geomlin.groups.as_group`][geomlin.groups.names.as_group] parses), its trailing ``shape`` and its
action ``act(g, x)``; see [`geomlin.reps.feature_type`][].

>>> from geomlin.reps import Positions, Scalars
>>> Positions(3)
Positions(3) under E(3)
>>> Scalars(16).shape
(16,)
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from geomlin.algebra.clifford import CliffordAlgebra
from geomlin.groups.base import Group
from geomlin.groups.euclidean import Euclidean
from geomlin.groups.names import as_group
from geomlin.groups.versor import versor_group
from geomlin.reps.feature_type import (
    EXAMPLE_BATCH,
    FeatureType,
    apply_matrix,
    channel_suffix,
    check_channels,
    group_key,
    rotation_part,
    translation_part,
)
from geomlin.validation import check_index, check_int, check_positive_int, check_tensor

#: Parity classes of sphere coefficients: ``NATURAL`` functions on the sphere pick up ``(-1)^l``
#: under the inversion ``x -> -x``; ``PSEUDO`` ones ``-(-1)^l``.
NATURAL, PSEUDO = 1, -1


class Scalars(FeatureType):
    """Invariant real features ``(..., channels)`` (or ``(...)`` when ``channels`` is None).

    Parameters
    ----------
    channels : int, optional
        size of the last axis; ``None`` for features with no channel axis.
    """

    def __init__(self, channels: int | None = None):
        self.channels = check_channels(channels)

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
    """``E(d)`` for ``None``; else ``group`` (a group or a name), which must act on ``R^d``."""
    if group is None:
        return Euclidean(d)
    group = as_group(group)
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
        self.channels = check_channels(channels)
        self.group = _default_euclidean(self.d, group, "Vectors")

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.d,) if self.channels is None else (self.channels, self.d)

    def act(self, g, x: Tensor) -> Tensor:
        return apply_matrix(rotation_part(g), x)

    def layout_key(self) -> tuple:
        return ("Vectors", self.d, self.channels)

    def __repr__(self) -> str:
        return f"Vectors({self.d}{channel_suffix(self.channels)}) under {self.group!r}"


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

    def __repr__(self) -> str:
        return f"Positions({self.d}) under {self.group!r}"


class Multivectors(FeatureType):
    """Multivectors ``(..., [channels,] algebra.dim)`` of a Clifford algebra.

    Acted on by the algebra's versor group by default
    ([`geomlin.groups.versor_group`][geomlin.groups.versor.versor_group]: Pin(3,0,1) for G(3,0,1),
    the Clifford group otherwise) through ``algebra.act(g, x)``, the twisted sandwich ``v x^ v^-1``
    (or the outermorphism of an ``(n, n)`` matrix of O(p,q,r)).

    Parameters
    ----------
    algebra : CliffordAlgebra
        the algebra; the last axis has ``algebra.dim`` components.
    channels : int, optional
        multivector channels (the axis before the last); ``None`` for no channel axis.
    group : optional
        another group whose elements ``algebra.act`` understands, e.g. a
        [`geomlin.groups.PseudoOrthogonalGroup`][geomlin.groups.versor.PseudoOrthogonalGroup]
        (default: the versor group).
    """

    def __init__(self, algebra, channels: int | None = None, group=None):
        if not isinstance(algebra, CliffordAlgebra):
            raise TypeError(f"Multivectors needs a geomlin CliffordAlgebra, got {type(algebra).__name__}")
        self.algebra = algebra
        self.channels = check_channels(channels)
        self.group = versor_group(algebra) if group is None else as_group(group)

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.algebra.dim,) if self.channels is None else (self.channels, self.algebra.dim)

    def act(self, g, x: Tensor) -> Tensor:
        return self.algebra.act(g, x)

    def layout_key(self) -> tuple:
        return ("Multivectors", tuple(self.algebra.metric), self.channels)

    def __repr__(self) -> str:
        metric = tuple(self.algebra.metric)
        name = "G(3,0,1)" if metric == (0.0, 1.0, 1.0, 1.0) else f"Cl{metric}"
        return f"Multivectors({name}{channel_suffix(self.channels)})"


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
        self.channels = check_channels(channels)
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

    def __repr__(self) -> str:
        parity = "" if self.parity == NATURAL else ", pseudo"
        return f"SphereCoefficients(lmax={self.lmax}{channel_suffix(self.channels)}{parity})"


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
        self.group = as_group(group, "Tensors: group", kind=Group)
        self.order = check_int(order, "order", minimum=0)
        self.channels = check_channels(channels)

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
        return f"Tensors(order {self.order} over {self.group!r}{channel_suffix(self.channels)})"


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

    def __repr__(self) -> str:
        return f"Frames({self.d}) under {self.group!r}"
