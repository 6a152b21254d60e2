"""``geomlin train pointcloud``: option validation, and the task's invariant models are exactly
invariant under the symmetry the task declares (the baseline is not)."""

import re

import pytest
import torch

from geomlin.groups import SE3
from geomlin.testing import equivariance_error
from geomlin.train.config import validate_config
from geomlin.train.errors import UserError
from geomlin.train.tasks.pointcloud import PointCloudTask


def _cfg(**overrides):
    task = PointCloudTask()
    cfg = {o.name: o.default for o in task.all_options()}
    cfg.update(overrides)
    return task, cfg


@pytest.mark.parametrize("key,value,phrase", [
    ("width", 0, "width must be >= 1, got 0"),
    ("vn_width", 0, "vn_width must be >= 1, got 0"),
    ("train_per_class", 0, "train_per_class must be >= 1, got 0"),
    ("test_per_class", -3, "test_per_class must be >= 1, got -3"),
    ("gatr_points", 0, "gatr_points must be >= 1, got 0"),
    ("prior_weight", -0.5, "prior_weight must be >= 0.0, got -0.5"),
    ("prior_weight", float("nan"), "prior_weight must be finite, got nan"),
    ("num_points", 4, "num_points must be >= 8, got 4"),
])
def test_options_are_validated_before_training(key, value, phrase):
    # the same check run_training applies to a config built in Python or read from the command line
    task, cfg = _cfg(**{key: value})
    with pytest.raises(UserError, match=re.escape(phrase)):
        validate_config(task.all_options(), cfg)


@pytest.mark.parametrize("name", ["frame_avg", "canonical", "vn_pointnet"])
def test_the_task_models_are_invariant(name):
    task, cfg = _cfg()
    torch.manual_seed(0)
    model = task.build_model(name, cfg, {"num_classes": 5}).double().eval()
    spec = task.audit_spec(name, model, {"num_points": 24, "frame_group": cfg["frame_group"]})
    assert equivariance_error(model, SE3(), spec.type_in, spec.type_out, inputs=spec.inputs, num_samples=3) < 1e-9
    baseline = task.build_model("pointnet", cfg, {"num_classes": 5}).double()
    assert equivariance_error(baseline, SE3(), spec.type_in, spec.type_out, inputs=spec.inputs) > 1e-3
