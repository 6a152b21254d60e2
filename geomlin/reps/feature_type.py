"""Feature types: how a tensor transforms.

A [`FeatureType`][] says which group acts on a tensor and how: its ``group`` (a
[`geomlin.groups.SymmetryGroup`][geomlin.groups.base.SymmetryGroup]), its trailing ``shape`` (the axes
it occupies, e.g. ``(channels, 16)`` for multivectors), and ``act(g, x)``, the action of one group
element ``g`` on ``x (..., *shape)``. Tensors stay plain ``torch.Tensor``; the types are
declarations, as e3nn modules carry ``irreps_in`` / ``irreps_out``. Modules declare theirs as
``type_in`` / ``type_out`` ([`geomlin.reps.declarations`][]).

The concrete types: [`Rep`][] (the representation algebra), and in
[`geomlin.reps.types`][] [`Scalars`][], [`Labels`][],
[`Vectors`][], [`Positions`][], [`Frames`][],
[`Multivectors`][], [`SphereCoefficients`][] and
[`Tensors`][]; image types in [`geomlin.reps.images`][].
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from geomlin.validation import check_positive_int, check_tensor

#: Leading batch size of the random example inputs generated from declared types.
EXAMPLE_BATCH = 4


class FeatureType:
    """Base class of feature types; see the module docstring.

    Subclasses implement [`shape`][], [`act`][], ``layout_key()`` (or [`key`][]) and set [`group`][].
    """

    #: The group (sampler) acting on this type; ``None`` for invariant types, which every group
    #: leaves unchanged.
    group = None

    @property
    def shape(self) -> tuple[int, ...]:
        """Trailing shape of a tensor of this type (e.g. ``(channels, 16)``); ``()`` for none."""
        raise NotImplementedError

    @property
    def size(self) -> int:
        """Number of numbers per item: the product of [`shape`][]."""
        out = 1
        for s in self.shape:
            out *= s
        return out

    @property
    def is_invariant(self) -> bool:
        """True when every group element acts as the identity."""
        return False

    def act(self, g, x: Tensor) -> Tensor:
        """The action of one group element ``g`` on ``x (..., *shape)``; returns the same shape."""
        raise NotImplementedError

    def key(self) -> tuple:
        """Canonical hashable description; equal types have equal keys.

        By default the type's ``layout_key()`` (what its tensors look like) and its group's key.
        """
        return self.layout_key() + (group_key(self.group),)

    def random(self, lead: Sequence[int] = (EXAMPLE_BATCH,), generator: torch.Generator | None = None,
               dtype: torch.dtype = torch.float64) -> Tensor:
        """A standard-normal example ``(*lead, *shape)`` (for checks and audits)."""
        return torch.randn(*lead, *self.shape, generator=generator, dtype=dtype)

    def check(self, x, name: str = "x") -> Tensor:
        """Refuse ``x`` unless it is a floating tensor ``(..., *shape)``; returns ``x``."""
        return check_tensor(x, name, shape=(Ellipsis, *self.shape), what=repr(self))

    def __eq__(self, other) -> bool:
        return isinstance(other, FeatureType) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())


def check_channels(channels, name: str = "channels") -> int | None:
    """A channel count: ``None`` (no channel axis) or an int >= 1."""
    return None if channels is None else check_positive_int(channels, name)


def channel_suffix(channels: int | None) -> str:
    """``", 3 channels"`` for the reprs of feature types (empty without a channel axis)."""
    return "" if channels is None else f", {channels} channel{'s' if channels != 1 else ''}"


#: The feature type that says what a name such as ``"vector"`` said (for the messages refusing names).
TYPE_FOR_NAME = {"scalar": "Scalars()", "invariant": "Scalars()", "vector": "Vectors(d)",
                 "position": "Positions(d)"}


def name_is_not_a_type(value: str, name: str) -> TypeError:
    """The error for a string where a feature type is expected, naming the type to use."""
    hint = (f"geomlin.reps.{TYPE_FOR_NAME[value]}" if value in TYPE_FOR_NAME
            else "a feature type of geomlin.reps (Scalars(), Vectors(d), Positions(d), ...)")
    return TypeError(f"{name} must be feature types, not strings: for {value!r} pass {hint}")


# ----------------------------------------------------------------------------- groups
def group_key(group) -> tuple:
    """A hashable identity of a group or sampler (its ``key()`` when it has one)."""
    if group is None:
        return ("any",)
    key = getattr(group, "key", None)
    return key() if callable(key) else (type(group).__name__, repr(group))


def is_subgroup(a, b) -> bool:
    """True when group ``a`` is (known to be) contained in group ``b``: equal groups, or ``a``
    declares it through ``a.is_subgroup_of(b)`` (SE(d) in E(d), SO(n) in O(n), ...)."""
    if group_key(a) == group_key(b):
        return True
    test = getattr(a, "is_subgroup_of", None)
    return bool(test(b)) if callable(test) else False


def merge_groups(a, b, what: str = "types"):
    """The smaller of two nested groups (``None`` means any group); error when they are unrelated."""
    if a is None:
        return b
    if b is None or is_subgroup(a, b):
        return a
    if is_subgroup(b, a):
        return b
    raise ValueError(f"{what} are acted on by unrelated groups {a!r} and {b!r}; "
                     "pass the group to check explicitly")


def rotation_part(g) -> Tensor:
    """The ``(d, d)`` matrix of a group element: ``g`` itself or the ``R`` of a rigid transform."""
    from geomlin.groups.euclidean import RigidTransform

    if isinstance(g, RigidTransform):
        return g.R
    if isinstance(g, Tensor) and g.ndim == 2 and g.shape[0] == g.shape[1]:
        return g
    raise TypeError(f"this feature type is acted on by matrices or rigid transforms, got "
                    f"{type(g).__name__}{' of shape ' + str(tuple(g.shape)) if isinstance(g, Tensor) else ''}")


def translation_part(g, like: Tensor) -> Tensor | None:
    """The translation of a rigid transform (``None`` for linear group elements)."""
    from geomlin.groups.euclidean import RigidTransform

    if isinstance(g, RigidTransform):
        return g.t.to(dtype=like.dtype, device=like.device)
    return None


def apply_matrix(M: Tensor, x: Tensor) -> Tensor:
    """``x @ M^T`` on the last axis (``M`` cast to ``x``'s dtype and device)."""
    if x.shape[-1] != M.shape[-1]:
        raise ValueError(f"the action has size {M.shape[-1]} but the tensor has last dimension "
                         f"{x.shape[-1]} (shape {tuple(x.shape)})")
    return x @ M.to(dtype=x.dtype, device=x.device).transpose(-1, -2)


def compatible(out_type, in_type) -> bool:
    """True when a tensor of ``out_type`` may be fed where ``in_type`` is expected.

    Equal types, invariant types of the same shape, or the same layout acted on by nested groups.
    """
    if out_type is None or in_type is None:
        return out_type is None and in_type is None
    if out_type == in_type:
        return True
    if out_type.is_invariant and in_type.is_invariant:
        return out_type.shape == in_type.shape
    layout_a = getattr(out_type, "layout_key", None)
    layout_b = getattr(in_type, "layout_key", None)
    if callable(layout_a) and callable(layout_b) and layout_a() == layout_b():
        return is_subgroup(out_type.group, in_type.group) or is_subgroup(in_type.group, out_type.group)
    return False
