"""Training: the loop, distributed setup, checkpoints, configs and the tasks.

* :func:`run_training` — train a task's models (single process or under ``torchrun``);
* :mod:`geomlin.train.tasks` — ``pointcloud``, ``molecules``, ``nbody``;
* :class:`UserError` — the error the command reports in one line.

The ``geomlin`` command itself (argument parsing, ``bench``, ``audit``) lives in :mod:`geomlin.cli`.
"""

from geomlin.train.errors import UserError
from geomlin.train.loop import run_training
from geomlin.train.tasks import TASKS, AuditSpec, Task, TaskData, get_task

__all__ = [
           "TASKS",
           "AuditSpec",
           "Task",
           "TaskData",
           "UserError",
           "get_task",
           "run_training",
]


_MOVED_TO_CLI = {"audit": "geomlin.cli.audit", "AuditResult": "geomlin.cli.audit"}


def __getattr__(name: str):
    # deprecated aliases (one release): the audit moved to geomlin.cli.audit
    if name in _MOVED_TO_CLI:
        import importlib
        import warnings

        warnings.warn(f"geomlin.train.{name} moved to {_MOVED_TO_CLI[name]}.{name}", DeprecationWarning,
                      stacklevel=2)
        return getattr(importlib.import_module(_MOVED_TO_CLI[name]), name)
    raise AttributeError(f"module 'geomlin.train' has no attribute {name!r}")
