"""The loop's pieces: metric sums stay where they are computed and an epoch's statistics are read once."""

import math

import pytest
import torch

from geomlin.train.loop import autocast
from geomlin.train.metrics import MetricSums, StepClock, read_epoch_means
from tests.device import simulated as sim


def test_sums_on_the_device_and_counts_on_the_host_are_read_in_one_go():
    d = sim.DEVICE
    train, test = MetricSums(), MetricSums()
    with sim.watch() as log:
        for loss, n in ((torch.tensor(2.0, device=d), 4), (torch.tensor(1.0, device=d), 2)):
            train.add({"loss": (loss.double(), float(n)), "acc": (torch.tensor(3.0, device=d).double(), float(n))})
        test.add({"mae": (0.5, torch.tensor(2.0, device=d).double())})  # a host sum, a device count
        test.add({"empty": (0.0, 0.0)})
    assert not log.events  # adding reads nothing
    with sim.watch() as log:
        means = read_epoch_means({"m/train": train, "m/test": test}, d)
    assert [e.kind for e in log.events] == ["upload", "sync"]  # the host numbers once, the result once
    assert means["m/train"] == {"acc": 1.0, "loss": 0.5}
    assert means["m/test"]["mae"] == 0.25 and math.isnan(means["m/test"]["empty"])


def test_no_statistics_read_nothing():
    assert read_epoch_means({"m/train": MetricSums()}, torch.device("cpu")) == {"m/train": {}}


def test_host_clock_and_autocast_choices():
    clock = StepClock(torch.device("cpu"))
    with clock.step():
        sum(range(1000))
    assert clock.seconds() > 0
    with autocast(sim.DEVICE, "bf16"):
        assert torch.is_autocast_enabled(sim.DEVICE_TYPE)
    with autocast(sim.DEVICE, "fp32"):
        assert not torch.is_autocast_enabled(sim.DEVICE_TYPE)
    with pytest.raises(KeyError):
        autocast(sim.DEVICE, "fp8")
