"""Training: the loop, distributed setup, checkpoints, configs and the ``geomlin`` command.

* :func:`run_training` — train a task's models (single process or under ``torchrun``);
* :mod:`geomlin.train.tasks` — ``pointcloud``, ``molecules``, ``nbody``;
* :func:`audit` — equivariance error of trained models under their declared group;
* :class:`UserError` — the error the command reports in one line.
"""

from geomlin.train.audit import AuditResult, audit
from geomlin.train.errors import UserError
from geomlin.train.loop import run_training
from geomlin.train.tasks import TASKS, AuditSpec, Task, TaskData, get_task

__all__ = [
           "TASKS",
           "AuditResult",
           "AuditSpec",
           "Task",
           "TaskData",
           "UserError",
           "audit",
           "get_task",
           "run_training",
]
