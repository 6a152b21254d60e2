"""Enumerators against closed-form counts (Bell numbers, double factorials, binomials)."""

import math

import pytest

from geomlin.linear.diagrams import (
    brauer_diagrams,
    levi_civita_diagrams,
    partition_diagrams,
    set_partitions,
    spanning_diagrams,
)

BELL = [1, 1, 2, 5, 15, 52, 203, 877]


def double_factorial_odd(m: int) -> int:
    """(m-1)!! for even m, 0 for odd m."""
    return 0 if m % 2 else math.prod(range(m - 1, 0, -2))


@pytest.mark.parametrize("m", range(8))
def test_set_partitions_bell_numbers_and_distinct(m):
    parts = set_partitions(m)
    assert len(parts) == BELL[m]
    assert len(set(parts)) == len(parts)
    for p in parts:
        assert sorted(v for b in p for v in b) == list(range(m))


@pytest.mark.parametrize("k,l", [(0, 0), (1, 1), (2, 2), (2, 3), (3, 3), (0, 4)])
def test_partition_diagrams_count_and_block_limit(k, l):
    ds = partition_diagrams(k, l)
    assert len(ds) == BELL[k + l] and len(set(ds)) == len(ds)
    limited = partition_diagrams(k, l, max_blocks=2)
    assert all(d.num_blocks <= 2 for d in limited)
    # Stirling numbers of the second kind S(m,1) + S(m,2) = 1 + (2^(m-1) - 1)
    m = k + l
    assert len(limited) == (1 if m == 0 else 2 ** (m - 1))


@pytest.mark.parametrize("k,l", [(1, 1), (2, 2), (1, 3), (3, 3), (4, 4), (2, 1)])
def test_brauer_count_is_double_factorial(k, l):
    ds = brauer_diagrams(k, l)
    assert len(ds) == double_factorial_odd(k + l) and len(set(ds)) == len(ds)
    assert all(d.is_brauer for d in ds)


@pytest.mark.parametrize("k,l,n", [(2, 1, 3), (3, 2, 3), (2, 2, 4), (3, 3, 4), (2, 2, 2), (1, 1, 2)])
def test_levi_civita_count(k, l, n):
    ds = levi_civita_diagrams(k, l, n)
    want = math.comb(k + l, n) * double_factorial_odd(k + l - n) if (k + l - n) % 2 == 0 else 0
    assert len(ds) == want
    assert all(len(d.free) == n for d in ds)


def test_levi_civita_needs_enough_vertices():
    with pytest.raises(ValueError, match="k \\+ l >= n"):
        levi_civita_diagrams(1, 1, 3)


def test_spanning_sets_per_group():
    assert len(spanning_diagrams("S", 2, 2, 3)) == 15
    assert len(spanning_diagrams("O", 2, 2, 3)) == 3
    assert len(spanning_diagrams("SO", 2, 2, 4)) == 4  # 3 Brauer + one ε diagram
    assert len(spanning_diagrams("SO", 1, 1, 3)) == 1  # n > k + l: no ε diagrams
    assert len(spanning_diagrams("Sp", 3, 3, 4)) == 15
    with pytest.raises(ValueError, match="unknown group"):
        spanning_diagrams("U", 1, 1, 3)
    with pytest.raises(ValueError, match="n = 2m even"):
        spanning_diagrams("Sp", 1, 1, 3)
