"""concur's cache folder: where it is, and how files in it are read and written.

A cache is an optimisation: a missing, unreadable, stale, corrupt or planted file only means
the work is done again. The folder is ``$CONCUR_CACHE_DIR``, else ``$XDG_CACHE_HOME/concur``,
else ``~/.cache/concur`` -- one variable for every cache (parsed packs, inverted closed forms,
unit facts, native benchmark binaries).

How is this designed, and why?
==============================

The folder is *not trusted*: a CI cache restored from another branch, or a folder shared by
several users, may hold files someone else wrote. So:

* **Data, never code.** Every cache file is JSON (no pickle: unpickling runs whatever the file
  says). A file is one header line and a payload::

      {"concur-cache": 1, "kind": "pack", "sha256": "<digest of the payload>"}
      <payload: JSON>

  :func:`read_json` reads at most :data:`MAX_BYTES` from a regular file (never a FIFO),
  checks the format, the kind and the payload digest (a truncated or bit-flipped file is a
  miss, not a wrong answer), parses the JSON and hands it to the caller's ``validate``, which
  rebuilds typed objects and raises on anything it did not expect. Every failure is ``None``.
* **Content keys.** Callers key entries by :func:`digest` of the *bytes* of every input (a
  pack file's content, not its size and mtime, which ``cp -p``, ``rsync -a`` and tar keep
  across edits), so a cache restored from another branch never answers for a different file.
* **Atomic writes.** :func:`write_bytes` writes a temp file beside the target and renames it
  into place: a concurrent reader sees the old file or the new one, never half of one.
* **Executables only from a private folder.** A cached binary is run, so its folder must be
  owned by this user and writable by no one else (:func:`is_private`); the native builds use
  the cache folder when it is private, else :func:`private_dir`, a per-user folder in the
  temp directory created ``0700`` and refused when someone else owns it or can write to it.

Non-goal: a writer of a *shared* cache folder can still plant well-formed data under the right
key and change an answer (never run code). Share a cache folder only with writers you trust
as much as the packs themselves; ``docs/security.md`` says this to users.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from .readfile import FileRefused, read_regular

__all__ = [
    "FORMAT",
    "MAX_BYTES",
    "cache_dir",
    "digest",
    "is_private",
    "private_dir",
    "read_json",
    "write_bytes",
    "write_json",
]

FORMAT = 1
MAX_BYTES = 32 * 1024 * 1024  # a parsed pack is ~100 kB; anything near this is not ours
_HEADER_MAX = 512
T = TypeVar("T")

#: What a ``validate`` callback (or decoding the payload) may raise on malformed data: a miss.
_MALFORMED = (
    ValueError,
    TypeError,
    KeyError,
    IndexError,
    AttributeError,
    OverflowError,
    RecursionError,
    MemoryError,
    UnicodeError,
)


def cache_dir() -> Path:
    """The cache folder (not created here): ``$CONCUR_CACHE_DIR``, ``$XDG_CACHE_HOME/concur``
    or ``~/.cache/concur``."""
    root = os.environ.get("CONCUR_CACHE_DIR")
    if root:
        return Path(root)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "concur"


def digest(*parts: bytes | str) -> str:
    """sha256 (hex) of ``parts``, each length-prefixed so that ("ab", "c") != ("a", "bc")."""
    h = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8") if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    return h.hexdigest()


def read_json(path: str | Path, kind: str, validate: Callable[[Any], T]) -> T | None:
    """``validate(payload)`` of the cache file at ``path`` written as ``kind``, or None.

    None when the file is missing, not a regular file, over :data:`MAX_BYTES`, of another
    format or kind, fails its digest, is not JSON, or when ``validate`` raises
    ``ValueError``/``TypeError``/``KeyError``/... on it. Never raises for what a file holds.
    """
    try:
        raw = read_regular(path, MAX_BYTES)
    except FileRefused:
        return None
    head, sep, body = raw.partition(b"\n")
    if not sep or len(head) > _HEADER_MAX:
        return None
    try:
        header = json.loads(head)
        if not (
            isinstance(header, dict)
            and header.get("concur-cache") == FORMAT
            and header.get("kind") == kind
            and header.get("sha256") == hashlib.sha256(body).hexdigest()
        ):
            return None
        return validate(json.loads(body))
    except _MALFORMED:
        return None


def write_json(path: str | Path, kind: str, payload: Any) -> bool:
    """Write ``payload`` (plain JSON data) as a ``kind`` cache file, atomically.

    False when the cache folder is not writable or ``payload`` cannot be written as JSON (too
    deep, not plain data): the caller just does the work next time.
    """
    try:
        body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError, RecursionError):
        return False
    header = json.dumps({"concur-cache": FORMAT, "kind": kind, "sha256": hashlib.sha256(body).hexdigest()})
    return write_bytes(path, header.encode() + b"\n" + body)


def write_bytes(path: str | Path, data: bytes, *, mode: int = 0o644) -> bool:
    """Write ``data`` atomically (creating the folder); False when the cache is not writable.

    The temp file is created exclusively (``O_EXCL``) with ``mode``, so a file or link planted
    under the temp name is never written through.
    """
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), mode)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        os.replace(tmp, target)
        return True
    except OSError:
        return False


def is_private(path: str | Path) -> bool:
    """True when ``path`` is a real directory (not a link) owned by this user that neither
    group nor others can write to: the only kind of folder concur runs a cached binary from."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022


def private_dir(name: str) -> Path | None:
    """``<temp>/concur-<uid>/<name>``, created ``0700``; None when it cannot be made private.

    An existing folder is used only when :func:`is_private` holds for it and its parent: a
    folder another user created first (to plant files) is refused, never reused.
    """
    import tempfile  # here, not at import: tempfile pulls in shutil, random and the compression modules

    root = Path(tempfile.gettempdir()) / f"concur-{os.getuid()}"
    folder = root / name
    for step in (root, folder):
        try:
            os.mkdir(step, 0o700)
        except FileExistsError:
            pass
        except OSError:
            return None
        if not is_private(step):
            return None
    return folder


def __getattr__(name: str) -> Any:
    """``concur.cache.tempfile``, imported on first use (a solve never needs it)."""
    if name == "tempfile":
        import tempfile

        return tempfile
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
