"""The space of equivariant linear maps between two representations.

For a group with Lie algebra generators ``A_i`` and discrete generators ``h_j``,
``W`` maps ``rep_in`` to ``rep_out`` equivariantly iff (Finzi et al. 2021, Eq. 4-5)

    drho_out(A_i) W - W drho_in(A_i) = 0      for every i,
    rho_out(h_j)  W - W rho_in(h_j)  = 0      for every j.

With ``vec`` row-major, ``vec(P W - W Q) = (P (x) I - I (x) Q^T) vec(W) = C vec(W)``, so
the solution space is the null space of the stacked constraints, i.e. the
zero eigenspace of the Gram matrix ``L = sum_i C_i^T C_i``. ``L`` is assembled
from Kronecker identities (no ``N x N`` matrix products):

    C^T C = P^T P (x) I - P^T (x) Q - P (x) Q^T + I (x) Q Q^T.

``method="auto"`` takes, for each pair of blocks, the first of

* ``"diagrams"``: tensor products of ``V`` and ``V*`` of S(n), O(n), SO(n), Sp(m) and the
  Lorentz groups, read off from Brauer / partition diagrams with no solve at all
  ([`geomlin.linear.diagram_solver`][]; exact and the same on every machine);
* ``"monomial"`` (also in place of ``"diagrams"`` when the diagrams are dependent and more than
  ``MAX_SELECTION_BEFORE_ORBITS`` of them would have to be reduced to a basis): tensor reps
  (``V``, ``V*`` factors) of groups whose discrete generators are
  signed permutations and which have a signed permutation or a diagonal Lie algebra generator
  (Z(n), S(n), C(4), D(4), the Rubik's cube group, GL(n), SL(n), ...):
  [`geomlin.linear.monomial_solver`][] keeps the multi-indices of weight zero, takes orbits
  of multi-indices (exact, no solve), and solves the remaining generators on the orbit vectors
  only; used when that leaves no solve or a reduced problem within the dense limits below;
* ``"dense"``: the Gram matrix above, for up to ``DENSE_MAX_UNKNOWNS`` unknowns;
* ``"sampled"``: larger problems of compact or finite groups,
  [`geomlin.linear.sampled_solver.nullspace_sampled`][]
  (averaging over random group elements, applied factor by factor, with an exact Rayleigh-Ritz check), which never forms the Gram matrix;
* ``"dense"`` again for larger problems of non-compact groups, up to ``MAX_DENSE_UNKNOWNS``.

``method=`` forces one of them. Direct sums are solved block by block
(``Hom(a1 + a2, b) = Hom(a1, b) + Hom(a2, b)``), each distinct pair of blocks once; results are
cached in memory by the reps' canonical keys and, with ``cache_dir=``, on disk (one file per
pair of blocks, written atomically), so a later process reads them instead of solving again.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from pathlib import Path

import torch
from torch import Tensor

from geomlin.io_atomic import atomic_write
from geomlin.linear.diagram_solver import applies as diagrams_apply
from geomlin.linear.diagram_solver import diagram_solution, selection_size
from geomlin.linear.monomial_solver import applies as monomial_applies
from geomlin.linear.monomial_solver import monomial_plan, nullspace_monomial
from geomlin.linear.sampled_solver import check_averaging, nullspace_sampled
from geomlin.reps.base import Rep, bind, common_group
from geomlin.tables import device_cache, in_cache
from geomlin.validation import check_choice

#: The solver methods; ``"auto"`` picks one per pair of blocks (see the module docstring).
METHODS = ("auto", "dense", "sampled", "diagrams", "monomial")

#: Eigenvalues of the Gram matrix below ``NULLSPACE_RTOL * max(1, largest)`` span the solution.
NULLSPACE_RTOL = 1e-9
#: Block problems with more unknowns (``out * in``) than this go to the sampled
#: iterative solver when the group is compact or finite (orthogonal generators).
DENSE_MAX_UNKNOWNS = 1024
#: Largest block problem the dense solver accepts (non-compact groups); its Gram
#: matrix takes ``8 N^2`` bytes and ``eigh`` about ``N^3`` flops (4096: ~15 s on 2 cores).
MAX_DENSE_UNKNOWNS = 8192
#: Largest block problem the sampled solver accepts (its iterate holds ``64 N`` floats).
MAX_SAMPLED_UNKNOWNS = 2_000_000
#: ``"auto"`` prefers the monomial solver to diagrams whose spanning set has dependencies and more
#: diagrams than this (their selection grows cubically: O(2) on ``T(10)``, 945 Brauer diagrams, takes
#: 7 s; its 512 orbit vectors 0.1 s).
MAX_SELECTION_BEFORE_ORBITS = 300


def _check_rep(rep, name: str) -> Rep:
    return bind(rep, None, name)


def check_cache_dir(cache_dir):
    """``None`` or a folder path (it need not exist yet); returns it."""
    if cache_dir is not None and not isinstance(cache_dir, (str, os.PathLike)):
        raise TypeError(f"cache_dir must be a folder path (str or os.PathLike) or None, got "
                        f"{type(cache_dir).__name__}")
    if cache_dir is not None and Path(cache_dir).expanduser().exists() and not Path(cache_dir).expanduser().is_dir():
        raise ValueError(f"cache_dir {str(cache_dir)!r} exists and is not a folder")
    return cache_dir


def _kron(a: Tensor, b: Tensor) -> Tensor:
    return torch.kron(a.contiguous(), b.contiguous())


def constraint_gram(rep_in: Rep, rep_out: Rep) -> Tensor:
    """Gram matrix ``L = sum C_i^T C_i`` of the equivariance constraints, ``(N, N)`` float64, ``N = out * in``."""
    rep_in, rep_out = _check_rep(rep_in, "rep_in"), _check_rep(rep_out, "rep_out")
    group = common_group([rep_in, rep_out])
    if rep_in.size * rep_out.size > MAX_DENSE_UNKNOWNS:
        raise ValueError(f"the constraint Gram matrix of Hom({rep_in!r}, {rep_out!r}) would be "
                         f"{rep_in.size * rep_out.size} x {rep_in.size * rep_out.size} (limit {MAX_DENSE_UNKNOWNS} "
                         "unknowns); use equivariant_basis, which picks a solver that never forms it")
    n_in, n_out = rep_in.size, rep_out.size
    N = n_in * n_out
    L = torch.zeros(N, N, dtype=torch.float64)
    if group is None:
        return L
    eye_in = torch.eye(n_in, dtype=torch.float64)
    eye_out = torch.eye(n_out, dtype=torch.float64)
    pairs = []
    for A in group.lie_algebra:
        pairs.append((rep_out.drho(A), rep_in.drho(A).T))
    for h in group.discrete_generators:
        pairs.append((rep_out.rho(h), rep_in.rho(h).T))
    for P, Q in pairs:
        P = P.to(torch.float64)
        Q = Q.to(torch.float64)
        L += _kron(P.T @ P, eye_in)
        L -= _kron(P.T, Q)
        L -= _kron(P, Q.T)
        L += _kron(eye_out, Q.T @ Q)
    return L


def _nullspace_dense(L: Tensor) -> Tensor:
    """Orthonormal null space ``(N, r)`` of a symmetric PSD ``L``."""
    evals, evecs = torch.linalg.eigh(L)
    tol = NULLSPACE_RTOL * max(1.0, float(evals[-1].abs()))
    return evecs[:, evals <= tol]


def basis_method(rep_in: Rep, rep_out: Rep, method: str = "auto") -> str:
    """The method that solves ``Hom(rep_in, rep_out)`` for two non-sum blocks, without solving.

    One of ``"scalar"`` (both trivial, or one of them empty: every map is equivariant), ``"dense"``,
    ``"diagrams"``, ``"monomial"``, ``"sampled"``;
    raises ``ValueError`` when the problem is beyond every method's limit (or the forced
    ``method``'s). Deciding on ``"monomial"`` finds the orbits of multi-indices (cached for the solve).
    """
    check_choice(method, "method", METHODS)
    if (rep_in.is_scalar and rep_out.is_scalar) or rep_in.size * rep_out.size == 0:
        return "scalar"  # an empty rep (e3nn's Irreps("")) has only the zero map, which every method agrees on
    N = rep_in.size * rep_out.size
    group = common_group([rep_in, rep_out])
    compact = group is not None and group.is_compact
    if method == "auto" and _orbits_beat_selection(rep_in, rep_out):  # before diagrams_apply: it selects
        return "monomial"
    if method in ("auto", "diagrams") and diagrams_apply(rep_in, rep_out):
        return "diagrams"
    if method == "diagrams":
        raise ValueError("method='diagrams' covers tensor products of V and V* of S(n), O(n), SO(n), "
                         f"Sp(m) and the Lorentz groups; Hom({rep_in!r}, {rep_out!r}) is not one of them "
                         "(or is too large)")
    if method in ("auto", "monomial") and monomial_applies(rep_in, rep_out):
        plan = monomial_plan(rep_in, rep_out)
        reduced = plan.num_orbits if plan.remaining.shape[0] else 0
        if reduced <= (DENSE_MAX_UNKNOWNS if compact and method == "auto" else MAX_DENSE_UNKNOWNS):
            return "monomial"
        if method == "monomial":
            raise ValueError(f"method='monomial' leaves {reduced} orbit vectors of Hom({rep_in!r}, {rep_out!r}) "
                             f"to solve, more than the limit of {MAX_DENSE_UNKNOWNS}")
    if method == "monomial":
        raise ValueError("method='monomial' covers tensor products of V and V* of groups whose discrete "
                         "generators are signed permutations, with a signed permutation or a diagonal Lie "
                         f"algebra generator; Hom({rep_in!r}, {rep_out!r}) is not one of them (or is too large)")
    if method == "dense" or (method == "auto" and N <= DENSE_MAX_UNKNOWNS):
        if N <= MAX_DENSE_UNKNOWNS:
            return "dense"
    elif method == "sampled" and not compact:
        check_averaging(group, "method='sampled'")
    elif compact and N <= MAX_SAMPLED_UNKNOWNS:
        return "sampled"
    elif method == "auto" and not compact and N <= MAX_DENSE_UNKNOWNS:
        return "dense"
    limit = MAX_SAMPLED_UNKNOWNS if compact and method != "dense" else MAX_DENSE_UNKNOWNS
    # the sampled solver averages an orthogonal action: a finite (or compact) group given by
    # non-orthogonal generators has only the dense solver
    kind = ("compact groups" if compact else "finite groups given by non-orthogonal generators"
            if group.is_finite else "non-compact groups (or generators that are not orthogonal)")
    raise ValueError(
        f"Hom({rep_in!r}, {rep_out!r}) has {N} unknowns, more than the solver's limit of {limit} "
        f"for {kind}; split the reps into smaller direct-sum "
        "blocks, or use geomlin.linear.diagrams for tensor powers of S(n)/O(n)/SO(n)/Sp(n)")


def _orbits_beat_selection(rep_in: Rep, rep_out: Rep) -> bool:
    """Whether ``"auto"`` takes the monomial solver over diagrams: when the diagrams are dependent
    (``n`` small for the rank) and more than ``MAX_SELECTION_BEFORE_ORBITS`` of them would be
    reduced, and the monomial solver leaves at most ``DENSE_MAX_UNKNOWNS`` orbit vectors to solve."""
    if selection_size(rep_in, rep_out) <= MAX_SELECTION_BEFORE_ORBITS or not monomial_applies(rep_in, rep_out):
        return False
    plan = monomial_plan(rep_in, rep_out)
    return plan.num_orbits <= DENSE_MAX_UNKNOWNS or not plan.remaining.shape[0]


def _solve_constraints(rep_in: Rep, rep_out: Rep, method: str) -> Tensor:
    """``(r, out * in)`` orthonormal rows spanning the solutions, by ``method`` (never ``"auto"``)."""
    N = rep_in.size * rep_out.size
    if method == "diagrams":
        basis = diagram_solution(rep_in, rep_out)
        if basis is not None:
            return basis.reshape(-1, N)
        # the exact rank check refused the diagram selection (probability < 1e-6): solve instead
        method = "sampled" if common_group([rep_in, rep_out]).is_compact else "dense"
    if method == "monomial":
        return nullspace_monomial(rep_in, rep_out).reshape(-1, N)
    if method == "sampled":
        return nullspace_sampled(rep_in, rep_out).reshape(-1, N)
    return _nullspace_dense(constraint_gram(rep_in, rep_out)).T


def _solve_pair(rep_in: Rep, rep_out: Rep, cache_dir=None, method: str = "auto") -> Tensor:
    """Orthonormal basis ``(r, out, in)`` of Hom_G(rep_in, rep_out) for two non-sum reps (cached)."""
    resolved = basis_method(rep_in, rep_out, method)
    key = (rep_in.key(), rep_out.key(), resolved)
    return device_cache(("linear:block-basis", *key), lambda: _load_or_solve(rep_in, rep_out, key, cache_dir))


def _load_or_solve(rep_in: Rep, rep_out: Rep, key: tuple, cache_dir) -> Tensor:
    """The block basis of ``key`` from ``cache_dir`` when it holds it, else solved (and written there)."""
    resolved = key[2]
    path = _disk_path(cache_dir, key) if cache_dir is not None else None
    if path is not None and path.exists():
        stored = _read_cache_file(path)
        if stored is not None and stored.get("key") == repr(key):
            return stored["basis"]
    n_in, n_out = rep_in.size, rep_out.size
    if resolved == "scalar":
        basis = torch.eye(n_out * n_in, dtype=torch.float64)
    else:
        basis = _solve_constraints(rep_in, rep_out, resolved)
    basis = _canonical_sign(basis.reshape(basis.shape[0], n_out, n_in).contiguous())
    if path is not None:
        _write_cache_file(path, key, basis)
    return basis


def is_cached(rep_in: Rep, rep_out: Rep, cache_dir=None, method: str = "auto") -> bool:
    """Whether the block basis is in memory or in ``cache_dir`` already (nothing is solved)."""
    try:
        key = (rep_in.key(), rep_out.key(), basis_method(rep_in, rep_out, method))
    except ValueError:
        return False
    return in_cache(("linear:block-basis", *key)) or (cache_dir is not None and _disk_path(cache_dir, key).exists())


def _canonical_sign(basis: Tensor) -> Tensor:
    """Flip each basis element so its largest-magnitude entry is positive (reproducible output)."""
    if basis.shape[0] == 0:
        return basis
    flat = basis.reshape(basis.shape[0], -1)
    idx = flat.abs().argmax(dim=1)
    signs = torch.sign(flat.gather(1, idx[:, None]))
    return basis * signs[:, :, None]


def _disk_path(cache_dir, key) -> Path:
    digest = hashlib.sha1(repr(key).encode()).hexdigest()
    return Path(cache_dir).expanduser() / f"basis-{digest}.pt"


def _read_cache_file(path: Path) -> dict | None:
    """The stored ``{"key", "basis"}`` dict, or ``None`` for a corrupt file (which is then rewritten)."""
    try:
        stored = torch.load(path, weights_only=True)
    except (OSError, RuntimeError, EOFError, ValueError, pickle.UnpicklingError):
        return None
    return stored if isinstance(stored, dict) and "basis" in stored else None


def _write_cache_file(path: Path, key, basis: Tensor) -> None:
    """Write atomically ([`geomlin.io_atomic.atomic_write`][]), creating the folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda fh: torch.save({"key": repr(key), "basis": basis}, fh))


def equivariant_basis(rep_in: Rep, rep_out: Rep, cache_dir: str | os.PathLike | None = None,
                      method: str = "auto", group=None) -> Tensor:
    """Orthonormal basis of the equivariant linear maps ``rep_in -> rep_out``.

    Parameters
    ----------
    rep_in, rep_out : Rep
        representations of the same group (``Scalar`` combines with any); group-free
        reps (``T(2)``, ``V ** 2``) need ``group``.
    cache_dir : str | os.PathLike | None
        optional folder for an on-disk cache of the block bases (written atomically); a later
        process with the same ``cache_dir`` reads them instead of solving.
    method : str
        ``"auto"`` (default), ``"dense"``, ``"sampled"``, ``"diagrams"`` or ``"monomial"`` (module
        docstring).
    group : Group or str, optional
        binds group-free reps (a geomlin Group or a name such as ``"O(3)"``).

    Returns
    -------
    Tensor of shape (r, rep_out.size, rep_in.size)
        float64, orthonormal in the
        Frobenius inner product; ``r`` is the dimension of the space. Each basis
        element is supported on one pair of direct-sum blocks. A fresh tensor (caches stay private).
    """
    rep_in = bind(rep_in, group, "rep_in")
    rep_out = bind(rep_out, group, "rep_out")
    common_group([rep_in, rep_out])
    check_cache_dir(cache_dir)
    check_choice(method, "method", METHODS)
    pieces = []
    o0 = 0
    for b in rep_out.blocks:
        i0 = 0
        for a in rep_in.blocks:
            block = _solve_pair(a, b, cache_dir, method)
            if block.shape[0]:
                full = torch.zeros(block.shape[0], rep_out.size, rep_in.size, dtype=torch.float64)
                full[:, o0:o0 + b.size, i0:i0 + a.size] = block
                pieces.append(full)
            i0 += a.size
        o0 += b.size
    return torch.cat(pieces) if pieces else torch.zeros(0, rep_out.size, rep_in.size, dtype=torch.float64)


def block_basis(rep_in: Rep, rep_out: Rep, cache_dir=None, method: str = "auto") -> Tensor:
    """Basis ``(r, out, in)`` for a pair of non-sum blocks (cached and shared by layers: do not modify)."""
    return _solve_pair(_check_rep(rep_in, "rep_in"), _check_rep(rep_out, "rep_out"),
                       check_cache_dir(cache_dir), check_choice(method, "method", METHODS))

