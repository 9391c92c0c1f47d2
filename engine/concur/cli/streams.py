"""Files the CLI reads and writes, where ``-`` means stdin or stdout, and nothing is half-written.

* **Writing a file** goes to a temporary name beside the target (created exclusively, so a
  planted file or link under that name is never written through) and is renamed over the
  target only when everything was written: an error, a full disk or Ctrl-C leaves the old file
  (or none), never half of a new one.
* **``-`` as an output** is stdout. Text goes as it is produced (a million-row CSV streams).
  Binary output (a PNG, a workbook) goes to stdout only when stdout is not a terminal: bytes
  of a ``.xlsx`` would only garble the screen, so that is a usage error naming the fix.
* **``-`` as an input** is stdin, read with the same size limit as a pack file; its label in
  messages is ``<stdin>``.

Every failure to open or write is a :class:`concur.errors.UsageError` (exit 2) naming the path;
a closed pipe on stdout is not a failure and is left to ``concur.cli.main`` (exit 0).
"""

from __future__ import annotations

import errno
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from ..errors import UsageError

__all__ = ["STDIN_LABEL", "STDIO", "binary_output", "is_stdio", "read_input", "text_output", "write_text"]

STDIO = "-"
STDIN_LABEL = "<stdin>"


def is_stdio(path: str | os.PathLike[str] | None) -> bool:
    return path is not None and str(path) == STDIO


def read_input(path: str) -> tuple[bytes | None, str]:
    """(bytes read from stdin, ``<stdin>``) for ``-``; (None, path) otherwise (the caller reads the
    file itself, with its own checks). Stdin is read up to the pack size limit plus one byte, so a
    larger input is refused by the loader without reading all of it."""
    if not is_stdio(path):
        return None, path
    from ..lang.yamlsafe import MAX_BYTES

    return sys.stdin.buffer.read(MAX_BYTES + 1), STDIN_LABEL


def _temp_beside(target: Path, binary: bool, suffix: str = "") -> tuple[Path, IO]:  # type: ignore[type-arg]
    """An exclusively created temporary file beside ``target`` and its open stream."""
    if not target.parent.is_dir():  # never created: a typo in a path must not grow folders
        raise UsageError(
            f"cannot write '{target}': folder '{target.parent}' does not exist",
            hint="create the folder first, or write somewhere that exists",
        )
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp{suffix}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o666)
    except OSError as exc:
        raise UsageError(
            f"cannot write '{target}': {exc.strerror}", hint="check that the folder exists and is writable"
        ) from None
    return tmp, (os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", newline=""))


@contextmanager
def text_output(path: str) -> Iterator[IO[str]]:
    """A text stream for ``path``: stdout for ``-`` (flushed, not closed), else an atomic file."""
    if is_stdio(path):
        yield sys.stdout
        sys.stdout.flush()
        return
    target = Path(path)
    tmp, fh = _temp_beside(target, binary=False)
    try:
        with fh:
            yield fh
        os.replace(tmp, target)
    except OSError as exc:
        if exc.errno == errno.EPIPE:
            raise
        raise UsageError(f"cannot write '{target}': {exc.strerror}") from None
    finally:
        tmp.unlink(missing_ok=True)


def write_text(path: str, text: str) -> None:
    """Write ``text`` to ``path`` atomically (``-``: stdout)."""
    with text_output(path) as fh:
        fh.write(text)


@contextmanager
def binary_output(path: str, suffix: str) -> Iterator[Path]:
    """A temporary file to write binary output into, delivered to ``path`` when the block succeeds.

    For a file, the temporary lies beside the target and is renamed over it; for ``-`` it lies in a
    private temporary folder and its bytes are copied to stdout, which must not be a terminal.
    ``suffix`` keeps writers that choose a format by extension (``.png``, ``.xlsx``) happy.
    """
    if is_stdio(path):
        if sys.stdout.isatty():
            raise UsageError(
                f"refusing to write binary {suffix} data to a terminal",
                hint=f"redirect it (> out{suffix}) or pipe it, or give a file name",
            )
        with tempfile.TemporaryDirectory(prefix="concur-") as folder:
            tmp = Path(folder) / f"out{suffix}"
            yield tmp
            sys.stdout.flush()
            with tmp.open("rb") as produced:
                shutil.copyfileobj(produced, sys.stdout.buffer)
            sys.stdout.buffer.flush()
        return
    target = Path(path)
    tmp, stream = _temp_beside(target, binary=True, suffix=suffix)
    stream.close()  # the writer opens the path itself
    try:
        yield tmp
        os.replace(tmp, target)
    except OSError as exc:
        raise UsageError(f"cannot write '{target}': {exc.strerror}") from None
    finally:
        tmp.unlink(missing_ok=True)
