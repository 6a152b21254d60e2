"""Atomic file writes: the one way geomlin writes a file.

[`atomic_write`][] writes to a temporary file in the target's own folder, flushes and
``fsync``s it, then ``os.replace``s it onto the target (atomic on POSIX and Windows), so a
reader -- or a process killed at any instant -- sees either the previous complete file or the
new complete file, never a partial one. The temporary file is removed on any failure.
Temporary files are named ``.<name>.<host>.<pid>.<random>.tmp`` ([`temporary_name`][]), so a
later writer can recognise those of killed processes
([`geomlin.datasets.cache.remove_stale_temporaries`][]).
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Callable
from typing import IO

#: Suffix of every temporary file [`atomic_write`][] creates.
TMP_SUFFIX = ".tmp"


class FileWriteError(OSError):
    """A file that cannot be written (read-only folder, full disk); one line naming the file."""

    def __str__(self) -> str:
        return str(self.strerror)


def host_name() -> str:
    """This host's name as it appears in temporary file names (dots replaced)."""
    return socket.gethostname().replace(".", "_") or "host"


def temporary_name(path: str | os.PathLike) -> str:
    """A fresh temporary path next to ``path``: ``<folder>/.<name>.<host>.<pid>.<random>.tmp``."""
    path = os.fspath(path)
    folder = os.path.dirname(path) or "."
    return os.path.join(folder, f".{os.path.basename(path)}.{host_name()}.{os.getpid()}.{uuid.uuid4().hex}{TMP_SUFFIX}")


def atomic_write(path: str | os.PathLike, write: Callable[[IO], None], *, text: bool = False,
                 hint: str = "") -> None:
    """Write ``path`` atomically: ``write(fh)`` fills a temporary file that then replaces ``path``.

    Parameters
    ----------
    path : str or PathLike
        The target file; its folder must exist.
    write : callable
        Called with the open temporary file (binary, or text with ``text=True``).
    text : bool
        Open the temporary file in text mode (UTF-8, ``newline=""``).
    hint : str
        Appended to the error message (what the user can do instead).

    Raises
    ------
    FileWriteError
        An OSError (with the original ``errno``) whose message names ``path`` and the reason,
        when the folder is not writable or the disk is full. Nothing is left behind and the
        previous ``path`` (if any) is untouched. Other exceptions of ``write`` propagate after
        the temporary file is removed.
    """
    path = os.fspath(path)
    tmp = temporary_name(path)
    try:
        with open(tmp, "w" if text else "wb", **({"encoding": "utf-8", "newline": ""} if text else {})) as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as err:
        if isinstance(err, FileWriteError):
            raise
        reason = err.strerror or str(err) or type(err).__name__
        raise FileWriteError(err.errno, f"cannot write {path} ({reason})" + (f"; {hint}" if hint else "")) from err
    finally:
        try:
            if os.path.exists(tmp):
                os.remove(tmp)
        except OSError:
            pass


def atomic_write_text(path: str | os.PathLike, content: str, *, hint: str = "") -> None:
    """Write the string ``content`` to ``path`` atomically (see [`atomic_write`][])."""
    atomic_write(path, lambda fh: fh.write(content), text=True, hint=hint)
