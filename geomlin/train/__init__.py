"""Training: the loop, distributed setup, checkpoints, configs and the tasks.

* [`run_training`][] — train a task's models (single process or under ``torchrun``);
* [`geomlin.train.tasks`][] — ``pointcloud``, ``molecules``, ``nbody``;
* [`UserError`][] — the error the command reports in one line.

The ``geomlin`` command itself (argument parsing, ``bench``, ``audit``) lives in [`geomlin.cli`][].
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

