"""Processed-data caches that are written atomically and carry a fingerprint.

A cache is one ``torch.save`` file holding ``{"fingerprint": str, "payload": ...}``.
The fingerprint hashes the raw files' bytes, the ``repr`` of the ``pre_transform``
and ``pre_filter`` and the loader's options, so editing a raw file or changing a
pre-transform rebuilds the cache. Writes go to a temporary file in the same folder
followed by ``os.replace`` (atomic on POSIX and Windows), so a crash or an error
while processing never leaves a half-written cache; a cache that fails to load
is treated as missing and rebuilt.

A process killed in the middle of a write cannot remove its temporary file; the next
[`load_cache`][] or [`save_cache`][] of the same cache removes it. Temporary files are named
``.<cache>.<host>.<pid>.<random>.tmp``: one of this host whose process is gone is removed at once,
one of another host (a shared file system) once it is older than [`STALE_SECONDS`][].
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Iterable
from typing import Any

import torch

from geomlin.io_atomic import TMP_SUFFIX as _TMP_SUFFIX
from geomlin.io_atomic import FileWriteError, atomic_write
from geomlin.io_atomic import host_name as _host

#: Bump when the layout of a processed payload changes.
CACHE_FORMAT = 1
_CHUNK = 1 << 20
#: Age after which a temporary file of another host (or of a live process: a reused pid) counts as abandoned.
STALE_SECONDS = 24 * 3600

def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True           # exists but belongs to someone else (or cannot tell): keep its file
    return True


def remove_stale_temporaries(path: str | os.PathLike) -> list[str]:
    """Delete temporary files left by interrupted writes of the cache ``path``; returns their paths."""
    path = os.fspath(path)
    folder = os.path.dirname(path) or "."
    prefix = f".{os.path.basename(path)}."
    try:
        names = [n for n in os.listdir(folder) if n.startswith(prefix) and n.endswith(_TMP_SUFFIX)]
    except OSError:
        return []
    removed = []
    for name in names:
        fields = name[len(prefix):-len(_TMP_SUFFIX)].split(".")
        full = os.path.join(folder, name)
        try:
            age = time.time() - os.path.getmtime(full)
        except OSError:
            continue
        ours = len(fields) == 3 and fields[0] == _host() and fields[1].isdigit()
        if ours and int(fields[1]) == os.getpid():
            continue
        abandoned = age > STALE_SECONDS or (ours and not _process_alive(int(fields[1])))
        if abandoned:
            try:
                os.remove(full)
                removed.append(full)
            except OSError:
                pass
    return removed


def file_digest(path: str | os.PathLike) -> str:
    """BLAKE2b hex digest of a file's bytes."""
    h = hashlib.blake2b(digest_size=20)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def file_stats(folder: str | os.PathLike, pattern: re.Pattern | None = None) -> list[tuple[str, int, int]]:
    """``(name, size, mtime_ns)`` of the files in ``folder`` (those whose name fully matches ``pattern``).

    Sorted by name. For folders of many small raw files, where hashing every file's bytes on
    each load would cost about as much as processing them; pass the list to [`fingerprint`][]
    as an option.
    """
    out = []
    with os.scandir(folder) as entries:
        for e in entries:
            if (pattern is None or pattern.fullmatch(e.name)) and e.is_file():
                st = e.stat()
                out.append((e.name, st.st_size, st.st_mtime_ns))
    return sorted(out)


def fingerprint(files: Iterable[str | os.PathLike], *options: Any) -> str:
    """Fingerprint of raw ``files`` (names and contents) and ``options`` (their ``repr``).

    Pass the ``pre_transform``, ``pre_filter`` and any option that changes the processed result.
    A transform without a stable ``repr`` (a lambda) yields a new fingerprint each run,
    which makes the cache rebuild rather than risk a stale one.
    """
    h = hashlib.blake2b(digest_size=20)
    h.update(f"geomlin-cache-{CACHE_FORMAT}".encode())
    for path in files:
        h.update(os.path.basename(os.fspath(path)).encode())
        h.update(file_digest(path).encode())
    for opt in options:
        h.update(repr(opt).encode())
    return h.hexdigest()


def load_cache(path: str | os.PathLike, expected: str) -> Any | None:
    """The payload of the cache at ``path`` if it exists, loads and matches ``expected``; else None.

    A stale (fingerprint mismatch) or corrupt cache file is deleted, and so are the temporary files
    of interrupted writes ([`remove_stale_temporaries`][]).
    """
    path = os.fspath(path)
    remove_stale_temporaries(path)
    if not os.path.exists(path):
        return None
    try:
        blob = torch.load(path, weights_only=True)
        ok = isinstance(blob, dict) and blob.get("fingerprint") == expected and "payload" in blob
    except Exception:  # noqa: BLE001 - any unreadable cache is simply rebuilt
        ok = False
    if ok:
        return blob["payload"]
    try:
        os.remove(path)
    except OSError:
        pass
    return None


class CacheWriteError(FileWriteError):
    """A processed cache that cannot be written (read-only folder, full disk); one line naming the folder."""


def save_cache(path: str | os.PathLike, fingerprint_: str, payload: Any) -> None:
    """Write ``payload`` with its fingerprint to ``path`` atomically (temporary file, then rename).

    The temporary file lies in the cache's own folder, so the rename never crosses file systems.
    Raises [`CacheWriteError`][] (an OSError with the original ``errno``) naming the folder
    when it cannot be created or written; no temporary file is left behind.
    """
    path = os.fspath(path)
    folder = os.path.dirname(path) or "."
    try:
        os.makedirs(folder, exist_ok=True)
        remove_stale_temporaries(path)
        atomic_write(path, lambda fh: torch.save({"fingerprint": fingerprint_, "payload": payload}, fh))
    except OSError as err:
        cause = err.__cause__ if isinstance(err, FileWriteError) and isinstance(err.__cause__, OSError) else err
        reason = cause.strerror or str(cause) or type(cause).__name__
        raise CacheWriteError(err.errno, f"cannot write the processed cache in folder {folder!r} ({reason}); make "
                              "it writable or free space, or load without a cache (cache=False; SDFDataset: no cache_dir)") from err
