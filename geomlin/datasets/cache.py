"""Processed-data caches that are written atomically and carry a fingerprint.

A cache is one ``torch.save`` file holding ``{"fingerprint": str, "payload": ...}``.
The fingerprint hashes the raw files' bytes, the ``repr`` of the ``pre_transform``
and ``pre_filter`` and the loader's options, so editing a raw file or changing a
pre-transform rebuilds the cache. Writes go to a temporary file in the same folder
followed by ``os.replace`` (atomic on POSIX and Windows), so a crash or an error
while processing never leaves a half-written cache; a cache that fails to load
is treated as missing and rebuilt.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Iterable
from typing import Any

import torch

#: Bump when the layout of a processed payload changes.
CACHE_FORMAT = 1
_CHUNK = 1 << 20


def file_digest(path: str | os.PathLike) -> str:
    """BLAKE2b hex digest of a file's bytes."""
    h = hashlib.blake2b(digest_size=20)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


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

    A stale (fingerprint mismatch) or corrupt cache file is deleted.
    """
    path = os.fspath(path)
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


def save_cache(path: str | os.PathLike, fingerprint_: str, payload: Any) -> None:
    """Write ``payload`` with its fingerprint to ``path`` atomically (temporary file, then rename)."""
    path = os.fspath(path)
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    try:
        torch.save({"fingerprint": fingerprint_, "payload": payload}, tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
