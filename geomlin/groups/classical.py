"""The groups geomlin ships: classical Lie groups, finite groups and products.

Every group here is a [`Group`][] whose generators are
built in float64 from their textbook definitions; compact groups override
``sample`` with an exactly Haar-uniform sampler.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from geomlin.groups.base import (
    RANDOM_WORD_LENGTH,
    Group,
    check_elements,
    check_form,
    check_sample_count,
    check_sample_dtype,
    haar_orthogonal,
)
from geomlin.validation import check_int


def _unit(d: int, i: int, j: int) -> Tensor:
    """The matrix unit ``E_ij`` in ``R^{d x d}``, float64."""
    e = torch.zeros(d, d, dtype=torch.float64)
    e[i, j] = 1.0
    return e


def _so_generators(d: int) -> Tensor:
    """``(d(d-1)/2, d, d)`` antisymmetric generators ``E_ij - E_ji`` for ``i < j``."""
    gens = [_unit(d, i, j) - _unit(d, j, i) for i in range(d) for j in range(i + 1, d)]
    return torch.stack(gens) if gens else torch.zeros(0, d, d, dtype=torch.float64)


def _reflection(d: int, axis: int = 0) -> Tensor:
    """The reflection flipping coordinate ``axis``, ``(d, d)`` float64."""
    r = torch.eye(d, dtype=torch.float64)
    r[axis, axis] = -1.0
    return r


#: How many tolerances (in radians) the rotation angle of a C_k / D_k element may be off a multiple of 2 pi / k.
ANGLE_SLACK = 10.0


def _check_dim(n, name: str, minimum: int = 1) -> int:
    """A dimension or order: an int >= ``minimum`` (``TypeError`` for other kinds of value)."""
    return check_int(n, name, minimum=minimum)


def _check_determinant(g: Tensor, name: str, tol: float, group, sign: float = 1.0) -> None:
    """Refuse ``g`` unless ``det g = sign`` (to ``tol`` relative to ``|g|^d``)."""
    det = torch.linalg.det(g)
    scale = g.abs().amax(dim=(-2, -1)).pow(g.shape[-1]).clamp_min(1.0)

    def worst() -> str:
        return f", got {float(det.flatten()[int(((det - sign).abs() / scale).flatten().argmax())]):+.6f}"

    check_elements((det - sign).abs() <= 10 * tol * scale,
             f"{name} is not an element of {group}: its determinant must be {sign:+.0f}", worst)


class SO(Group):
    """Special orthogonal group SO(n) acting on R^n (Haar sampling via QR)."""

    def __init__(self, n: int):
        n = _check_dim(n, "SO(n): n")
        super().__init__(lie_algebra=_so_generators(n), d=n, name=f"SO({n})")
        self.n = n

    def is_subgroup_of(self, other) -> bool:
        """SO(n) lies in O(n) (and in itself)."""
        return isinstance(other, (SO, O)) and other.d == self.d

    def _check_membership(self, g: Tensor, name: str, tol: float) -> None:
        super()._check_membership(g, name, tol)
        _check_determinant(g, name, tol, self)

    def sample(self, n: int = 1, generator=None, dtype=torch.float64) -> Tensor:
        check_sample_dtype(dtype)
        return haar_orthogonal(check_sample_count(n), self.d, generator, special=True).to(dtype)


class O(Group):
    """Orthogonal group O(n): SO(n) plus the reflection of the first axis."""

    def __init__(self, n: int):
        n = _check_dim(n, "O(n): n")
        super().__init__(lie_algebra=_so_generators(n), discrete_generators=_reflection(n)[None],
                         d=n, name=f"O({n})")
        self.n = n

    def sample(self, n: int = 1, generator=None, dtype=torch.float64) -> Tensor:
        check_sample_dtype(dtype)
        return haar_orthogonal(check_sample_count(n), self.d, generator).to(dtype)


def symplectic_form(m: int) -> Tensor:
    """The symplectic form ``J = [[0, I_m], [-I_m, 0]]``, ``(2m, 2m)`` float64.

    Basis convention: coordinates are ordered ``(q_1..q_m, p_1..p_m)``; a matrix
    ``g`` is symplectic when ``g^T J g = J``.
    """
    eye = torch.eye(m, dtype=torch.float64)
    zero = torch.zeros(m, m, dtype=torch.float64)
    return torch.cat([torch.cat([zero, eye], 1), torch.cat([-eye, zero], 1)], 0)


class Sp(Group):
    """Real symplectic group Sp(2m, R) acting on R^(2m), form [`symplectic_form`][].

    Lie algebra: ``A = J S`` with ``S`` symmetric (``A^T J + J A = 0``),
    dimension ``m (2m + 1)``. The group is not compact; samples are
    exponentials of random algebra elements.
    """

    def __init__(self, m: int):
        m = _check_dim(m, "Sp(m): m")
        d = 2 * m
        J = symplectic_form(m)
        gens = []
        for i in range(d):
            for j in range(i, d):
                s = _unit(d, i, j) + _unit(d, j, i)
                gens.append(J @ s)
        super().__init__(lie_algebra=torch.stack(gens), d=d, name=f"Sp({m})")
        self.m = m
        self.form = J

    @property
    def invariant_form(self) -> Tensor:
        """The symplectic form ``J`` ([`symplectic_form`][])."""
        return symplectic_form(self.m)


class SL(Group):
    """Special linear group SL(n): traceless Lie algebra, not compact."""

    def __init__(self, n: int):
        n = _check_dim(n, "SL(n): n", minimum=2)
        gens = [_unit(n, i, j) for i in range(n) for j in range(n) if i != j]
        gens += [_unit(n, i, i) - _unit(n, i + 1, i + 1) for i in range(n - 1)]
        super().__init__(lie_algebra=torch.stack(gens), d=n, name=f"SL({n})")
        self.n = n

    def _check_membership(self, g: Tensor, name: str, tol: float) -> None:
        _check_determinant(g, name, tol, self)


#: The Minkowski metric diag(+1, -1, -1, -1) used by [`Lorentz`][].
MINKOWSKI_METRIC = torch.diag(torch.tensor([1.0, -1.0, -1.0, -1.0], dtype=torch.float64))


def _lorentz_algebra() -> Tensor:
    rotations = [_unit(4, i, j) - _unit(4, j, i) for i in range(1, 4) for j in range(i + 1, 4)]
    boosts = [_unit(4, 0, i) + _unit(4, i, 0) for i in range(1, 4)]
    return torch.stack(rotations + boosts)


class Lorentz(Group):
    """The full Lorentz group O(1,3) on (t, x, y, z) with metric diag(1,-1,-1,-1).

    Generators: 3 rotations, 3 boosts, parity ``diag(1,-1,-1,-1)`` and time
    reversal ``diag(-1,1,1,1)``.
    """

    def __init__(self):
        parity = torch.diag(torch.tensor([1.0, -1.0, -1.0, -1.0], dtype=torch.float64))
        time_reversal = torch.diag(torch.tensor([-1.0, 1.0, 1.0, 1.0], dtype=torch.float64))
        super().__init__(lie_algebra=_lorentz_algebra(),
                         discrete_generators=torch.stack([parity, time_reversal]),
                         d=4, name="O(1,3)")
        self.metric = MINKOWSKI_METRIC.clone()

    @property
    def invariant_form(self) -> Tensor:
        """The Minkowski metric ``diag(1, -1, -1, -1)``."""
        return MINKOWSKI_METRIC.clone()


class SO13p(Group):
    """The proper orthochronous Lorentz group SO+(1,3) (identity component of O(1,3))."""

    def __init__(self):
        super().__init__(lie_algebra=_lorentz_algebra(), d=4, name="SO+(1,3)")
        self.metric = MINKOWSKI_METRIC.clone()

    @property
    def invariant_form(self) -> Tensor:
        """The Minkowski metric ``diag(1, -1, -1, -1)``."""
        return MINKOWSKI_METRIC.clone()

    def is_subgroup_of(self, other) -> bool:
        """SO+(1,3) lies in O(1,3) (and in itself)."""
        return isinstance(other, (SO13p, Lorentz))

    def _check_membership(self, g: Tensor, name: str, tol: float) -> None:
        super()._check_membership(g, name, tol)
        _check_determinant(g, name, tol, self)
        check_elements(g[..., 0, 0] >= 1 - tol, f"{name} is not an element of {self}: it reverses the direction of time",
                 lambda: f" (g[0, 0] = {float(g[..., 0, 0].min()):+.6f} < 1)")


class Trivial(Group):
    """The trivial group acting on R^n: every linear map is equivariant."""

    def __init__(self, n: int):
        n = _check_dim(n, "Trivial(n): n")
        super().__init__(d=n, name=f"Trivial({n})")

    def _check_membership(self, g: Tensor, name: str, tol: float) -> None:
        err = (g - torch.eye(self.d, dtype=g.dtype, device=g.device)).abs().amax(dim=(-2, -1))
        check_elements(err <= tol, f"{name} is not an element of {self}: the only element is the identity",
                 lambda: f", got a matrix {float(err.max()):.2e} away from it")


class S(Group):
    """Symmetric group S_n as n x n permutation matrices (``(g x)_{p(i)} = x_i``).

    Generators: the transposition (0 1) and the n-cycle. Sampling draws
    uniform random permutations directly (no enumeration needed).
    """

    def __init__(self, n: int):
        n = _check_dim(n, "S(n): n")
        eye = torch.eye(n, dtype=torch.float64)
        gens = []
        if n >= 2:
            gens.append(eye[[1, 0] + list(range(2, n))])
        if n >= 3:
            gens.append(eye[list(range(1, n)) + [0]])
        gens_t = torch.stack(gens) if gens else torch.zeros(0, n, n, dtype=torch.float64)
        super().__init__(discrete_generators=gens_t, d=n, name=f"S({n})")
        self.n = n

    def _check_membership(self, g: Tensor, name: str, tol: float) -> None:
        off = torch.minimum((g - 1).abs(), g.abs()).amax(dim=(-2, -1))
        rows = (g.sum(-1) - 1).abs().amax(dim=-1)
        cols = (g.sum(-2) - 1).abs().amax(dim=-1)
        check_elements((off <= tol) & (rows <= tol) & (cols <= tol),
                 f"{name} is not an element of {self}: it must be a permutation matrix "
                 "(entries 0 or 1, one 1 in every row and column)")

    def sample(self, n: int = 1, generator=None, dtype=torch.float64) -> Tensor:
        n = check_sample_count(n)
        check_sample_dtype(dtype)
        perms = torch.argsort(torch.rand(n, self.d, generator=generator), dim=-1)
        eye = torch.eye(self.d, dtype=dtype)
        return eye[perms]


def _planar_rotation(angle: float) -> Tensor:
    c, s = math.cos(angle), math.sin(angle)
    return torch.tensor([[c, -s], [s, c]], dtype=torch.float64)


class C(Group):
    """Cyclic group C_k: rotations of the plane by multiples of 2 pi / k."""

    def __init__(self, k: int):
        k = _check_dim(k, "C(k): k")
        super().__init__(discrete_generators=_planar_rotation(2 * math.pi / k)[None], d=2,
                         name=f"C({k})")
        self.k = k

    def _check_membership(self, g: Tensor, name: str, tol: float) -> None:
        _check_rotation_by_multiple(g, name, tol, self, self.k, reflections=False)


class D(Group):
    """Dihedral group D_k: C_k plus the reflection ``diag(1, -1)`` (order 2k)."""

    def __init__(self, k: int):
        k = _check_dim(k, "D(k): k")
        flip = torch.diag(torch.tensor([1.0, -1.0], dtype=torch.float64))
        super().__init__(discrete_generators=torch.stack([_planar_rotation(2 * math.pi / k), flip]),
                         d=2, name=f"D({k})")
        self.k = k

    def _check_membership(self, g: Tensor, name: str, tol: float) -> None:
        _check_rotation_by_multiple(g, name, tol, self, self.k, reflections=True)


def _check_rotation_by_multiple(g: Tensor, name: str, tol: float, group, k: int, reflections: bool) -> None:
    """Elements of C_k / D_k: orthogonal, rotation angle a multiple of 2 pi / k (times a reflection).

    The angle may be off by ``ANGLE_SLACK * tol`` radians (an orthogonal matrix to ``tol`` has its
    angle to about ``tol``).
    """
    check_form(g, torch.eye(2, dtype=g.dtype, device=g.device), name, tol, f"{group}", True)
    det = torch.linalg.det(g)
    if not reflections:
        check_elements(det >= 0, f"{name} is not an element of {group}: it is a reflection (det -1)")
    flipped = torch.stack([g[..., 0], -g[..., 1]], dim=-1)  # g diag(1, -1)
    rot = torch.where(det[..., None, None] < 0, flipped, g)
    steps = torch.atan2(rot[..., 1, 0], rot[..., 0, 0]) * k / (2 * math.pi)
    check_elements((steps - steps.round()).abs() <= ANGLE_SLACK * tol * k / (2 * math.pi),
             f"{name} is not an element of {group}: its rotation angle is not a multiple of 2 pi / {k}")


def _block_diag_batch(a: Tensor, b: Tensor) -> Tensor:
    """Block-diagonal ``(..., da + db, da + db)`` from ``(..., da, da)`` and ``(..., db, db)``."""
    da, db = a.shape[-1], b.shape[-1]
    out = a.new_zeros(*a.shape[:-2], da + db, da + db)
    out[..., :da, :da] = a
    out[..., da:, da:] = b
    return out


class DirectProduct(Group):
    """``G1 x G2`` acting block-diagonally on ``R^(d1 + d2)``; samples are independent pairs."""

    def __init__(self, G1: Group, G2: Group):
        if not isinstance(G1, Group) or not isinstance(G2, Group):
            raise TypeError("DirectProduct takes two geomlin Groups, got "
                            f"{type(G1).__name__} and {type(G2).__name__}")
        d1, d2 = G1.d, G2.d
        eye1 = torch.eye(d1, dtype=torch.float64)
        eye2 = torch.eye(d2, dtype=torch.float64)
        zero1 = torch.zeros(d1, d1, dtype=torch.float64)
        zero2 = torch.zeros(d2, d2, dtype=torch.float64)
        lie = [_block_diag_batch(a, zero2) for a in G1.lie_algebra]
        lie += [_block_diag_batch(zero1, b) for b in G2.lie_algebra]
        disc = [_block_diag_batch(h, eye2) for h in G1.discrete_generators]
        disc += [_block_diag_batch(eye1, h) for h in G2.discrete_generators]
        d = d1 + d2
        super().__init__(
            lie_algebra=torch.stack(lie) if lie else None,
            discrete_generators=torch.stack(disc) if disc else None,
            d=d, name=f"{G1}x{G2}")
        self.factors = (G1, G2)

    def _check_membership(self, g: Tensor, name: str, tol: float) -> None:
        d1 = self.factors[0].d
        off = torch.maximum(g[..., :d1, d1:].abs().amax(dim=(-2, -1)), g[..., d1:, :d1].abs().amax(dim=(-2, -1)))
        check_elements(off <= tol, f"{name} is not an element of {self}: it must be block diagonal ({d1} + {self.d - d1})")
        self.factors[0]._check_membership(g[..., :d1, :d1], name, tol)
        self.factors[1]._check_membership(g[..., d1:, d1:], name, tol)

    def sample(self, n: int = 1, generator=None, dtype=torch.float64) -> Tensor:
        a = self.factors[0].sample(n, generator, dtype)
        b = self.factors[1].sample(n, generator, dtype)
        return _block_diag_batch(a, b)


class Z(Group):
    """Cyclic group Z_n in its regular representation: cyclic shifts of the coordinates of R^n.

    The generator sends ``e_j`` to ``e_{(j + 1) mod n}`` (EMLP's ``Z(n)``; not to be confused with
    [`C`][], the same abstract group rotating the plane).
    """

    def __init__(self, n: int):
        n = _check_dim(n, "Z(n): n")
        shift = torch.eye(n, dtype=torch.float64)[torch.roll(torch.arange(n), 1)]
        super().__init__(discrete_generators=shift[None], d=n, name=f"Z({n})")
        self.n = n

    def _check_membership(self, g: Tensor, name: str, tol: float) -> None:
        # a power of the shift: g e_j = e_{(j + s) mod n} with s read off the first column
        n = self.d
        s = g[..., :, 0].argmax(-1)
        i = torch.arange(n, device=g.device)
        expected = ((i[:, None] - i[None, :] - s[..., None, None]) % n == 0).to(g.dtype)
        err = (g - expected).abs().amax(dim=(-2, -1))
        check_elements(err <= tol, f"{name} is not an element of {self}: it must be a cyclic shift of the coordinates",
                 lambda: f" (off by {float(err.max()):.2e})")


class GL(Group):
    """General linear group GL(n): all invertible ``n x n`` matrices (not compact).

    Lie algebra: the matrix units ``E_ij`` (EMLP's ``GL(n)``, which generates the identity
    component GL+(n)); the reflection of the first axis reaches ``det < 0``. Tensor
    representations have the same invariants under GL(n) and GL+(n).
    """

    def __init__(self, n: int):
        n = _check_dim(n, "GL(n): n")
        gens = torch.stack([_unit(n, i, j) for i in range(n) for j in range(n)])
        super().__init__(lie_algebra=gens, discrete_generators=_reflection(n)[None], d=n, name=f"GL({n})")
        self.n = n


def realify(M: Tensor) -> Tensor:
    """The real ``(..., 2n, 2n)`` matrix of a complex ``(..., n, n)`` one: ``A + iB -> [[A, -B], [B, A]]``.

    Convention: ``z = x + iy`` in C^n is ``(x_1..x_n, y_1..y_n)`` in R^(2n), so ``realify(M)`` acts
    on R^(2n) as ``M`` acts on C^n, and ``realify(M N) = realify(M) realify(N)``.
    """
    A, B = M.real, M.imag
    return torch.cat([torch.cat([A, -B], -1), torch.cat([B, A], -1)], -2)


def complexify(g: Tensor) -> Tensor:
    """Inverse of [`realify`][] on complex-linear matrices: ``(..., 2n, 2n)`` real -> ``(..., n, n)`` complex."""
    n = g.shape[-1] // 2
    return torch.complex(g[..., :n, :n], g[..., n:, :n])


def _unitary_algebra(n: int, special: bool) -> Tensor:
    """Realified basis of u(n) (skew-Hermitian) or su(n) (also traceless), ``(k, 2n, 2n)`` float64."""
    gens = []
    for i in range(n):
        for j in range(i + 1, n):
            gens.append(torch.complex(_unit(n, i, j) - _unit(n, j, i), torch.zeros(n, n, dtype=torch.float64)))
            gens.append(torch.complex(torch.zeros(n, n, dtype=torch.float64), _unit(n, i, j) + _unit(n, j, i)))
    zero = torch.zeros(n, n, dtype=torch.float64)
    if special:
        gens += [torch.complex(zero, _unit(n, i, i) - _unit(n, i + 1, i + 1)) for i in range(n - 1)]
    else:
        gens += [torch.complex(zero, _unit(n, i, i)) for i in range(n)]
    if not gens:
        return torch.zeros(0, 2 * n, 2 * n, dtype=torch.float64)
    return realify(torch.stack(gens))


def _haar_unitary(n: int, d: int, generator, special: bool) -> Tensor:
    """Haar-uniform ``(n, d, d)`` complex128 samples of U(d) or SU(d) (Mezzadri 2007, Sec. 5)."""
    re = torch.randn(n, d, d, generator=generator, dtype=torch.float64)
    im = torch.randn(n, d, d, generator=generator, dtype=torch.float64)
    q, r = torch.linalg.qr(torch.complex(re, im))
    phase = torch.diagonal(r, dim1=-2, dim2=-1)
    q = q * (phase / phase.abs().clamp_min(torch.finfo(torch.float64).tiny))[..., None, :]
    if special:  # divide by an n-th root of the determinant (a phase)
        q = q * torch.exp(-1j * torch.angle(torch.linalg.det(q)) / d)[..., None, None]
    return q


class U(Group):
    """Unitary group U(n), realified: acts on C^n = R^(2n) through [`realify`][] (a subgroup of SO(2n)).

    geomlin's reps are real, so ``V(U(n))`` is C^n as the real space R^(2n) (``z = x + iy`` ->
    ``(x, y)``) and ``T(p, q)`` its real tensors: ``T(1, 1)`` is every real-linear map of C^n, among
    them the complex structure ``J = realify(i I)``, which is itself an invariant. Complexified,
    ``V = C^n + conj(C^n)``, so the real invariants of ``T(k)`` number
    ``sum_a binom(k, a) dim Inv(C^n^(x a) (x) conj(C^n)^(x (k - a)))`` (EMLP's complex ``T(a, k - a)``).
    Lie algebra: the realified skew-Hermitian matrices (``n^2``); Haar sampling by complex QR.
    """

    special = False

    def __init__(self, n: int):
        n = _check_dim(n, f"{type(self).__name__}(n): n")
        super().__init__(lie_algebra=_unitary_algebra(n, self.special), d=2 * n, name=f"{type(self).__name__}({n})")
        self.n = n

    @property
    def complex_structure(self) -> Tensor:
        """``J = realify(i I)``: multiplication by ``i`` on R^(2n), ``(2n, 2n)`` float64 (commutes with the group)."""
        return realify(1j * torch.eye(self.n, dtype=torch.complex128))

    def _check_membership(self, g: Tensor, name: str, tol: float) -> None:
        super()._check_membership(g, name, tol)  # orthogonal
        key = (g.device, g.dtype)
        cache = self.__dict__.setdefault("_structure_on", {})
        if key not in cache:  # one copy per (device, dtype), as the invariant forms
            cache[key] = self.complex_structure.to(device=g.device, dtype=g.dtype)
        J = cache[key]
        err = (g @ J - J @ g).abs().amax(dim=(-2, -1))
        check_elements(err <= 10 * tol, f"{name} is not an element of {self}: it must commute with the complex structure "
                 "J = [[0, -I], [I, 0]] (be complex-linear)", lambda: f" (off by {float(err.max()):.2e})")

    def sample(self, n: int = 1, generator=None, dtype=torch.float64) -> Tensor:
        check_sample_dtype(dtype)
        return realify(_haar_unitary(check_sample_count(n), self.n, generator, self.special)).to(dtype)


class SU(U):
    """Special unitary group SU(n), realified as [`U`][] (complex determinant 1; ``n^2 - 1`` generators)."""

    special = True

    def is_subgroup_of(self, other) -> bool:
        """SU(n) lies in U(n) (and in itself)."""
        return isinstance(other, U) and other.d == self.d

    def _check_membership(self, g: Tensor, name: str, tol: float) -> None:
        super()._check_membership(g, name, tol)
        if g.device.type == "mps":  # no complex determinant there
            return
        det = torch.linalg.det(complexify(g))
        err = (det - 1).abs()
        check_elements(err <= 10 * tol, f"{name} is not an element of {self}: its complex determinant must be 1",
                 lambda: f" (off by {float(err.max()):.2e})")


#: Order of the Rubik's cube group (Singmaster 1981): 2^27 3^14 5^3 7^2 11.
RUBIKS_CUBE_ORDER = 43_252_003_274_489_856_000


def _rubiks_stickers() -> list[tuple[tuple[int, int, int], tuple[int, int, int]]]:
    """The 48 non-centre stickers as (cubie position in {-1, 0, 1}^3, outward face normal), sorted."""
    stickers = []
    for axis in range(3):
        for side in (1, -1):
            normal = tuple(side if a == axis else 0 for a in range(3))
            for p in ((x, y, z) for x in (-1, 0, 1) for y in (-1, 0, 1) for z in (-1, 0, 1)):
                if p[axis] == side and sum(c != 0 for c in p) >= 2:
                    stickers.append((p, normal))
    return stickers


def _quarter_turn(axis: int, side: int, p: tuple[int, int, int]) -> tuple[int, int, int]:
    """Rotate ``p`` by 90 degrees about ``side * e_axis`` (counterclockwise seen from outside)."""
    a, b = [i for i in range(3) if i != axis]  # (a, b, axis) is a right-handed cyclic order up to sign
    sign = side if (axis, a, b) in ((0, 1, 2), (1, 2, 0), (2, 0, 1)) else -side
    out = list(p)
    out[a], out[b] = -sign * p[b], sign * p[a]
    return tuple(out)


def _rubiks_generators() -> Tensor:
    """The six face quarter turns as ``(6, 48, 48)`` permutation matrices of the stickers."""
    stickers = _rubiks_stickers()
    where = {s: i for i, s in enumerate(stickers)}
    eye = torch.eye(len(stickers), dtype=torch.float64)
    gens = []
    for axis in range(3):
        for side in (1, -1):
            image = []
            for p, normal in stickers:
                if p[axis] == side:  # in the turning layer
                    p, normal = _quarter_turn(axis, side, p), _quarter_turn(axis, side, normal)
                image.append(where[(p, normal)])
            gens.append(eye[:, image])  # column j is e_{image[j]}: sticker j moves to image[j]
    return torch.stack(gens)


class RubiksCube(Group):
    """The Rubik's cube group: quarter turns of the six faces permuting the 48 non-centre stickers.

    Acts on R^48 by permutation matrices (a sticker is a cubie position and a face normal; the
    generators turn the layer of a face by 90 degrees). Order [`RUBIKS_CUBE_ORDER`][], too large to
    enumerate: samples are random words of ``RANDOM_WORD_LENGTH`` generators. ``check_element``
    checks that ``g`` is a permutation matrix that keeps corner stickers among corner stickers and
    edge stickers among edge stickers (a necessary condition; deciding membership exactly needs a
    Schreier-Sims computation, which geomlin does not do).
    """

    def __init__(self):
        super().__init__(discrete_generators=_rubiks_generators(), d=48, name="RubiksCube")
        self._corner = torch.tensor([sum(c != 0 for c in p) == 3 for p, _ in _rubiks_stickers()])

    def elements(self) -> Tensor:
        raise ValueError(f"{self} has {RUBIKS_CUBE_ORDER:,} elements, too many to enumerate")

    def sample(self, n: int = 1, generator=None, dtype=torch.float64) -> Tensor:
        n = check_sample_count(n)
        check_sample_dtype(dtype)
        perms = self.discrete_generators.argmax(1)  # (6, 48): column j's 1 sits in row perms[:, j]
        word = torch.arange(48).repeat(n, 1)
        for _ in range(RANDOM_WORD_LENGTH):
            choice = torch.randint(len(perms), (n,), generator=generator)
            word = torch.gather(perms[choice], 1, word)  # apply the chosen turn after the word so far
        out = torch.zeros(n, 48, 48, dtype=dtype)
        out.scatter_(1, word[:, None, :], 1.0)
        return out

    def _check_membership(self, g: Tensor, name: str, tol: float) -> None:
        off = torch.minimum((g - 1).abs(), g.abs()).amax(dim=(-2, -1))
        rows = (g.sum(-1) - 1).abs().amax(dim=-1)
        cols = (g.sum(-2) - 1).abs().amax(dim=-1)
        corner = self.__dict__.setdefault("_corner_on", {}).get((g.device, g.dtype))
        if corner is None:  # one copy per (device, dtype)
            corner = self._corner_on[(g.device, g.dtype)] = self._corner.to(device=g.device, dtype=g.dtype)
        mixed = (corner @ g @ (1 - corner)).abs() + ((1 - corner) @ g @ corner).abs()
        check_elements((off <= tol) & (rows <= tol) & (cols <= tol) & (mixed <= tol),
                 f"{name} is not an element of {self}: it must be a permutation matrix of the stickers that "
                 "keeps corner stickers among corner stickers")
