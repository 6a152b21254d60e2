"""C4/D4 group convolutions: exactly equivariant (geomlin.testing with the image feature types), and
those types agree with the action written out from the group tables."""

import pytest
import torch
from torch import nn

from geomlin.frames import GroupConv2d, LiftingConv2d
from geomlin.groups import C, D
from geomlin.groups.square_grid import element_index, grid_order, inverse_table, multiplication_table
from geomlin.reps import Images, RegularFeatures
from geomlin.reps.images import act_on_image
from geomlin.testing import assert_equivariant

GROUPS = [("C4", C(4)), ("D4", D(4))]


def _regular_image(name):
    """The regular action on ``(B, C, |G|, H, W)`` written out: ``(g . y)[:, :, a] = g . y[:, :, g^{-1} a]``."""
    mul, inv = multiplication_table(name), inverse_table(name)

    def act(g, y):
        i = int(element_index(g, name))
        return act_on_image(y[:, :, mul[inv[i]]], i, name)
    return act


@pytest.mark.parametrize("name,group", GROUPS)
def test_regular_features_act_as_the_tables_say(name, group):
    y = torch.randn(2, 3, grid_order(name), 5, 5, dtype=torch.float64)
    logits = torch.randn(4, grid_order(name), dtype=torch.float64)
    mul, inv = multiplication_table(name), inverse_table(name)
    for g in group.sample(8):
        i = int(element_index(g, name))
        assert torch.equal(RegularFeatures(group, 3, grid=True).act(g, y), _regular_image(name)(g, y))
        assert torch.equal(RegularFeatures(group).act(g, logits), logits[:, mul[inv[i]]])
        assert torch.equal(Images(group, 3).act(g, y[:, :, 0]), act_on_image(y[:, :, 0], i, name))


@pytest.mark.parametrize("name,group", GROUPS)
def test_group_convolutions_are_exactly_equivariant(name, group):
    lift = LiftingConv2d(name, 2, 3, 3).double()
    conv = GroupConv2d(name, 3, 2, 3).double()
    nn.init.normal_(lift.bias)
    nn.init.normal_(conv.bias)
    x = torch.randn(2, 2, 7, 7, dtype=torch.float64)
    features = RegularFeatures(group, grid=True)
    assert_equivariant(lift, group, Images(group, 2), features, inputs=(x,))
    h = torch.randn(2, 3, grid_order(name), 7, 7, dtype=torch.float64)
    assert_equivariant(conv, group, features, features, inputs=(h,))
    assert_equivariant(conv, group, features, _regular_image(name), inputs=(h,))  # against the tables
