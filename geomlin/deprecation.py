"""Deprecated spellings of keyword arguments: accepted for one release, with a DeprecationWarning.

One helper for the whole package, in two shapes:

* :func:`renamed` when the old name is still a keyword of the signature (default ``None``):
  ``hidden_channels = renamed("EGNNPotential", "hidden", "hidden_channels", hidden, hidden_channels)``;
* :func:`renamed_keyword` when old names are collected in ``**deprecated``:
  ``num_blocks = renamed_keyword(deprecated, "layers", "num_blocks", num_blocks, "VNPointNet")``.

Both warn ``"Owner(old=...) is deprecated; use new=..."``, pointing at the caller's caller.
"""

from __future__ import annotations

import warnings

#: Marks "no default given" in :func:`renamed_keyword` (``None`` is a legitimate default).
_UNSET = object()


def _warn(owner: str, old: str, new: str) -> None:
    warnings.warn(f"{owner}({old}=...) is deprecated; use {new}=...", DeprecationWarning, stacklevel=4)


def renamed(owner: str, old: str, new: str, old_value, new_value):
    """``new_value``, or ``old_value`` (with a warning) when the caller used the old spelling."""
    if old_value is None:
        return new_value
    _warn(owner, old, new)
    return old_value


def renamed_keyword(kwargs: dict, old: str, new: str, value, owner: str, default=_UNSET):
    """Pop the deprecated keyword ``old`` from ``kwargs`` (with a warning) and return its value, else
    ``value``. With ``default``, giving both spellings (``value is not default``) is a TypeError."""
    if old not in kwargs:
        return value
    if default is not _UNSET and value is not default:
        raise TypeError(f"{owner}: give {new}= or its deprecated name {old}=, not both")
    _warn(owner, old, new)
    return kwargs.pop(old)
