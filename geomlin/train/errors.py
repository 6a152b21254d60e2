"""The one exception type the ``geomlin`` command reports without a traceback."""

from __future__ import annotations


class UserError(Exception):
    """A mistake in what the user asked for (unknown task, missing file, bad config key, ...).

    The command line prints ``geomlin: error: <message>`` on one line and exits
    with status [`USER_ERROR_EXIT`][]; everything else is a bug and keeps its traceback.
    """


class TrainingDiverged(UserError):
    """The loss became NaN or infinite: a setting (usually ``--lr``) the user can change."""


#: Exit status of the ``geomlin`` command for user errors (argparse uses 2 as well).
USER_ERROR_EXIT = 2
