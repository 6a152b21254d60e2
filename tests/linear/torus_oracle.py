"""Invariant counts of U(n) / SU(n) from Weyl's integration formula: an oracle independent of any solver.

``dim Inv(V^(x a) (x) conj(V)^(x b)) = (1/n!) E_t [ chi(t)^a conj(chi(t))^b prod_{i<j} |t_i - t_j|^2 ]``
over the maximal torus ``t = diag(t_1, .., t_n)`` (``prod t_i = 1`` for SU(n)), ``chi(t) = sum t_i``
(Weyl 1926; e.g. Bump, "Lie Groups", Thm. 17.2). The integrand is a Laurent polynomial, so the
average over a grid of M-th roots of unity with M above its degree spread is exact.

The same numbers count the invariants of GL(n, R) / SL(n, R) on ``V^(x a) (x) V*^(x b)`` (all four
groups are Zariski dense in GL(n, C) / SL(n, C), and ``conj(V) = V*`` for unitary groups), and the
real invariants of realified U(n) / SU(n) on ``(R^2n)^(x k)``, whose complexification is
``(V + conj(V))^(x k)``: ``sum_a binom(k, a) dim Inv(V^(x a) (x) conj(V)^(x (k - a)))``.
"""

import itertools
import math

import torch


def torus_invariants(n: int, a: int, b: int, special: bool) -> int:
    """dim_C of the U(n)- (``special``: SU(n)-) invariants of ``V^(x a) (x) conj(V)^(x b)``."""
    # degree spread per free variable: a + b + 2(n - 1) for U(n); for SU(n), t_n = 1 / (t_1 .. t_(n-1))
    # doubles it
    M = 2 * (a + b) + 4 * n - 3 if special else a + b + 2 * n - 1
    free = n - 1 if special else n
    if free == 0:  # SU(1) is trivial
        return 1
    k = torch.stack(torch.meshgrid(*[torch.arange(M)] * free, indexing="ij"), -1).reshape(-1, free)
    t = torch.exp(2j * math.pi * k.to(torch.float64) / M)
    if special:
        t = torch.cat([t, 1 / t.prod(-1, keepdim=True)], -1)
    chi = t.sum(-1)
    vandermonde = torch.ones(len(t), dtype=torch.float64)
    for i, j in itertools.combinations(range(n), 2):
        vandermonde = vandermonde * (t[:, i] - t[:, j]).abs() ** 2
    value = (chi ** a * chi.conj() ** b * vandermonde).mean() / math.factorial(n)
    return round(value.real.item())


def realified_invariants(n: int, k: int, special: bool) -> int:
    """dim_R of the invariants of realified U(n) / SU(n) on the real tensors ``(R^2n)^(x k)``."""
    return sum(math.comb(k, a) * torus_invariants(n, a, k - a, special) for a in range(k + 1))
