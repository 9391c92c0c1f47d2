"""Reading a file someone else may have written: a regular file, and never more than a limit.

Pack files, scenario files and cache files are all input concur does not control. Opening
one must not hang and reading one must not exhaust memory, whatever the path names:

* the path is opened with ``O_NONBLOCK`` (opening a FIFO for reading would otherwise wait
  for a writer forever) and ``O_NOCTTY``, then checked with ``fstat`` on the *open*
  descriptor, so a file swapped after a ``stat`` cannot slip through: anything but a
  regular file (FIFO, character or block device such as ``/dev/zero``, directory,
  socket) is refused before a byte is read;
* at most ``limit + 1`` bytes are read, so ``/proc`` files whose size says 0 and files
  that grow while read are bounded too; more than ``limit`` is refused.

:class:`FileRefused` (an ``OSError``) carries a short reason that never quotes the file's
contents; callers turn it into their own error (a pack error, a usage error, a cache miss).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["FileRefused", "FileTooLarge", "read_regular"]

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class FileRefused(OSError):
    """The file cannot be read safely: missing, not a regular file, or over the limit."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

    def __str__(self) -> str:
        return self.reason


class FileTooLarge(FileRefused):
    """The file holds more than the limit."""


def _kind(mode: int) -> str:
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def read_regular(path: str | Path, limit: int) -> bytes:
    """The bytes of the regular file at ``path``, at most ``limit`` of them.

    Raises :class:`FileRefused` when the path is missing or unreadable, is not a regular
    file, or holds more than ``limit`` bytes. Never blocks on a FIFO or device.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise FileRefused(f"cannot open the file ({exc.strerror or type(exc).__name__})") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise FileRefused(f"is {_kind(mode)}, not a regular file")
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except FileRefused:
        raise
    except OSError as exc:
        raise FileRefused(f"cannot read the file ({exc.strerror or type(exc).__name__})") from None
    finally:
        os.close(fd)
    if size > limit:
        raise FileTooLarge(f"is larger than the limit of {limit:,} bytes")
    return b"".join(chunks)
