"""concur's cache folder: where it is, and how files in it are read and written.

A cache is an optimisation: a missing, unreadable, stale, corrupt or planted file only means
the work is done again. The folder is ``$CONCUR_CACHE_DIR``, else ``$XDG_CACHE_HOME/concur``,
else ``~/.cache/concur`` -- one variable for every cache (parsed packs, inverted closed forms,
unit facts, native benchmark binaries).

How is this designed, and why?
==============================

The folder is *not trusted*: a CI cache restored from another branch, or a folder shared by
several users, may hold files someone else wrote. A planted or forged file can at most cost a
recomputation: it never changes an answer and never runs code. So:

* **Data, never code.** Every cache file is JSON (no pickle: unpickling runs whatever the file
  says), and nothing from the cache is ever executed (native benchmark binaries are built into
  a fresh private folder per process, :mod:`concur.native`). A file is one header line and a
  payload::

      {"concur-cache": 2, "kind": "pack", "mac": "<HMAC-SHA256 of kind, file name, payload>"}
      <payload: JSON>

* **Authenticated by a key kept outside the folder.** The MAC is keyed by a per-user secret
  (:func:`key_file`: ``$XDG_CONFIG_HOME/concur/cache-key``, else ``~/.config/concur/cache-key``),
  created ``0600`` in a folder only this user can write. A key that lies inside the cache folder,
  is readable or writable by anyone else, or cannot be created is not used: this process then
  uses a random key of its own and writes nothing, so no file is trusted across processes (a
  recomputation, never a wrong answer). The MAC covers the kind and the file name (which holds
  the content key), so a genuine entry copied under another key is a miss too.
* :func:`read_json` reads at most :data:`MAX_BYTES` from a regular file (never a FIFO),
  checks the format, the kind and the MAC (a truncated, bit-flipped, forged or moved file is a
  miss, not a wrong answer), parses the JSON and hands it to the caller's ``validate``, which
  rebuilds typed objects and raises on anything it did not expect. Every failure is ``None``.
* **Content keys.** Callers key entries by :func:`digest` of the *bytes* of every input (a
  pack file's content, not its size and mtime, which ``cp -p``, ``rsync -a`` and tar keep
  across edits), so a cache restored from another branch never answers for a different file.
* **Atomic writes.** :func:`write_bytes` writes a temp file beside the target and renames it
  into place: a concurrent reader sees the old file or the new one, never half of one.

Non-goal: whoever can read your key file (your own account, root) can forge entries; the key
is as secret as your home folder. ``docs/security.md`` states this trust model to users.
"""

from __future__ import annotations

import hashlib
import hmac
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
    "key_file",
    "read_json",
    "source_digest",
    "write_bytes",
    "write_json",
]

FORMAT = 2  # 1: a bare sha256 of the payload, which anyone can recompute
MAX_BYTES = 32 * 1024 * 1024  # a parsed pack is ~100 kB; anything near this is not ours
_HEADER_MAX = 512
_KEY_BYTES = 32
_KEY: bytes | None = None  # this process's MAC key, read (or made) once
_KEY_DURABLE = False  # the key is the user's (not one made for this process only)
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


_SOURCE_DIGEST: str | None = None


def source_digest() -> str:
    """sha256 of concur's own code and data: every ``.py``, ``.json`` and ``.txt`` file of the
    package (not its version string, which stays put while a checkout's code changes), once per
    process. A result cached under it is recomputed after any edit to concur.

    Reading and hashing the ~140 files is most of a warm solve's own work after its imports, so
    the digest itself is kept in the cache folder under the files' identities (path, size,
    mtime, ctime, inode: an edit changes the ctime, which no copy or ``touch`` can set back);
    a miss, or a forged entry (its MAC fails), means reading the files again."""
    global _SOURCE_DIGEST
    if _SOURCE_DIGEST is None:
        root = Path(__file__).resolve().parent
        files: list[tuple[str, str]] = []
        for folder, dirs, names in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(names):
                if name.endswith((".py", ".json", ".txt")):
                    file = os.path.join(folder, name)
                    files.append((os.path.relpath(file, root), file))
        stamp = _stamp(files)
        entry = cache_dir() / "source" / f"{stamp[:40]}.json" if stamp is not None else None
        kept = read_json(entry, "source", _a_digest) if entry is not None else None
        if kept is None:
            parts: list[bytes | str] = []
            for rel, file in files:
                parts.append(rel)
                with open(file, "rb") as fh:
                    parts.append(fh.read())
            kept = digest(*parts)
            if entry is not None:
                write_json(entry, "source", kept)
        _SOURCE_DIGEST = kept
    return _SOURCE_DIGEST


def _stamp(files: list[tuple[str, str]]) -> str | None:
    """Digest of the identities of ``files`` (None when one cannot be read)."""
    try:
        stats = [(rel, os.stat(file)) for rel, file in files]
    except OSError:
        return None
    return digest(
        *(f"{rel}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_ino}:{st.st_dev}" for rel, st in stats)
    )


def _a_digest(payload: Any) -> str:
    if not (isinstance(payload, str) and len(payload) == 64 and all(c in "0123456789abcdef" for c in payload)):
        raise ValueError("not a sha256 digest")
    return payload


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
            and isinstance(header.get("mac"), str)
            and hmac.compare_digest(header["mac"], _mac(kind, Path(path).name, body))
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
    mac = _mac(kind, Path(path).name, body)
    if not _KEY_DURABLE:
        return False  # no later process could trust it: writing would only churn the folder
    header = json.dumps({"concur-cache": FORMAT, "kind": kind, "mac": mac})
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


def key_file() -> Path:
    """Where the cache's MAC key lives: ``$XDG_CONFIG_HOME/concur/cache-key``, else
    ``~/.config/concur/cache-key`` -- outside the cache folder, which CI restores and others may share."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "concur" / "cache-key"


def _mac(kind: str, name: str, body: bytes) -> str:
    return hmac.new(_key(), digest(kind, name, body).encode(), hashlib.sha256).hexdigest()


def _key() -> bytes:
    """This user's MAC key (see the module docstring); a random per-process key when it cannot be had."""
    global _KEY, _KEY_DURABLE
    if _KEY is None:
        durable = _user_key()
        _KEY, _KEY_DURABLE = durable or os.urandom(_KEY_BYTES), durable is not None
    return _KEY


def _private(st: os.stat_result, folder: bool) -> bool:
    """Owned by this user; a folder writable by nobody else, a file readable by nobody else."""
    kind_ok = stat.S_ISDIR(st.st_mode) if folder else stat.S_ISREG(st.st_mode)
    return kind_ok and st.st_uid == os.getuid() and not st.st_mode & (0o022 if folder else 0o077)


def _user_key() -> bytes | None:
    """The key in :func:`key_file`, created when missing; None when it is not private or not ours."""
    path = key_file()
    try:
        if path.resolve().is_relative_to(cache_dir().resolve()):
            return None  # a key inside the folder it protects protects nothing
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not _private(os.lstat(path.parent), folder=True):
            return None
        if not os.path.lexists(path):
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(os.urandom(_KEY_BYTES).hex().encode())
                os.link(tmp, path)  # never replaces: two processes racing agree on the first key
            except FileExistsError:
                pass
            finally:
                tmp.unlink(missing_ok=True)
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as fh:
            if not _private(os.fstat(fh.fileno()), folder=False):
                return None
            key = bytes.fromhex(fh.read(4 * _KEY_BYTES).decode("ascii"))
    except (OSError, ValueError, RuntimeError):
        return None
    return key if len(key) == _KEY_BYTES else None
