"""Writing an output path the user named: the one way every command writes a file.

What the path names decides how it is written (:func:`open_output`, :func:`output_path`):

* **a regular file, or a path that does not exist yet**: written *atomically* -- into a temporary
  file created exclusively beside it (``O_EXCL | O_NOFOLLOW``: a file or link planted under that
  name is never written through), renamed over it only once everything was written. An error,
  a full disk or Ctrl-C leaves the old file (or none), never half of a new one. A file that is
  replaced keeps its permission bits.
* **a FIFO or a character device** (``/dev/null``, ``/dev/stdout``, a named pipe a reader
  waits on): opened and written *in place*, as a stream. Renaming over it would replace the
  device or the pipe with a regular file (``--csv /dev/null`` run as root would destroy
  ``/dev/null``). A stream cannot be un-written: an error leaves what was written so far.
* **a symbolic link**: followed. What it resolves to is written by the rules above, so the link
  stays a link and its target a regular file (or a FIFO, a device); the link is never replaced.
* **anything else** (a folder, a socket, a block device): refused.

A folder that does not exist is never created (a typo in a path must not grow folders). Every
refusal or failure is a :class:`concur.errors.UsageError` (exit 2) naming the path; a closed
pipe (``EPIPE``) is re-raised as it is, for the CLI to end quietly. ``-`` (stdout) is the CLI's
business (:mod:`concur.cli.streams`) and never reaches this module.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any

from .errors import UsageError

__all__ = ["open_output", "output_path", "resolve_output", "write_output"]


def resolve_output(path: str | os.PathLike[str]) -> tuple[Path, bool]:
    """(the path to write, True when it is to be streamed in place rather than replaced atomically).

    Symlinks are resolved; raises :class:`UsageError` for a folder, a socket, a block device, a
    link loop or a missing folder.
    """
    given = Path(path)
    try:
        target = Path(os.path.realpath(given, strict=False)) if given.is_symlink() else given
    except OSError as exc:  # a link loop
        raise UsageError(f"cannot write '{given}': {exc.strerror or exc}") from None
    try:
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise UsageError(f"cannot write '{given}': {exc.strerror}") from None
    if st is None or stat.S_ISREG(st.st_mode):
        if not target.parent.is_dir():
            raise UsageError(
                f"cannot write '{given}': folder '{target.parent}' does not exist",
                hint="create the folder first, or write somewhere that exists",
            )
        return target, False
    if stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode):
        return target, True
    kind = "a folder" if stat.S_ISDIR(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) else "a block device"
    raise UsageError(f"cannot write '{given}': it is {kind}", hint="give a file name")


def _fail(path: Path, exc: OSError) -> UsageError:
    return UsageError(f"cannot write '{path}': {exc.strerror or exc}", hint="check that the folder is writable")


@contextmanager
def open_output(path: str | os.PathLike[str], *, binary: bool = False) -> Iterator[IO[Any]]:
    """A stream that writes ``path`` by the rules of the module docstring (text: UTF-8, ``\\n`` kept)."""
    target, in_place = resolve_output(path)
    if in_place:
        try:
            fd = os.open(target, os.O_WRONLY | getattr(os, "O_NOCTTY", 0))
        except OSError as exc:
            raise _fail(target, exc) from None
        try:
            with os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
                yield fh
        except OSError as exc:
            if exc.errno == errno.EPIPE:
                raise
            raise _fail(target, exc) from None
        return
    tmp, fd = _temp_beside(target)
    try:
        try:
            with os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
                yield fh
                fh.flush()
                os.fsync(fh.fileno())  # the rename must not land before the bytes do
            _keep_mode(target, tmp)
            os.replace(tmp, target)
        except OSError as exc:
            if exc.errno == errno.EPIPE:
                raise
            raise _fail(target, exc) from None
    finally:
        tmp.unlink(missing_ok=True)


@contextmanager
def output_path(path: str | os.PathLike[str], suffix: str = "") -> Iterator[Path]:
    """A temporary file name for a writer that wants a path (``savefig``, a workbook's ``save``),
    delivered to ``path`` when the block succeeds: renamed over a regular file, copied into a FIFO
    or a device. ``suffix`` keeps writers that choose a format by extension (``.png``) happy."""
    target, in_place = resolve_output(path)
    if in_place:
        with tempfile.TemporaryDirectory(prefix="concur-") as folder:
            staged = Path(folder) / f"out{suffix}"
            yield staged
            with open_output(target, binary=True) as out, staged.open("rb") as produced:
                shutil.copyfileobj(produced, out)
        return
    tmp, fd = _temp_beside(target, suffix)
    os.close(fd)  # the writer opens the path itself
    try:
        yield tmp
        try:
            _keep_mode(target, tmp)
            os.replace(tmp, target)
        except OSError as exc:
            raise _fail(target, exc) from None
    finally:
        tmp.unlink(missing_ok=True)


def write_output(path: str | os.PathLike[str], data: str | bytes) -> None:
    """Write ``data`` to ``path`` (see the module docstring); text is UTF-8."""
    with open_output(path, binary=isinstance(data, bytes)) as fh:
        fh.write(data)


def _temp_beside(target: Path, suffix: str = "") -> tuple[Path, int]:
    """An exclusively created temporary file beside ``target`` (never through a planted link)."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp{suffix}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o666)
    except OSError as exc:
        raise _fail(target, exc) from None
    return tmp, fd


def _keep_mode(target: Path, tmp: Path) -> None:
    """A file that is replaced keeps its permission bits (a new one gets the umask's)."""
    with suppress(FileNotFoundError):
        os.chmod(tmp, stat.S_IMODE(os.stat(target).st_mode))
