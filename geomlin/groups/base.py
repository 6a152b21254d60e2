"""Matrix groups defined by their generators.

A group ``G`` acting on ``R^d`` is described, as in EMLP (Finzi et al. 2021,
"A Practical Method for Constructing Equivariant MLPs for Arbitrary Matrix
Groups", Sec. 4), by

* ``lie_algebra``: ``(k, d, d)`` infinitesimal generators ``A_i`` of the
  identity component (``exp(t A_i)`` lies in ``G``), and
* ``discrete_generators``: ``(m, d, d)`` group elements ``h_j`` that, together
  with the identity component, generate the whole group.

A linear map is equivariant to ``G`` iff it commutes with every ``A_i`` (in the
Lie algebra representation) and every ``h_j``, which is what
[`geomlin.linear.equivariant_basis`][geomlin.linear.solver.equivariant_basis] solves.

Every group geomlin builds follows one protocol, [`SymmetryGroup`][]: its generators, ``sample``,
``key``, ``is_subgroup_of`` and a ``name`` that [`geomlin.groups.as_group`][geomlin.groups.names.as_group]
parses back. [`Group`][] is the matrix group acting on ``R^d``; the rigid motions
([`geomlin.groups.Euclidean`][geomlin.groups.euclidean.Euclidean]) and the versor groups
([`geomlin.groups.versor`][]) follow the same protocol with other kinds of elements.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable

import torch
from torch import Tensor

from geomlin.groups.closure import (
    REFINED_RTOL,
    check_finite_order,
    check_inner_product,
    close,
    invariant_forms,
    polar,
    refine,
)
from geomlin.precision import full_precision
from geomlin.tables import device_cache
from geomlin.validation import (
    check_condition,
    check_finite,
    check_int,
    check_nonnegative_int,
    check_tensor,
    tolerance,
)

#: Finite groups with at most this many elements are enumerated once so that
#: [`Group.sample`][] is exactly uniform; larger ones use long random words.
MAX_ENUMERATED_ORDER = 50_000
#: Length of the random generator words used for large finite groups.
RANDOM_WORD_LENGTH = 64
#: Standard deviation of the Lie algebra coefficients used to sample
#: non-compact groups (keeps entries of ``exp(A)`` moderate for float64 tests).
NONCOMPACT_SAMPLE_SCALE = 0.5
#: Two products of exact (float64 or integer) generators are the same element when they agree to this,
#: relative to the generators' largest entry.
ELEMENT_RTOL = 1e-8
#: Two distinct elements of a group from low-precision generators must differ by this many times the
#: dtype's tolerance (else the dtype cannot tell them apart).
SEPARATION = 4.0
#: A discrete generator whose smallest singular value is below this fraction of its largest is
#: singular: no group contains it.
SINGULAR_RTOL = 1e-10
#: Tolerance of [`Group.is_orthogonal`][] on the float64 generators.
ORTHOGONAL_ATOL = 1e-10


def _as_generator_tensor(x, name: str, d: int | None) -> tuple[Tensor, torch.dtype | None]:
    """Validate generators: a ``(k, d, d)`` float64 tensor, and the dtype whose tolerance they carry.

    Accepts tensors, numpy arrays and nested lists of real numbers (lists of floats become float32,
    torch's default). Integer entries (permutation matrices), in any dtype, and float64 generators
    are exact (``None``); other floating-point generators (their dtype returned) are taken to that
    dtype's [`geomlin.validation.tolerance`][] (``1e-3`` for float32). Complex and boolean input is refused.
    """
    if x is None:
        if d is None:
            raise ValueError(f"{name} is None and the dimension d is unknown")
        return torch.zeros(0, d, d, dtype=torch.float64), None
    try:
        t = torch.as_tensor(x)
    except (TypeError, ValueError, RuntimeError) as err:
        raise TypeError(f"{name} must be a real tensor of shape (k, d, d), got {type(x).__name__}") from err
    if t.is_complex() or t.dtype == torch.bool or not (t.is_floating_point() or t.dtype in (
            torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)):
        raise TypeError(f"{name} must be a real float or int tensor, got dtype {t.dtype}")
    given = t.dtype
    t = t.to(torch.float64)
    if t.ndim == 2:
        t = t.unsqueeze(0)
    if t.ndim != 3 or t.shape[-1] != t.shape[-2]:
        raise ValueError(
            f"{name} must have shape (k, d, d) with square (d, d) matrices, got shape {tuple(t.shape)}"
        )
    if d is not None and t.shape[0] > 0 and t.shape[-1] != d:
        raise ValueError(f"{name} act on R^{t.shape[-1]} but the group acts on R^{d}")
    if not torch.isfinite(t).all():
        raise ValueError(f"{name} contain NaN or inf entries")
    exact = given == torch.float64 or not given.is_floating_point or bool((t == t.round()).all())
    return t, None if exact else given


def _check_invertible(H: Tensor, name: str) -> None:
    """Refuse singular matrices among ``H (m, d, d)``: they are not elements of any group."""
    if H.shape[0] == 0:
        return
    sv = torch.linalg.svdvals(H)
    ratio = sv[:, -1] / sv[:, 0].clamp_min(torch.finfo(torch.float64).tiny)
    bad = torch.nonzero(ratio < SINGULAR_RTOL)
    if len(bad):
        i = int(bad[0, 0])
        raise ValueError(f"{name}[{i}] is singular (smallest / largest singular value "
                         f"{float(ratio[i]):.1e}), so it is not an element of any group of "
                         "invertible matrices")


class SymmetryGroup:
    """The protocol every geomlin group follows (EMLP: a group is its generators).

    Attributes
    ----------
    name : str
        how the group prints (``repr`` and ``str``); for every group geomlin builds,
        [`geomlin.groups.as_group`][geomlin.groups.names.as_group] parses it back to an equal group.
    lie_algebra : Tensor of shape (k, m, m)
        float64 generators of the identity component in the group's defining matrix
        representation (``R^d`` for a matrix group; homogeneous coordinates for rigid motions;
        the vectors of the algebra for versor groups).
    discrete_generators : Tensor of shape (h, m, m)
        float64 elements that, with the identity component, generate the whole group, in the
        same representation.

    Notes
    -----
    Subclasses implement [`sample`][] and [`key`][]; equality and hashing follow the key, so two
    groups are equal when they are the same group, whatever sampling options they carry.
    [`is_subgroup_of`][] says which other groups contain this one (itself by default).
    """

    name: str = "SymmetryGroup"

    def sample(self, n: int = 1, generator: torch.Generator | None = None, dtype: torch.dtype = torch.float64):
        """``n`` random elements (indexable as ``elements[i]``; matrices, rigid motions or versors)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement sample")

    def key(self) -> tuple:
        """A hashable key identifying the group (used for caching and equality)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement key")

    def is_subgroup_of(self, other) -> bool:
        """True when this group is (known to be) contained in ``other``; every group lies in itself."""
        return self == other

    def __eq__(self, other) -> bool:
        return isinstance(other, SymmetryGroup) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())

    def __repr__(self) -> str:
        return self.name


class Group(SymmetryGroup):
    """A matrix group given by Lie algebra and discrete generators.

    Parameters
    ----------
    lie_algebra : Tensor or array_like of shape (k, d, d), optional
        Generators of the Lie algebra (``k`` may be 0).
    discrete_generators : Tensor or array_like of shape (m, d, d), optional
        Discrete generators (``m`` may be 0).
    name : str, optional
        Readable name used by ``repr`` and error messages.
    d : int, optional
        Dimension of the defining representation; inferred from the
        generators when omitted.

    Notes
    -----
    A user-defined group is either ``Group(lie_algebra=..., discrete_generators=...,
    name=...)`` or a subclass that passes its generators to ``super().__init__``.
    Elements are float64 ``(d, d)`` matrices acting on column vectors.

    A group with ``discrete_generators`` alone is finite. float64 and integer-valued generators are
    exact. Generators in a lower precision (float32, as a list of floats becomes; float16, bfloat16)
    are taken to their dtype's tolerance: the group they generate to that tolerance is enumerated
    and the generators replaced by exact ones ([`geomlin.groups.closure.refine`][]), so a float32
    60-degree rotation, or one with entries rounded to ``0.866``, generates C6 (with an antisymmetric
    Lie algebra, such generators are replaced by their nearest orthogonal matrices). Generators of no
    finite group (``diag(2, 1)``, a shear: infinite order) are refused. Generators need not be
    orthogonal: a finite group in a non-orthonormal basis preserves the inner product
    [`invariant_form`][], and the equivariant bases are exact either way.
    """

    def __init__(self, lie_algebra=None, discrete_generators=None, name: str | None = None,
                 d: int | None = None):
        if lie_algebra is None and discrete_generators is None and d is None:
            raise ValueError("a Group needs lie_algebra, discrete_generators or d")
        if d is not None:
            d = check_int(d, "d", minimum=1)
        lie = None if lie_algebra is None else _as_generator_tensor(lie_algebra, "lie_algebra", d)[0]
        if d is None and lie is not None and lie.shape[0]:
            d = lie.shape[-1]
        disc, disc_dtype = (None, None) if discrete_generators is None else _as_generator_tensor(
            discrete_generators, "discrete_generators", d)
        if d is None and disc is not None and disc.shape[0]:
            d = disc.shape[-1]
        if d is None:
            raise ValueError("the generators are empty, so the dimension d is unknown; pass d=")
        if name is not None and not isinstance(name, str):
            raise TypeError(f"name must be a str, got {type(name).__name__}")
        self.d = int(d)
        self.lie_algebra = lie if lie is not None and lie.shape[0] else torch.zeros(0, self.d, self.d,
                                                                                      dtype=torch.float64)
        self.discrete_generators = (disc if disc is not None and disc.shape[0]
                                    else torch.zeros(0, self.d, self.d, dtype=torch.float64))
        for gens, what in ((self.lie_algebra, "lie_algebra"), (self.discrete_generators, "discrete_generators")):
            if gens.shape[-1] != self.d:
                raise ValueError(f"{what} act on R^{gens.shape[-1]} but the group acts on R^{self.d}")
        _check_invertible(self.discrete_generators, "discrete_generators")
        self.name = name or type(self).__name__
        self._elements: Tensor | None = None
        if self.is_finite and self.discrete_generators.shape[0]:
            if disc_dtype is not None:
                self.discrete_generators, self._elements = _exact_finite_group(self.discrete_generators, disc_dtype)
            check_finite_order(self.discrete_generators, "discrete_generators")
            if not self.is_orthogonal:
                check_inner_product(self.discrete_generators, "discrete_generators")
        elif disc_dtype is not None:
            self.discrete_generators = _exact_orthogonal(self.discrete_generators, self.lie_algebra, disc_dtype)

    # ------------------------------------------------------------------ identity
    def key(self) -> tuple:
        """A hashable key identifying the group (used for caching and equality).

        Built from the generators' bytes once; generators are treated as immutable.
        """
        cached = self.__dict__.get("_key")
        if cached is None:
            h = hashlib.sha1()
            h.update(self.lie_algebra.contiguous().numpy().tobytes())
            h.update(b"|")
            h.update(self.discrete_generators.contiguous().numpy().tobytes())
            cached = (type(self).__name__, self.d, h.hexdigest())
            self._key = cached
        return cached

    # --------------------------------------------------------------- properties
    @property
    def is_finite(self) -> bool:
        """True when the group has no continuous part (``k == 0``)."""
        return self.lie_algebra.shape[0] == 0

    @property
    def is_orthogonal(self) -> bool:
        """True when every generator preserves the Euclidean inner product."""
        cached = self.__dict__.get("_is_orthogonal")
        if cached is None:
            A = self.lie_algebra
            H = self.discrete_generators
            eye = torch.eye(self.d, dtype=torch.float64)
            lie_ok = torch.allclose(A, -A.transpose(-1, -2), atol=ORTHOGONAL_ATOL)
            disc_ok = torch.allclose(H @ H.transpose(-1, -2), eye.expand_as(H), atol=ORTHOGONAL_ATOL)
            cached = self._is_orthogonal = bool(lie_ok and disc_ok)
        return cached

    @property
    def invariant_form(self) -> Tensor | None:
        """The ``(d, d)`` bilinear form ``B`` every element preserves (``g^T B g = B``), if known.

        The identity for orthogonal groups, ``J`` for Sp, the Minkowski metric for the Lorentz
        groups; for a finite group with non-orthogonal generators (enumerable: at most
        ``MAX_ENUMERATED_ORDER`` elements) the invariant inner product ``mean_g g^T g``; for another
        group given by its generators, the symmetric form its generators preserve when there is one
        up to scale ([`geomlin.groups.closure.invariant_forms`][]: SO(2) in a sheared basis). Scaled
        to spectral norm 1; ``None`` for a group without a known form. A copy (safe to modify).
        """
        if self.is_orthogonal:
            return torch.eye(self.d, dtype=torch.float64)
        if "_found_form" not in self.__dict__:
            B = None
            if self.is_finite:
                E = self._closure_elements()
                B = None if E is None else (E.transpose(-1, -2) @ E).mean(0)
            else:
                forms = invariant_forms(self.discrete_generators, self.lie_algebra)
                B = forms[0] if forms is not None and len(forms) == 1 else None
            self._found_form = None if B is None else B / torch.linalg.matrix_norm(B, 2)
        return None if self._found_form is None else self._found_form.clone()

    @property
    def is_compact(self) -> bool:
        """True for groups whose sampling is Haar-uniform (orthogonal groups)."""
        return self.is_orthogonal

    # --------------------------------------------------------------- membership
    def check_element(self, g, name: str = "g") -> Tensor:
        """Refuse ``g`` unless it is a float tensor ``(..., d, d)`` of elements of this group.

        Checks the shape and dtype, finiteness and a cheap membership test to the tolerance of
        ``g``'s dtype ([`geomlin.validation.tolerance`][], relative to ``|g|^2``
        for non-compact groups): the group's invariant form ``g^T B g = B`` when it has one (orthogonality for
        orthogonal groups), plus what a subclass adds (determinant, permutation entries). Groups
        without a known form only check invertibility. On the CPU a failure raises at once (in
        float64, with the offending value); on an accelerator the value tests are deferred
        ([`geomlin.validation.check_condition`][]: no host synchronisation).
        Returns ``g``.
        """
        check_tensor(g, name, shape=(..., self.d, self.d), what=f"elements of {self}")
        if g.numel() == 0 or g.device.type == "meta" or torch.compiler.is_compiling():
            return g
        check_finite(g, name)
        work = g.detach()
        if work.device.type == "cpu":
            work = work.to(torch.float64)
        elif work.dtype in (torch.float16, torch.bfloat16):
            work = work.float()  # determinants and products of half-precision matrices are not supported everywhere
        with full_precision(work):  # the caller's autocast must not round the test (geomlin.precision)
            self._check_membership(work, name, tolerance(g.dtype))
        return g

    def _check_membership(self, g: Tensor, name: str, tol: float) -> None:
        """Membership test on ``g (..., d, d)`` (float64 on the CPU); refuses through ``check_elements``."""
        B = self._invariant_form_on(g.device, g.dtype)
        if B is None:
            det = torch.linalg.det(g).abs()
            scale = torch.linalg.matrix_norm(g).pow(self.d).clamp_min(1.0)
            check_elements(det > tol * scale, f"{name} contains a singular matrix, which is not an element of {self}")
            return
        check_form(g, B, name, tol, f"{self}", self.is_orthogonal)

    def _invariant_form_on(self, device, dtype) -> Tensor | None:
        """[`invariant_form`][] on ``device`` in ``dtype``, cached per (group, device, dtype) (read-only)."""
        B = self.invariant_form
        if B is None:
            return None
        return device_cache(("groups:invariant-form", self.key()), lambda: B, device, dtype)  # equal groups share it

    # ----------------------------------------------------------------- sampling
    def sample(self, n: int = 1, generator: torch.Generator | None = None,
               dtype: torch.dtype = torch.float64) -> Tensor:
        """Draw ``n`` random group elements.

        Returns
        -------
        Tensor
            Tensor of shape ``(n, d, d)`` and the requested dtype.

            Finite groups: exactly uniform when the order is at most
            ``MAX_ENUMERATED_ORDER`` (the group is enumerated once), otherwise a
            long random word in the generators. Groups with a Lie algebra: the
            exponential of a random algebra element times a random word in the
            discrete generators. Subclasses with a known Haar measure override this.
        """
        n = check_sample_count(n)
        check_sample_dtype(dtype)
        if self.is_finite:
            out = self._sample_finite(n, generator)
        else:
            scale = math.pi if self.is_compact else NONCOMPACT_SAMPLE_SCALE
            k = self.lie_algebra.shape[0]
            coeffs = torch.randn(n, k, generator=generator, dtype=torch.float64) * scale
            out = torch.linalg.matrix_exp(torch.einsum("nk,kij->nij", coeffs, self.lie_algebra))
            out = self._random_discrete_words(n, generator) @ out
        return out.to(dtype)

    def elements(self) -> Tensor:
        """All elements of a finite group, ``(order, d, d)`` float64.

        Raises ``ValueError`` for groups with a Lie algebra, more than ``MAX_ENUMERATED_ORDER``
        elements, or unbounded elements (the generators generate no finite group).
        """
        if not self.is_finite:
            raise ValueError(f"{self} has a Lie algebra and cannot be enumerated")
        E = self._closure_elements()
        if E is None:
            raise ValueError(f"{self} cannot be enumerated: {self._closure_problem}")
        return E

    def _closure_elements(self) -> Tensor | None:
        """The enumerated elements, or ``None`` (with ``_closure_problem`` saying why); computed once."""
        if self._elements is None and "_closure_problem" not in self.__dict__:
            found = close(self.discrete_generators, ELEMENT_RTOL, MAX_ENUMERATED_ORDER)
            if found.complete:
                self._elements = found.elements
            else:
                self._closure_unbounded = found.unbounded
                self._closure_problem = found.problem + ("" if found.unbounded else (
                    f"; MAX_ENUMERATED_ORDER = {MAX_ENUMERATED_ORDER}, and sample() draws random words instead"))
        return self._elements

    def _sample_finite(self, n: int, generator) -> Tensor:
        elems = self._closure_elements()
        if elems is None:
            if self._closure_unbounded:
                raise ValueError(f"{self} has no uniform samples: {self._closure_problem}")
            return self._random_discrete_words(n, generator, RANDOM_WORD_LENGTH)
        idx = torch.randint(len(elems), (n,), generator=generator)
        return elems[idx]

    def _random_discrete_words(self, n: int, generator, length: int | None = None) -> Tensor:
        H = self.discrete_generators
        eye = torch.eye(self.d, dtype=torch.float64).expand(n, self.d, self.d).clone()
        m = H.shape[0]
        if m == 0:
            return eye
        if length is None:
            # a short word: every discrete generator appears with probability 1/2,
            # enough to reach every connected component of the groups we ship
            length = 2 * m
        out = eye
        for _ in range(length):
            idx = torch.randint(m + 1, (n,), generator=generator)
            choice = torch.cat([H, torch.eye(self.d, dtype=torch.float64)[None]], 0)[idx]
            out = choice @ out
        return out


def check_elements(ok: Tensor, message: str, detail: Callable[[], str] | None = None) -> None:
    """Refuse group elements unless every entry of ``ok`` is True.

    On the CPU a ``ValueError(message + detail())`` is raised at once (``detail`` may read the
    values); on an accelerator the test is deferred with ``message`` alone
    ([`geomlin.validation.check_condition`][]).
    """
    if ok.device.type != "cpu":
        check_condition(ok, message)
    elif ok.numel() and not bool(ok.all()):
        raise ValueError(message + (detail() if detail is not None else ""))


def check_form(g: Tensor, B: Tensor, name: str, tol: float, group: str, orthogonal: bool) -> None:
    """Refuse ``g`` unless ``g^T B g = B`` to ``tol`` relative to ``max(1, |g|^2)`` (``orthogonal``: ``B = I``)."""
    lhs = g.transpose(-1, -2) @ B @ g
    err = (lhs - B).abs().amax(dim=(-2, -1))
    scale = g.abs().amax(dim=(-2, -1)).pow(2).clamp_min(1.0)
    rel = err / scale
    what = "orthogonal (g g^T = I)" if orthogonal else "form-preserving (g^T B g = B)"
    check_elements(rel <= tol, f"{name} is not an element of {group}: it must be {what}",
             lambda: f", but the relative error is {float(rel.max()):.2e} > {tol:.0e}")



def _exact_orthogonal(H: Tensor, lie_algebra: Tensor, dtype: torch.dtype) -> Tensor:
    """Low-precision discrete generators of a group with an antisymmetric Lie algebra: their nearest
    orthogonal matrices when they are within ``dtype``'s tolerance of orthogonal (a rounded reflection
    of O(2)); else as given. Only their component of the group matters, which a rounding error keeps."""
    eye = torch.eye(H.shape[-1], dtype=torch.float64)
    antisymmetric = torch.allclose(lie_algebra, -lie_algebra.transpose(-1, -2), atol=ORTHOGONAL_ATOL)
    near = bool((H.transpose(-1, -2) @ H - eye).abs().max() <= tolerance(dtype))
    return polar(H) if antisymmetric and near else H


def _exact_finite_group(H: Tensor, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    """Exact generators and elements of the finite group that generators ``H`` given in ``dtype`` approximate.

    Generators within ``tol`` of orthogonal are first replaced by their nearest orthogonal matrices
    (rounding shrinks or stretches them, and a scale error grows with every product). The closure
    identifies products within ``tol`` (the dtype's tolerance, relative to the entries);
    [`geomlin.groups.closure.refine`][] then makes the generators exact. Refused, with the reason, when
    the closure does not end, the refinement does not converge, or two elements are closer than
    ``SEPARATION * tol`` (the dtype cannot tell them apart).
    """
    tol = tolerance(dtype)
    what = f"discrete_generators given in {str(dtype).removeprefix('torch.')} (taken to its tolerance {tol:.0e})"
    hint = "; pass float64 generators, which geomlin takes as exact"
    eye = torch.eye(H.shape[-1], dtype=torch.float64)
    orthogonal = bool((H.transpose(-1, -2) @ H - eye).abs().max() <= tol)
    start = polar(H) if orthogonal else H
    found = close(start, tol, MAX_ENUMERATED_ORDER)
    if not found.complete:
        raise ValueError(f"the group generated by the {what} is not finite: {found.problem}{hint}")
    gens, elements, err = refine(start, found, orthogonal)
    scale = max(1.0, float(H.abs().max()))
    if err > REFINED_RTOL:
        raise ValueError(f"the {what} are not within that tolerance of a finite group's elements (products "
                         f"disagree by {err:.1e} after averaging){hint}")
    moved = float((gens - H).abs().max()) / scale
    if moved > tol:
        raise ValueError(f"the {what} are {moved:.1e} from the nearest exact generators of the finite group they "
                         f"approximate, more than the tolerance{hint}")
    nearest = float((elements[1:] - eye).abs().amax((-2, -1)).min()) / scale if len(elements) > 1 else math.inf
    if nearest < SEPARATION * tol:
        raise ValueError(f"the {what} cannot resolve the group: an element differs from the identity by {nearest:.1e}, "
                         f"less than {SEPARATION:g} times the tolerance{hint}")
    return gens, elements


def check_sample_dtype(dtype) -> None:
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point torch.dtype, got {dtype!r}")


def check_sample_count(n) -> int:
    """The number of samples: an int >= 0."""
    return check_nonnegative_int(n, "the number of samples n")


def haar_orthogonal(n: int, d: int, generator=None, special: bool = False) -> Tensor:
    """Haar-uniform samples of O(d) (or SO(d) when ``special``), ``(n, d, d)`` float64.

    QR of a Gaussian matrix with the signs of ``diag(R)`` absorbed into ``Q``
    (Mezzadri 2007, "How to generate random matrices from the classical compact
    groups", Sec. 5). For SO(d) the first column is flipped when ``det = -1``,
    which maps the Haar measure of O(d)'s other coset onto SO(d)'s.
    """
    n = check_sample_count(n)
    d = check_int(d, "d", minimum=1)
    z = torch.randn(n, d, d, generator=generator, dtype=torch.float64)
    q, r = torch.linalg.qr(z)
    signs = torch.sign(torch.diagonal(r, dim1=-2, dim2=-1))
    signs[signs == 0] = 1.0
    q = q * signs[..., None, :]
    if special:
        det = torch.linalg.det(q)
        q[..., :, 0] = q[..., :, 0] * det[..., None]
    return q


