"""Pin(3,0,1) sampler: valid versors of both parities, acting as a group."""

import pytest
import torch

from geomlin.algebra import Pin301, pga, pin_action

DT = torch.float64


def test_samples_are_invertible_versors_of_both_parities():
    g = Pin301().sample(64, generator=torch.Generator().manual_seed(0))
    assert g.shape == (64, 16) and g.dtype == DT
    parity = pga.PGA.parity(g)
    assert parity.any() and (~parity).any()
    # versors: v ~v is a non-zero scalar; planes are unit so |<v ~v>_0| = 1
    vv = pga.geometric_product(g, pga.reverse(g))
    torch.testing.assert_close(vv[:, 0].abs(), torch.ones(64, dtype=DT))
    assert vv[:, 1:].abs().max() < 1e-10
    # translations occur: some versor moves the origin
    origin = pga.embed_point(torch.zeros(3, dtype=DT))
    moved = torch.stack([pga.extract_point(pin_action(g[i], origin)) for i in range(64)])
    assert moved.norm(dim=-1).max() > 0.5


def test_action_is_a_homomorphism_on_channel_layouts():
    g = Pin301().sample(2, generator=torch.Generator().manual_seed(1))
    x = torch.randn(3, 4, 2, 16, dtype=DT)  # (batch, items, channels, 16)
    both = pga.geometric_product(g[0], g[1])
    torch.testing.assert_close(pin_action(g[0], pin_action(g[1], x)), pin_action(both, x))


def test_parity_option_and_errors():
    assert not pga.PGA.parity(Pin301(parity="even").sample(10)).any()
    assert pga.PGA.parity(Pin301(parity="odd").sample(10)).all()
    with pytest.raises(ValueError, match="max_planes"):
        Pin301(max_planes=5)
    with pytest.raises(ValueError, match="n must be >= 1"):
        Pin301().sample(0)
