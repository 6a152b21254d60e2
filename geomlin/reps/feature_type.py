"""Feature types: how a tensor transforms, declared by every equivariant module.

A [`FeatureType`][] says which group acts on a tensor and how: its ``group`` (a sampler with
``sample(n, generator, dtype)``), its trailing ``shape`` (the axes it occupies, e.g.
``(channels, 16)`` for multivectors), and ``act(g, x)``, the action of one group element ``g``
on ``x (..., *shape)``. Tensors stay plain ``torch.Tensor``; the types are declarations, as
e3nn modules carry ``irreps_in`` / ``irreps_out``.

Every equivariant module in geomlin has two attributes:

* ``type_in`` — one [`FeatureType`][] per positional input of ``forward`` (a single type or
  a tuple; ``None`` marks an input that is not acted on);
* ``type_out`` — likewise for the outputs (a tuple when ``forward`` returns a tuple);

and may define ``example_inputs(generator=None, dtype=torch.float64) -> (args, kwargs)`` when
random tensors of the declared shapes are not valid inputs (masks, batch vectors, edge indices).
With these, [`geomlin.testing.assert_equivariant(module)`][geomlin.testing.assert_equivariant],
``geomlin audit`` and [`EquivariantSequential`][] need nothing else.

The concrete types: [`Rep`][] (the representation algebra), and in
[`geomlin.reps.types`][] [`Scalars`][], [`Labels`][],
[`Vectors`][], [`Positions`][],
[`Multivectors`][], [`SphereCoefficients`][] and
[`Tensors`][].
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import torch
from torch import Tensor

from geomlin.validation import check_tensor

#: Leading batch size of the random example inputs generated from declared types.
EXAMPLE_BATCH = 4


class FeatureType:
    """Base class of feature types; see the module docstring.

    Subclasses implement [`shape`][], [`act`][], [`key`][] and set [`group`][].
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
        """Canonical hashable description; equal types have equal keys."""
        raise NotImplementedError

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


# ------------------------------------------------------------------- module declarations
def _as_type_tuple(value, owner: str, attr: str) -> tuple:
    if _is_irreps(value):
        from geomlin.reps.irreps import IrrepsRep

        return (IrrepsRep(value),)
    items = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    out = []
    for t in items:
        if _is_irreps(t):
            from geomlin.reps.irreps import IrrepsRep

            t = IrrepsRep(t)
        if t is not None and not isinstance(t, FeatureType):
            raise TypeError(f"{owner}.{attr} must hold geomlin feature types (or None), got {type(t).__name__}")
        out.append(t)
    return tuple(out)


def _is_irreps(x) -> bool:
    """True for e3nn ``Irreps``; never imports e3nn (an Irreps object means it is loaded already)."""
    o3 = sys.modules.get("e3nn.o3")
    return o3 is not None and isinstance(x, o3.Irreps)


def declared_types(module) -> tuple[tuple, tuple]:
    """``(types_in, types_out)`` of a module, as tuples with one entry per input / output.

    Reads ``type_in`` / ``type_out``; e3nn modules' ``irreps_in`` (or ``irreps_in1``,
    ``irreps_in2``) / ``irreps_out`` count as representations of O(3).
    """
    owner = type(module).__name__
    if hasattr(module, "type_in") and hasattr(module, "type_out"):
        return (_as_type_tuple(module.type_in, owner, "type_in"),
                _as_type_tuple(module.type_out, owner, "type_out"))
    if hasattr(module, "irreps_out"):
        if hasattr(module, "irreps_in1") and hasattr(module, "irreps_in2"):
            tin = _as_type_tuple((module.irreps_in1, module.irreps_in2), owner, "irreps_in")
        elif hasattr(module, "irreps_in"):
            tin = _as_type_tuple(module.irreps_in, owner, "irreps_in")
        else:
            tin = None
        if tin is not None:
            return tin, _as_type_tuple(module.irreps_out, owner, "irreps_out")
    raise TypeError(f"{owner} declares no feature types: give it type_in / type_out attributes "
                    "(geomlin.reps feature types), or pass the group and actions explicitly")


def declared_group(module):
    """The group a module is equivariant to: the smallest group acting on its declared types.

    ``None`` when every declared type is invariant.
    """
    types_in, types_out = declared_types(module)
    group = None
    for t in types_in + types_out:
        if t is not None:
            group = merge_groups(group, t.group, f"the feature types of {type(module).__name__}")
    return group


def example_inputs(module, generator: torch.Generator | None = None, dtype: torch.dtype = torch.float64,
                   batch: int = EXAMPLE_BATCH) -> tuple[tuple, dict]:
    """Valid random inputs ``(args, kwargs)`` for ``module``.

    The module's own ``example_inputs(generator=..., dtype=...)`` when it defines one (returning
    ``args`` or ``(args, kwargs)``), else one [`FeatureType.random`][] tensor per declared input.
    """
    own = getattr(module, "example_inputs", None)
    if callable(own):
        out = own(generator=generator, dtype=dtype)
        if isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], dict) and isinstance(out[0], tuple):
            return out
        return (out if isinstance(out, tuple) else (out,)), {}
    types_in, _ = declared_types(module)
    args = []
    for i, t in enumerate(types_in):
        if t is None:
            raise ValueError(f"{type(module).__name__}: input {i} has no declared type; define "
                             "example_inputs() or pass inputs=")
        args.append(t.random((batch,), generator=generator, dtype=dtype))
    return tuple(args), {}


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
