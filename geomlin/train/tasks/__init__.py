"""The ``geomlin train`` tasks: point clouds, molecules, n-body."""

from __future__ import annotations

from geomlin.train.errors import UserError
from geomlin.train.tasks.base import AuditSpec, GraphSet, Task, TaskData

#: Task name -> "module:class" (imported on demand so ``--help`` stays fast).
TASKS = {
    "pointcloud": "geomlin.train.tasks.pointcloud:PointCloudTask",
    "molecules": "geomlin.train.tasks.molecules:MoleculesTask",
    "nbody": "geomlin.train.tasks.nbody:NBodyTask",
}


def get_task(name: str) -> Task:
    """A fresh instance of task ``name``; raises [`UserError`][] for unknown names."""
    import importlib

    if name not in TASKS:
        raise UserError(f"unknown task '{name}'; choose from {', '.join(TASKS)}")
    module, _, cls = TASKS[name].partition(":")
    return getattr(importlib.import_module(module), cls)()


__all__ = ["TASKS", "AuditSpec", "GraphSet", "Task", "TaskData", "get_task"]
