"""Cache files in concur's cache folder: read if usable, write atomically, never fail the caller.

A cache is an optimisation: a missing, unreadable, stale-format or unwritable file only means
the work is done again. Writes go to a temp file beside the target and are renamed into place,
so a concurrent reader sees the old file or the new one, never half of one. Pickles are only
ever read from files this module wrote into the user's own cache folder.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

__all__ = ["read_pickle", "write_pickle", "write_bytes"]

_MISSING: Any = object()


def read_pickle(path: str | Path, default: Any = None) -> Any:
    """The object pickled at ``path``, or ``default`` when it cannot be read."""
    try:
        with open(path, "rb") as fh:
            return pickle.load(fh)
    except (OSError, pickle.PickleError, EOFError, AttributeError, ImportError, TypeError, ValueError):
        return default


def write_bytes(path: str | Path, data: bytes) -> bool:
    """Write ``data`` atomically (creating the folder); False when the cache is not writable."""
    target = Path(path)
    tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data)
        os.replace(tmp, target)
        return True
    except OSError:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        return False


def write_pickle(path: str | Path, value: Any) -> bool:
    """Pickle ``value`` to ``path`` atomically; False when the cache is not writable."""
    return write_bytes(path, pickle.dumps(value))
