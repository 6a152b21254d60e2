"""Embed and extract pairs of G(3,0,1): geometric objects as multivectors and back.

Geometric objects (Brehmer et al., "Geometric Algebra Transformer", NeurIPS 2023, Table 1):

* plane ``n . x + d = 0``: vector ``d e0 + n1 e1 + n2 e2 + n3 e3``;
* point ``x``: trivector ``e123 - x e023 + y e013 - z e012``;
* line: bivector (join of two points);
* isometries: versors acting by ``rho_u(x) = u x^ u^-1`` (reflections in planes are the planes
  themselves, rotations are even rotors, translations ``1 + t e0 / 2``).

A point under an odd versor (a reflection) comes back as ``-P'``: PGA points are oriented, and a
reflection reverses the orientation (the weight ``e123`` becomes ``-1``). [`extract_point`][]
divides by the ``e123`` component, so it returns the reflected coordinates either way.

**Conventions that differ from the reference GATr (``gatr.interface``)**

* quaternions are ``(w, x, y, z)`` (scalar first) in [`embed_rotation`][],
  [`extract_rotation`][] and [`matrix_to_quaternion`][]; the reference uses ``(x, y, z, w)``
  (its ``ijkw``). Both are Hamilton quaternions (``ijk = -1``) and both put
  ``w - x e23 + y e13 - z e12`` into the multivector, so ``embed_rotation(q)`` equals the
  reference's ``embed_rotation(q[..., [1, 2, 3, 0]])`` and ``extract_rotation`` returns the
  reference's ``extract_rotation`` with the same reordering (``normalize`` as there, default off);
* [`extract_point`][] clamps a small weight ``|e123| < threshold`` to ``+-threshold`` keeping
  its sign (so the result does not depend on the orientation a reflection gives the point);
  the reference replaces it by ``+threshold`` whatever its sign;
* [`extract_oriented_plane`][] returns ``(normal, offset)``; the reference returns the
  normal only;
* [`extract_translation`][] is equivariant only for pure translators (as in the reference,
  where it is deprecated for that reason); it is kept for reading back [`embed_translation`][].

Everything else (point, plane, translation, scalar and pseudoscalar embeddings) is the
reference's, tested component by component against its formulas.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor

from geomlin.algebra.pga import basis
from geomlin.algebra.pga.basis import DIM, E0, E0123, E1, E123, SCALAR, check_mv, select_components
from geomlin.algebra.pga.products import geometric_product, join
from geomlin.algebra.quaternions import shepperd_quaternion
from geomlin.tables import table_on
from geomlin.validation import check_bool, check_finite, check_orthogonal, check_positive_float, check_tensor


def _signed(x: Tensor, components: tuple[int, ...], signs: tuple[float, ...]) -> Tensor:
    """``(signs[i] * x[..., components[i]])_i`` as ``(..., len(components))`` (no constant tensor)."""
    return torch.stack([x[..., c] if sign == 1.0 else sign * x[..., c] for c, sign in zip(components, signs)], -1)


def _place(out: Tensor, components: tuple[int, ...], values: Tensor) -> Tensor:
    """Write ``values (..., len(components))`` into ``out[..., components]`` (integer indices, in place)."""
    for i, c in enumerate(components):
        out[..., c] = values[..., i]
    return out


def _check_last(x: Tensor, size: int, name: str) -> Tensor:
    """A real floating tensor ``(..., size)`` (integer input is refused, not converted)."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.ndim == 0 or x.shape[-1] != size:
        raise ValueError(f"{name} must have last dimension {size}, got shape {tuple(x.shape)}")
    return check_tensor(x, name, dtype="float")


def _zeros(like: Tensor, lead) -> Tensor:
    return torch.zeros(*lead, DIM, dtype=like.dtype if like.is_floating_point() else torch.get_default_dtype(),
                       device=like.device)


def _embed_component(values: Tensor, component: int, name: str) -> Tensor:
    """``values (..., 1)`` on one component of zero multivectors ``(..., 16)``."""
    _check_last(values, 1, name)
    out = _zeros(values, values.shape[:-1])
    out[..., component] = values[..., 0]
    return out


def embed_scalar(s: Tensor) -> Tensor:
    """Scalars ``(..., 1)`` -> multivectors ``(..., 16)``."""
    return _embed_component(s, SCALAR, "scalar")


def extract_scalar(x: Tensor) -> Tensor:
    """Scalar component ``(..., 16) -> (..., 1)``."""
    return check_mv(x)[..., SCALAR:SCALAR + 1]


def embed_pseudoscalar(p: Tensor) -> Tensor:
    """Pseudoscalars ``(..., 1)`` -> ``(..., 16)`` on ``e0123``."""
    return _embed_component(p, E0123, "pseudoscalar")


def extract_pseudoscalar(x: Tensor) -> Tensor:
    """``e0123`` component ``(..., 16) -> (..., 1)``."""
    return check_mv(x)[..., E0123:E0123 + 1]


def embed_point(pos: Tensor) -> Tensor:
    """Points ``(..., 3)`` -> trivectors ``(..., 16)``: ``e123 = 1, e023 = -x, e013 = y, e012 = -z``."""
    _check_last(pos, 3, "point coordinates")
    check_finite(pos, "point coordinates")
    out = _zeros(pos, pos.shape[:-1])
    out[..., E123] = 1.0
    for c, (idx, sign) in enumerate(zip(basis.POINT_COMPONENTS, basis.POINT_SIGNS)):
        out[..., idx] = sign * pos[..., c]
    return out


def extract_point(x: Tensor, threshold: float = 1e-3) -> Tensor:
    """Trivector ``(..., 16)`` -> coordinates ``(..., 3)``, dividing by the ``e123`` weight.

    The division makes the result independent of the sign a reflection puts on the point.
    Weights with ``|e123| < threshold`` (points at infinity) are clamped to ``+-threshold``, keeping
    their sign (a weight of exactly 0 counts as positive). The reference GATr clamps them to
    ``+threshold`` whatever their sign, so the two differ only for ``-threshold < e123 < 0``.
    """
    check_mv(x)
    check_finite(x, "x")
    threshold = check_positive_float(threshold, "threshold")
    w = x[..., E123:E123 + 1]
    clamped = w.new_full((), threshold)
    w = torch.where(w.abs() < threshold, torch.where(w < 0, -clamped, clamped), w)
    return _signed(x, basis.POINT_COMPONENTS, basis.POINT_SIGNS) / w


def embed_oriented_plane(normal: Tensor, position: Tensor) -> Tensor:
    """Plane through ``position (..., 3)`` with normal ``normal (..., 3)`` -> vector ``(..., 16)``.

    ``n1 e1 + n2 e2 + n3 e3 + d e0`` with ``d = -n . position``.
    """
    _check_last(normal, 3, "normal")
    _check_last(position, 3, "position")
    normal, position = torch.broadcast_tensors(normal, position)
    out = _zeros(normal, normal.shape[:-1])
    _place(out, basis.PLANE_NORMAL, normal)
    out[..., E0] = -(normal * position).sum(-1)
    return out


def extract_oriented_plane(x: Tensor) -> tuple[Tensor, Tensor]:
    """Vector part of ``(..., 16)`` -> ``(normal (..., 3), offset (..., 1))`` with the plane
    ``normal . p + offset = 0``."""
    check_mv(x)
    return select_components(x, basis.PLANE_NORMAL), x[..., E0:E0 + 1]


def plane_closest_point(x: Tensor) -> Tensor:
    """Point of the plane ``(..., 16)`` closest to the origin, ``(..., 3)``: ``-d n / |n|^2``."""
    n, d = extract_oriented_plane(x)
    return -d * n / (n * n).sum(-1, keepdim=True).clamp_min(1e-12)


def embed_reflection(normal: Tensor, position: Tensor) -> Tensor:
    """Reflection in a plane: the plane itself with unit normal ``(..., 16)`` (an odd versor)."""
    normal = _check_last(normal, 3, "normal")
    normal = normal / normal.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    return embed_oriented_plane(normal, position)


def embed_line(point: Tensor, direction: Tensor) -> Tensor:
    """Line through ``point (..., 3)`` along ``direction (..., 3)`` -> bivector ``(..., 16)``.

    The join of the points ``point`` and ``point + direction``: the ``e12, e13, e23``
    components carry the direction, ``e01, e02, e03`` the moment.
    """
    _check_last(point, 3, "point")
    _check_last(direction, 3, "direction")
    point, direction = torch.broadcast_tensors(point, direction)
    return join(embed_point(point), embed_point(point + direction))




@functools.cache
def _line_maps() -> tuple[Tensor, Tensor]:
    """Linear maps from a line bivector to its direction (3) and moment (3), float64.

    Found once from the embedding itself: a line is linear in (direction, point x direction).
    """
    # the join of P(p) and P(p + d) is linear in (d, p x d); fit the exact 6x16 map on samples
    gen = torch.Generator().manual_seed(0)
    p = torch.randn(32, 3, generator=gen, dtype=torch.float64)
    d = torch.randn(32, 3, generator=gen, dtype=torch.float64)
    feats = torch.cat([d, torch.linalg.cross(p, d)], -1)  # (32, 6)
    mv = embed_line(p, d)  # (32, 16)
    sol = torch.linalg.lstsq(feats, mv).solution  # (6, 16): mv = feats @ sol
    return sol, torch.linalg.pinv(sol)  # embed (6, 16), extract (16, 6)


def _line_map_on(index: int, device: torch.device, dtype: torch.dtype) -> Tensor:
    """``_line_maps()[index]`` cached on ``device`` / ``dtype``."""
    return table_on("pga:line_maps", _line_maps, device, dtype, index)


def extract_line(x: Tensor) -> tuple[Tensor, Tensor]:
    """Line bivector ``(..., 16)`` -> ``(point closest to the origin (..., 3), direction (..., 3))``.

    Uses Pluecker coordinates ``(d, m = p x d)``; the closest point is ``d x m / |d|^2``.
    """
    check_mv(x)
    pl = x @ _line_map_on(1, x.device, x.dtype)
    d, m = pl[..., :3], pl[..., 3:]
    point = torch.linalg.cross(d, m) / (d * d).sum(-1, keepdim=True).clamp_min(1e-12)
    return point, d


def embed_pluecker_ray(pluecker: Tensor) -> Tensor:
    """Pluecker coordinates ``(..., 6) = (direction, moment = p x direction)`` -> bivector ``(..., 16)``."""
    _check_last(pluecker, 6, "pluecker coordinates")
    return pluecker @ _line_map_on(0, pluecker.device, pluecker.dtype)


def extract_pluecker_ray(x: Tensor) -> Tensor:
    """Bivector ``(..., 16)`` -> Pluecker coordinates ``(..., 6)`` (inverse of [`embed_pluecker_ray`][])."""
    check_mv(x)
    return x @ _line_map_on(1, x.device, x.dtype)


def embed_translation(t: Tensor) -> Tensor:
    """Translation by ``t (..., 3)`` -> even versor ``1 + (t1 e01 + t2 e02 + t3 e03) / 2``.

    The sign convention is fixed by the test ``extract_point(sandwich(T, P)) == x + t``.
    """
    _check_last(t, 3, "translation")
    out = _zeros(t, t.shape[:-1])
    out[..., SCALAR] = 1.0
    return _place(out, basis.TRANSLATION_COMPONENTS, TRANSLATION_SIGN * 0.5 * t)


def extract_translation(x: Tensor) -> Tensor:
    """Translation versor ``(..., 16)`` -> ``t (..., 3)`` (normalised by the scalar part)."""
    check_mv(x)
    return TRANSLATION_SIGN * 2.0 * select_components(x, basis.TRANSLATION_COMPONENTS) / x[..., SCALAR:SCALAR + 1]


#: Sign of the ``e0i`` components of a translator (determined by the point convention).
TRANSLATION_SIGN = -1.0


def embed_rotation(quaternion: Tensor) -> Tensor:
    """Quaternion ``(..., 4)`` in ``(w, x, y, z)`` order (scalar first, Hamilton: ``ijk = -1``) ->
    even rotor ``w - x e23 + y e13 - z e12``, ``(..., 16)``.

    A unit quaternion's rotor acts on points and planes as the rotation ``q v q*``; any other
    quaternion embeds linearly (so [`extract_rotation`][] gives it back). The reference GATr's
    ``embed_rotation`` takes ``(x, y, z, w)``: pass ``q[..., [3, 0, 1, 2]]`` of a reference
    quaternion here.
    """
    _check_last(quaternion, 4, "quaternion")
    out = _zeros(quaternion, quaternion.shape[:-1])
    out[..., SCALAR] = quaternion[..., 0]
    for c, (idx, sign) in enumerate(zip(basis.ROTOR_COMPONENTS, basis.ROTOR_SIGNS)):
        out[..., idx] = sign * quaternion[..., c + 1]
    return out


def extract_rotation(x: Tensor, normalize: bool = False) -> Tensor:
    """Rotor ``(..., 16)`` -> quaternion ``(..., 4)`` ``(w, x, y, z)``: the inverse of
    [`embed_rotation`][] on its image.

    ``normalize=True`` divides by the quaternion's norm (as the reference's option of the same
    name; a zero quaternion stays zero).
    """
    check_mv(x)
    normalize = check_bool(normalize, "normalize")
    q = torch.cat([x[..., SCALAR:SCALAR + 1], _signed(x, basis.ROTOR_COMPONENTS, basis.ROTOR_SIGNS)], -1)
    return q / q.norm(dim=-1, keepdim=True).clamp_min(1e-12) if normalize else q


def matrix_to_quaternion(R: Tensor) -> Tensor:
    """Rotation matrices ``(..., 3, 3)`` (orthogonal, det +1) -> unit quaternions ``(..., 4)`` ``(w, x, y, z)``
    with ``w >= 0``.

    Scalar first, unlike the reference GATr's ``(x, y, z, w)``. Refuses non-orthogonal and improper
    matrices ([`geomlin.validation.check_orthogonal`][]), then converts with Shepperd's method
    ([`geomlin.algebra.quaternions.shepperd_quaternion`][]).
    """
    check_tensor(R, "R", shape=(..., 3, 3), what="rotation matrices")
    check_orthogonal(R, "R", special=True)
    return shepperd_quaternion(R)


def embed_rigid_motion(R: Tensor, t: Tensor) -> Tensor:
    """Rigid motion ``p -> R p + t`` (``R (..., 3, 3)`` orthogonal, det +-1; ``t (..., 3)``) -> versor ``(..., 16)``.

    Proper rotations give even motors ``T * rotor``; improper ones (det -1) are written as
    ``R = R' H`` with ``H`` the reflection in the plane ``x = 0`` and give odd versors
    ``T * rotor(R') * e1``. ``R`` must be orthogonal to the dtype's tolerance
    ([`geomlin.validation.check_orthogonal`][]): a shear or a scaled
    rotation is refused rather than turned into some unrelated rotation.
    """
    check_tensor(R, "R", shape=(..., 3, 3), what="orthogonal matrices")
    check_orthogonal(R, "R")
    _check_last(t, 3, "translation")
    det = torch.linalg.det(R)
    improper = det < 0
    flip = torch.ones(3, dtype=R.dtype, device=R.device)
    flip[0] = -1.0
    R_proper = torch.where(improper[..., None, None], R * flip, R)  # R H: flips column 0
    rotor = embed_rotation(matrix_to_quaternion(R_proper))
    plane = torch.zeros(DIM, dtype=R.dtype, device=R.device)
    plane[E1] = 1.0
    rotor = torch.where(improper[..., None], geometric_product(rotor, plane.expand_as(rotor)), rotor)
    return geometric_product(embed_translation(t.to(R.dtype)).expand_as(rotor), rotor)


def rigid_motion_versor(g) -> Tensor:
    """A [`geomlin.groups.RigidTransform`][geomlin.groups.euclidean.RigidTransform] (single or batched) -> versor(s) ``(..., 16)``."""
    return embed_rigid_motion(g.R, g.t)
