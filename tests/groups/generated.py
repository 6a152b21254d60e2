"""Oracle for "the generators generate the sampled group": the maps of ``V (x) V`` commuting with the
generators (null space of the linearised constraints, solved here with an SVD) must be exactly the maps
commuting with many sampled elements. Generators of a smaller group leave a larger commutant; extra
generators a smaller one."""

import torch

DT = torch.float64


def _kron(a, b):
    return torch.kron(a.contiguous(), b.contiguous())


def _null_space(rows: torch.Tensor, tol: float = 1e-8) -> torch.Tensor:
    """Orthonormal basis ``(k, n)`` of ``{w : rows @ w = 0}``."""
    _, s, vh = torch.linalg.svd(rows, full_matrices=True)
    rank = int((s > tol * max(s.max().item(), 1.0)).sum())
    return vh[rank:]


def _tensor_square(m):
    return _kron(m, m)


def commutant_from_generators(lie: torch.Tensor, discrete: torch.Tensor) -> torch.Tensor:
    """Maps ``W`` of ``V (x) V`` with ``[d rho(X), W] = 0`` and ``rho(h) W = W rho(h)``, as vectors."""
    n = (lie if lie.shape[0] else discrete).shape[-1]
    eye = torch.eye(n, dtype=DT)
    big = torch.eye(n * n, dtype=DT)
    rows = []
    for X in lie:
        d = _kron(X, eye) + _kron(eye, X)  # d rho on V (x) V
        rows.append(_kron(d, big) - _kron(big, d.T))  # vec(d W - W d), row-major vec
    for h in discrete:
        r = _tensor_square(h)
        rows.append(_kron(r, big) - _kron(big, r.T))
    return _null_space(torch.cat(rows) if rows else torch.zeros(1, n ** 4, dtype=DT))


def commutant_from_samples(mats: torch.Tensor) -> torch.Tensor:
    """The same space from sampled elements ``mats (k, n, n)`` of the defining representation."""
    n = mats.shape[-1]
    big = torch.eye(n * n, dtype=DT)
    rows = [_kron(_tensor_square(g), big) - _kron(big, _tensor_square(g).T) for g in mats]
    return _null_space(torch.cat(rows))


def assert_generators_generate(lie: torch.Tensor, discrete: torch.Tensor, samples: torch.Tensor) -> None:
    """The two commutants coincide (same dimension, and each generator-solution commutes with the samples),
    and the samples hold improper elements (det < 0) exactly when some discrete generator is improper
    (which ``V (x) V`` alone cannot see: O(3) and SO(3) have the same commutant there)."""
    improper_gens = bool((torch.linalg.det(discrete) < 0).any()) if discrete.shape[0] else False
    assert bool((torch.linalg.det(samples) < 0).any()) == improper_gens
    from_gens = commutant_from_generators(lie, discrete)
    from_samples = commutant_from_samples(samples)
    assert from_gens.shape[0] == from_samples.shape[0], (from_gens.shape[0], from_samples.shape[0])
    # the generator solutions lie in the sample solutions' span
    proj = from_gens @ from_samples.T @ from_samples
    torch.testing.assert_close(proj, from_gens, atol=1e-7, rtol=1e-7)
