"""The Irreps <-> sphere layout and parity classes (geomlin.gaunt.layout)."""

import torch
from e3nn import o3

from geomlin.gaunt import (
    PSEUDO,
    gaunt_parity_product,
    irreps_to_sphere,
    sphere_irreps,
    sphere_to_irreps,
    split_parity,
)
from geomlin.groups import O
from geomlin.testing import assert_equivariant


def test_irreps_round_trip_and_layout():
    irreps = o3.Irreps("3x0e+3x1o+3x2e")
    x = irreps.randn(5, -1, dtype=torch.float64)
    y = irreps_to_sphere(x, irreps)
    assert y.shape == (5, 3, 9)
    torch.testing.assert_close(y[:, 1, 1:4], x[:, 3 + 3:3 + 6])  # channel 1 of the 1o block
    torch.testing.assert_close(sphere_to_irreps(y), x)
    missing = irreps_to_sphere(o3.Irreps("2x0e+2x2e").randn(1, -1), "2x0e+2x2e")
    assert missing.shape == (1, 2, 9) and missing[..., 1:4].abs().max() == 0


def test_parity_classes_equivariant():
    irreps = o3.Irreps("2x0e+2x0o+2x1o+2x1e+2x2e+2x2o")
    L = 2
    nat_out, ps_out = sphere_irreps(2 * L, 1), sphere_irreps(2 * L, 1, PSEUDO)

    def fn(a, b):
        return gaunt_parity_product(split_parity(a, irreps), split_parity(b, irreps))

    x1, x2 = irreps.randn(3, -1, dtype=torch.float64), irreps.randn(3, -1, dtype=torch.float64)
    assert_equivariant(fn, O(3), (irreps, irreps), (nat_out, ps_out), inputs=(x1, x2))
    nat, ps = split_parity(x1, irreps)
    assert nat.shape == ps.shape == (3, 2, 9)
