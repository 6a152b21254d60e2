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

